"""Dropout alignment: an example benchbench method plugin, written from docs/writing-a-method.md alone.

The idea (SimCSE's views with Wang & Isola's 2020 losses instead of InfoNCE): the same sentence
encoded twice in train mode gives two views that differ only by dropout. The loss pulls each pair
together (alignment: mean squared distance of the normalised views) and, with weight
``uniformity``, spreads the batch over the sphere (log of the mean Gaussian potential between
different sentences). There is no contrastive pairing of positives against negatives; with
``uniformity=0`` it is alignment alone, which collapses to one vector (the degenerate case SimCSE's
paper and Wang & Isola describe), so the default keeps it.

Everything else (device, mixed precision, the step budget, checkpoints with exact resume after a
kill, the accounting in the result record) comes from benchbench's training loop through ``fit``.
This file imports only benchbench's public API.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from benchbench import ConfigError, Method, Objective, fit, hookimpl, linear_decay, seed_everything


@dataclass
class DropoutAlignConfig:
    steps: int = 1000
    batch_size: int = 64
    lr: float = 3e-5
    uniformity: float = 1.0  # weight of the uniformity term (0: alignment alone, which collapses)
    t: float = 2.0  # the uniformity potential's scale (Wang & Isola's default)
    pooling: str = "mean"
    train_max_seq_length: int = 32  # SimCSE's training truncation; evaluation uses the start's length
    max_grad_norm: float = 1.0
    # how often to checkpoint changes only speed, never a number: kept out of the result key
    checkpoint_every: int = field(default=1000, metadata={"hash": False})


def align_uniform_loss(za: torch.Tensor, zb: torch.Tensor, uniformity: float, t: float) -> torch.Tensor:
    """Alignment of the two views plus ``uniformity`` x uniformity of the batch (both views)."""
    za, zb = F.normalize(za.float(), dim=-1), F.normalize(zb.float(), dim=-1)
    align = (za - zb).pow(2).sum(-1).mean()
    if uniformity == 0 or len(za) < 2:
        return align
    # pairwise squared distances between different sentences of the batch, per view
    unif = sum(torch.pdist(z).pow(2).mul(-t).exp().mean().log() for z in (za, zb)) / 2
    return align + uniformity * unif


class DropoutAlignObjective(Objective):
    def __init__(self, encoder, uniformity: float, t: float):
        super().__init__()
        self.encoder = encoder  # what `result()` hands back, and what the monitor scores
        self.uniformity, self.t = uniformity, t

    def collate(self, items: list[str], rng) -> dict:
        # no randomness here: the two views differ only by the dropout masks of the two passes
        batch = dict(self.encoder.tokenize(list(items)))
        batch["n_tokens"] = 2 * int(batch["attention_mask"].sum())  # for the accounting: two passes
        return batch

    def forward(self, **feats) -> torch.Tensor:
        za = self.encoder(**feats)["sentence_embedding"]  # train mode: dropout on,
        zb = self.encoder(**feats)["sentence_embedding"]  # so the two passes differ
        return align_uniform_loss(za, zb, self.uniformity, self.t)


class DropoutAlign(Method):
    name = "dropout-align"
    Config = DropoutAlignConfig
    description = "example plugin: two dropout passes aligned, the batch spread on the sphere (no negatives)"

    def train(self, corpus: list[str], ctx):
        c = self.config
        if c.uniformity < 0 or c.t <= 0:
            raise ConfigError(
                f"dropout-align: options 'uniformity' must be >= 0 and 't' > 0 (got {c.uniformity}, {c.t})."
            )
        seed_everything(ctx.seed)  # before building anything random
        encoder = ctx.load_encoder(pooling=c.pooling, train_max_seq_length=c.train_max_seq_length)
        objective = fit(
            self,
            DropoutAlignObjective(encoder, c.uniformity, c.t),
            corpus,
            ctx,
            make_optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=c.lr),
            make_scheduler=lambda o: linear_decay(o, c.steps),
        )
        return objective.encoder


@hookimpl
def benchbench_register_methods(register):
    register(DropoutAlign.name, DropoutAlign)
