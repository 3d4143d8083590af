"""TSDAE (Wang, Reimers & Gurevych 2021): a denoising auto-encoder whose decoder sees only the
sentence vector.

The encoder reads a corrupted sentence (default: 60% of its words deleted), pools one vector (CLS by
default), and a Transformer decoder reconstructs the clean sentence token by token; the decoder's
cross-attention keys and values are that single vector (paper eq. in section 3.2), so everything
the decoder learns about the sentence must pass through it. Encoder and decoder share their
embeddings and layer weights (the best configuration, Appendix A). Defaults follow Appendix B:
AdamW, lr 3e-5, batch 8, constant lr, 100K steps (use ``--steps`` on a CPU).

The decoder is the model family's causal-LM head model (``BertLMHeadModel`` for BERT) with
``is_decoder``/``add_cross_attention``, tied to the encoder as sentence-transformers'
``DenoisingAutoEncoderLoss`` does. Two exact shortcuts make it cheaper than that reference:

* cross-attention over a one-vector memory: the softmax over a single key is 1, so each decoder
  position receives ``W_o(W_v s)`` (with attention dropout deciding per head and position whether it
  receives it at all); the query/key products and the per-position output projection are skipped;
* the vocabulary projection and the cross-entropy are computed only on positions with a target,
  not on padding;
* optionally (``group_by_length``, off by default) each batch is split into length groups padded
  only to their own longest member: exact, and it removes padded work, but on a 2-core CPU the
  smaller matmuls made steps slower (bench/tsdae_throughput.py: 0.93x vs 1.36x without).

Departures and choices (reference code: sentence-transformers ``DenoisingAutoEncoderLoss`` +
``DenoisingAutoEncoderDataset`` + ``fit``, which the TSDAE authors wrote):

| item | paper | reference code | benchbench |
|---|---|---|---|
| decoder LM head | pretrained (bert-base) | ``AutoModelForCausalLM.from_pretrained`` of the model | the checkpoint's head for every model source (hub id, local dir, sentence-transformers folder); a checkpoint without one starts it at random and the record says so (``train.pretrained_lm_head``) |
| gradient clipping | not stated | ``fit``: global norm 1.0 | ``max_grad_norm`` 1.0 (0 = off) |
| cross-attention over one vector | full attention | library attention | exact shortcut (``fast_cross_attention``); loss equal to the reference (tests/plugins/test_method_fidelity.py) |
| word splitting for the noise | words | nltk ``word_tokenize`` / ``TreebankWordDetokenizer`` | benchbench's own word splitter (no nltk data offline) |
| lr schedule | constant 3e-5 | the example uses ``constantlr`` | constant |
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from benchbench import (
    NOISE_KINDS,
    ConfigError,
    Method,
    Objective,
    TrainContext,
    TransformerEncoder,
    WordNoise,
    adamw,
    fit,
    hookimpl,
    is_decoder_name,
    length_groups,
    load_pretrained_head,
    register_noise,
    seed_everything,
)


@dataclass
class TSDAEConfig:
    steps: int = 100_000  # paper; on a CPU pass e.g. --steps 2000
    batch_size: int = 8
    lr: float = 3e-5
    weight_decay: float = 0.0
    max_seq_length: int | None = None  # None: the model's own
    noise: str = "delete"
    noise_ratio: float = 0.6
    pooling: str = "cls"
    tie_encoder_decoder: bool = True
    grad_accum: int = 1
    max_grad_norm: float = 1.0  # sentence-transformers fit() clips the global norm at 1.0; 0 = off
    checkpoint_every: int = field(default=1000, metadata={"hash": False})  # speed knob: not in the result key
    fast_cross_attention: bool = True  # the exact one-vector shortcut (False: the library's attention)
    group_by_length: bool = (
        False  # pad each length group only to its own maximum (exact; slower on CPU: 0.93x vs 1.36x)
    )
    # tied lookups' gradients as sparse rows (None: on CPU only). Speed only: not part of the config hash
    sparse_embedding_grad: bool | None = field(default=None, metadata={"hash": False})


class OneVectorCrossAttention(nn.Module):
    """Drop-in for a BERT-style cross-attention block (``.self`` query/key/value, ``.output``
    dense/dropout/LayerNorm) when the memory is one vector. Keeps the original submodules, so the
    weights and their names are the library's."""

    def __init__(self, block: nn.Module):
        super().__init__()
        self.self = block.self
        self.output = block.output

    def forward(
        self, hidden_states, attention_mask=None, encoder_hidden_states=None, encoder_attention_mask=None, **_kw
    ):
        core, out = self.self, self.output
        b, t, d = hidden_states.shape
        if encoder_hidden_states.shape[1] != 1:
            raise ValueError("OneVectorCrossAttention needs a memory of exactly one vector")
        v = core.value(encoder_hidden_states)  # (b, 1, d): the value of the only key
        p = core.dropout.p if self.training else 0.0
        if p > 0:
            # attention-prob dropout zeroes the single weight for some (position, head) pairs:
            # project each head's value once, then sum the heads each position keeps
            h, hd = core.num_attention_heads, core.attention_head_size
            per_head = torch.einsum("bhk,dhk->bhd", v.view(b, h, hd), out.dense.weight.view(d, h, hd))
            keep = (torch.rand(b, t, h, device=v.device) >= p).to(per_head.dtype) / (1 - p)
            attn = torch.einsum("bth,bhd->btd", keep, per_head) + out.dense.bias
        else:
            attn = out.dense(v).expand(b, t, d)
        attn = out.dropout(attn)
        return out.LayerNorm(attn + hidden_states), None


def _base(model: nn.Module) -> nn.Module:
    return getattr(model, model.base_model_prefix)


def decoder_config(encoder: TransformerEncoder):
    """The encoder's config turned into a decoder's: causal self-attention plus cross-attention."""
    cfg = type(encoder.model.config).from_dict(encoder.model.config.to_dict())
    cfg.is_decoder = True
    cfg.add_cross_attention = True
    cfg.use_cache = False
    return cfg


def build_decoder(
    encoder: TransformerEncoder,
    tie: bool = True,
    fast_cross_attention: bool = True,
    pretrained: nn.Module | None = None,
) -> nn.Module:
    """The family's causal-LM model as a decoder with cross-attention, tied to ``encoder``: every
    decoder base parameter with an encoder counterpart of the same name IS that parameter (so the
    encoder keeps its pretrained values), and the output projection is the word embedding matrix."""
    from transformers import AutoModelForCausalLM

    cfg = decoder_config(encoder)
    decoder = pretrained  # the checkpoint's causal-LM model with its LM head (load_pretrained_head), if any
    try:
        decoder = decoder or AutoModelForCausalLM.from_config(cfg)
    except (ValueError, OSError) as e:
        raise ConfigError(
            f"TSDAE: model type {cfg.model_type!r} has no causal-LM (decoder) class in transformers: {e}"
        ) from e
    decoder.to(encoder.device)
    base = _base(decoder)
    enc_mods = dict(encoder.model.named_modules())
    if tie:
        for name, _ in list(base.named_parameters()):
            mod_name, _, attr = name.rpartition(".")
            src = enc_mods.get(mod_name)
            if src is not None and isinstance(getattr(src, attr, None), nn.Parameter):
                setattr(dict(base.named_modules())[mod_name], attr, getattr(src, attr))
    else:
        base.load_state_dict(encoder.model.state_dict(), strict=False)
    out_emb = decoder.get_output_embeddings()
    if out_emb is not None:
        out_emb.weight = decoder.get_input_embeddings().weight
    if fast_cross_attention:
        for layer in base.modules():
            block = getattr(layer, "crossattention", None)
            if (
                block is not None
                and all(hasattr(block, a) for a in ("self", "output"))
                and all(hasattr(block.output, a) for a in ("dense", "dropout", "LayerNorm"))
            ):
                layer.crossattention = OneVectorCrossAttention(block)
    return decoder


def lm_head(decoder: nn.Module) -> nn.Module:
    """The module mapping decoder states to vocabulary logits (BERT: ``cls``; RoBERTa: ``lm_head``)."""
    heads = [m for n, m in decoder.named_children() if n != decoder.base_model_prefix]
    if len(heads) != 1:
        raise ConfigError(
            f"TSDAE: cannot find the LM head of {type(decoder).__name__} (children: "
            f"{[n for n, _ in decoder.named_children()]})."
        )
    return heads[0]


class TSDAEObjective(Objective):
    def __init__(
        self,
        encoder: TransformerEncoder,
        decoder: nn.Module,
        noise: WordNoise,
        group_by_length: bool = False,
        sparse_embedding_grad: bool | None = None,
    ):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.noise = noise
        self.pad_id = encoder.tokenizer.pad_token_id
        self.group_by_length = group_by_length
        self.sparse_embedding_grad = sparse_embedding_grad
        # word-embedding lookups whose table IS the output projection (tied): their gradients can be
        # sparse, because the projection's dense gradient is always added to them in the same backward
        out = decoder.get_output_embeddings()
        self._tied_lookups = [
            m
            for m in list(encoder.model.modules()) + list(decoder.modules())
            if isinstance(m, nn.Embedding) and out is not None and m.weight is out.weight
        ]

    def _set_sparse(self, device: torch.device) -> None:
        """Sparse lookup gradients on CPU (default). A dense lookup gradient is a zero-filled
        vocabulary-sized matrix (30522 x 384 for MiniLM) per lookup, summed out of place with the
        projection's: three fresh 47 MB buffers a step, whose first touch cost more than the
        arithmetic on a CPU (bench/tsdae_throughput.py). Sparse rows are added into the projection's
        gradient instead; the summed gradient is the same."""
        self.sparse_lookups(
            self.sparse_embedding_grad if self.sparse_embedding_grad is not None else device.type == "cpu"
        )

    def sparse_lookups(self, on: bool) -> None:
        for m in self._tied_lookups:
            m.sparse = bool(on)

    def collate(self, items: list[str], rng: np.random.Generator) -> dict:
        src = self.encoder.tokenize(self.noise(items, rng))
        tgt = self.encoder.tokenize(items)
        batch = {f"src_{k}": v for k, v in src.items()}
        batch["target_ids"] = tgt["input_ids"]
        batch["n_tokens"] = int(src["attention_mask"].sum())
        return batch

    def sentence_vectors(self, **src) -> torch.Tensor:
        return self.encoder(**src)["sentence_embedding"]

    def decode_hidden(self, target_ids: torch.Tensor, sentence: torch.Tensor) -> torch.Tensor:
        """Decoder states for inputs ``target_ids[:, :-1]``. No self-attention mask is passed: with
        right padding the causal mask alone keeps every real position from seeing padding."""
        return _base(self.decoder)(
            input_ids=target_ids[:, :-1], encoder_hidden_states=sentence[:, None], use_cache=False
        ).last_hidden_state

    def forward(self, target_ids: torch.Tensor, **src) -> torch.Tensor:
        src = {k.removeprefix("src_"): v for k, v in src.items()}
        self._set_sparse(target_ids.device)
        if not self.group_by_length:
            sentence = self.sentence_vectors(**src)
            hidden = self.decode_hidden(target_ids, sentence)
            labels = target_ids[:, 1:]
            where = labels != self.pad_id
            logits = lm_head(self.decoder)(hidden[where])  # vocabulary projection only where a target exists
            return F.cross_entropy(logits.float(), labels[where])
        # The same computation, with each length group padded only to its own longest member: every
        # sentence's encoding and decoding is independent of the others in the batch (masked
        # encoder attention; causal decoder attention whose memory is its own sentence vector), so
        # trimming padding changes no result, only the work.
        mask = src["attention_mask"]
        order, parts = [], []
        for g in length_groups(mask.sum(1)):
            n = int(mask[g].sum(1).max())
            order.append(g)
            parts.append(self.sentence_vectors(**{k: v[g, :n] for k, v in src.items()}))
        sentence = torch.cat(parts)[torch.argsort(torch.cat(order))]  # back to batch order
        states, targets = [], []
        for g in length_groups((target_ids != self.pad_id).sum(1)):
            n = int((target_ids[g] != self.pad_id).sum(1).max())
            ids = target_ids[g, :n]
            hidden = self.decode_hidden(ids, sentence[g])
            labels = ids[:, 1:]
            where = labels != self.pad_id
            states.append(hidden[where])
            targets.append(labels[where])
        logits = lm_head(self.decoder)(torch.cat(states))  # vocabulary projection only where a target exists
        return F.cross_entropy(logits.float(), torch.cat(targets))


class TSDAE(Method):
    name = "tsdae"
    Config = TSDAEConfig
    description = "Transformer-based denoising auto-encoder (decoder sees only the sentence vector)"

    def build(self, ctx: TrainContext) -> TSDAEObjective:
        c = self.config
        if c.noise not in NOISE_KINDS:
            raise ConfigError(f"tsdae: option 'noise' must be one of {NOISE_KINDS} (got {c.noise!r}).")
        if is_decoder_name(str(ctx.model)):
            raise ConfigError(
                f"tsdae: base model {ctx.model!r} is a decoder-only LLM, and TSDAE cannot start from one: its "
                f"decoder is a BERT-style transformer that CROSS-ATTENDS to the encoder's sentence vector and is "
                f"tied to the encoder (built from the encoder's own config and weights); a decoder-only model has "
                f"no cross-attention to read the vector through. Start TSDAE from an encoder (e.g. all-MiniLM-L6-v2); "
                f"for a decoder start use llm2vec or simcse."
            )
        seed_everything(ctx.seed)
        encoder = ctx.load_encoder(pooling=c.pooling, max_seq_length=c.max_seq_length)
        # the decoder's LM head from the checkpoint for every model source (hub id, local dir,
        # sentence-transformers folder), as sentence-transformers' DenoisingAutoEncoderLoss does
        pretrained, note = load_pretrained_head(ctx.model, "AutoModelForCausalLM", decoder_config(encoder))
        ctx.accounting["pretrained_lm_head"] = note
        decoder = build_decoder(
            encoder, tie=c.tie_encoder_decoder, fast_cross_attention=c.fast_cross_attention, pretrained=pretrained
        )
        mask = getattr(encoder.tokenizer, "mask_token", None) or "[MASK]"
        return TSDAEObjective(
            encoder, decoder, WordNoise(c.noise, c.noise_ratio, mask), c.group_by_length, c.sparse_embedding_grad
        )

    def loss_chance(self, objective) -> float:
        """Token cross-entropy of the decoder over the vocabulary V: ln V, an upper reference (unigram
        frequencies alone score well below it)."""
        return math.log(len(objective.encoder.tokenizer))

    def train(self, corpus: list[str], ctx: TrainContext):
        c = self.config
        obj = self.build(ctx)
        obj = fit(
            self, obj, corpus, ctx, make_optimizer=lambda m: adamw(m.parameters(), lr=c.lr, weight_decay=c.weight_decay)
        )
        obj.sparse_lookups(False)  # hand back the encoder's lookups in their usual (dense) mode
        return obj.encoder


@hookimpl
def benchbench_register_methods(register):
    register(TSDAE.name, TSDAE)


@hookimpl
def benchbench_register_augmenters(register):
    register_noise(register)
