"""BSL: Bootstrapped Sentence representation Learning (Zhang et al. 2021), BYOL for sentences.

Two views of a sentence (back-translations through two pivot languages by default; Table 4's other
augmenters, and the single-view setting x1 = x, x2 = T(x) of section 4.4, through ``augmenter`` and
``two_view``) go through two networks:

* online: the encoder (mean pooling) followed by a predictor MLP d -> kd -> kd -> d (k = 8) with
  BatchNorm + ReLU after the two intermediate layers;
* target: a copy of the encoder, WITHOUT a predictor, that never receives a gradient (stop-gradient,
  ``requires_grad=False``) and moves only by an exponential moving average of the online encoder,
  ``target <- m * target + (1 - m) * online`` with m = 0.999, once per optimizer step.

Loss: the symmetric negative cosine, -cos(q(f(x1)), sg(g(x2))) - cos(q(f(x2)), sg(g(x1))), batch mean.
Paper defaults: Adam, lr 5e-4, batch 64, one epoch over the unlabelled NLI sentences (``corpus =
"general"``; offline: SNLI dev/test + XNLI-en, about 36K sentences, see benchbench/train/nli.py). The
encoder handed back is the online encoder (the predictor and target are dropped).

Views are made before training, in big batches, only for the sentences the step budget draws
(``TrainContext.budget_items``: ``--steps 20`` at batch 64 back-translates 1,280 sentences, not the
corpus); the record's ``train.preprocessed_sentences`` says how many. A sentence drawn beyond them
(another process's share) gets its views on first use.

The EMA update is a post-step hook of the optimizer: it runs inside ``optimizer.step()``, i.e. exactly
once per real update (not per micro-batch under gradient accumulation; not on a step the loss scaler
skips) and before the loop writes a checkpoint, whose model state then holds the updated target (the
target is a submodule of the objective), so a resumed run continues the same EMA. ``on_step`` of the
loop is called after the checkpoint is written, so an update made there would be lost on resume.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

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
    hookimpl,
    method_fingerprint,
    resolve_steps,
    seed_everything,
    train_loop,
)

# The two recipes. "paper": BSL section 3/4 as written. "reference": what the authors' public code runs
# (github.com/yanzhangnlp/BSL at cfacb3b): training/unsupervised_tuning.py (lr 1e-4 l.84, 10% warm-up
# l.70, STS-B dev evaluation every 10% of the steps l.71 with the best model saved and reloaded l.78-95,
# batch 64 l.20, 1 epoch l.21, max 64 tokens l.22, momentum 0.999 l.24, mean pooling l.38, AMP l.85);
# sentence_transformers/losses/BYOLoss.py (three stacked MLPs d -> 10d -> 10d -> d, BatchNorm only after
# the first layer, l.32-45 and l.63-65/79-81; loss 2 - 2 cos per direction, summed, l.49-52 and l.88-93);
# sentence_transformers/SentenceTransformer.py fit (transformers.AdamW, weight decay 0.0, linear warm-up
# then linear decay, clipping at norm 1, EMA after every optimizer step, l.439-447 and l.560-581).
RECIPES: dict[str, dict[str, Any]] = {
    "paper": {
        "optimizer": "adam",
        "lr": 5e-4,
        "weight_decay": 0.0,
        "warmup": 0.0,
        "schedule": "constant",
        "predictor": "bsl-paper",  # d -> kd -> kd -> d, BatchNorm + ReLU on both hidden layers
        "predictor_k": 8,
        "predictor_stack": 1,
        "loss_scale": 1.0,  # -cos - cos
        "select_on_stsb_dev": False,
    },
    "reference": {
        "optimizer": "adamw",
        "lr": 1e-4,
        "weight_decay": 0.0,
        "warmup": 0.1,
        "schedule": "linear",
        "predictor": "bsl-code",  # d -> 10d -> 10d -> d, BatchNorm + ReLU, then ReLU; three stacked
        "predictor_k": 10,
        "predictor_stack": 3,
        "loss_scale": 2.0,  # (2 - 2 cos) + (2 - 2 cos) = 4 + 2 * (-cos - cos): same optimum, twice the gradient
        "select_on_stsb_dev": True,  # every 10% of the steps and at the end; the best is returned
    },
}


@dataclass
class BSLConfig:
    recipe: str = "paper"  # "paper" | "reference" (the authors' code; see RECIPES)
    steps: int | None = None  # None: `epochs` passes over the corpus
    epochs: float = 1.0
    batch_size: int = 64
    lr: float | None = None  # None: the recipe's (paper 5e-4, reference 1e-4)
    momentum: float = 0.999  # EMA momentum of the target network
    predictor_k: int | None = None  # predictor hidden width = k * d; None: the recipe's (paper 8, reference 10)
    augmenter: str = "backtranslate"  # a registered augmenter (backtranslate, synonym, mlm, nli-entail, word-*)
    two_view: bool = True  # x1 = T1(x), x2 = T2(x); false: x1 = x, x2 = T(x) (section 4.4)
    pooling: str = "mean"
    max_seq_length: int | None = 64
    # train on a seeded random subset of the corpus. Not needed for a small budget: views are made only
    # for the sentences the steps draw (``preprocessed_sentences`` in the record), whatever the corpus size
    max_sentences: int | None = None
    grad_accum: int = 1
    # the paper states no clipping and names no code: the loop's usual global norm 1.0 (as
    # sentence-transformers' fit), now recorded in the config; 0 = off
    max_grad_norm: float = 1.0
    checkpoint_every: int = field(default=1000, metadata={"hash": False})  # speed knob: not in the result key


def predictor(d: int, k: int) -> torch.nn.Sequential:
    """q: d -> kd -> kd -> d, BatchNorm + ReLU on the intermediate layers (BSL section 3)."""
    return torch.nn.Sequential(
        torch.nn.Linear(d, k * d),
        torch.nn.BatchNorm1d(k * d),
        torch.nn.ReLU(),
        torch.nn.Linear(k * d, k * d),
        torch.nn.BatchNorm1d(k * d),
        torch.nn.ReLU(),
        torch.nn.Linear(k * d, d),
    )


def reference_predictor(d: int, k: int = 10, stack: int = 3) -> torch.nn.Sequential:
    """The authors' code: ``stack`` MLPs d -> kd -> kd -> d, BatchNorm + ReLU after the first layer and
    ReLU after the second (BYOLoss.py, ``MLP`` and ``online_predictor_1..3``)."""
    return torch.nn.Sequential(
        *(
            torch.nn.Sequential(
                torch.nn.Linear(d, k * d),
                torch.nn.BatchNorm1d(k * d),
                torch.nn.ReLU(),
                torch.nn.Linear(k * d, k * d),
                torch.nn.ReLU(),
                torch.nn.Linear(k * d, d),
            )
            for _ in range(stack)
        )
    )


class BSLObjective(Objective):
    def __init__(
        self,
        encoder: TransformerEncoder,
        augmenter: Any,
        momentum: float,
        k: int,
        two_view: bool,
        recipe: str = "paper",
    ):
        super().__init__()
        r = RECIPES[recipe]
        self.encoder = encoder  # online f
        self.predictor = (  # online q
            predictor(encoder.dim, k)
            if r["predictor"] == "bsl-paper"
            else reference_predictor(encoder.dim, k, r["predictor_stack"])
        )
        self.loss_scale = float(r["loss_scale"])
        self.target = copy.deepcopy(encoder)  # target g: no predictor, EMA only
        for p in self.target.parameters():
            p.requires_grad_(False)
        self.momentum = float(momentum)
        self.augmenter = augmenter
        self.two_view = two_view

    def collate(self, items: list[str], rng: np.random.Generator) -> dict:
        """Both views of the drawn sentences, made now from the augmenter (cached views are lookups)."""
        v1, v2 = self.augmenter.views(list(items), rng, two_view=self.two_view)
        t1, t2 = self.encoder.tokenize(v1), self.encoder.tokenize(v2)
        n_tokens = int(t1["attention_mask"].sum() + t2["attention_mask"].sum())
        return {"view1": dict(t1), "view2": dict(t2), "n_tokens": n_tokens}

    @staticmethod
    def _to(tok: dict, device: torch.device) -> dict:
        return {k: v.to(device) for k, v in tok.items()}

    def forward(self, view1: dict, view2: dict) -> torch.Tensor:
        dev = next(self.predictor.parameters()).device
        view1, view2 = self._to(view1, dev), self._to(view2, dev)
        p1 = self.predictor(self.encoder(**view1)["sentence_embedding"])
        p2 = self.predictor(self.encoder(**view2)["sentence_embedding"])
        with torch.no_grad():  # stop-gradient: the target only ever changes by ema_update
            z1 = self.target(**view1)["sentence_embedding"]
            z2 = self.target(**view2)["sentence_embedding"]
        return self.loss_scale * symmetric_negative_cosine(p1, p2, z1, z2)  # constants dropped (no gradient)

    @torch.no_grad()
    def ema_update(self) -> None:
        """target <- m * target + (1 - m) * online, parameters and floating buffers alike."""
        m = self.momentum
        for pt, po in zip(self.target.parameters(), self.encoder.parameters()):
            pt.mul_(m).add_(po.detach(), alpha=1.0 - m)
        for bt, bo in zip(self.target.buffers(), self.encoder.buffers()):
            if bt.dtype.is_floating_point:
                bt.mul_(m).add_(bo, alpha=1.0 - m)
            else:
                bt.copy_(bo)


def symmetric_negative_cosine(p1: torch.Tensor, p2: torch.Tensor, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
    """-cos(p1, z2) - cos(p2, z1), averaged over the batch (in [-2, 2]; -2 when predictions match)."""
    return -(
        F.cosine_similarity(p1.float(), z2.detach().float(), dim=-1).mean()
        + F.cosine_similarity(p2.float(), z1.detach().float(), dim=-1).mean()
    )


def make_optimizer(obj: BSLObjective, lr: float, recipe: str = "paper") -> torch.optim.Optimizer:
    """Adam (paper) or AdamW (reference code, its weight decay 0.0) over the online network only, with
    the EMA update as a post-step hook (see module doc)."""
    r = RECIPES[recipe]
    params = [p for p in obj.parameters() if p.requires_grad]
    if r["optimizer"] == "adam":
        opt = torch.optim.Adam(params, lr=lr)
    else:
        opt = torch.optim.AdamW(params, lr=lr, weight_decay=r["weight_decay"])
    opt.register_step_post_hook(lambda *_: obj.ema_update())
    return opt


class _SingleView:
    """A plain ``(texts, rng) -> texts`` augmenter as BSL's view maker: x1 = x, x2 = T(x) (section 4.4)."""

    def __init__(self, augment: Any):
        self.augment = augment

    def views(self, texts: list[str], rng: np.random.Generator, two_view: bool = False) -> tuple[list, list]:
        return list(texts), self.augment(list(texts), rng)


class BSL(Method):
    name = "bsl"
    Config = BSLConfig
    corpus = "general"
    description = "BSL: BYOL for sentences (online encoder+predictor, EMA target), back-translation views"

    augmenter_override: Any = None  # an augmenter object instead of the registry's (tests, notebooks)

    def _augmenter(self, ctx: TrainContext) -> Any:
        aug = self.augmenter_override if self.augmenter_override is not None else ctx.augmenter(self.config.augmenter)
        if not hasattr(aug, "views"):  # a plain (texts, rng) -> texts augmenter: single view only
            if self.config.two_view:
                raise ConfigError(f"bsl: augmenter {self.config.augmenter!r} makes one view; use two_view=false.")
            aug = _SingleView(aug)
        if hasattr(aug, "prepare"):
            aug.prepare(ctx)
        return aug

    def train(self, corpus: list[str], ctx: TrainContext):
        c = self.config
        if c.recipe not in RECIPES:
            raise ConfigError(f"bsl: option recipe={c.recipe!r}; expected one of {sorted(RECIPES)}.")
        r = RECIPES[c.recipe]
        lr = r["lr"] if c.lr is None else c.lr
        k = r["predictor_k"] if c.predictor_k is None else c.predictor_k
        if not 0.0 <= c.momentum < 1.0:
            raise ConfigError(f"bsl: option 'momentum' must be in [0, 1) (got {c.momentum}).")
        if c.batch_size < 2:
            raise ConfigError("bsl: option 'batch_size' must be >= 2 (the predictor's BatchNorm needs a batch).")
        seed_everything(ctx.seed)
        aug = self._augmenter(ctx)
        items = list(corpus)
        if hasattr(aug, "covers"):  # nli-entail: only premises with an entailed hypothesis
            items = aug.covers(items)
            ctx.accounting["augmenter_uses_labels"] = True
        if c.max_sentences is not None and len(items) > c.max_sentences:
            keep = np.sort(np.random.default_rng(ctx.seed).permutation(len(items))[: c.max_sentences])
            items = [items[i] for i in keep]
        if not items:
            raise ConfigError(f"bsl: nothing to train on after augmenter {c.augmenter!r} selected its sentences.")
        steps = resolve_steps(c.steps, len(items), c.batch_size * c.grad_accum, c.epochs)
        prepared = 0
        if hasattr(aug, "apply"):  # the budget's views, made once in big batches before training (cached)
            need = [items[i] for i in ctx.budget_items(len(items), steps, c.batch_size, c.grad_accum)]
            for variant in (0, 1) if c.two_view else (0,):
                aug.apply(need, variant)
            prepared = len(need)
        ctx.accounting.update(
            {
                "augmenter": c.augmenter,
                "two_view": c.two_view,
                "bsl_sentences": len(items),
                "preprocessed_sentences": prepared,
                "recipe": {"name": c.recipe, **r, "lr": lr, "predictor_k": k},
            }
        )
        encoder = ctx.load_encoder(pooling=c.pooling, max_seq_length=c.max_seq_length)
        obj = BSLObjective(encoder, aug, c.momentum, k, c.two_view, c.recipe)
        loop = LoopConfig.from_config(c, steps=steps)
        best = _stsb_dev_selection(obj, ctx, steps) if r["select_on_stsb_dev"] else None
        obj = train_loop(
            obj,
            items,
            ctx,
            loop,
            fingerprint=method_fingerprint(self, ctx, items),
            make_optimizer=lambda m: make_optimizer(m, lr, c.recipe),
            make_scheduler=lambda o: schedule(o, c.recipe, steps),
            desc="bsl",
        )
        if best is not None and best["state"] is not None:
            obj.load_state_dict(best["state"])
            ctx.accounting.update(stsb_dev_selected_step=best["step"], stsb_dev_best=best["score"])
        return obj.encoder


def schedule(opt: torch.optim.Optimizer, recipe: str, steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """paper: constant; reference: linear warm-up over ceil(10%) of the steps, then linear decay to 0
    (transformers' get_linear_schedule_with_warmup, as sentence-transformers' fit uses)."""
    r = RECIPES[recipe]
    warm = math.ceil(steps * r["warmup"])

    def factor(s: int) -> float:
        if r["schedule"] == "constant":
            return 1.0
        if s < warm:
            return s / max(1, warm)
        return max(0.0, (steps - s) / max(1, steps - warm))

    return torch.optim.lr_scheduler.LambdaLR(opt, factor)


def _stsb_dev_selection(obj: BSLObjective, ctx: TrainContext, steps: int) -> dict:
    """The reference code's selection: STS-B dev Spearman every 10% of the steps and at the end, the best
    online encoder kept (in memory: a resumed run restarts the selection from the resume point). The
    loop's monitor restores the RNG, so scoring does not change the trajectory."""
    from benchbench import DataStore, Embedder, get_registry, make_adapter

    adapter = make_adapter(get_registry(), "stsb", ctx.data if ctx.data is not None else DataStore())
    every = max(1, int(steps * 0.1))
    best: dict[str, Any] = {"score": float("-inf"), "step": 0, "state": None}
    outer, outer_every = ctx.monitor, int(ctx.monitor_every or 0)

    def monitor(step: int, _encoder) -> dict[str, float]:
        out: dict[str, float] = {}
        if step % every == 0 or step == steps:
            score = float(adapter.evaluate(Embedder(obj.encoder, progress=False), "dev").main_score)
            out["stsb_dev_select"] = score
            if score > best["score"]:
                best.update(score=score, step=step, state=copy.deepcopy(obj.state_dict()))
        if outer is not None and outer_every and (step % outer_every == 0 or step == steps):
            out.update(outer(step, _encoder))
        return out

    ctx.monitor = monitor
    ctx.monitor_every = math.gcd(every, outer_every) if outer is not None and outer_every else every
    return best


@hookimpl
def benchbench_register_methods(register):
    register(BSL.name, BSL)
