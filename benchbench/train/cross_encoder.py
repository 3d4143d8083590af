"""Training a cross-encoder (``encode/cross_encoder.py``) on soft pair labels through the one loop.

``CrossEncoderObjective`` is an ``Objective`` like any method's, so ``train_loop`` gives a cross-encoder
what it gives every other training: device, checkpoints with exact resume after a kill, SIGINT/SIGTERM
at a safe point, accounting. Its default loss is sentence-transformers' for a one-label CrossEncoder
(binary cross-entropy on the logit against a target in [0, 1]); a method passes its own
``loss(logits, targets)`` where it differs.

An item is ``(a, b, target)``, or a list of them when the method hands the loop whole batches in its
own order (``train_loop(..., shuffle=False)`` with ``batch_size=1``): collate flattens either."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from benchbench.encode.cross_encoder import CrossEncoderScorer
from benchbench.train.loop import Objective


def soft_bce(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy of ``sigmoid(logits)`` against soft targets, clipped to [0, 1] (the range
    BCE targets live in: a teacher's cosine can dip below 0)."""
    return F.binary_cross_entropy_with_logits(logits, targets.clamp(0.0, 1.0))


def flatten_pairs(items: list[Any]) -> list[tuple[str, str, float]]:
    """``(a, b, target)`` items, or lists of them (pre-made batches), as one list of triples."""
    out: list[tuple[str, str, float]] = []
    for it in items:
        out.extend(it if isinstance(it, list) else [it])
    return out


class CrossEncoderObjective(Objective):
    """``loss(cross_encoder(a, b), target)`` over a batch of scored pairs."""

    def __init__(
        self,
        cross_encoder: CrossEncoderScorer,
        loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = soft_bce,
    ):
        super().__init__()
        self.cross_encoder = cross_encoder
        self.loss = loss

    def collate(self, items: list[Any], rng: np.random.Generator) -> dict[str, Any]:
        """The tokenized pairs of ``items`` with their soft labels as ``targets``, and ``n_tokens``
        for the accounting. Draws nothing at random."""
        batch = flatten_pairs(items)
        features = self.cross_encoder.tokenize([e[0] for e in batch], [e[1] for e in batch])
        return {
            **features,
            "targets": torch.tensor([e[2] for e in batch]),
            "n_tokens": int(features["attention_mask"].sum()),
        }

    def forward(self, targets: torch.Tensor, **features: torch.Tensor) -> torch.Tensor:
        """The loss (``soft_bce`` by default) of the cross-encoder's logits against ``targets``."""
        return self.loss(self.cross_encoder(**features), targets)

    def result(self) -> CrossEncoderScorer:
        """The cross-encoder being trained, as it stands."""
        return self.cross_encoder
