"""Trans-Encoder (Liu et al. 2022): self- and mutual-distillation between a bi- and a cross-encoder.

Start: an unsupervised bi-encoder, [CLS] pooling: ``--model``; or ``--set start=PATH``, a saved
encoder folder; or ``--set start=METHOD`` (e.g. ``simcse``, ``tsdae``): that registered method is
trained first through the harness (``benchbench.train_method``: its own corpus for this task, the
same seed and ``--model``, its options from ``--set start_set=steps=1000,batch_size=64``) into the
run folder ``benchbench run --method METHOD`` uses under the same ``--output``, so a stored start is
reused; the record's ``train.start`` names the method, its config hash and the encoder path.

Each cycle (3 for STS, 5 for binary pair tasks) does:

(a) bi -> cross: the bi-encoder labels every training pair with its cosine; a cross-encoder
    (``[CLS] a [SEP] b [SEP]`` -> linear -> one logit) initialised from the ORIGINAL PLM weights
    learns them with soft binary cross-entropy, ``BCE(sigmoid(logit), cos)`` (1 epoch STS / 3 pairs;
    both pair orders except on QNLI, as the reference code);
(b) cross -> bi: the cross-encoder labels the pairs with ``sigmoid(logit)``; the bi-encoder,
    re-initialised from its START weights, learns them with MSE on cosine (10 epochs STS / 15 pairs).

The cross-encoder's budget (a deviation from A.6, recorded in every record's config): the cross-encoder
is the PLM plus a NEW head (linear layer on [CLS], and a pooler the sentence-embedding start never trained).
The paper's 2e-5 over ~2,300 steps (37K STS pairs, both orders, batch 32) trains it; at the budgets run
here (300 pairs = 19 steps) it left the head untrained: STS-B dev Spearman 2.0 at 2e-5, against 75.6 at
1e-4 for the same 19 steps and 86.3 for 38 steps at 1e-4 (all-MiniLM-L6-v2, 300 STS-B train pairs;
leaderboards/tenc/README.md). So the defaults are ``cross_lr=1e-4`` and ``cross_min_steps=40`` (the phase
takes max(cross_epochs x steps-per-epoch, 40) steps: more epochs over few pairs, nothing changes at the
paper's scale); ``cross_head_lr`` gives the head its own lr (None: ``cross_lr``). The paper's setting:
``--set cross_lr=2e-5 --set cross_min_steps=0``.

"Refreshing" (both re-initialised every cycle) is the default; ``init=sequential`` initialises each
model from the other's last weights (paper 5.2). Appendix A.6: AdamW; bi->cross lr 2e-5, batch 32,
max 64 tokens, 10% linear warm-up; cross->bi lr 5e-5, batch 128, max 32 tokens, no warm-up.

Dev-set selection (paper Sec. 4): a checkpoint every 200 steps and at each epoch end; the best bi-
and the best cross-encoder over all cycles are chosen INDEPENDENTLY on the dev split (STS-B dev for
the STS tasks and the ``sts`` pair pool, the pair task's own dev split, or the first ``dev_max_pairs``
of its train split when it has no dev split, e.g. mrpc-pairs). The dev LABELS are read for this
selection only, as the paper does; the training pairs' labels are never read. Each cycle's labelling
uses that cycle's best checkpoint (what the reference code reloads).

``trans-encoder-mutual`` runs the same cycles over two or more base models in parallel; at every
labelling step each model's pseudo-labels are averaged over the models. It returns the bi- and
cross-encoder of ``report`` (a model of ``models``) or, with ``report=ensemble``, the ensemble:
mean of the cross-encoders' scores, and for the bi-encoder the concatenation of the L2-normalised
vectors (whose cosine is exactly the mean of the models' cosines).

Training pairs (``train_pairs``): ``auto`` = the STS pool for STS tasks (all pairs of STS12-16,
STS-B and SICK-R, every split, labels never read; trained once and shared by the seven tasks) and
the task's own pairs (every split) otherwise; ``sts`` = the STS pool for any task (Table 3's domain
transfer: train on STS, evaluate on ``pairs``); ``task`` = the task's own pairs. TRANSDUCTIVE.

Training: each phase (one direction, one model, one cycle) is a run of the one loop
(``benchbench.train_loop``): the cross-encoder is the library's ``CrossEncoderScorer`` trained as a
``CrossEncoderObjective``, the bi-encoder as this module's ``_BiObjective``. A killed run resumes the
phase it was in from that phase's last checkpoint (``--set checkpoint_every=N``, default 1000 steps, or
every 10 minutes) and replays the finished phases before it (their weights and dev choices are not
stored); the dev scores and best weights so far are buffers of the objective, so they ride in the same
checkpoint. Each phase keeps the trainer the results were fixed with: its batches are drawn in the
method's own order (a seeded Python shuffle per epoch, a short last batch), AdamW with the no-decay
split and linear warm-up/decay, no gradient clipping, full precision on a GPU too.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import math
import random
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from benchbench import (
    ConfigError,
    CrossEncoderObjective,
    CrossEncoderScorer,
    Embedder,
    LoopConfig,
    Method,
    Objective,
    TrainContext,
    TransformerEncoder,
    hookimpl,
    is_complete,
    load_encoder,
    make_adapter,
    mark_complete,
    method_fingerprint,
    model_label_of,
    pinned_folder,
    resolve_model_path,
    seed_everything,
    soft_bce,
    train_loop,
    train_method,
)

log = logging.getLogger("benchbench.trans_encoder")
STS_POOL = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")
CROSS_DIR = "cross-encoder"


# ---------------------------------------------------------------------------------------------
# what the method returns: both encoders
# ---------------------------------------------------------------------------------------------
class TransEncoderResult:
    """The bi-encoder (``encode``, ``fingerprint``: what tasks embed with) and the cross-encoder
    (``score_pairs``: what pairwise tasks use with ``--score cross``). ``bi_encoder`` tells the runner
    this object has two encoders, so ``--score bi`` (the default) can hide the cross-encoder."""

    def __init__(self, bi: Any, cross: Any, info: dict | None = None):
        self.bi_encoder = bi
        self.cross_encoder = cross
        self.info = info or {}
        self.batch_size = getattr(bi, "batch_size", 64)
        self.normalize = getattr(bi, "normalize", False)

    @property
    def fingerprint(self) -> str:
        return self.bi_encoder.fingerprint  # vectors come from the bi-encoder only

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.bi_encoder.encode(texts)

    def lengths(self, texts: list[str]) -> list[int]:
        fn = getattr(self.bi_encoder, "lengths", None)
        return fn(texts) if fn else [len(t) for t in texts]

    def score_pairs(self, a: list[str], b: list[str]) -> np.ndarray:
        return self.cross_encoder.score_pairs(a, b)

    def save(self, path: str | Path) -> Path:
        """The bi-encoder as a sentence-transformers folder at ``path`` (so ``--model PATH`` and
        ``load_encoder`` read it), the cross-encoder in CrossEncoder format under ``cross-encoder/``,
        and the wrapper file that makes ``load_encoder(path)`` return both again."""
        path = Path(path)
        self.bi_encoder.save(path)
        self.cross_encoder.save(path / CROSS_DIR)
        (path / "benchbench_wrapper.json").write_text(
            json.dumps({"loader": "trans-encoder", "info": self.info}, default=str)
        )
        return path

    @classmethod
    def reload(cls, encoder: TransformerEncoder, path: Path) -> TransEncoderResult:
        info = json.loads((Path(path) / "benchbench_wrapper.json").read_text()).get("info", {})
        return cls(encoder, CrossEncoderScorer.load(Path(path) / CROSS_DIR), info)


class EnsembleBi:
    """Mean of several bi-encoders' cosines, as one encoder: concatenated L2-normalised vectors
    (cos of the concatenation = mean of the cosines, since each half has norm 1)."""

    def __init__(self, encoders: list[Any]):
        self.encoders = encoders
        self.batch_size = 64
        self.normalize = False

    @property
    def fingerprint(self) -> str:
        return (
            "ens-"
            + hashlib.blake2b("|".join(e.fingerprint for e in self.encoders).encode(), digest_size=16).hexdigest()
        )

    def encode(self, texts: list[str]) -> np.ndarray:
        parts = [e.encode(texts) for e in self.encoders]
        return np.concatenate([p / np.maximum(np.linalg.norm(p, axis=1, keepdims=True), 1e-12) for p in parts], axis=1)


class EnsembleCross:
    def __init__(self, scorers: list[Any]):
        self.scorers = scorers

    @property
    def fingerprint(self) -> str:
        return (
            "ens-" + hashlib.blake2b("|".join(s.fingerprint for s in self.scorers).encode(), digest_size=16).hexdigest()
        )

    def score_pairs(self, a: list[str], b: list[str]) -> np.ndarray:
        return np.mean([s.score_pairs(a, b) for s in self.scorers], axis=0)


# ---------------------------------------------------------------------------------------------
# the two distillation losses (the method's defining mechanism)
# ---------------------------------------------------------------------------------------------
# bi -> cross: soft binary cross-entropy of the cross-encoder's logits against the bi-encoder's cosines
# (clipped to [0, 1], the range BCE targets live in; STS cosines of these models are >= 0 almost always):
# the library's loss for a one-label cross-encoder
bi_to_cross_loss = soft_bce


def cross_to_bi_loss(u: torch.Tensor, v: torch.Tensor, cross_scores: torch.Tensor) -> torch.Tensor:
    """MSE between the bi-encoder's cosine of the two sentence vectors and the cross-encoder's score."""
    return F.mse_loss(F.cosine_similarity(u, v, dim=-1), cross_scores)


# ---------------------------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------------------------
@dataclass
class TransEncoderConfig:
    start: str | None = None  # a registered method (trained first), a saved bi-encoder folder; None: --model
    start_set: str = ""  # options of a start METHOD, "key=value,key=value" (e.g. steps=1000,batch_size=64)
    plm: str | None = None  # the cross-encoder's ORIGINAL weights; None: the base model (--model)
    cycles: int | None = None  # None: 3 for STS, 5 for pair classification
    init: str = "refresh"  # "refresh" (paper default) | "sequential"
    train_pairs: str = "auto"  # auto | task | sts (the STS pool, also for Table 3's domain transfer)
    max_pairs: int | None = None  # budget: a seeded random subset of the training pairs
    both_orders: str = "auto"  # bi->cross on (a,b) and (b,a); auto: not for qnli (question/answer)
    cross_epochs: float | None = None  # None: 1 STS / 3 pairs
    bi_epochs: float | None = None  # None: 10 STS / 15 pairs
    cross_lr: float = 1e-4  # paper A.6: 2e-5 (see "The cross-encoder's budget")
    # the new head's lr: the linear layer on [CLS] and the pooler before it (weights no sentence-embedding
    # training ever updated); None: cross_lr. See "The cross-encoder's budget" in the module docstring.
    cross_head_lr: float | None = None
    cross_min_steps: int = 40  # the bi->cross phase takes at least this many steps (more epochs on few pairs)
    bi_lr: float = 5e-5
    cross_batch_size: int = 32
    bi_batch_size: int = 128
    cross_max_length: int = 64
    bi_max_length: int = 32
    cross_warmup: float = 0.1
    weight_decay: float = 0.01
    pooling: str = "cls"
    eval_every: int = 200  # dev-selection checkpoint every N steps (and at each epoch end); 0: epoch ends only
    dev_task: str = "auto"  # auto: stsb for STS/sts-pool, else the task itself
    dev_max_pairs: int | None = 1000  # dev pairs scored per checkpoint (the first N of the dev split)
    select: bool = True  # false: keep the last checkpoint (no dev labels read at all)
    score_batch_size: int = 128
    eval_full_length: bool = True  # the returned encoders keep the start's max length (fair vs the start)
    # loop checkpoints (exact resume after a kill) every N steps of a phase; speed knob, not in the result key
    checkpoint_every: int = field(default=1000, metadata={"hash": False}, repr=False)


@dataclass
class MutualConfig(TransEncoderConfig):
    models: list[str] = field(default_factory=list)  # empty: [--model, all-mpnet-base-v2]
    report: str = ""  # a model of ``models`` (default: the first) or "ensemble"


# ---------------------------------------------------------------------------------------------
# one model's bi/cross pair through the cycles
# ---------------------------------------------------------------------------------------------
class _Track:
    """One base model's state: its start and PLM weights, its current and best bi/cross."""

    def __init__(self, name: str, start: str, plm: str, c: TransEncoderConfig, seed: int, device: torch.device):
        self.name = name
        bi = load_encoder(start, pooling=c.pooling)
        self.dropped_head = None
        if type(bi) is not TransformerEncoder and isinstance(bi, TransformerEncoder):
            # a start saved with a head on the pooled vector (SimCSE's MLP): the bi-encoder is its
            # transformer with [CLS] pooling, as the reference code loads SimCSE checkpoints
            # (sentence-transformers Transformer + CLS Pooling); a head that refreshing would not
            # reset and the saved result would not reload is dropped, and the record says so
            self.dropped_head = type(bi).__name__
            bi = TransformerEncoder(
                bi.model,
                bi.tokenizer,
                pooling=c.pooling,
                max_seq_length=bi.max_seq_length,
                normalize=bi.normalize,
                name=bi.name,
                batch_size=bi.batch_size,
            )
        self.bi = bi.to(device)
        self.eval_max_length = self.bi.max_seq_length  # the start's own limit: what the result is evaluated with
        self.bi.max_seq_length = c.bi_max_length  # training and labelling: the paper's 32 / 64 tokens
        self.bi.pooling = c.pooling
        self.start_state = copy.deepcopy(self.bi.model.state_dict())
        plm_enc = self.bi if plm == start else load_encoder(plm, pooling=c.pooling)
        self.cross = CrossEncoderScorer.from_encoder(plm_enc, c.cross_max_length, seed).to(device)
        self.cross.batch_size = c.score_batch_size
        self.cross_init_state = copy.deepcopy(self.cross.model.state_dict())  # original PLM + seeded head
        self.best = {"bi": (-math.inf, None, None), "cross": (-math.inf, None, None)}  # score, state, where
        self.history: list[dict] = []


def _bi_cosines(bi: TransformerEncoder, pairs: list[tuple[str, str]], batch: int) -> np.ndarray:
    emb = Embedder(bi, cache=None, batch_size=batch, progress=False)
    return emb.cosine_pairs([p[0] for p in pairs], [p[1] for p in pairs])


def _cross_scores(cross: CrossEncoderScorer, pairs: list[tuple[str, str]]) -> np.ndarray:
    return cross.score_pairs([p[0] for p in pairs], [p[1] for p in pairs])


def _optimizer(
    model: torch.nn.Module, lr: float, wd: float, head: set[str] = frozenset(), head_lr: float | None = None
) -> torch.optim.Optimizer:
    """AdamW with the usual no-decay split (biases, LayerNorm), as sentence-transformers' fit; the
    parameters named in ``head`` get ``head_lr`` (None: ``lr``)."""
    groups: dict[tuple[bool, bool], list] = {}
    for n, p in model.named_parameters():
        no_decay = "bias" in n or "LayerNorm" in n or "layer_norm" in n
        groups.setdefault((n in head, no_decay), []).append(p)
    return torch.optim.AdamW(
        [
            {
                "params": ps,
                "weight_decay": 0.0 if no_decay else wd,
                "lr": head_lr if (is_head and head_lr is not None) else lr,
            }
            for (is_head, no_decay), ps in sorted(groups.items())
        ],
        lr=lr,
    )


def _plan(n: int, batch_size: int, epochs: float, min_steps: int, seed: int) -> tuple[list[list[int]], list[int]]:
    """One phase's batches (example indices) and the steps that end an epoch: each epoch a
    ``random.Random(seed)`` shuffle cut into batches (the last one short), ``epochs`` epochs or
    ``min_steps`` steps when that is more. The order the method's results were fixed with; the loop
    draws these batches as they are (``shuffle=False``)."""
    rng = random.Random(seed)
    per_epoch = max(1, math.ceil(n / batch_size))
    total = max(1, int(round(per_epoch * epochs)), int(min_steps))
    batches: list[list[int]] = []
    ends: list[int] = []
    while len(batches) < total:
        order = list(range(n))
        rng.shuffle(order)
        for s in range(0, n, batch_size):
            batches.append(order[s : s + batch_size])
            if len(batches) >= total:
                break
        ends.append(len(batches))
    return batches, ends


def _dev_points(total: int, eval_every: int, ends: list[int]) -> list[tuple[int, str]]:
    """(step, label) of each dev-selection checkpoint in order: every ``eval_every`` steps before the
    last, and each epoch end (the last step ends one)."""
    every = range(eval_every, total, eval_every) if eval_every else ()
    points = [(s, f"step {s}") for s in every] + [(s, f"epoch end (step {s})") for s in ends]
    return sorted(points, key=lambda p: (p[0], p[1].startswith("epoch")))


class _BiObjective(Objective):
    """cross -> bi: the bi-encoder's cosine of the two sentences against the cross-encoder's score.
    Items are the phase's batches of (a, b, score)."""

    def __init__(self, encoder: TransformerEncoder):
        super().__init__()
        self.encoder = encoder

    def collate(self, items: list[Any], rng: np.random.Generator) -> dict[str, Any]:
        batch = [e for it in items for e in it]
        tok = self.encoder.tokenize([e[0] for e in batch] + [e[1] for e in batch])
        return {**tok, "targets": torch.tensor([e[2] for e in batch]), "n_tokens": int(tok["attention_mask"].sum())}

    def forward(self, targets: torch.Tensor, **tok: torch.Tensor) -> torch.Tensor:
        n = len(targets)
        z = self.encoder(**tok)["sentence_embedding"]
        return cross_to_bi_loss(z[:n], z[n:], targets.to(z.dtype))


class _DevState(torch.nn.Module):
    """One phase's dev selection as buffers of its objective, so the loop's checkpoints carry it and a
    resumed phase selects exactly as an uninterrupted one: the optimizer steps taken, each dev point's
    score (NaN: not reached) and the best weights so far. Updated by an optimizer post-step hook (as
    BSL's EMA): it runs before the loop writes that step's checkpoint, which ``on_step`` does not."""

    def __init__(self, module: torch.nn.Module, n_points: int):
        super().__init__()
        self.names = list(module.state_dict()) if n_points else []  # no dev points: no copy of the weights
        self.register_buffer("step", torch.zeros((), dtype=torch.int64))
        self.register_buffer("scores", torch.full((n_points,), math.nan, dtype=torch.float64))
        self.register_buffer("best_score", torch.tensor(-math.inf, dtype=torch.float64))
        for i, v in enumerate(module.state_dict().values() if n_points else ()):
            self.register_buffer(f"w{i}", v.detach().clone())

    def best_state(self) -> dict[str, torch.Tensor]:
        return {k: getattr(self, f"w{i}") for i, k in enumerate(self.names)}

    @torch.no_grad()
    def record(self, i: int, score: float, module: torch.nn.Module) -> None:
        self.scores[i] = score
        if score > self.best_score.item():
            self.best_score.fill_(score)
            for w, v in zip(self.best_state().values(), module.state_dict().values()):
                w.copy_(v)


# ---------------------------------------------------------------------------------------------
# the method
# ---------------------------------------------------------------------------------------------
class TransEncoder(Method):
    name = "trans-encoder"
    Config = TransEncoderConfig
    transductive = True
    corpus = "pairs"
    description = "Trans-Encoder: bi<->cross self-distillation on the task's unlabelled pairs (transductive)"
    step0_options = {"cycles": "0"}  # its budget is cycles: 0 returns the start bi-encoder at its pooling

    # --- what to train on and select with --------------------------------------------------
    def _adapter(self, ctx: TrainContext, task: str):
        if ctx.registry is None:
            raise ConfigError(f"{self.name}: needs the task registry (run through the benchbench runner).")
        return make_adapter(ctx.registry, task, ctx.data)

    def _is_sts(self, ctx: TrainContext) -> bool:
        return ctx.task is not None and ctx.registry is not None and self._adapter(ctx, ctx.task).spec.kind == "sts"

    def _pairs(self, ctx: TrainContext) -> tuple[list[tuple[str, str]], str]:
        mode = self.config.train_pairs
        if mode not in ("auto", "task", "sts"):
            raise ConfigError(f"{self.name}: option train_pairs={mode!r}; expected auto, task or sts.")
        if mode == "sts" or (mode == "auto" and self._is_sts(ctx)):
            pool: list[tuple[str, str]] = []
            for t in STS_POOL:  # every split of every STS dataset; only the sentences are read
                ad = self._adapter(ctx, t)
                for split in ad.spec.splits:
                    pool += [(x, y) for a, b, _gold in ad.load(split).values() for x, y in zip(a, b)]
            return list(dict.fromkeys(pool)), "sts-all (STS12-16, STS-B, SICK-R; all splits)"
        if not ctx.pairs:
            raise ConfigError(
                f"{self.name}: task {ctx.task!r} has no unlabelled pairs (its adapter's train_pairs() "
                f"returned none); use --set train_pairs=sts for the STS pool."
            )
        return list(dict.fromkeys(ctx.pairs)), f"task:{ctx.task}"

    def _dev(self, ctx: TrainContext, pool: str) -> tuple[Any, str, str] | None:
        """(adapter, split, name) whose labels select checkpoints; None when selection is off."""
        c = self.config
        if not c.select or ctx.registry is None or ctx.task is None:
            return None
        task = c.dev_task if c.dev_task != "auto" else ("stsb" if pool.startswith("sts-all") else ctx.task)
        ad = self._adapter(ctx, task)
        split = "dev" if "dev" in ad.spec.splits else ("train" if "train" in ad.spec.splits else None)
        if split is None:
            raise ConfigError(
                f"{self.name}: dev task {task!r} has neither a dev nor a train split to select on; "
                f"pass --set dev_task=<task> or --set select=false."
            )
        return _DevSplit(ad, split, c.dev_max_pairs), split, task

    # --- training ----------------------------------------------------------------------------
    def _start_options(self) -> dict[str, str]:
        out = {}
        for item in filter(None, (x.strip() for x in self.config.start_set.split(","))):
            k, eq, v = item.partition("=")
            if not eq or not k.strip():
                raise ConfigError(
                    f"{self.name}: option start_set={self.config.start_set!r}: expected key=value,key=value "
                    f"(options of the start method, e.g. steps=1000,batch_size=64)."
                )
            out[k.strip()] = v.strip()
        return out

    def _resolve_start(self, ctx: TrainContext) -> tuple[str, dict[str, Any]]:
        """(what ``load_encoder`` reads as the start, what the record says about it). A registered
        method name is trained (or reused) first; then an existing folder; then a model name that
        resolves to a local folder (or ``--model`` itself). Anything else is an error naming the option."""
        c = self.config
        if c.start_set and not (c.start and ctx.registry is not None and c.start in ctx.registry.methods):
            raise ConfigError(
                f"{self.name}: option start_set applies only when start names a method (start={c.start!r})."
            )
        if not c.start:
            return ctx.model, {"model": model_label_of(ctx.model)}  # a label: a local folder's path is no record's
        methods = sorted(ctx.registry.methods) if ctx.registry is not None else []
        if c.start in methods:
            if c.start.startswith("trans-encoder"):
                raise ConfigError(f"{self.name}: option start={c.start!r}: a Trans-Encoder cannot start from itself.")
            trained = train_method(c.start, ctx, self._start_options())
            return str(trained.path), trained.describe()
        if Path(c.start).is_dir():
            return c.start, {"model": model_label_of(c.start)}
        if c.start == ctx.model or _local_model(c.start):
            return c.start, {"model": model_label_of(c.start)}
        raise ConfigError(
            f"{self.name}: option start={c.start!r} is neither a registered method nor an encoder folder. "
            f"Methods: {', '.join(methods) or '(no registry: run through the benchbench runner)'}."
        )

    def provenance(self) -> dict[str, Any]:
        """Labels of the weights a folder-valued option names (``start`` as a saved encoder, ``plm``),
        as ``train`` records them: the options' text alone would let new weights in the same folder
        meet an old result. A start METHOD is trained under its own key, and the base model is in
        the result key already."""
        c, out = self.config, {}
        if c.start and Path(c.start).is_dir():
            out["start"] = {"model": model_label_of(c.start)}
        if c.plm:
            out["plm"] = model_label_of(c.plm)
        return out

    def _tracks(self, ctx: TrainContext) -> list[tuple[str, str, str]]:
        """(label, start weights, PLM weights) per base model."""
        c = self.config
        start = getattr(self, "_resolved_start", None) or self._resolve_start(ctx)[0]
        return [(model_label_of(ctx.model), start, c.plm or ctx.model)]

    def train(self, corpus: list[str], ctx: TrainContext):
        c = self.config
        if c.init not in ("refresh", "sequential"):
            raise ConfigError(f"{self.name}: option init={c.init!r}; expected refresh or sequential.")
        pairs, pool = self._pairs(ctx)
        start, start_info = self._resolve_start(ctx)
        self._resolved_start = start  # what _tracks loads: resolved (and a start method trained) once
        ctx.accounting["start"] = start_info
        ctx.accounting.update(self.provenance())  # the weights' labels the runner checks before reuse
        cache_dir = None
        if pool.startswith("sts-all") and ctx.output_dir is not None:  # one training shared by all STS tasks
            payload = [pool, len(pairs), pairs[:50], ctx.seed, ctx.model, repr(c), self.name, start]
            folders = [f for f in (c.start, c.plm, *getattr(c, "models", ())) if f and Path(f).is_dir()]
            if folders:  # option-named folders: their weights, not only their paths (else the key is as before)
                payload.append([model_label_of(f) for f in folders])
            key = hashlib.sha256(json.dumps(payload, default=str).encode()).hexdigest()[:16]
            cache_dir = Path(ctx.output_dir).parent / f"sts-pool-{key}"
            if is_complete(cache_dir):
                log.info("%s: reusing the STS-pool training in %s", self.name, cache_dir)
                res = load_encoder(str(cache_dir))
                ctx.accounting.update(
                    res.info.get("accounting", {}), reused_sts_pool=cache_dir.name
                )  # the folder, not its machine path
                ctx.accounting["start"] = start_info
                return res
        t0 = time.perf_counter()
        # each phase's loop checkpoints (a killed run resumes its phase); no run folder: a temporary one
        with tempfile.TemporaryDirectory() if ctx.output_dir is None else contextlib.nullcontext() as tmp:
            self._phase_root = Path(tmp or Path(ctx.checkpoint_dir) / "trans-encoder")
            result = self.fit(pairs, pool, ctx)
            shutil.rmtree(self._phase_root, ignore_errors=True)  # every phase finished: nothing left to resume
        if cache_dir is not None and hasattr(result, "save"):
            # a task that reuses this training reports the training's seconds, not its own reload time
            result.info.setdefault("accounting", {})["seconds"] = round(time.perf_counter() - t0, 3)
            with pinned_folder(cache_dir, cache_dir.parent) as into:  # made in the seed folder, never via a link
                result.save(into)
            mark_complete(cache_dir, root=cache_dir.parent)
        return result

    def fit(self, pairs: list[tuple[str, str]], pool: str, ctx: TrainContext) -> TransEncoderResult:
        """The cycles on ``pairs`` (labels are never given to this function)."""
        c = self.config
        seed_everything(ctx.seed)
        sts_like = pool.startswith("sts-all") or self._is_sts(ctx)
        cycles = c.cycles if c.cycles is not None else (3 if sts_like else 5)
        cross_epochs = c.cross_epochs if c.cross_epochs is not None else (1 if sts_like else 3)
        bi_epochs = c.bi_epochs if c.bi_epochs is not None else (10 if sts_like else 15)
        if c.max_pairs and len(pairs) > c.max_pairs:
            pairs = random.Random(ctx.seed).sample(pairs, c.max_pairs)
        asymmetric = not pool.startswith("sts-all") and str(ctx.task or "").startswith("qnli")  # question vs answer
        both = (c.both_orders == "auto" and not asymmetric) or c.both_orders in ("true", "1", "yes")
        device = torch.device(ctx.device or ("cuda" if torch.cuda.is_available() else "cpu"))
        dev = self._dev(ctx, pool)
        tracks = [_Track(label, start, plm, c, ctx.seed, device) for label, start, plm in self._tracks(ctx)]
        acc = ctx.accounting
        dropped = {t.name: t.dropped_head for t in tracks if t.dropped_head}
        if dropped:
            acc["start_head_dropped"] = dropped
        acc.update(
            {
                "train_pairs_pool": pool,
                "train_pairs_used": len(pairs),
                "cycles": cycles,
                "cross_epochs": cross_epochs,
                "bi_epochs": bi_epochs,
                "init": c.init,
                "both_orders": both,
                "dev_selection": (
                    f"{dev[2]}:{dev[1]} (first {c.dev_max_pairs} pairs; its labels used only to "
                    f"select checkpoints, as the paper)"
                )
                if dev
                else "none (last checkpoint)",
            }
        )
        if not pairs:
            raise ConfigError(f"{self.name}: no training pairs for task {ctx.task!r}.")
        if cycles == 0:  # the step-0 row: the start bi-encoder at its pooling, the cross-encoder's fresh head
            acc.update(steps=0, step0_row=True)
        for cycle in range(1, cycles + 1):
            # (a) bi -> cross: mean over models of each bi-encoder's cosines
            bi_labels = np.mean([_bi_cosines(t.bi, pairs, c.score_batch_size) for t in tracks], axis=0)
            examples = [(a, b, float(y)) for (a, b), y in zip(pairs, bi_labels)]
            if both:
                examples += [(b, a, float(y)) for (a, b), y in zip(pairs, bi_labels)]
            for i, t in enumerate(tracks):
                if c.init == "refresh":
                    t.cross.model.load_state_dict(t.cross_init_state)
                else:  # sequential: the cross-encoder's transformer starts from the bi-encoder that labelled
                    _load_shared(t.cross.model.base_model, t.bi.model.state_dict())
                self._phase(
                    t, "cross", examples, cycle, dev, ctx, epochs=cross_epochs, seed=ctx.seed * 1000 + cycle * 10 + i
                )
            # (b) cross -> bi: mean over models of each cross-encoder's scores
            cross_labels = np.mean([_cross_scores(t.cross, pairs) for t in tracks], axis=0)
            examples = [(a, b, float(y)) for (a, b), y in zip(pairs, cross_labels)]
            for i, t in enumerate(tracks):
                if c.init == "refresh":
                    t.bi.model.load_state_dict(t.start_state)
                else:
                    _load_shared(t.bi.model, t.cross.model.base_model.state_dict())
                self._phase(
                    t, "bi", examples, cycle, dev, ctx, epochs=bi_epochs, seed=ctx.seed * 1000 + cycle * 10 + 5 + i
                )
            acc.setdefault("labels", []).append(
                {
                    "cycle": cycle,
                    "bi_label_mean": float(np.mean(bi_labels)),
                    "cross_label_mean": float(np.mean(cross_labels)),
                }
            )
        for t in tracks:  # the best checkpoint of each kind over all cycles
            if c.eval_full_length:  # evaluated like the start (its own max length), not truncated to 32/64
                t.bi.max_seq_length = t.cross.max_length = t.eval_max_length
            for kind in ("bi", "cross"):
                score, state, where = t.best[kind]
                if state is not None:
                    (t.bi.model if kind == "bi" else t.cross.model).load_state_dict(state)
                # select=false: no dev score (-inf); None, since a record is strict JSON
                t.history.append({"selected": kind, "dev": score if math.isfinite(score) else None, "at": where})
        acc["selection"] = {t.name: [h for h in t.history] for t in tracks}
        return self._result(tracks, acc)

    def _result(self, tracks: list[_Track], acc: dict) -> TransEncoderResult:
        t = tracks[0]
        return TransEncoderResult(t.bi, t.cross, {"accounting": _jsonable(acc), "model": t.name})

    def _phase(
        self,
        t: _Track,
        kind: str,
        examples: list[tuple[str, str, float]],
        cycle: int,
        dev: Any,
        ctx: TrainContext,
        *,
        epochs: float,
        seed: int,
    ) -> None:
        """Train one direction through the one loop (resumable from its checkpoints); keep, per cycle,
        the dev-best weights of this kind (the next labelling uses them) and, over all cycles, the best
        overall. AdamW with linear warm-up then decay; no clipping; full precision (as before the loop)."""
        c = self.config
        model = t.cross if kind == "cross" else t.bi
        device = next(model.parameters()).device
        if kind == "cross":
            objective: Objective = CrossEncoderObjective(model, loss=bi_to_cross_loss)
            lr, bs, warm, min_steps = c.cross_lr, c.cross_batch_size, c.cross_warmup, c.cross_min_steps
            head, head_lr = model.head_names(), c.cross_head_lr
        else:
            objective = _BiObjective(model)
            lr, bs, warm, min_steps, head, head_lr = c.bi_lr, c.bi_batch_size, 0.0, 0, frozenset(), None
        batches, ends = _plan(len(examples), bs, epochs, min_steps, seed)
        total, n_warm = len(batches), int(len(batches) * warm)
        points = _dev_points(total, c.eval_every, ends) if dev is not None else []
        state = _DevState(model.model, len(points))
        objective.add_module("dev_state", state)  # its buffers ride in the loop's checkpoints

        def after_update(*_):  # a dev checkpoint scores the weights this step left
            state.step += 1
            for i, (at, _where) in enumerate(points):
                if at == int(state.step):
                    state.record(i, dev[0].score(model, kind), model.model)

        def optimizer(_objective):
            opt = _optimizer(model, lr, c.weight_decay, head, head_lr)
            opt.register_step_post_hook(after_update)
            return opt

        # a checkpoint is resumed only by this phase of this run: the options, the weights' labels, the labels
        weights = {k: ctx.accounting.get(k) for k in ("start", "plm", "model_labels")}
        label = {"track": t.name, "cycle": cycle, "kind": kind, "seed": seed, **weights, "examples": examples}
        folder = self._phase_root / f"c{cycle}-{kind}-{seed}"
        phase_ctx = SimpleNamespace(
            device=ctx.device, seed=seed, progress=ctx.progress, accounting={}, checkpoint_dir=folder
        )
        train_loop(
            objective,
            [[examples[i] for i in b] for b in batches],
            phase_ctx,
            LoopConfig.from_config(c, steps=total, batch_size=1, max_grad_norm=None),
            make_optimizer=optimizer,
            make_scheduler=lambda opt: torch.optim.lr_scheduler.LambdaLR(
                opt,
                lambda s: (s + 1) / max(1, n_warm) if s < n_warm else max(0.0, (total - s) / max(1, total - n_warm)),
            ),
            fingerprint=method_fingerprint(self, ctx, [json.dumps(label, default=str)]),
            desc=f"{self.name} cycle {cycle} {kind}",
            shuffle=False,
            mixed_precision="no",
        )
        model.to(device)  # the loop hands the model back on the CPU
        best = self._select(t, kind, cycle, points, state)
        a = ctx.accounting
        done = a.setdefault(f"{kind}_train", {})
        done["steps"] = done.get("steps", 0) + total
        done["examples"] = done.get("examples", 0) + sum(len(b) for b in batches)
        a.setdefault(f"{kind}_phase_steps", []).append(total)
        a.setdefault(f"{kind}_loop", []).append(
            {k: phase_ctx.accounting.get(k) for k in ("seconds", "loss_curve", "resumed_from_steps")}
        )
        ctx.logger.info("%s cycle %d %s: dev best %.2f", self.name, cycle, kind, best)

    def _select(self, t: _Track, kind: str, cycle: int, points: list, state: _DevState) -> float:
        """The phase's dev history into the track's, its best weights into the model, and into the
        track's best of this kind when they beat the earlier cycles' (the first best wins ties)."""
        best, where = -math.inf, None
        for (_at, label), score in zip(points, state.scores.tolist()):
            t.history.append({"cycle": cycle, "kind": kind, "at": label, "dev": score})
            if score > best:
                best, where = score, label
        model = t.cross if kind == "cross" else t.bi
        if where is not None:
            weights = state.best_state()
            model.model.load_state_dict(weights)
            if best > t.best[kind][0]:
                t.best[kind] = (best, weights, f"cycle {cycle}, {where}")
        return best


class _DevSplit:
    """Scores an encoder on the first ``limit`` pairs of a dev split with the task's own metric
    (STS: Spearman, pair tasks: AUC); the only place dev labels are read."""

    def __init__(self, adapter: Any, split: str, limit: int | None):
        from benchbench import metrics

        self.metrics = metrics
        self.kind = adapter.spec.kind
        data = adapter.load(split)
        if isinstance(data, dict):  # STS: subset -> (a, b, gold)
            a = [x for v in data.values() for x in v[0]]
            b = [x for v in data.values() for x in v[1]]
            y = np.concatenate([v[2] for v in data.values()])
        else:
            a, b, y = data
        n = limit or len(a)
        self.a, self.b, self.y = list(a[:n]), list(b[:n]), np.asarray(y[:n], dtype=np.float64)

    def score(self, model: Any, kind: str) -> float:
        if kind == "cross":
            pred = model.score_pairs(self.a, self.b)
        else:
            pred = Embedder(model, cache=None, progress=False).cosine_pairs(self.a, self.b)
        if self.kind == "sts":
            return 100 * float(self.metrics.spearman(pred, self.y))
        return 100 * float(self.metrics.roc_auc(self.y.astype(int), pred))


class TransEncoderMutual(TransEncoder):
    name = "trans-encoder-mutual"
    Config = MutualConfig
    description = "Trans-Encoder mutual distillation: pseudo-labels averaged over several base models (transductive)"

    def _resolve_start(self, ctx: TrainContext) -> tuple[str, dict[str, Any]]:
        """Each model of ``models`` starts from itself (no start method: checked before any training)."""
        c = self.config
        models = list(c.models) or [ctx.model, "all-mpnet-base-v2"]
        if c.start_set or (c.start and c.start not in models):
            raise ConfigError(
                f"{self.name}: options start/start_set apply to one model; name the starts in models=... instead."
            )
        return ctx.model, {"models": models}

    def provenance(self) -> dict[str, Any]:
        """The labels of ``models`` when one of them is a folder (recorded as ``model_labels``; the
        record's ``start`` names them as given). No models option: the base model and the packaged
        mpnet, whose names are their identity."""
        models = list(self.config.models)
        if not any(Path(m).is_dir() for m in models):
            return {}
        return {"model_labels": [model_label_of(m) for m in models]}

    def _tracks(self, ctx: TrainContext) -> list[tuple[str, str, str]]:
        c = self.config
        models = list(c.models) or [ctx.model, "all-mpnet-base-v2"]
        if len(models) < 2:
            raise ConfigError(f"{self.name}: option models needs two or more base models (got {models}).")
        if c.start and c.start not in models:
            raise ConfigError(f"{self.name}: option start applies to one model; name the starts in models=... instead.")
        return [(model_label_of(m), m, m) for m in models]  # labels, never a machine path, in the record

    def _result(self, tracks: list[_Track], acc: dict) -> TransEncoderResult:
        c = self.config
        info = {"accounting": _jsonable(acc), "models": [t.name for t in tracks]}
        if c.report == "ensemble":
            return _EnsembleResult(
                EnsembleBi([t.bi for t in tracks]),
                EnsembleCross([t.cross for t in tracks]),
                {**info, "model": "ensemble"},
            )
        names = [t.name for t in tracks]
        want = c.report or names[0]
        want = want if want in names else model_label_of(want)  # as --model names it: its label
        if want not in names:
            raise ConfigError(f"{self.name}: option report={want!r} is not one of models {names} (or 'ensemble').")
        t = tracks[names.index(want)]
        return TransEncoderResult(t.bi, t.cross, {**info, "model": t.name})


class _EnsembleResult:
    """The mutual ensemble: vectors from ``EnsembleBi``, pair scores from ``EnsembleCross``. It has no
    ``save`` (the runner then keeps it in memory only): rerun to evaluate it again."""

    def __init__(self, bi: EnsembleBi, cross: EnsembleCross, info: dict):
        self.bi_encoder, self.cross_encoder, self.info = bi, cross, info
        self.batch_size, self.normalize = 64, False

    @property
    def fingerprint(self) -> str:
        return self.bi_encoder.fingerprint

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.bi_encoder.encode(texts)

    def score_pairs(self, a: list[str], b: list[str]) -> np.ndarray:
        return self.cross_encoder.score_pairs(a, b)


def _load_shared(dst: torch.nn.Module, state: dict) -> None:
    """Sequential init: copy the transformer weights both models have (the cross-encoder's BERT has a
    pooler the bi-encoder lacks, and keeps its own when the bi-encoder has none)."""
    own = dst.state_dict()
    shared = {k: v for k, v in state.items() if k in own}
    if len(shared) < len(own) // 2:
        raise ConfigError(
            f"trans-encoder: init=sequential needs the bi- and cross-encoder to share a transformer "
            f"(only {len(shared)} of {len(own)} weights match)."
        )
    dst.load_state_dict(shared, strict=False)


def _local_model(name: str) -> bool:
    """A model name whose weights are on this machine (e.g. the offline all-MiniLM-L6-v2 package)."""
    try:
        return Path(resolve_model_path(name)).is_dir()
    except ConfigError:
        return False


def _jsonable(x: Any) -> Any:
    return json.loads(json.dumps(x, default=str))


@hookimpl
def benchbench_register_methods(register):
    register(TransEncoder.name, TransEncoder)
    register(TransEncoderMutual.name, TransEncoderMutual)


@hookimpl
def benchbench_register_loaders(register):
    register("trans-encoder", TransEncoderResult.reload)
