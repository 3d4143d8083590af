"""BERT-flow (Li et al. 2020; TSDAE paper section 5.5 and Appendix B).

The encoder stays frozen. Its mean-pooled vectors u are mapped by an invertible Glow flow f to
z = f(u), trained by maximum likelihood under a standard Gaussian (change of variables:
log p(u) = log N(f(u)) + log|det df/du|); z is the sentence vector. Multi-scale Glow: 3 levels of 3
steps, coupling networks 32 wide (the official "config_l3_d3_w32"); each step is ActNorm ->
permutation -> coupling, and half the dimensions leave the flow after each level.

Written by hand: no installed library provides Glow (normflows/nflows are not dependencies here).

| item | paper (TSDAE App. B) | reference code (bohanli/BERT-flow; UKPLab/pytorch-bertflow) | benchbench |
|---|---|---|---|
| coupling | - | official config: additive | ``coupling="additive"`` (default); ``"affine"`` = benchbench's earlier Glow variant |
| permutation | - | official config: fixed reverse | ``permutation="reverse"`` (default); ``"lu"`` = learned LU 1x1 map (earlier variant) |
| vectors the flow sees | - | BERT called in training mode (dropout on) on every batch, BERT frozen | ``vectors="dropout"`` (default); ``"cached"`` = encoded once in eval mode (earlier variant, far cheaper on a CPU) |
| learning rate | 1e-6 (wd 0.01) | 1e-3 (pytorch-bertflow) | 1e-3: 1e-6 barely moves a fresh flow in a CPU budget (``--lr 1e-6`` for App. B) |
| pooling | mean | official offers several (e.g. first-last average) | mean of the last layer |
| gradient clipping | - | global norm 1.0 | ``max_grad_norm`` 1.0 (0 = off) |
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from benchbench import (
    ConfigError,
    Method,
    Objective,
    TrainContext,
    TransformerEncoder,
    adamw,
    fit,
    hash_weights,
    hookimpl,
    seed_everything,
)


@dataclass
class BertFlowConfig:
    steps: int = 100_000
    batch_size: int = 8
    lr: float = 1e-3
    weight_decay: float = 0.01
    max_seq_length: int | None = None
    pooling: str = "mean"
    levels: int = 3
    depth: int = 3
    hidden: int = 32
    # the official config (bohanli/BERT-flow, flow/config/config_l3_d3_w32.json): additive coupling, a
    # fixed reversing permutation, and the flow trained on vectors re-encoded every batch by the frozen
    # encoder with dropout on (BERT in training mode). "affine" / "lu" / "cached" is benchbench's earlier
    # variant (Glow's affine coupling, learned LU-parametrised 1x1 map, eval-mode vectors encoded once):
    # ~30x cheaper per step on a CPU, kept as a named option
    coupling: str = "additive"  # "additive" | "affine"
    permutation: str = "reverse"  # "reverse" | "lu"
    vectors: str = "dropout"  # "dropout": re-encoded per batch, dropout on | "cached": encoded once, eval mode
    grad_accum: int = 1
    max_grad_norm: float = 1.0  # global-norm clipping (the official optimiser clips at 1.0); 0 = off
    checkpoint_every: int = field(default=10_000, metadata={"hash": False})  # speed knob: not in the result key


class ActNorm(nn.Module):
    """Per-dimension affine map initialised from the first batch to zero mean, unit variance."""

    def __init__(self, dim: int):
        super().__init__()
        self.loc = nn.Parameter(torch.zeros(dim))
        self.log_scale = nn.Parameter(torch.zeros(dim))
        self.register_buffer("initialized", torch.tensor(False))

    def forward(self, x):
        if not bool(self.initialized) and self.training:
            with torch.no_grad():
                self.loc.copy_(-x.mean(0))
                self.log_scale.copy_(-torch.log(x.std(0) + 1e-6))
                self.initialized.fill_(True)
        return (x + self.loc) * torch.exp(self.log_scale), self.log_scale.sum().expand(x.shape[0])


class InvLinear(nn.Module):
    """Glow's invertible 1x1 convolution on a vector: W = P L (U + diag(sign * exp(log_s))), so
    log|det W| = sum(log_s)."""

    def __init__(self, dim: int, generator: torch.Generator):
        super().__init__()
        import scipy.linalg

        q, _ = torch.linalg.qr(torch.randn(dim, dim, generator=generator))
        p, lower, upper = scipy.linalg.lu(q.numpy())
        s = np.diag(upper)
        self.register_buffer("p", torch.tensor(p, dtype=torch.float32))
        self.register_buffer("sign_s", torch.tensor(np.sign(s), dtype=torch.float32))
        self.register_buffer("l_mask", torch.tril(torch.ones(dim, dim), -1))
        self.lower = nn.Parameter(torch.tensor(lower, dtype=torch.float32))
        self.upper = nn.Parameter(torch.tensor(np.triu(upper, 1), dtype=torch.float32))
        self.log_s = nn.Parameter(torch.tensor(np.log(np.abs(s)), dtype=torch.float32))

    def weight(self):
        eye = torch.eye(self.p.shape[0], device=self.p.device)
        lower = self.lower * self.l_mask + eye
        upper = self.upper * self.l_mask.T + torch.diag(self.sign_s * torch.exp(self.log_s))
        return self.p @ lower @ upper

    def forward(self, x):
        return x @ self.weight().T, self.log_s.sum().expand(x.shape[0])


class Reverse(nn.Module):
    """Glow's fixed "reverse" permutation: a volume-preserving map (log-determinant 0)."""

    def forward(self, x):
        return x.flip(-1), x.new_zeros(x.shape[0])


class AdditiveCoupling(nn.Module):
    """Additive coupling (NICE; the official BERT-flow config): the second half is shifted by a network
    of the first half; volume-preserving. Last layer zero-initialised: each step starts as the identity."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.half = dim // 2
        self.net = nn.Sequential(
            nn.Linear(self.half, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, dim - self.half),
        )
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)

    def forward(self, x):
        xa, xb = x[:, : self.half], x[:, self.half :]
        return torch.cat([xa, xb + self.net(xa)], -1), x.new_zeros(x.shape[0])


class Coupling(nn.Module):
    """Affine coupling: the second half is scaled and shifted by a network of the first half
    (sigmoid scale as in Glow; last layer zero-initialised so each step starts as the identity)."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.half = dim // 2
        self.net = nn.Sequential(
            nn.Linear(self.half, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 2 * (dim - self.half)),
        )
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)

    def forward(self, x):
        xa, xb = x[:, : self.half], x[:, self.half :]
        log_s, t = self.net(xa).chunk(2, dim=-1)
        s = torch.sigmoid(log_s + 2.0)
        return torch.cat([xa, (xb + t) * s], -1), torch.log(s).sum(-1)


class Glow(nn.Module):
    """Multi-scale Glow on vectors: ``levels`` levels of ``depth`` steps; after each level but the
    last, half the dimensions leave the flow (they are part of z and scored by the prior)."""

    def __init__(
        self,
        dim: int,
        levels: int = 3,
        depth: int = 3,
        hidden: int = 32,
        seed: int = 0,
        coupling: str = "affine",
        permutation: str = "lu",
    ):
        # the defaults are the earlier variant's, so folders saved before these options reload as saved
        super().__init__()
        if coupling not in ("additive", "affine") or permutation not in ("reverse", "lu"):
            raise ValueError(
                f"bertflow: coupling must be additive|affine and permutation reverse|lu "
                f"(got {coupling!r}, {permutation!r})"
            )
        g = torch.Generator().manual_seed(seed)
        self.levels = nn.ModuleList()
        self.dims = []
        d = dim
        for lvl in range(levels):
            steps = nn.ModuleList()
            for _ in range(depth):
                perm = InvLinear(d, g) if permutation == "lu" else Reverse()
                couple = Coupling(d, hidden) if coupling == "affine" else AdditiveCoupling(d, hidden)
                steps.extend([ActNorm(d), perm, couple])
            self.levels.append(steps)
            self.dims.append(d)
            if lvl < levels - 1:
                d = d - d // 2
        self.dim = dim

    def forward(self, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """z = f(u) and log|det df/du|."""
        x, logdet, out = u, torch.zeros(u.shape[0], device=u.device), []
        for i, steps in enumerate(self.levels):
            for step in steps:
                x, ld = step(x)
                logdet = logdet + ld
            if i < len(self.levels) - 1:
                k = x.shape[1] // 2
                out.append(x[:, :k])
                x = x[:, k:]
        out.append(x)
        return torch.cat(out, -1), logdet

    def nll(self, u: torch.Tensor) -> torch.Tensor:
        """Negative log-likelihood per dimension (nats), averaged over the batch."""
        z, logdet = self(u)
        log_pz = -0.5 * (z**2).sum(-1) - 0.5 * self.dim * math.log(2 * math.pi)
        return -((log_pz + logdet) / self.dim).mean()


class FlowObjective(Objective):
    """Flow NLL on cached vectors (items are vectors)."""

    def __init__(self, flow: Glow):
        super().__init__()
        self.flow = flow

    def collate(self, items: list[np.ndarray], rng: np.random.Generator) -> dict:
        return {"u": torch.from_numpy(np.stack(items)).float()}

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        return self.flow.nll(u)


class ReencodeFlowObjective(Objective):
    """Flow NLL on vectors the frozen encoder computes for each batch in training mode (dropout on),
    as the official code does (BERT is called with is_training=True and only the flow's variables are
    trained). Items are sentences; the encoder gets no gradient."""

    def __init__(self, base: TransformerEncoder, flow: Glow):
        super().__init__()
        self.base = base
        self.flow = flow

    def collate(self, items: list[str], rng: np.random.Generator) -> dict:
        tok = self.base.tokenize(items)
        return {**tok, "n_tokens": int(tok["attention_mask"].sum())}

    def vectors(self, **tok) -> torch.Tensor:
        with torch.no_grad():
            return self.base(**tok)["sentence_embedding"].float()

    def forward(self, **tok) -> torch.Tensor:
        return self.flow.nll(self.vectors(**tok))


class FlowEncoder(TransformerEncoder):
    """A frozen transformer whose pooled vector goes through a trained flow. Saved as a
    sentence-transformers folder plus ``glow/`` (the flow's config and weights)."""

    def __init__(self, base: TransformerEncoder, flow: Glow, flow_config: dict):
        super().__init__(
            base.model,
            base.tokenizer,
            pooling=base.pooling,
            max_seq_length=base.max_seq_length,
            normalize=False,
            name=base.name,
            batch_size=base.batch_size,
        )
        self.flow = flow.eval()
        self.flow_config = flow_config
        for p in self.parameters():
            p.requires_grad_(False)

    def forward(self, input_ids, attention_mask, token_type_ids=None, **kw):
        out = super().forward(input_ids, attention_mask, token_type_ids)
        out["sentence_embedding"] = self.flow(out["sentence_embedding"].float())[0]
        return out

    @property
    def fingerprint(self) -> str:
        import hashlib

        h = hash_weights(hashlib.blake2b(digest_size=8), self.flow.state_dict())
        return f"{super().fingerprint}-flow-{h.hexdigest()}"

    def save(self, path) -> Path:
        path = super().save(path)
        (path / "glow").mkdir(exist_ok=True)
        (path / "glow" / "config.json").write_text(json.dumps(self.flow_config))
        torch.save(self.flow.state_dict(), path / "glow" / "flow.pt")
        # benchbench's loader re-applies the flow (plain sentence-transformers loads the frozen base only)
        (path / "benchbench_wrapper.json").write_text(json.dumps({"loader": "bertflow"}))
        return path

    @classmethod
    def load_flow(cls, base: TransformerEncoder, path: str | Path) -> FlowEncoder:
        cfg = json.loads((Path(path) / "glow" / "config.json").read_text())
        flow = Glow(**cfg)
        flow.load_state_dict(torch.load(Path(path) / "glow" / "flow.pt", weights_only=True))
        return cls(base, flow, cfg)


class BertFlow(Method):
    name = "bertflow"
    Config = BertFlowConfig
    description = "BERT-flow: Glow (additive, reverse; dropout re-encoding) on a frozen encoder's mean-pooled vectors"
    step0_unsupported = (
        "at 0 steps it returns the start's pooled vectors through a randomly initialised flow (on tiny-bert "
        "the cosines move by up to 0.96): a random map, not a reading of the start. Its own start is the "
        "frozen encoder it flows: read it against plm-<its pooling> (plm-mean by default)."
    )

    def train(self, corpus: list[str], ctx: TrainContext):
        from benchbench import embed

        c = self.config
        if c.steps == 0:
            raise ConfigError(f"bertflow: option 'steps' = 0: {self.step0_unsupported}")
        if (
            c.coupling not in ("additive", "affine")
            or c.permutation not in ("reverse", "lu")
            or c.vectors not in ("dropout", "cached")
        ):
            raise ConfigError(
                f"bertflow: options coupling/permutation/vectors must be additive|affine, reverse|lu, "
                f"dropout|cached (got {c.coupling!r}, {c.permutation!r}, {c.vectors!r})."
            )
        seed_everything(ctx.seed)
        base = ctx.load_encoder(pooling=c.pooling, max_seq_length=c.max_seq_length, normalize=False)
        for p in base.parameters():
            p.requires_grad_(False)
        flow_cfg = {
            "dim": base.dim,
            "levels": c.levels,
            "depth": c.depth,
            "hidden": c.hidden,
            "seed": ctx.seed,
            "coupling": c.coupling,
            "permutation": c.permutation,
        }
        flow = Glow(**flow_cfg)
        head = corpus[: min(len(corpus), 1024)]
        if c.vectors == "cached":
            base.eval()
            vectors = embed(base, corpus, cache=None, progress=ctx.progress, desc="bertflow: encoding the corpus once")
            items: list = list(vectors.astype(np.float32))
            obj: Objective = FlowObjective(flow)
            init = torch.from_numpy(np.stack(items[: len(head)]))
        else:
            obj = ReencodeFlowObjective(base, flow)
            base.train()  # dropout on, as the official code encodes
            init = torch.cat(
                [
                    obj.vectors(**{k: v.to(base.device) for k, v in base.tokenize(head[i : i + 64]).items()})
                    for i in range(0, len(head), 64)
                ]
            ).cpu()
            items = corpus
        flow.train()
        flow(init.to(next(flow.parameters()).device))  # ActNorm's data-dependent initialisation
        obj = fit(
            self,
            obj,
            items,
            ctx,
            fingerprint_items=corpus,  # cached vectors come from the corpus
            make_optimizer=lambda m: adamw(m.parameters(), lr=c.lr, weight_decay=c.weight_decay),
        )
        base.eval()
        return FlowEncoder(base, obj.flow, flow_cfg)


@hookimpl
def benchbench_register_methods(register):
    register(BertFlow.name, BertFlow)


@hookimpl
def benchbench_register_loaders(register):
    register("bertflow", FlowEncoder.load_flow)
