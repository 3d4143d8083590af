"""The one training loop every trainer uses.

A method describes *what* to optimise as an :class:`Objective` (an ``nn.Module`` whose
``forward(**batch)`` returns the loss, plus ``collate(items, rng)`` that turns drawn corpus items into
a batch on the CPU: noise, pairing, tokenisation). :func:`train_loop` owns everything else: device
and mixed precision (HF Accelerate, so ``accelerate launch``/``torchrun`` spread one run over several
GPUs without code changes), seeding, the step/batch budget, gradient accumulation, periodic
checkpoints with exact resume after a kill, a progress bar, and the accounting that goes into the
result record.

Exact resume rests on two choices:

* the data order is a pure function of ``(seed, position)``: item ``p`` of the stream is element
  ``p mod n`` of the permutation of epoch ``p // n``, and the noise of micro-batch ``m`` is drawn from
  ``numpy.random.default_rng([seed, m, rank])``; so resuming needs only the position, not a sampler's
  internal state;
* a checkpoint holds the model, optimizer, scheduler and every RNG state plus the counters, written
  to a temporary folder and renamed into place only when complete (the format, its checksums and
  which checkpoint a resume trusts: ``checkpoint.py``).

Checkpoints are taken every ``checkpoint_every`` steps AND every ``checkpoint_minutes`` of wall time,
whichever comes first, so a kill at any instant loses at most one interval.

SIGINT and SIGTERM do not kill the loop mid-step: they ask it to stop after the current optimizer step
(a second signal stops at once); it writes a checkpoint there when that is cheap, then raises
:class:`TrainingInterrupted`, whose message says which step was kept and how to resume.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchbench.core.errors import ConfigError
from benchbench.core.methods import hashed_options
from benchbench.train import checkpoint
from benchbench.train.checkpoint import remove_checkpoints

log = logging.getLogger(__name__)

# On SIGINT/SIGTERM a checkpoint that is not due is still written when it is cheap: the last one took at
# most this long, or (none written yet) the model and two optimizer moments take at most this many bytes
CHEAP_SAVE_SECONDS = 1.0
CHEAP_SAVE_BYTES = 512 << 20


class Objective(torch.nn.Module):
    """A method's trainable modules and its loss. Subclasses implement ``collate`` and ``forward``.

    ``collate`` runs on the CPU for every micro-batch and must draw all its randomness from ``rng``
    (so that a resumed run draws the same noise); it may put ``n_tokens`` (an int) in the batch for
    the accounting. ``forward(**batch)`` returns a scalar loss."""

    def collate(self, items: list[Any], rng: np.random.Generator) -> dict[str, Any]:
        """The keyword arguments of ``forward`` for one micro-batch of ``items``, built on the CPU with
        every random draw taken from ``rng``, so a resumed run collates the same batches."""
        raise NotImplementedError

    def result(self):
        """The encoder this objective would hand back if training stopped now (what a training
        monitor evaluates); None when it has no such encoder on its own (e.g. a flow on cached
        vectors)."""
        return getattr(self, "encoder", None)


@dataclasses.dataclass
class LoopConfig:
    """The budget. ``steps`` counts optimizer updates; each update sees ``batch_size *
    grad_accum * world_size`` items."""

    steps: int
    batch_size: int
    grad_accum: int = 1
    checkpoint_every: int = 1000  # optimizer steps; 0 = no step-based checkpoints
    checkpoint_minutes: float = 10.0  # wall-clock minutes between checkpoints; 0 = no time-based ones
    max_grad_norm: float | None = 1.0  # global-norm clipping as every reference does; 0/None = off
    keep_checkpoints: bool = False  # keep the last checkpoint after a finished run
    log_every: int = 0  # 0: about 20 loss points per run

    @classmethod
    def from_config(cls, config: Any, **overrides: Any) -> LoopConfig:
        """The budget from a method's Config: every LoopConfig field the Config has, by name (steps,
        batch_size, grad_accum, checkpoint_every, checkpoint_minutes, max_grad_norm, ...); keyword
        ``overrides`` win (e.g. ``steps`` resolved from epochs). A Config without ``max_grad_norm``
        gets the loop's default clipping."""
        names = {f.name for f in dataclasses.fields(cls)}
        values = {n: getattr(config, n) for n in names if hasattr(config, n)}
        return cls(**{**values, **overrides})


# LoopConfig fields that change when and how often state is written, never a number: not part of a
# run's fingerprint, so changing them keeps resuming the same run
_SPEED_FIELDS = ("checkpoint_every", "checkpoint_minutes", "keep_checkpoints", "log_every")


def resolve_steps(steps: int | None, n_items: int, batch_size: int, epochs: float = 1.0) -> int:
    """A step budget: the explicit one, or ``epochs`` passes over the corpus. ``steps=0`` is allowed: it
    is the method's step-0 row (its start read through its own pooling, head and template), which a
    study reads each trained row against."""
    if steps is not None:
        if int(steps) < 0:
            raise ConfigError(f"option 'steps' must be >= 0 (0: the untrained step-0 row; got {steps}).")
        return int(steps)
    return max(1, math.ceil(epochs * n_items / batch_size))


class ItemStream:
    """Position-addressable shuffled stream over ``n`` items: epoch ``e`` is a fresh permutation
    seeded by ``(seed, e)``. Written by hand because torch samplers keep hidden iterator state that
    cannot be restored to an arbitrary position without replaying it."""

    def __init__(self, n: int, seed: int, shuffle: bool = True):
        if n < 1:
            raise ConfigError("the training corpus is empty: nothing to train on.")
        self.n, self.seed, self.shuffle = n, seed, shuffle
        self._epoch, self._perm = -1, np.arange(n)

    def _permutation(self, epoch: int) -> np.ndarray:
        if epoch != self._epoch:
            self._epoch = epoch
            self._perm = (
                np.random.default_rng([self.seed, epoch]).permutation(self.n) if self.shuffle else np.arange(self.n)
            )
        return self._perm

    def take(self, start: int, count: int) -> list[int]:
        out = []
        for p in range(start, start + count):
            out.append(int(self._permutation(p // self.n)[p % self.n]))
        return out


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (all devices) before a method builds its random heads."""
    from accelerate.utils import set_seed

    set_seed(seed)


def adamw(params, lr: float, weight_decay: float = 0.0) -> torch.optim.Optimizer:
    """AdamW with torch's fused kernel where available (what the HF Trainer uses by default since
    torch 2.8); on a CPU it is several times faster than the per-tensor loop, which otherwise costs
    as much as a small model's forward pass."""
    params = [p for p in params if p.requires_grad]
    try:
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=True)
    except (RuntimeError, TypeError):
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)


def linear_decay(optimizer: torch.optim.Optimizer, steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """The learning rate decayed linearly from its value at step 0 to 0 at ``steps`` (no warm-up): the
    schedule of SimCSE's and its followers' reference trainers. Written as ``1 - s / steps``, not
    through transformers' ``get_linear_schedule_with_warmup``, whose ``(steps - s) / steps`` can differ
    in the last bit (``steps=3, s=1``), which would move every stored result of these methods."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: max(0.0, 1 - s / steps))


def trainer_defaults(lr: float, steps: int) -> dict[str, Callable[[Any], Any]]:
    """``fit``'s ``make_optimizer`` and ``make_scheduler`` as the HF Trainer runs SimCSE's and its
    followers' reference scripts: :func:`adamw` without weight decay over the trainable parameters, the lr
    decayed by :func:`linear_decay` over ``steps``. One definition, so the eight methods that train this
    way cannot drift apart: ``fit(self, obj, corpus, ctx, **trainer_defaults(c.lr, steps))``."""
    return {
        "make_optimizer": lambda m: adamw(m.parameters(), lr=lr, weight_decay=0.0),
        "make_scheduler": lambda o: linear_decay(o, steps),
    }


def length_groups(lengths: torch.Tensor, overhead: int = 16) -> list[torch.Tensor]:
    """Split a batch into groups of similar length so that each group is padded only to its own
    longest member. Exact for models where padding cannot reach real positions (masked or causal
    attention). Chooses the split of the length-sorted batch minimising
    ``sum(group size * group max length) + overhead * groups`` (dynamic programme; batches are small)."""
    order = torch.argsort(lengths, stable=True)
    ls = lengths[order].tolist()
    n = len(ls)
    best = [0.0] + [float("inf")] * n
    cut = [0] * (n + 1)
    for j in range(1, n + 1):  # best[j]: cost of the first j sorted items
        for i in range(j):
            c = best[i] + (j - i) * ls[j - 1] + overhead
            if c < best[j]:
                best[j], cut[j] = c, i
    groups, j = [], n
    while j > 0:
        groups.append(order[cut[j] : j])
        j = cut[j]
    return groups[::-1]


def make_accelerator(device: str | None, mixed_precision: str | None = None, grad_accum: int = 1):
    """An Accelerator for ``device`` (None: CUDA when present, else CPU). ``mixed_precision`` ("no",
    "bf16"; a method's own fixed choice) or None: the run's ``--train-precision``
    (``benchbench.train.precision.training_precision``): "auto" is bf16 autocast on CUDA when the GPU
    supports it and full precision on CPU; "fp32" no autocast anywhere; "bf16" bf16 autocast on the CPU
    too (``acc.autocast()`` is ``torch.autocast("cpu", torch.bfloat16)`` there: ~2x faster training on
    an AVX512-BF16 EPYC, leaderboards/speed/study_train_throughput.md). bf16 changes the trained weights:
    CPU results stay comparable with each other in fp32, which "auto" keeps."""
    from datetime import timedelta

    from accelerate import Accelerator
    from accelerate.state import AcceleratorState
    from accelerate.utils import DistributedDataParallelKwargs, InitProcessGroupKwargs

    from benchbench.train.precision import train_precision

    cpu = device is not None and device.startswith("cpu")
    if device is not None and device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"--device {device}: CUDA is not available on this machine.")
    on_cuda = not cpu and torch.cuda.is_available()
    requested = train_precision()
    if mixed_precision is None and requested == "fp32":
        mixed_precision = "no"
    elif mixed_precision is None and requested == "bf16":
        if on_cuda and not torch.cuda.is_bf16_supported():
            raise ConfigError("--train-precision bf16: this GPU has no bf16 support; use auto or fp32.")
        mixed_precision = "bf16"
    elif mixed_precision is None:
        mixed_precision = "bf16" if (on_cuda and torch.cuda.is_bf16_supported()) else "no"
    # accelerate keeps one process-wide state that refuses another mixed precision than its first
    # Accelerator's: a process that trains in two precisions (a fixed-precision method after a bf16 one,
    # tests) starts that state afresh (the process group, PartialState, is kept)
    if AcceleratorState._shared_state.get("_mixed_precision", mixed_precision) != mixed_precision:
        AcceleratorState._reset_state()
    # find_unused_parameters: some objectives hold weights that get no gradient by design
    # (TSDAE's cross-attention query/key with a one-vector memory), which plain DDP rejects.
    # a long collective timeout: in a multi-process run the other ranks wait at the next task's first
    # collective while rank 0 evaluates (CQADupStack: minutes), which the default 10 minutes can cut
    return Accelerator(
        cpu=cpu,
        mixed_precision=mixed_precision,
        gradient_accumulation_steps=grad_accum,
        kwargs_handlers=[
            DistributedDataParallelKwargs(find_unused_parameters=True),
            InitProcessGroupKwargs(timeout=timedelta(hours=12)),
        ],
    )


def run_fingerprint(**parts: Any) -> str:
    """Identifies a run, so that a checkpoint is only resumed by the run that wrote it."""
    payload = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def method_fingerprint(method: Any, ctx: Any, items: Sequence[Any]) -> str:
    """The fingerprint of ``method`` (its name and full config) trained from ``ctx.model`` with
    ``ctx.seed`` on ``items``."""
    # speed knobs (hash False, e.g. checkpoint_every) and later options at their default (hash
    # "unless_default") name the same run, as in the result key (config_hash)
    cfg = hashed_options(method.config) if dataclasses.is_dataclass(method.config) else repr(method.config)
    return run_fingerprint(
        method=getattr(method, "name", type(method).__name__),
        config=cfg,
        model=getattr(ctx, "model", None),
        seed=getattr(ctx, "seed", None),
        corpus=corpus_fingerprint(items),
    )


def corpus_fingerprint(items: Sequence[Any]) -> str:
    h = hashlib.sha256()
    h.update(str(len(items)).encode())
    for it in items[:1000]:
        h.update(repr(it).encode() if not isinstance(it, str) else it.encode())
    return h.hexdigest()[:16]


@dataclasses.dataclass
class LoopState:
    """The loop's progress, handed to ``on_step`` after each optimizer step and saved in every
    checkpoint. A resumed run continues these counts from the checkpoint (``resumed_from`` lists the
    steps it resumed at), so the accounting a record stores covers the whole training."""

    step: int = 0  # optimizer steps done
    micro: int = 0  # micro-batches done (per process)
    items: int = 0  # items (sentences, pairs, vectors) seen, all processes
    tokens: int = 0  # non-padding input tokens seen, all processes
    seconds: float = 0.0  # training wall-clock, summed over resumed segments
    losses: list = dataclasses.field(default_factory=list)  # [step, mean loss since last point]
    monitor: list = dataclasses.field(default_factory=list)  # [step, {score: value}] from ctx.monitor
    resumed_from: list = dataclasses.field(default_factory=list)


def train_loop(
    objective: Objective,
    items: Sequence[Any],
    ctx,
    loop: LoopConfig,
    make_optimizer: Callable[[torch.nn.Module], torch.optim.Optimizer],
    make_scheduler: Callable[[torch.optim.Optimizer], Any] | None = None,
    fingerprint: str | None = None,
    on_step: Callable[[LoopState], None] | None = None,
    desc: str = "train",
    *,
    shuffle: bool = True,
    mixed_precision: str | None = None,
) -> torch.nn.Module:
    """Optimise ``objective`` on ``items`` for ``loop.steps`` updates and return it unwrapped (on
    the CPU). ``ctx`` is the method's TrainContext: device, seed, progress, checkpoint_dir, and the
    ``accounting`` dict this fills. ``fingerprint`` names the run for resume (default: from the
    objective's class, the loop config, the seed and the corpus). 0 steps: see :func:`_untrained`.
    ``shuffle=False``: items in the order given (a method whose items are its own batches, ``batch_size=1``);
    ``mixed_precision`` ("no", "bf16"; None: :func:`make_accelerator`'s) for results fixed in fp32 on a GPU."""
    _check_budget(loop)
    acc = make_accelerator(getattr(ctx, "device", None), mixed_precision, grad_accum=loop.grad_accum)
    if loop.steps == 0:
        return _untrained(objective, ctx, acc, loop, desc)
    seed = int(getattr(ctx, "seed", 0))
    budget = {k: v for k, v in dataclasses.asdict(loop).items() if k not in _SPEED_FIELDS}
    fingerprint = fingerprint or run_fingerprint(
        objective=type(objective).__qualname__, loop=budget, seed=seed, corpus=corpus_fingerprint(items)
    )
    if acc.mixed_precision != "no":  # a bf16 training never resumes a full-precision one's checkpoint, nor the reverse
        fingerprint = run_fingerprint(run=fingerprint, mixed_precision=acc.mixed_precision)
    optimizer = make_optimizer(objective)
    scheduler = make_scheduler(optimizer) if make_scheduler else None
    model, optimizer = acc.prepare(objective, optimizer)
    # the scheduler is stepped by hand once per optimizer step (an Accelerate-prepared scheduler steps
    # once per process, which would run schedules defined in optimizer steps too fast under DDP)
    ckpt_root = Path(ctx.checkpoint_dir)
    within = getattr(ctx, "write_root", None)  # --output: checkpoints never leave it (None: the run folder)
    checkpoint.check_root(ckpt_root, within)  # a linked checkpoints folder: refused before any step, not resumed from
    state = _resume(acc, model, optimizer, scheduler, ckpt_root, fingerprint, loop.steps, desc)
    stream = ItemStream(len(items), seed, shuffle=shuffle)
    log_every = loop.log_every or max(1, loop.steps // 20)
    bar = _progress_bar(ctx, acc, loop.steps, state.step, desc)
    window: list[float] = []
    monitor, monitor_every = _monitor_of(ctx, acc, model, desc, state)
    model.train()
    t_start = time.perf_counter()
    seconds_before, paused = state.seconds, 0.0
    last_save, save_seconds = (state.step, time.monotonic()), None
    with bar, _StopRequest() as stop:  # the bar closed first, so that an error starts its own line
        while state.step < loop.steps:
            window.append(_optimizer_step(acc, model, objective, optimizer, items, stream, state, loop, seed, desc))
            if scheduler is not None:
                scheduler.step()
            state.step += 1
            bar.update(1)
            if state.step % log_every == 0 or state.step == loop.steps:
                window = _loss_point(state, window, bar)
            if monitor is not None and (state.step % monitor_every == 0 or state.step == loop.steps):
                t_mon = time.perf_counter()
                _run_monitor(monitor, acc, model, state)
                paused += time.perf_counter() - t_mon
            state.seconds = seconds_before + time.perf_counter() - t_start - paused
            cheap = stop.signum is not None and _cheap_to_save(model, save_seconds)
            save, signum = _next_move(acc, loop, state, last_save, stop.signum, cheap)
            if save:
                last_save, save_seconds = _timed_save(
                    acc, model, optimizer, scheduler, ckpt_root, state, fingerprint, within
                )
            if on_step is not None:
                on_step(state)
            if signum is not None:
                stop.honoured = True
                raise TrainingInterrupted(signum, state.step, loop.steps, last_save[0], ckpt_root)
        bar.close()
        _last_checkpoint(acc, ctx, loop, (model, optimizer, scheduler), ckpt_root, state, fingerprint, within)
    _account(ctx, acc, state, loop)
    unwrapped = acc.unwrap_model(model)
    _release(acc)
    return unwrapped.to("cpu").eval()


def _check_budget(loop: LoopConfig) -> None:
    if loop.steps < 0 or loop.batch_size < 1 or loop.grad_accum < 1:
        raise ConfigError(
            f"training budget must be steps >= 0, batch_size >= 1, grad_accum >= 1: steps={loop.steps}, "
            f"batch_size={loop.batch_size}, grad_accum={loop.grad_accum}."
        )


def _release(acc) -> None:
    """Free a finished training's GPU memory for the next one (Accelerate's ``free_memory``: a full
    ``gc.collect`` and the CUDA cache). Skipped on a CPU, where the collect frees nothing refcounting
    does not and costs 0.5-0.8 s a training (Trans-Encoder trains 2 x cycles phases a run)."""
    if acc.device.type != "cpu":
        acc.free_memory()


def _last_checkpoint(
    acc, ctx, loop: LoopConfig, parts: tuple, root: Path, state: LoopState, fingerprint: str, within: Path | None
) -> None:
    """After the last step: the checkpoints removed, unless the run keeps them or the runner defers
    that until the trained encoder is saved and marked complete (then the last step is written, so
    that a kill between here and the encoder being marked complete redoes no training)."""
    defer_cleanup = bool(getattr(ctx, "defer_checkpoint_cleanup", False))
    if defer_cleanup and not (root / f"step-{state.step:09d}" / checkpoint.META).is_file():
        checkpoint.save_checkpoint(acc, *parts, root, state, fingerprint, within)
    acc.wait_for_everyone()
    if not loop.keep_checkpoints and not defer_cleanup and acc.is_main_process:
        remove_checkpoints(root, within)


def _untrained(objective: Objective, ctx, acc, loop: LoopConfig, desc: str) -> torch.nn.Module:
    """``steps=0``: the objective exactly as the method built it (its encoder, pooling, head and
    template, a freshly initialised head included), with no optimizer, scheduler (a schedule such as
    ``1 - s / steps`` is undefined at 0 steps) or checkpoint. The accounting says ``steps: 0`` and
    ``step0_row: true``, so a study tells this row from a trained one; a curve monitor gets its one
    point."""
    model = acc.prepare(objective)
    state = LoopState()
    _monitor_of(ctx, acc, model, desc, state)
    _account(ctx, acc, state, loop)
    unwrapped = acc.unwrap_model(model)
    _release(acc)
    return unwrapped.to("cpu").eval()


def _start_point(ctx, monitor, acc, model, state: LoopState) -> None:
    """The learning curve's step-0 point: ``ctx.monitor_start(0, encoder)`` before the first update,
    when a curve monitor is installed. A separate callable, not ``ctx.monitor``: a method that wraps
    ``ctx.monitor`` for its own dev selection (SimCSE, BSL) must not select the untrained start."""
    start = getattr(ctx, "monitor_start", None)
    if monitor is not None and start is not None and state.step == 0 and not state.monitor:
        _run_monitor(start, acc, model, state)


def _timed_save(
    acc, model, optimizer, scheduler, root, state, fingerprint, within=None
) -> tuple[tuple[int, float], float]:
    """Save a checkpoint; returns (its step, when) and how long it took (which says whether one more
    is cheap enough to write on SIGINT/SIGTERM)."""
    t0 = time.perf_counter()
    checkpoint.save_checkpoint(acc, model, optimizer, scheduler, root, state, fingerprint, within)
    return (state.step, time.monotonic()), time.perf_counter() - t0


def _progress_bar(ctx, acc, steps: int, done: int, desc: str):
    from tqdm.auto import tqdm

    return tqdm(
        total=steps,
        initial=done,
        desc=desc,
        unit="step",
        dynamic_ncols=True,
        disable=not (getattr(ctx, "progress", True) and acc.is_local_main_process),
    )


def _loss_point(state: LoopState, window: list[float], bar) -> list[float]:
    """The mean loss of the steps in ``window`` as a point of the loss curve (kept in checkpoints, so a
    resumed run has the whole curve) and on the bar; the window starts again."""
    state.losses.append([state.step, round(sum(window) / len(window), 5)])
    bar.set_postfix(loss=f"{state.losses[-1][1]:.4f}")
    return []


def _optimizer_step(acc, model, objective, optimizer, items, stream, state: LoopState, loop: LoopConfig, seed, desc):
    """One optimizer update over ``grad_accum`` micro-batches; returns its mean loss and advances the
    micro-batch, item and token counters. Micro-batch ``m`` of process ``r`` draws its items from
    stream position ``(m * world + r) * batch_size`` and its noise from ``(seed, m, r)``."""
    world, rank = acc.num_processes, acc.process_index
    step_loss = 0.0
    for _ in range(loop.grad_accum):
        start = (state.micro * world + rank) * loop.batch_size
        drawn = [items[i] for i in stream.take(start, loop.batch_size)]
        batch = objective.collate(drawn, np.random.default_rng([seed, state.micro, rank]))
        n_tokens = int(batch.pop("n_tokens", 0))
        batch = {k: v.to(acc.device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
        with acc.accumulate(model), acc.autocast():
            loss = model(**batch)
            acc.backward(loss)
            if acc.sync_gradients and loop.max_grad_norm:
                acc.clip_grad_norm_(model.parameters(), loop.max_grad_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        if not torch.isfinite(loss.detach()):
            raise FloatingPointError(
                f"{desc}: loss became {loss.item()} at step {state.step}; lower the learning rate."
            )
        step_loss += float(loss.detach()) / loop.grad_accum
        state.micro += 1
        state.items += len(drawn) * world
        state.tokens += n_tokens * world
    return step_loss


def _monitor_of(ctx, acc, model, desc: str, state: LoopState) -> tuple[Callable | None, int]:
    """``ctx``'s training monitor and its interval, checked before any step (on every process); with a
    monitor, the curve's step-0 point is scored here (:func:`_start_point`)."""
    monitor, monitor_every = getattr(ctx, "monitor", None), int(getattr(ctx, "monitor_every", 0) or 0)
    if monitor is not None and monitor_every < 1:
        raise ConfigError(f"{desc}: a training monitor needs monitor_every >= 1 (got {monitor_every}).")
    if monitor is not None and acc.unwrap_model(model).result() is None:
        raise ConfigError(
            f"{desc}: this method has no encoder to monitor during training "
            f"({type(acc.unwrap_model(model)).__name__}.result() is None)."
        )
    _start_point(ctx, monitor, acc, model, state)
    return monitor, monitor_every


def _resume(acc, model, optimizer, scheduler, root: Path, fingerprint: str, steps: int, desc: str) -> LoopState:
    """The state of the newest intact checkpoint of this run, loaded into the model, optimizer,
    scheduler and RNGs; a fresh state when there is none."""
    found = checkpoint.pick_checkpoint(root, fingerprint, steps, acc.process_index)
    if found is None:
        return LoopState()
    ckpt, meta = found
    checkpoint.load_checkpoint(acc, model, optimizer, scheduler, ckpt)
    names = {f.name for f in dataclasses.fields(LoopState)}
    state = LoopState(**{k: v for k, v in meta["state"].items() if k in names})
    state.resumed_from.append(state.step)
    log.info("resuming %s from %s (step %d)", desc, ckpt, state.step)
    return state


class TrainingInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped training at a safe point (after an optimizer step). A
    KeyboardInterrupt, so that no ``except Exception`` (a plugin's, the runner's) swallows it or blames
    a plugin for it; ``signum`` gives the exit status (128 + signum) and the message says what was kept
    and how to resume."""

    def __init__(self, signum: int, step: int, steps: int, kept: int, root: Path):
        name, root = signal.Signals(signum).name, root.absolute()
        if kept:
            what = f"kept checkpoint step {kept} in {root / f'step-{kept:09d}'}; run the same command to resume from it"
        else:
            what = "nothing was kept (no checkpoint yet); the same command starts this training over"
        super().__init__(f"interrupted ({name}) at training step {step} of {steps}: {what}.")
        self.signum, self.step, self.kept = signum, step, kept


class _StopRequest:
    """While the loop runs, SIGINT/SIGTERM are remembered and honoured after the current optimizer
    step: a KeyboardInterrupt raised inside ``backward()`` takes seconds to unwind and a SIGTERM kills
    mid-interval, both losing the steps since the last checkpoint. A second signal gets the handler
    there was before (stop at once). Installed only in the main thread (where Python runs handlers)
    and never over an ignored signal (nohup, a background job); a signal that came after the last
    step is passed on when the loop ends."""

    def __init__(self):
        self.signum: int | None = None
        self.honoured = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                before = signal.getsignal(sig)
                if before is not None and before is not signal.SIG_IGN:
                    self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.signum is None:
            self.signum = signum
            return
        signal.signal(signum, self._previous[signum])
        signal.raise_signal(signum)

    def __exit__(self, exc_type, *_exc) -> None:
        for sig, before in self._previous.items():
            signal.signal(sig, before)
        if exc_type is None and self.signum is not None and not self.honoured:
            signal.raise_signal(self.signum)


def _cheap_to_save(model, save_seconds: float | None) -> bool:
    """Whether a checkpoint can be written on SIGINT/SIGTERM without delaying the exit: the last one
    took at most CHEAP_SAVE_SECONDS, or (none yet) the weights and AdamW's two moments fit in
    CHEAP_SAVE_BYTES."""
    if save_seconds is not None:
        return save_seconds <= CHEAP_SAVE_SECONDS
    return 3 * sum(p.numel() * p.element_size() for p in model.parameters()) <= CHEAP_SAVE_BYTES


def _run_monitor(monitor, acc, model, state: LoopState) -> None:
    """Evaluate the encoder as it stands (``monitor(step, encoder) -> {name: score}``, on the main
    process) and keep the scores in the loop state, so they survive a resume. Its time is not
    counted as training time, and it cannot move the run: it sees the model in eval mode, and the
    torch RNG streams (dropout) are restored and training mode is set again afterwards."""
    if acc.is_main_process:
        devices = [acc.device] if acc.device.type == "cuda" else []
        model.eval()  # before result(): an encoder it copies out is then in eval mode too
        encoder = acc.unwrap_model(model).result()
        try:
            with torch.random.fork_rng(devices=devices):
                scores = monitor(state.step, encoder)
        finally:
            model.train()
        state.monitor.append([state.step, dict(scores or {})])
    acc.wait_for_everyone()


def _checkpoint_due(loop: LoopConfig, state: LoopState, last_save: tuple[int, float]) -> bool:
    """Every ``checkpoint_every`` steps, or when ``checkpoint_minutes`` have passed since the last save;
    never at the last step (the result is saved then)."""
    if state.step >= loop.steps:
        return False
    if loop.checkpoint_every and state.step % loop.checkpoint_every == 0:
        return True
    if not loop.checkpoint_minutes or loop.checkpoint_minutes <= 0:
        return False
    return state.step > last_save[0] and time.monotonic() - last_save[1] >= loop.checkpoint_minutes * 60


def _next_move(
    acc, loop: LoopConfig, state: LoopState, last_save: tuple[int, float], signum: int | None, cheap: bool
) -> tuple[bool, int | None]:
    """(write a checkpoint now, the signal to stop on or None) after an optimizer step: a checkpoint
    when one is due, or when stopping and it is cheap. Decided by the main process and shared, so that
    every process saves and stops at the same step."""
    stop = signum
    save = _checkpoint_due(loop, state, last_save) or (stop is not None and cheap)
    if acc.num_processes > 1:
        from accelerate.utils import broadcast_object_list

        flag = [save, stop]
        broadcast_object_list(flag, from_process=0)
        save, stop = bool(flag[0]), flag[1]
    return save, stop


def _account(ctx, acc, state: LoopState, loop: LoopConfig) -> None:
    a = getattr(ctx, "accounting", None)
    if a is None:
        return
    dev = acc.device
    label = f"cuda:{torch.cuda.get_device_name(dev)}" if dev.type == "cuda" else "cpu"
    a.update(
        {
            "seconds": round(state.seconds, 3),
            "steps": state.step,
            "examples": state.items,
            "tokens": state.tokens,
            "batch_size": loop.batch_size,
            "grad_accum": loop.grad_accum,
            "processes": acc.num_processes,
            "device": label,
            "mixed_precision": str(acc.mixed_precision),
            "steps_per_second": round(state.step / state.seconds, 4) if state.seconds else None,
            "loss_curve": state.losses,
            "resumed_from_steps": state.resumed_from,
        }
    )
    if loop.steps == 0:
        a["step0_row"] = True
    if state.monitor:
        a["monitor"] = state.monitor
