"""Contrastive Tension (Carlsson et al. 2021; TSDAE paper section 5.3 and Appendix B).

Two encoders start from the same weights. Each batch holds pairs (a, b): for every positive pair
(a, a) there are K negatives (a, random corpus sentence); the logit is the dot product
f1(a)·f2(b) and the loss binary cross-entropy (summed over the batch, as the CT authors'
sentence-transformers port does). RMSprop with the segmented-constant lr of Appendix B
(1e-5, 8e-6, 6e-6, 4e-6 for steps 1-500, 501-1000, 1001-1500, 1501-2000, then 2e-6); mean
pooling; the SECOND encoder is the result.

| item | paper (TSDAE App. B) | reference code | benchbench |
|---|---|---|---|
| implementation | the TSDAE authors' own (PyTorch) | official TF code (FreddeFrallan/Contrastive-Tension); the TSDAE authors' port is sentence-transformers ``ContrastiveTensionLoss`` | the port's loss (equal to it: tests/plugins/test_method_fidelity.py) |
| dropout while training | not stated | official: both encoders without dropout; port: train mode, dropout on | on (``dropout=True``, the TSDAE authors' port); ``dropout=False`` = official; recorded in the config |
| max length | not stated | official 75; port: the model's | the model's (``--max-seq-length 75`` for the official) |
| random negative equal to its anchor | - | labelled 0 (port's data loader; official samples at random too) | labelled 0 (not resampled) |
| loss reduction | expectation | port: BCE summed over the batch | summed |
| gradient clipping | not stated | ``fit``: global norm 1.0 | ``max_grad_norm`` 1.0 (0 = off) |
| lr schedule | segmented 1e-5 .. 2e-6 | same | same (``segment_steps`` 500) |
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from benchbench import (
    ConfigError,
    Method,
    Objective,
    TrainContext,
    TransformerEncoder,
    fit,
    hookimpl,
    seed_everything,
)


@dataclass
class CTConfig:
    steps: int = 100_000  # paper; on a CPU pass e.g. --steps 2000
    batch_size: int = 8  # pairs per batch
    lr: float = 1e-5  # the first segment; later segments scale it by 0.8, 0.6, 0.4, 0.2
    negatives: int = 7  # K negatives per positive
    segment_steps: int = 500
    max_seq_length: int | None = None
    pooling: str = "mean"
    grad_accum: int = 1
    # dropout in both encoders while training: on, as the TSDAE authors' own CT implementation (the
    # sentence-transformers port, ContrastiveTensionLoss, trains in train mode); False = the CT
    # authors' official code, which calls both encoders with dropout off
    dropout: bool = True
    max_grad_norm: float = 1.0  # sentence-transformers fit() clips the global norm at 1.0; 0 = off
    checkpoint_every: int = field(default=1000, metadata={"hash": False})  # speed knob: not in the result key


def segmented_lr(segment: int = 500):
    """Multiplier of the base lr after ``s`` optimizer steps (step s+1 is being taken)."""
    factors = (1.0, 0.8, 0.6, 0.4)
    return lambda s: factors[s // segment] if s // segment < len(factors) else 0.2


class CTObjective(Objective):
    def __init__(self, encoder: TransformerEncoder, corpus: list[str], negatives: int, dropout: bool = True):
        super().__init__()
        self.dropout = dropout
        self.first = encoder.clone()  # f1, encodes a
        self.second = encoder  # f2, encodes b; the result
        self.corpus = corpus
        self.negatives = negatives

    def collate(self, items: list[str], rng: np.random.Generator) -> dict:
        group = self.negatives + 1
        b, labels = [], []
        for i, a in enumerate(items):
            if i % group == 0:
                b.append(a)
                labels.append(1.0)
            else:
                # a random sentence is a negative even when it happens to equal the anchor (label 0),
                # as the sentence-transformers port's ContrastiveTensionDataLoader labels it
                b.append(self.corpus[int(rng.integers(len(self.corpus)))])
                labels.append(0.0)
        ta, tb = self.first.tokenize(items), self.second.tokenize(b)
        batch = {**{f"a_{k}": v for k, v in ta.items()}, **{f"b_{k}": v for k, v in tb.items()}}
        batch["labels"] = torch.tensor(labels)
        batch["n_tokens"] = int(ta["attention_mask"].sum() + tb["attention_mask"].sum())
        return batch

    def train(self, mode: bool = True) -> CTObjective:
        """With ``dropout=False`` both encoders run in eval mode (no dropout; gradients still flow)."""
        super().train(mode)
        if not self.dropout:
            self.first.eval()
            self.second.eval()
        return self

    def forward(self, labels: torch.Tensor, **feats) -> torch.Tensor:
        a = self.first(**{k[2:]: v for k, v in feats.items() if k.startswith("a_")})["sentence_embedding"]
        b = self.second(**{k[2:]: v for k, v in feats.items() if k.startswith("b_")})["sentence_embedding"]
        logits = (a.float() * b.float()).sum(-1)
        return F.binary_cross_entropy_with_logits(logits, labels.float(), reduction="sum")

    def result(self) -> TransformerEncoder:
        return self.second


class CT(Method):
    name = "ct"
    Config = CTConfig
    description = "Contrastive Tension: two encoders, BCE on dot products, RMSprop; the second encoder"

    def loss_chance(self, objective) -> float:
        """Binary cross-entropy summed over the b pairs of a batch, at logit 0: b ln 2."""
        return self.config.batch_size * math.log(2)

    def train(self, corpus: list[str], ctx: TrainContext):
        c = self.config
        if c.negatives < 0:
            raise ConfigError(f"ct: option 'negatives' must be >= 0 (got {c.negatives}).")
        seed_everything(ctx.seed)
        obj = CTObjective(
            ctx.load_encoder(pooling=c.pooling, max_seq_length=c.max_seq_length), corpus, c.negatives, c.dropout
        )
        obj = fit(
            self,
            obj,
            corpus,
            ctx,
            make_optimizer=lambda m: torch.optim.RMSprop(m.parameters(), lr=c.lr),
            make_scheduler=lambda o: torch.optim.lr_scheduler.LambdaLR(o, segmented_lr(c.segment_steps)),
        )
        return obj.result()


@hookimpl
def benchbench_register_methods(register):
    register(CT.name, CT)
