"""Word-crop contrastive learning: an example benchbench method plugin.

The idea (a small cousin of SimCSE and DeCLUTR): two views of a sentence, each with a random
``crop`` fraction of its words deleted, should be closer to each other than to the other sentences
of the batch. Loss: in-batch cross-entropy over cosine similarities divided by a temperature
(InfoNCE, as sentence-transformers' MultipleNegativesRankingLoss). Everything else — device,
mixed precision, seeding, the step budget, checkpoints with exact resume after a kill, the accounting
in the result record — comes from benchbench's shared training loop.

This file is meant to be copied: it imports only benchbench's public API.
"""

from __future__ import annotations

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
    hookimpl,
    method_fingerprint,
    seed_everything,
    train_loop,
)


@dataclass
class WordCropConfig:
    steps: int = 1000
    batch_size: int = 32
    lr: float = 2e-5
    crop: float = 0.2  # fraction of words deleted in each view
    temperature: float = 0.05
    pooling: str = "mean"
    max_seq_length: int | None = 64
    max_grad_norm: float = 1.0
    # how often to checkpoint changes only speed, never a number: kept out of the result key
    checkpoint_every: int = field(default=1000, metadata={"hash": False})


def crop_words(sentence: str, crop: float, rng: np.random.Generator) -> str:
    """Delete each word with probability ``crop``, keeping at least one word."""
    words = sentence.split()
    if len(words) < 2:
        return sentence
    keep = rng.random(len(words)) >= crop
    if not keep.any():
        keep[rng.integers(len(words))] = True
    return " ".join(w for w, k in zip(words, keep) if k)


class WordCropObjective(Objective):
    def __init__(self, encoder, crop: float, temperature: float):
        super().__init__()
        self.encoder = encoder  # what `result()` hands back, and what the monitor scores
        self.crop, self.temperature = crop, temperature

    def collate(self, items: list[str], rng: np.random.Generator) -> dict:
        # all randomness from `rng`: the loop seeds it by (seed, micro-batch), so a resumed run
        # draws exactly the same views
        a = self.encoder.tokenize([crop_words(s, self.crop, rng) for s in items])
        b = self.encoder.tokenize([crop_words(s, self.crop, rng) for s in items])
        batch = {**{f"a_{k}": v for k, v in a.items()}, **{f"b_{k}": v for k, v in b.items()}}
        batch["n_tokens"] = int(a["attention_mask"].sum() + b["attention_mask"].sum())
        return batch

    def forward(self, **feats) -> torch.Tensor:
        za = self.encoder(**{k[2:]: v for k, v in feats.items() if k.startswith("a_")})["sentence_embedding"]
        zb = self.encoder(**{k[2:]: v for k, v in feats.items() if k.startswith("b_")})["sentence_embedding"]
        sim = F.cosine_similarity(za.float()[:, None], zb.float()[None], dim=-1) / self.temperature
        return F.cross_entropy(sim, torch.arange(len(za), device=sim.device))


class WordCrop(Method):
    name = "wordcrop"
    Config = WordCropConfig
    description = "example plugin: contrastive learning between two word-cropped views (InfoNCE)"

    def train(self, corpus: list[str], ctx: TrainContext):
        c = self.config
        if not 0 <= c.crop < 1:
            raise ConfigError(f"wordcrop: option 'crop' must be in [0, 1) (got {c.crop}).")
        seed_everything(ctx.seed)  # before building anything random
        objective = WordCropObjective(
            ctx.load_encoder(pooling=c.pooling, max_seq_length=c.max_seq_length), c.crop, c.temperature
        )
        loop = LoopConfig.from_config(c)  # steps, batch_size, checkpoint_every, max_grad_norm by name
        objective = train_loop(
            objective,
            corpus,
            ctx,
            loop,
            fingerprint=method_fingerprint(self, ctx, corpus),
            make_optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=c.lr),
            desc=f"wordcrop {ctx.task or ''}".strip(),
        )
        return objective.encoder


@hookimpl
def benchbench_register_methods(register):
    register(WordCrop.name, WordCrop)
