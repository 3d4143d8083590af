"""Unsupervised SimCSE (Gao et al. 2021; TSDAE paper section 5.4 and Appendix B).

Each sentence is encoded twice in one forward pass; the two vectors differ only by dropout and form
the positive pair, the other sentences of the batch are the negatives: cross-entropy over cosine
similarities divided by a temperature of 0.05 (the in-batch-negatives loss, MNRL). Pooling is the
[CLS] vector through a linear+tanh layer during training only, as the official unsupervised recipe
(the TSDAE paper's "linear layer on the CLS token"); the saved encoder is the [CLS] vector. Appendix
B's settings: one epoch, batch 512, AdamW lr 5e-5 (linear decay, the official HF-Trainer default),
max length 32."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from benchbench import adamw, ConfigError, hookimpl, LoopConfig, Method, method_fingerprint, Objective, resolve_steps, seed_everything, train_loop, TrainContext, TransformerEncoder


@dataclass
class SimCSEConfig:
    steps: int | None = None  # None: one epoch over the corpus
    epochs: float = 1.0
    batch_size: int = 512
    lr: float = 5e-5
    temperature: float = 0.05
    max_seq_length: int | None = 32
    pooling: str = "cls"
    mlp_train_only: bool = True
    grad_accum: int = 1
    checkpoint_every: int = field(default=1000, metadata={"hash": False})  # speed knob: not in the result key


class SimCSEObjective(Objective):
    def __init__(self, encoder: TransformerEncoder, temperature: float, mlp: bool):
        super().__init__()
        self.encoder = encoder
        self.temperature = temperature
        self.mlp = torch.nn.Sequential(torch.nn.Linear(encoder.dim, encoder.dim), torch.nn.Tanh()) if mlp else torch.nn.Identity()

    def collate(self, items: list[str], rng: np.random.Generator) -> dict:
        tok = self.encoder.tokenize(items)
        batch = dict(tok)
        batch["n_tokens"] = int(tok["attention_mask"].sum()) * 2
        return batch

    def views(self, **tok) -> tuple[torch.Tensor, torch.Tensor]:
        """The two views: the same token ids stacked twice, one forward pass, so only the dropout
        masks differ between them."""
        n = tok["input_ids"].shape[0]
        doubled = {k: torch.cat([v, v]) for k, v in tok.items()}
        z = self.mlp(self.encoder(**doubled)["sentence_embedding"])
        return z[:n], z[n:]

    def forward(self, **tok) -> torch.Tensor:
        z1, z2 = self.views(**tok)
        sim = F.cosine_similarity(z1.float()[:, None], z2.float()[None], dim=-1) / self.temperature
        return F.cross_entropy(sim, torch.arange(len(z1), device=sim.device))


class SimCSE(Method):
    name = "simcse"
    Config = SimCSEConfig
    description = "unsupervised SimCSE: dropout positives, in-batch negatives, temperature 0.05"

    def train(self, corpus: list[str], ctx: TrainContext):
        c = self.config
        if c.temperature <= 0:
            raise ConfigError(f"simcse: option 'temperature' must be > 0 (got {c.temperature}).")
        seed_everything(ctx.seed)
        obj = SimCSEObjective(ctx.load_encoder(pooling=c.pooling, max_seq_length=c.max_seq_length), c.temperature,
                              c.mlp_train_only)
        steps = resolve_steps(c.steps, len(corpus), c.batch_size * c.grad_accum, c.epochs)
        loop = LoopConfig(steps=steps, batch_size=c.batch_size, grad_accum=c.grad_accum, checkpoint_every=c.checkpoint_every)
        obj = train_loop(obj, corpus, ctx, loop, fingerprint=method_fingerprint(self, ctx, corpus),
                         make_optimizer=lambda m: adamw(m.parameters(), lr=c.lr, weight_decay=0.0),
                         make_scheduler=lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda s: max(0.0, 1 - s / steps)),
                         desc=f"simcse {ctx.task or ''}".strip())
        return obj.encoder


@hookimpl
def benchbench_register_methods(register):
    register(SimCSE.name, SimCSE)
