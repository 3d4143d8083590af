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
  to a temporary folder and renamed into place only when complete.

Checkpoints hold no pickle: tensors go to safetensors files (the model through
``safetensors.torch.save_model``, which drops the duplicates of tied weights), everything else (optimizer
hyper-parameters, scheduler counters, Python/NumPy RNG states, loop counters) to JSON, and
``benchbench_state.json`` (written last) lists every file's sha256 and carries a checksum of its own
(the loop counters it holds decide which data comes next, so a changed digit there would resume a
different run). The two newest checkpoints are kept: one whose files do not match is ignored with a
loud warning naming it and the run resumes from the older intact one, or from the start, which is
exact too (the run is a pure function of its seed). Checkpoints are taken every ``checkpoint_every``
steps AND every ``checkpoint_minutes`` of wall time, whichever comes first, so a kill at any instant
loses at most one interval.

SIGINT and SIGTERM do not kill the loop mid-step: they ask it to stop after the current optimizer step
(a second signal stops at once); it writes a checkpoint there when that is cheap, then raises
:class:`TrainingInterrupted`, whose message says which step was kept and how to resume. A full disk
while writing a checkpoint removes the partial folder and keeps the previous checkpoints.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import logging
import math
import os
import re
import shutil
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchbench.core.errors import ConfigError, DataError
from benchbench.store.files import atomic_write_json, check_inside, sha256_file

log = logging.getLogger(__name__)

META = "benchbench_state.json"
# 3: the state file carries a checksum of its own; 2: safetensors + JSON, the state file unchecked;
# 1 (unmarked): Accelerate save_state with pickle
CHECKPOINT_FORMAT = 3
_OLD_FORMATS = {  # by str(format): a damaged field may hold anything
    "2": "its state file has no checksum of its own, so its step counters cannot be trusted",
    "1": "pickle-based Accelerate state; nothing is unpickled",
    "None": "pickle-based Accelerate state; nothing is unpickled",
}
KEEP_CHECKPOINTS = 2  # the newest and one older: a damaged newest one then costs one interval, not the run
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
    """An Accelerator for ``device`` (None: CUDA when present, else CPU). bf16 autocast on CUDA when
    the GPU supports it; full precision on CPU. Whether bf16 is faster there depends on the CPU's bf16
    units (on an AVX512-BF16 EPYC, TSDAE ran 1.4-1.5x faster under it), and it changes the trained
    weights: CPU results stay comparable with each other in fp32."""
    from datetime import timedelta

    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs, InitProcessGroupKwargs

    cpu = device is not None and device.startswith("cpu")
    if device is not None and device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"--device {device}: CUDA is not available on this machine.")
    if mixed_precision is None:
        mixed_precision = "bf16" if (not cpu and torch.cuda.is_available() and torch.cuda.is_bf16_supported()) else "no"
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
    cfg = dataclasses.asdict(method.config) if dataclasses.is_dataclass(method.config) else repr(method.config)
    if isinstance(cfg, dict):  # speed knobs (field(metadata={"hash": False}), e.g. checkpoint_every) name the same run
        for f in dataclasses.fields(method.config):
            if f.metadata.get("hash") is False:
                cfg.pop(f.name, None)
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


def _checkpoints(root: Path) -> list[tuple[int, Path]]:
    """The finished checkpoint folders under ``root`` (``step-N``; ``.tmp-step-N`` are unfinished),
    newest first by the step in their name."""
    if not root.is_dir():
        return []
    found = []
    for d in root.glob("step-*"):
        m = re.fullmatch(r"step-(\d+)", d.name)
        if m and d.is_dir():
            found.append((int(m.group(1)), d))
    return sorted(found, reverse=True)


def _meta_checksum(meta: dict) -> str:
    """The state file's checksum of itself: every field but ``checksum``, as canonical JSON."""
    body = {k: v for k, v in meta.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _read_meta(ckpt: Path, step: int, fingerprint: str) -> tuple[dict | None, str | None]:
    """(the state file of ``ckpt``, None) when it is whole and this run's, else (None, why not)."""
    f = ckpt / META
    try:
        meta = json.loads(f.read_text())
    except FileNotFoundError:
        return None, f"its state file {f} is missing"
    except (OSError, ValueError) as e:
        return None, f"its state file {f} is unreadable (truncated or damaged: {e})"
    if not isinstance(meta, dict):
        return None, f"its state file {f} is not a JSON object (damaged)"
    if meta.get("format") != CHECKPOINT_FORMAT:
        why = _OLD_FORMATS.get(str(meta.get("format")), "an unknown format")
        return None, f"it was written by another benchbench version (format {meta.get('format')}: {why})"
    if meta.get("checksum") != _meta_checksum(meta):
        return None, f"its state file {f} does not match its own checksum (damaged or edited)"
    if meta.get("fingerprint") != fingerprint:
        return None, f"it belongs to another run (fingerprint {meta.get('fingerprint')} != {fingerprint})"
    if meta.get("step") != step:
        return None, f"its state file {f} is the one of step {meta.get('step')} (copied from another checkpoint?)"
    return meta, None


def _damage(ckpt: Path, meta: dict, rank: int) -> str | None:
    """Why ``ckpt`` cannot be resumed exactly by process ``rank`` (a missing or changed file), or None."""
    files = meta.get("files", {})
    needed = [n for n in files if not n.startswith("rng-")] + [f"rng-{rank}.json", f"rng-{rank}.safetensors"]
    for name in needed:
        if name not in files:
            return f"{name} is not listed in {META} (written by a run with another number of processes?)"
        f = ckpt / name
        if not f.is_file():
            return f"{f} is missing"
        if sha256_file(f) != files[name]:
            return f"{f} does not match its checksum in {META} (damaged or edited)"
    return None


def _pick_checkpoint(root: Path, fingerprint: str, max_step: int, rank: int) -> tuple[Path, dict] | None:
    """The newest checkpoint of this run under ``root`` whose state file and every file match their
    checksums, with its state. Each one passed over is named in a warning (never resumed from
    silently), and so is the older one used instead."""
    passed: list[Path] = []
    for step, ckpt in _checkpoints(root):
        if step > max_step:  # a longer budget's: another run (the budget is in the fingerprint)
            continue
        meta, why = _read_meta(ckpt, step, fingerprint)
        why = why or _damage(ckpt, meta, rank)
        if why is None:
            if passed:
                log.warning("resuming from the older intact checkpoint %s (step %d) instead", ckpt, step)
            return ckpt, meta
        log.warning(
            "NOT resuming from checkpoint %s: %s. Falling back to an older intact checkpoint or to the "
            "start (exact either way: the run is a pure function of its seed); delete the folder to "
            "silence this.",
            ckpt,
            why,
        )
        passed.append(ckpt)
    if passed:
        log.warning("no intact checkpoint left in %s: this training starts from step 0", root)
    return None


# -- a state dict as safetensors + JSON: tensors go to the safetensors file under generated names, the
# rest of the (nested) structure to JSON. Written by hand because neither safetensors nor torch stores a
# nested optimizer/scheduler state without pickle.


def _split_tensors(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(obj, torch.Tensor):
        name = f"t{len(tensors)}"
        tensors[name] = obj.detach().to("cpu").contiguous().clone()  # clone: no shared storage for safetensors
        return {"__tensor__": name}
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj):
            return {"__map__": {k: _split_tensors(v, tensors) for k, v in obj.items()}}
        return {"__items__": [[_split_tensors(k, tensors), _split_tensors(v, tensors)] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"__tuple__": [_split_tensors(v, tensors) for v in obj]}
    if isinstance(obj, list):
        return [_split_tensors(v, tensors) for v in obj]
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": obj.tolist(), "dtype": str(obj.dtype)}
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"cannot store a {type(obj).__name__} in a checkpoint without pickle")


def _join_tensors(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(obj, list):
        return [_join_tensors(v, tensors) for v in obj]
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return tensors[obj["__tensor__"]]
        if "__map__" in obj:
            return {k: _join_tensors(v, tensors) for k, v in obj["__map__"].items()}
        if "__items__" in obj:
            return {_join_tensors(k, tensors): _join_tensors(v, tensors) for k, v in obj["__items__"]}
        if "__tuple__" in obj:
            return tuple(_join_tensors(v, tensors) for v in obj["__tuple__"])
        if "__ndarray__" in obj:
            return np.asarray(obj["__ndarray__"], dtype=obj["dtype"])
    return obj


def _save_tree(obj: Any, folder: Path, name: str) -> None:
    from safetensors.torch import save_file

    tensors: dict[str, torch.Tensor] = {}
    tree = _split_tensors(obj, tensors)
    save_file(tensors, str(folder / f"{name}.safetensors"))
    (folder / f"{name}.json").write_text(json.dumps(tree))


def _load_tree(folder: Path, name: str) -> Any:
    from safetensors.torch import load_file

    return _join_tensors(
        json.loads((folder / f"{name}.json").read_text()), load_file(str(folder / f"{name}.safetensors"))
    )


def _rng_state(device: torch.device) -> dict[str, Any]:
    import random

    st = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if device.type == "cuda":
        st["cuda"] = torch.cuda.get_rng_state_all()
    return st


def _set_rng_state(st: dict[str, Any]) -> None:
    import random

    random.setstate(st["python"])
    np.random.set_state(st["numpy"])
    torch.set_rng_state(st["torch"])
    if "cuda" in st:
        torch.cuda.set_rng_state_all(st["cuda"])


@dataclasses.dataclass
class LoopState:
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
) -> torch.nn.Module:
    """Optimise ``objective`` on ``items`` for ``loop.steps`` updates and return it unwrapped (on
    the CPU). ``ctx`` is the method's TrainContext: device, seed, progress, checkpoint_dir, and the
    ``accounting`` dict this fills. ``fingerprint`` names the run for resume (default: from the
    objective's class, the loop config, the seed and the corpus). 0 steps: see :func:`_untrained`."""
    if loop.steps < 0 or loop.batch_size < 1 or loop.grad_accum < 1:
        raise ConfigError(
            f"training budget must be steps >= 0, batch_size >= 1, grad_accum >= 1: steps={loop.steps}, "
            f"batch_size={loop.batch_size}, grad_accum={loop.grad_accum}."
        )
    acc = make_accelerator(getattr(ctx, "device", None), grad_accum=loop.grad_accum)
    if loop.steps == 0:
        return _untrained(objective, ctx, acc, loop, desc)
    seed = int(getattr(ctx, "seed", 0))
    budget = {k: v for k, v in dataclasses.asdict(loop).items() if k not in _SPEED_FIELDS}
    fingerprint = fingerprint or run_fingerprint(
        objective=type(objective).__qualname__, loop=budget, seed=seed, corpus=corpus_fingerprint(items)
    )
    optimizer = make_optimizer(objective)
    scheduler = make_scheduler(optimizer) if make_scheduler else None
    model, optimizer = acc.prepare(objective, optimizer)
    # the scheduler is stepped by hand once per optimizer step (an Accelerate-prepared scheduler steps
    # once per process, which would run schedules defined in optimizer steps too fast under DDP)
    ckpt_root = Path(ctx.checkpoint_dir)
    state = _resume(acc, model, optimizer, scheduler, ckpt_root, fingerprint, loop.steps, desc)
    stream = ItemStream(len(items), seed)
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
                last_save, save_seconds = _timed_save(acc, model, optimizer, scheduler, ckpt_root, state, fingerprint)
            if on_step is not None:
                on_step(state)
            if signum is not None:
                stop.honoured = True
                raise TrainingInterrupted(signum, state.step, loop.steps, last_save[0], ckpt_root)
        bar.close()
        # the runner keeps checkpoints until the trained encoder is saved and marked complete
        defer_cleanup = bool(getattr(ctx, "defer_checkpoint_cleanup", False))
        if defer_cleanup and not (ckpt_root / f"step-{state.step:09d}" / META).is_file():
            # a kill between here and the encoder being marked complete redoes no training
            _save_checkpoint(acc, model, optimizer, scheduler, ckpt_root, state, fingerprint)
        acc.wait_for_everyone()
        if not loop.keep_checkpoints and not defer_cleanup and acc.is_main_process:
            remove_checkpoints(ckpt_root)
    _account(ctx, acc, state, loop)
    unwrapped = acc.unwrap_model(model)
    acc.free_memory()
    return unwrapped.to("cpu").eval()


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
    acc.free_memory()
    return unwrapped.to("cpu").eval()


def _start_point(ctx, monitor, acc, model, state: LoopState) -> None:
    """The learning curve's step-0 point: ``ctx.monitor_start(0, encoder)`` before the first update,
    when a curve monitor is installed. A separate callable, not ``ctx.monitor``: a method that wraps
    ``ctx.monitor`` for its own dev selection (SimCSE, BSL) must not select the untrained start."""
    start = getattr(ctx, "monitor_start", None)
    if monitor is not None and start is not None and state.step == 0 and not state.monitor:
        _run_monitor(start, acc, model, state)


def _timed_save(acc, model, optimizer, scheduler, root, state, fingerprint) -> tuple[tuple[int, float], float]:
    """Save a checkpoint; returns (its step, when) and how long it took (which says whether one more
    is cheap enough to write on SIGINT/SIGTERM)."""
    t0 = time.perf_counter()
    _save_checkpoint(acc, model, optimizer, scheduler, root, state, fingerprint)
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
    found = _pick_checkpoint(root, fingerprint, steps, acc.process_index)
    if found is None:
        return LoopState()
    ckpt, meta = found
    _load_checkpoint(acc, model, optimizer, scheduler, ckpt)
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
        encoder = acc.unwrap_model(model).result()
        devices = [acc.device] if acc.device.type == "cuda" else []
        model.eval()
        try:
            with torch.random.fork_rng(devices=devices):
                scores = monitor(state.step, encoder)
        finally:
            model.train()
        state.monitor.append([state.step, dict(scores or {})])
    acc.wait_for_everyone()


def remove_checkpoints(root: Path) -> None:
    """Delete a run's checkpoints (after its result is safely stored)."""
    if Path(root).is_dir():
        for d in list(Path(root).glob("step-*")) + list(Path(root).glob(".tmp-step-*")):
            shutil.rmtree(d, ignore_errors=True)


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


def _save_checkpoint(acc, model, optimizer, scheduler, root: Path, state: LoopState, fingerprint: str) -> None:
    """Write ``step-N``: the main process writes the model, optimizer and scheduler, every process its
    RNG state, into a temporary folder that the main process renames into place once the state file
    (with every file's checksum, and its own) is written; then all but the KEEP_CHECKPOINTS newest are
    dropped. A write that fails (a full disk) removes the temporary folder and keeps the others."""
    final = check_inside(root / f"step-{state.step:09d}", root)  # a linked step folder is refused, never
    tmp = check_inside(root / f".tmp-step-{state.step:09d}", root)  # written through or deleted through
    try:
        _write_checkpoint(acc, model, optimizer, scheduler, tmp, state, fingerprint)
    except Exception as e:
        if acc.is_main_process:
            shutil.rmtree(tmp, ignore_errors=True)
        cause = _os_error(e)
        if cause is None:
            raise
        raise _checkpoint_write_error(root, state.step, cause) from e
    if acc.is_main_process:
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        _prune(root, state.step)
    acc.wait_for_everyone()


def _write_checkpoint(acc, model, optimizer, scheduler, tmp: Path, state: LoopState, fingerprint: str) -> None:
    from safetensors.torch import save_model

    if acc.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True, exist_ok=True)
    acc.wait_for_everyone()
    if acc.is_main_process:
        save_model(acc.unwrap_model(model), str(tmp / "model.safetensors"))  # drops tied duplicates, keeps one
        _save_tree(optimizer.state_dict(), tmp, "optimizer")
        if scheduler is not None:
            _save_tree(scheduler.state_dict(), tmp, "scheduler")
    _save_tree(_rng_state(acc.device), tmp, f"rng-{acc.process_index}")
    acc.wait_for_everyone()
    if acc.is_main_process:
        meta = {
            "format": CHECKPOINT_FORMAT,
            "fingerprint": fingerprint,
            "step": state.step,
            "processes": acc.num_processes,
            "files": {f.name: sha256_file(f) for f in sorted(tmp.iterdir()) if f.is_file()},
            "state": dataclasses.asdict(state),
        }
        meta["checksum"] = _meta_checksum(meta)
        atomic_write_json(tmp / META, meta, root=tmp)


def _prune(root: Path, step: int) -> None:
    """Keep checkpoint ``step`` (just written) and the newest older ones, KEEP_CHECKPOINTS in all; drop
    the rest, any newer one (a resumed run passed over it: damaged, or another run's) and unfinished
    folders."""
    older = [d for s, d in _checkpoints(root) if s < step]
    for d in older[KEEP_CHECKPOINTS - 1 :] + [d for s, d in _checkpoints(root) if s > step]:
        shutil.rmtree(d, ignore_errors=True)
    for d in root.glob(".tmp-step-*"):
        shutil.rmtree(d, ignore_errors=True)


def _os_error(e: BaseException) -> tuple[int, str] | None:
    """(errno, message) of an OS-level write failure: an OSError, or safetensors' SafetensorError, which
    carries the OS error only in its text ("... No space left on device (os error 28)")."""
    if isinstance(e, OSError) and e.errno:
        return e.errno, e.strerror or str(e)
    m = re.search(r"os error (\d+)", str(e))
    if m:
        return int(m.group(1)), os.strerror(int(m.group(1)))
    return None


def _checkpoint_write_error(root: Path, step: int, cause: tuple[int, str]) -> DataError:
    """What to do when checkpoint ``step`` could not be written under ``root``, and what is kept."""
    root = root.absolute()
    kept = [d for s, d in _checkpoints(root) if s < step and (d / META).is_file()]
    resume = f"it resumes from the last good checkpoint, {kept[0]}" if kept else "no earlier checkpoint was kept"
    code, text = cause
    if code in (errno.ENOSPC, errno.EDQUOT):
        return DataError(
            f"No space left on the device holding {root}: training checkpoint step {step} could not be written "
            f"(removed, nothing partial is left). Free space there (old run folders under the results' runs/, "
            f"embedding caches under $BENCHBENCH_CACHE or ~/.cache/benchbench) or choose another --output, then "
            f"run the same command: {resume}."
        )
    return DataError(
        f"Training checkpoint step {step} could not be written under {root}: {text} (errno {code}). Make that "
        f"folder writable or choose another --output, then run the same command: {resume}."
    )


def _load_checkpoint(acc, model, optimizer, scheduler, ckpt: Path) -> None:
    from safetensors.torch import load_model

    # strict: every weight comes back (tied duplicates, dropped at save, are restored through their tie)
    load_model(acc.unwrap_model(model), str(ckpt / "model.safetensors"), strict=True, device=str(acc.device))
    optimizer.load_state_dict(_load_tree(ckpt, "optimizer"))
    if scheduler is not None:
        scheduler.load_state_dict(_load_tree(ckpt, "scheduler"))
    _set_rng_state(_load_tree(ckpt, f"rng-{acc.process_index}"))


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
