"""Mirror-BERT (Liu, Vulic, Korhonen & Collier, EMNLP 2021): "identity fine-tuning" of a masked LM.

Each sentence and a slightly changed copy of it are a positive pair: the copy has one random span of
5 CHARACTERS replaced by [MASK] (random span masking; the reference code works on the raw string and
leaves sentences shorter than 30 characters alone); both strings go through the encoder with dropout
on (or drophead, which drops whole attention heads). The loss is InfoNCE in its NT-Xent form (the
reference uses pytorch-metric-learning's ``NTXentLoss``): the 2N vectors of a batch are pooled
(mean over tokens for sentences), and each one's positive is its mirror, its negatives the 2N - 2
others, both views included, at temperature 0.04. Very short training: 10k sentences, one epoch,
batch 200, AdamW lr 2e-5 (weight decay 0.01), max length 50, no schedule and no clipping -- about 50
steps, "20-30 seconds" on a GPU.

| item | paper | reference code (cambridgeltl/mirror-bert, commit 8b6b9de) | benchbench |
|---|---|---|---|
| span masking | random span of k = 5 replaced by [MASK] | ``erase_and_mask``: on CHARACTERS of the raw string; start ``np.random.randint(len(s) - 5)``; the string is split at the FIRST occurrence of that 5-character substring and rejoined ``left [MASK] right`` with spaces; strings shorter than 30 characters unchanged; only the SECOND view is masked | the same rule (``mask_span``; equal strings for equal draws: bench/fidelity_mirror_bert.py); the tokenizer's mask token (the reference writes "[MASK]" even for RoBERTa) |
| loss | InfoNCE, tau 0.04 (sentences) | ``NTXentLoss(temperature=0.04)`` on [z1; z2] with labels [0..N-1, 0..N-1]: 2N anchors, 2N - 2 negatives each, mean | the same loss written out (``nt_xent``; equal to pytorch-metric-learning 0.9.98: bench/fidelity_mirror_bert.py) |
| pooling (sentences) | mean pooling | ``--agg_mode mean`` in the BERT sentence scripts: ``last_hidden_state.mean(1)`` over ALL max_length positions, padding included (50 at training, 64 at evaluation); ``mean_std`` is the masked mean | masked mean (the reference's ``mean_std``); ``pooling="cls"`` the RoBERTa scripts' choice; the padded mean is NOT offered (it ties the vector to the padding length) |
| data | 10k sentences | ``stsbenchmark_train_10k_sents_random_sampled.txt``: 10k STS-B train sentences for every STS task | a seeded random 10k (``max_sentences``) of the task's own sentences (corpus "task": one model per task) |
| epochs / batch / lr / max length | 1 / 200 / 2e-5 / 50 | same; ``drop_last=True``; AdamW weight decay 0.01 on every parameter; constant lr; no clipping; fp16 AMP | same (one pass, last partial batch dropped); max length 50 for training only (the saved encoder keeps the start's; the reference evaluates at 64); bf16 autocast on CUDA |
| dropout / drophead | dropout 0.1; drophead as the alternative feature augmentation | ``--dropout_rate 0.1 --drophead_rate 0`` (``mirror_sentence_bert.sh``); ``0.0`` / ``0.2`` (``..._drophead.sh``); drophead scales kept heads by heads / kept, divides by zero (NaN) when a sentence keeps no head | ``dropout`` sets every Dropout module (0.1); ``drophead`` the same per-sentence head mask, a sentence that keeps no head gets zeros instead of NaN; hooks removed after training |
| base model | bert-base-uncased | bert-base-uncased | offline: all-MiniLM-L6-v2 (already sentence-tuned) or a tiny random BERT; no plain BERT is available offline |
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from benchbench import (
    ConfigError,
    LoopConfig,
    Method,
    Objective,
    TrainContext,
    TransformerEncoder,
    adamw,
    fit,
    hookimpl,
    resolve_steps,
    seed_everything,
)

MIN_MASKED_CHARS = 30  # the reference leaves shorter strings unmasked ("if too short, no span masking")


@dataclass
class MirrorBERTConfig:
    steps: int | None = None  # None: one pass over the sampled sentences, last partial batch dropped
    epochs: float = 1.0
    batch_size: int = 200
    lr: float = 2e-5
    weight_decay: float = 0.01
    temperature: float = 0.04  # sentences and phrases (words: 0.2)
    span_mask: int = 5  # characters replaced by [MASK] in the second view; 0 = no masking
    dropout: float = 0.1
    drophead: float = 0.0  # the drophead variant: dropout=0.0, drophead=0.2
    pooling: str = "mean"
    max_seq_length: int | None = 50  # training truncation only (the saved encoder keeps the start's)
    max_sentences: int | None = 10_000  # a seeded random sample of the corpus; None = all of it
    grad_accum: int = 1
    max_grad_norm: float = 0.0  # the reference does not clip
    checkpoint_every: int = field(default=1000, metadata={"hash": False})  # speed knob: not in the result key


def mask_span(s: str, span: int, rng: np.random.Generator, mask_token: str = "[MASK]") -> str:
    """The reference's ``erase_and_mask``: replace ``span`` characters starting at a uniform position
    by the mask token. As there, the cut is made at the FIRST occurrence of the chosen substring, and
    strings of at most ``span`` or fewer than 30 characters are returned unchanged."""
    if span <= 0 or len(s) <= span or len(s) < MIN_MASKED_CHARS:
        return s
    ind = int(rng.integers(len(s) - span))
    left, right = s.split(s[ind : ind + span], 1)
    return " ".join([left, mask_token, right])


def nt_xent(z1: torch.Tensor, z2: torch.Tensor, temperature: float) -> torch.Tensor:
    """InfoNCE over the 2N vectors [z1; z2]: anchor i's positive is its mirror (i + N or i - N), its
    negatives the 2N - 2 others of both views; cosine / temperature, mean over the 2N anchors."""
    n = len(z1)
    z = F.normalize(torch.cat([z1, z2]).float(), dim=-1)
    sim = (z @ z.T) / temperature
    self_pair = torch.eye(2 * n, dtype=torch.bool, device=sim.device)
    sim = sim.masked_fill(self_pair, float("-inf"))
    mirror = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)]).to(sim.device)
    return F.cross_entropy(sim, mirror)


def self_attention_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The self-attention blocks whose per-head outputs drophead masks (BERT-like models)."""
    return [
        m for m in model.modules() if type(m).__name__.endswith("SelfAttention") and hasattr(m, "num_attention_heads")
    ]


def drophead_hook(p: float):
    """A forward hook for a self-attention block: in training, zero each sentence's heads with
    probability ``p`` and scale the kept ones by heads / kept (the reference's mask, drawn on the CPU
    as ``torch.distributions.Bernoulli`` draws it; a sentence with no kept head gets zeros)."""

    def hook(module, _inputs, output):
        if not module.training or p == 0:
            return output
        out = output[0] if isinstance(output, tuple) else output
        b, length, width = out.shape
        heads = int(module.num_attention_heads)
        keep = torch.bernoulli(torch.full((b, heads), 1.0 - p)).to(device=out.device, dtype=out.dtype)
        scale = heads / keep.sum(1, keepdim=True).clamp(min=1.0)
        out = (out.view(b, length, heads, width // heads) * (keep * scale)[:, None, :, None]).view(b, length, width)
        return (out, *output[1:]) if isinstance(output, tuple) else out

    return hook


class MirrorBERTObjective(Objective):
    def __init__(self, encoder: TransformerEncoder, temperature: float, span_mask: int):
        super().__init__()
        self.encoder = encoder
        self.temperature, self.span_mask = float(temperature), int(span_mask)
        self.mask_token = getattr(encoder.tokenizer, "mask_token", None) or "[MASK]"

    def result(self) -> TransformerEncoder:
        """The encoder ``MirrorBERT.train`` would return now: a copy (it encodes at the start's max
        length, the training cut being training-only)."""
        return self.encoder.clone()

    def collate(self, items: list[str], rng: np.random.Generator) -> dict:
        """View 1: the sentence; view 2: its span-masked copy (the reference masks the second only)."""
        a = self.encoder.tokenize(list(items))
        b = self.encoder.tokenize([mask_span(s, self.span_mask, rng, self.mask_token) for s in items])
        batch = {**{f"a_{k}": v for k, v in a.items()}, **{f"b_{k}": v for k, v in b.items()}}
        batch["n_tokens"] = int(a["attention_mask"].sum() + b["attention_mask"].sum())
        return batch

    def views(self, **feats) -> tuple[torch.Tensor, torch.Tensor]:
        """The two vectors, one forward pass per view (as the reference), dropout/drophead on."""
        za = self.encoder(**{k[2:]: v for k, v in feats.items() if k.startswith("a_")})["sentence_embedding"]
        zb = self.encoder(**{k[2:]: v for k, v in feats.items() if k.startswith("b_")})["sentence_embedding"]
        return za, zb

    def forward(self, **feats) -> torch.Tensor:
        return nt_xent(*self.views(**feats), self.temperature)


def set_dropout(model: torch.nn.Module, p: float) -> None:
    """Every Dropout module's rate (the reference resets embeddings, attention-probability, attention
    output and output dropout: all of BERT's)."""
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = float(p)


class MirrorBERT(Method):
    name = "mirror-bert"
    Config = MirrorBERTConfig
    description = "Mirror-BERT: a sentence and its span-masked copy, dropout, InfoNCE at 0.04, ~50 steps"

    def loss_chance(self, objective) -> float:
        """NT-Xent over the 2b views: each anchor's mirror among the 2b - 1 others: ln(2b - 1)."""
        return math.log(2 * self.config.batch_size - 1)

    def train(self, corpus: list[str], ctx: TrainContext):
        c = self.config
        if c.temperature <= 0:
            raise ConfigError(f"mirror-bert: option 'temperature' must be > 0 (got {c.temperature}).")
        if not (0.0 <= c.dropout < 1.0 and 0.0 <= c.drophead < 1.0):
            raise ConfigError(
                f"mirror-bert: 'dropout' and 'drophead' must be in [0, 1) (got {c.dropout}, {c.drophead})."
            )
        if c.span_mask < 0:
            raise ConfigError(f"mirror-bert: option 'span_mask' must be >= 0 (got {c.span_mask}).")
        if c.batch_size < 2:
            raise ConfigError("mirror-bert: option 'batch_size' must be >= 2 (the other sentences are the negatives).")
        seed_everything(ctx.seed)
        items = list(corpus)
        if c.max_sentences is not None and len(items) > c.max_sentences:
            keep = np.sort(np.random.default_rng(ctx.seed).permutation(len(items))[: c.max_sentences])
            items = [items[i] for i in keep]
        encoder = ctx.load_encoder(pooling=c.pooling, train_max_seq_length=c.max_seq_length)
        set_dropout(encoder.model, c.dropout)
        hooks = []
        if c.drophead > 0:
            blocks = self_attention_modules(encoder.model)
            if not blocks:
                raise ConfigError(
                    f"mirror-bert: drophead needs BERT-like self-attention blocks; model {ctx.model!r} has none "
                    f"(use drophead=0)."
                )
            hooks = [m.register_forward_hook(drophead_hook(c.drophead)) for m in blocks]
        obj = MirrorBERTObjective(encoder, c.temperature, c.span_mask)
        # the reference's DataLoader drops the last partial batch: one pass is floor(n / batch) steps
        per_step = c.batch_size * c.grad_accum
        steps = (
            resolve_steps(c.steps, len(items), per_step)
            if c.steps is not None
            else max(1, int(c.epochs * len(items)) // per_step)
        )
        ctx.accounting["mirror_bert_sentences"] = len(items)
        try:
            obj = fit(
                self,
                obj,
                items,
                ctx,
                loop=LoopConfig.from_config(c, steps=int(steps)),
                make_optimizer=lambda m: adamw(m.parameters(), lr=c.lr, weight_decay=c.weight_decay),
            )
        finally:
            for h in hooks:
                h.remove()
        encoder = obj.encoder
        return encoder


@hookimpl
def benchbench_register_methods(register):
    register(MirrorBERT.name, MirrorBERT)


__all__ = ["MirrorBERT", "MirrorBERTConfig", "MirrorBERTObjective", "drophead_hook", "mask_span", "nt_xent"]
