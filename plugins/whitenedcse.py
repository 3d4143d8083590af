"""WhitenedCSE: whitening-based contrastive learning of sentence embeddings (Zhuo et al., ACL 2023).

Unsupervised SimCSE with two changes inside the training-only projection head:

* shuffled group whitening (SGW) before the head's dense+tanh: the pooled vectors of a block of rows
  are centred, their dimensions randomly permuted and cut into ``num_groups`` groups, and each group is
  ZCA-whitened with its own batch covariance (W = U S^-1/2 U^T), then the permutation is undone. A new
  permutation is drawn for every block at every step, so which dimensions are decorrelated together
  changes all the time;
* ``num_pos`` dropout views of each sentence instead of two: the first view is the anchor and the loss
  is the sum over the other views v of InfoNCE(anchor, view v) with in-batch negatives at 0.05.

The whitening matrix is a constant for the backward: the reference code rebuilds the covariance as a
new leaf tensor (``torch.tensor(covs, requires_grad=True)``) before the eigendecomposition, so the
gradient reaches the vectors through the centring and the product with W only; benchbench does the
same (``W`` from a detached covariance).

| item | paper | reference code (SupstarZh/WhitenedCSE, commit 65fe70a) | benchbench |
|---|---|---|---|
| runnable as published | - | no: ``whitenedcse/models.py`` does not parse (``ShuffledGroupWhitening(config.hidden_size, num_groups=128, config.num_pos)``: a positional argument after a keyword), imports two modules the repository lacks (``whiten_norm``, ``whitening``), ``train.py`` has no ``--num_pos`` argument and builds 2 views for a one-column corpus while ``cl_forward`` needs 3 (``z1_z3_cos``) | bench/fidelity_whitenedcse.py runs the reference's own ``ShuffledGroupWhitening`` (``torch.symeig`` mapped to ``torch.linalg.eigh``, removed in torch 2) and its ``cl_forward``, ``Pooler``, ``Similarity`` and ``MLPLayer`` with that one line repaired (``num_pos=config.num_pos``) |
| where SGW sits | on the features before contrast | inside ``MLPLayer``: SGW, then dense, then tanh; the MLP is training-only (``--mlp_only_train``) | same; the saved encoder is the bare [CLS] |
| which rows are whitened together | one whitening per positive view | the MLP input is the flattened (batch, 3, dim) tensor (the 3 views of a sentence ADJACENT) and SGW cuts it into thirds by row: each third holds all three views of a third of the sentences | ``whiten_rows="reference"`` (default): the reference's thirds; ``whiten_rows="view"``: one block per view (what the code's names ``x1/x2/x3`` suggest) |
| groups / shuffle | groups of dimensions, shuffled | ``num_groups=128`` (hard-coded; 6 dimensions per group for BERT-base), a ``randperm`` per block per step | ``num_groups``: the most groups up to 128 that leave each at least 3 dimensions (128 on BERT-base and all-MiniLM-L6-v2, 8 on tiny-bert's 32; ``--set num_groups=N`` fixes it, a divisor of the hidden size), ``shuffle`` true |
| whitening | ZCA | centred per block, covariance / rows (biased), ``symeig``, W = U S^-1/2 U^T without epsilon, W without gradient | same with ``torch.linalg.eigh``, float32 |
| epsilon | - | none: a singular group covariance gives an infinite W (NaN loss) | ``whiten_eps`` 1e-5 added to the eigenvalues (BatchNorm's eps): all-MiniLM-L6-v2's [CLS] has a dimension that is constant over a batch (std 7e-33), so without it the first step is NaN; ``whiten_eps=0`` is the reference (the equality bench runs it). Its size on the bench's tiny 384-wide BERT, batch 16: loss 1.3e-3, gradients 6.5e-3 of the largest |
| positives / loss | multiple positives | ``--num_pos 3``: CE(sim(z1, z2)) + CE(sim(z1, z3)), cosine / 0.05 | ``num_pos`` 3: the sum over views 2..num_pos |
| batch / lr / max length / epochs | BERT-base, 1M Wikipedia sentences | 128 / 1e-5 / 32 / 1; HF Trainer: AdamW without weight decay, linear decay, clip 1.0, fp16; ``--dup_type bpe`` is passed but nothing reads it | same on the task's own sentences; max length 32 for training only |
| checkpoint selection | STS-B dev | every 125 steps, ``--load_best_model_at_end`` | NOT implemented: the last step (fixed budget, as every method here) |
| base model | bert-base-uncased | bert-base-uncased | offline: all-MiniLM-L6-v2 (384 = 128 groups of 3) or a tiny random BERT |
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
    fit,
    hookimpl,
    resolve_steps,
    seed_everything,
    trainer_defaults,
)

WHITEN_ROWS = ("reference", "view")


@dataclass
class WhitenedCSEConfig:
    steps: int | None = None  # None: one epoch over the corpus
    epochs: float = 1.0
    batch_size: int = 128
    lr: float = 1e-5
    temperature: float = 0.05
    num_pos: int = 3  # dropout views per sentence: the anchor and num_pos - 1 positives
    # groups of dimensions whitened separately (the hidden size must be a multiple); None: the most groups, up
    # to the reference's 128, that leave each group at least 3 dimensions (``default_groups``)
    num_groups: int | None = None
    shuffle: bool = True  # a new random grouping of the dimensions per block and step
    whiten_rows: str = "reference"  # which rows share a whitening: the reference code's thirds, or one per view
    whiten_eps: float = 1e-5  # added to each group covariance's eigenvalues; 0 = the reference (NaN if singular)
    max_seq_length: int | None = 32  # training truncation only (the saved encoder keeps the start's)
    pooling: str = "cls"
    grad_accum: int = 1
    max_grad_norm: float = 1.0  # HF Trainer (the reference's trainer) clips the global norm at 1.0; 0 = off
    checkpoint_every: int = field(default=1000, metadata={"hash": False})  # speed knob: not in the result key


REFERENCE_GROUPS = 128  # the reference code's constant: 6 dimensions a group on BERT-base's 768
MIN_GROUP_WIDTH = 3  # all-MiniLM-L6-v2's 384 = 128 groups of 3, the narrowest groups the stored records used


def default_groups(hidden: int) -> int:
    """WhitenedCSE's default ``num_groups`` for a hidden size: the most groups, up to the reference's 128,
    that divide it and leave each group at least 3 dimensions. That is the reference's 128 on BERT-base
    (768: groups of 6) and on all-MiniLM-L6-v2 (384: groups of 3, as every run before this rule), 128 on
    1024, and 8 groups of 4 on tiny-bert's 32 (a group of 1 or 2 dimensions has nothing to decorrelate
    worth the name). 1 when no divisor qualifies (a hidden size under 6)."""
    fits = [g for g in range(1, min(REFERENCE_GROUPS, hidden // MIN_GROUP_WIDTH) + 1) if hidden % g == 0]
    return max(fits, default=1)


def whiten_groups(x: torch.Tensor, num_groups: int, perm: torch.Tensor | None = None, eps: float = 0.0) -> torch.Tensor:
    """ZCA-whiten each group of ``x``'s (rows x dims) dimensions over its rows; with ``perm`` the
    groups are formed on the dimensions in that order and the output is put back in the original
    order. W comes from a detached covariance (no gradient through the whitening matrix)."""
    n, d = x.shape
    if perm is not None:
        x = x[:, perm]
    g = x.reshape(n, num_groups, d // num_groups).transpose(0, 1)  # groups, rows, dims per group
    g = g - g.mean(1, keepdim=True)
    with torch.no_grad():
        cov = g.transpose(1, 2) @ g / n
        s, u = torch.linalg.eigh(cov)
        w = u @ torch.diag_embed((s + eps).rsqrt()) @ u.transpose(1, 2)
    out = (g @ w).transpose(0, 1).reshape(n, d)
    return out if perm is None else out[:, torch.argsort(perm)]


def shuffled_group_whitening(
    x: torch.Tensor, blocks: int, num_groups: int, shuffle: bool = True, eps: float = 0.0
) -> torch.Tensor:
    """SGW over ``blocks`` equal blocks of rows (the last takes the remainder, as the reference's
    ``x[2 * batch:]``), each whitened on its own with its own random permutation of the dimensions,
    drawn block by block from torch's global generator."""
    n, d = x.shape
    size = n // blocks
    out = []
    for b in range(blocks):
        part = x[b * size : (b + 1) * size if b < blocks - 1 else n]
        perm = torch.randperm(d) if shuffle and num_groups != 1 else None
        out.append(whiten_groups(part, num_groups, None if perm is None else perm.to(x.device), eps))
    return torch.cat(out)


class WhitenedCSEObjective(Objective):
    def __init__(
        self,
        encoder: TransformerEncoder,
        temperature: float = 0.05,
        num_pos: int = 3,
        num_groups: int = 128,
        shuffle: bool = True,
        whiten_rows: str = "reference",
        whiten_eps: float = 0.0,
    ):
        super().__init__()
        self.encoder = encoder
        self.temperature, self.num_pos, self.num_groups = float(temperature), int(num_pos), int(num_groups)
        self.shuffle, self.whiten_rows, self.whiten_eps = bool(shuffle), whiten_rows, float(whiten_eps)
        lin = torch.nn.Linear(encoder.dim, encoder.dim)
        torch.nn.init.normal_(lin.weight, std=float(getattr(encoder.model.config, "initializer_range", 0.02)))
        torch.nn.init.zeros_(lin.bias)
        self.dense = lin.to(encoder.device)  # the head's dense (+ tanh), after the whitening; training only

    def result(self) -> TransformerEncoder:
        """The encoder ``WhitenedCSE.train`` would return now: a copy, the bare [CLS] (it encodes at the
        start's max length, the training cut being training-only)."""
        return self.encoder.clone()

    def collate(self, items: list[str], rng: np.random.Generator) -> dict:
        tok = self.encoder.tokenize(items)
        batch = {"input_ids": tok["input_ids"], "attention_mask": tok["attention_mask"]}
        batch["n_tokens"] = int(tok["attention_mask"].sum()) * self.num_pos
        return batch

    def views(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(num_pos, batch, dim): the head's output for each dropout view, from one forward pass."""
        n, k = input_ids.shape[0], self.num_pos
        h = self.encoder(input_ids=input_ids.repeat(k, 1), attention_mask=attention_mask.repeat(k, 1))
        h = h["sentence_embedding"].float()  # rows view-major: row v * n + i is view v of sentence i
        # the reference's row order: the views of one sentence adjacent (row i * k + v)
        order = torch.arange(n * k, device=h.device).view(k, n).T.reshape(-1)
        if self.whiten_rows == "reference":
            white = shuffled_group_whitening(h[order], k, self.num_groups, self.shuffle, self.whiten_eps)
            h = white[torch.argsort(order)]
        else:
            h = shuffled_group_whitening(h, k, self.num_groups, self.shuffle, self.whiten_eps)
        return torch.tanh(self.dense(h)).view(k, n, -1)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        z = self.views(input_ids, attention_mask)
        return whitenedcse_loss(z, self.temperature)


def whitenedcse_loss(z: torch.Tensor, temperature: float) -> torch.Tensor:
    """Sum over views v >= 1 of InfoNCE(anchor z[0], z[v]) with in-batch negatives; z: (views, batch, dim)."""
    labels = torch.arange(z.shape[1], device=z.device)
    return sum(
        F.cross_entropy(F.cosine_similarity(z[0][:, None], z[v][None], dim=-1) / temperature, labels)
        for v in range(1, z.shape[0])
    )


class WhitenedCSE(Method):
    name = "whitenedcse"
    Config = WhitenedCSEConfig
    description = "WhitenedCSE: shuffled group whitening in the training head, 3 dropout views, temperature 0.05"

    @classmethod
    def model_defaults(cls, config: WhitenedCSEConfig, shape) -> dict[str, int]:
        """``num_groups`` left at None: ``default_groups`` of the start's hidden size."""
        if config.num_groups is None and shape.hidden:
            return {"num_groups": default_groups(shape.hidden)}
        return {}

    def num_groups(self, dim: int) -> int:
        """The groups on a start of hidden size ``dim``: the option, or its default rule."""
        g = self.config.num_groups
        return default_groups(dim) if g is None else g

    def _check(self, dim: int) -> None:
        c = self.config
        num_groups = self.num_groups(dim)
        if c.temperature <= 0:
            raise ConfigError(f"whitenedcse: option 'temperature' must be > 0 (got {c.temperature}).")
        if c.whiten_eps < 0:
            raise ConfigError(f"whitenedcse: option 'whiten_eps' must be >= 0 (got {c.whiten_eps}).")
        if c.num_pos < 2:
            raise ConfigError(f"whitenedcse: option 'num_pos' must be >= 2 (got {c.num_pos}).")
        if c.whiten_rows not in WHITEN_ROWS:
            raise ConfigError(
                f"whitenedcse: option 'whiten_rows' must be one of {WHITEN_ROWS} (got {c.whiten_rows!r})."
            )
        if num_groups < 1 or dim % num_groups:
            raise ConfigError(
                f"whitenedcse: option 'num_groups' ({num_groups}) must divide the model's hidden size {dim}; "
                f"choose a divisor of it (BERT-base 768: 128 groups of 6; MiniLM 384: 128 groups of 3), or leave "
                f"it out for its default on this model ({default_groups(dim)})."
            )
        if c.batch_size <= dim // num_groups:
            raise ConfigError(
                f"whitenedcse: option 'batch_size' ({c.batch_size}) must exceed the dimensions per group "
                f"({dim // num_groups}): a group's covariance over fewer rows is singular and cannot be whitened."
            )

    def loss_chance(self, objective) -> float:
        """A sum of num_pos - 1 InfoNCE terms, each over the batch's b candidates: (num_pos - 1) ln b."""
        return (self.config.num_pos - 1) * math.log(self.config.batch_size)

    def train(self, corpus: list[str], ctx: TrainContext):
        c = self.config
        seed_everything(ctx.seed)
        # max_seq_length: the reference's training truncation only (the saved encoder keeps the start's)
        encoder = ctx.load_encoder(pooling=c.pooling, train_max_seq_length=c.max_seq_length)
        self._check(encoder.dim)
        num_groups = self.num_groups(encoder.dim)
        ctx.accounting["num_groups"] = num_groups  # the value that trained, when the option was left to its rule
        obj = WhitenedCSEObjective(
            encoder, c.temperature, c.num_pos, num_groups, c.shuffle, c.whiten_rows, c.whiten_eps
        )
        steps = resolve_steps(c.steps, len(corpus), c.batch_size * c.grad_accum, c.epochs)
        obj = fit(
            self,
            obj,
            corpus,
            ctx,
            loop=LoopConfig.from_config(c, steps=steps),
            **trainer_defaults(c.lr, steps),
        )
        return obj.encoder


@hookimpl
def benchbench_register_methods(register):
    register(WhitenedCSE.name, WhitenedCSE)


__all__ = [
    "WhitenedCSE",
    "WhitenedCSEConfig",
    "WhitenedCSEObjective",
    "default_groups",
    "shuffled_group_whitening",
    "whiten_groups",
    "whitenedcse_loss",
]
