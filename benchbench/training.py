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
* a checkpoint holds the model, optimizer, scheduler and every RNG state (``Accelerator.save_state``)
  plus the counters, written to a temporary folder and renamed into place only when complete.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .errors import ConfigError

log = logging.getLogger(__name__)

META = "benchbench_state.json"


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
    checkpoint_every: int = 1000  # optimizer steps; 0 = never
    max_grad_norm: float | None = None
    keep_checkpoints: bool = False  # keep the last checkpoint after a finished run
    log_every: int = 0  # 0: about 20 loss points per run


def resolve_steps(steps: int | None, n_items: int, batch_size: int, epochs: float = 1.0) -> int:
    """A step budget: the explicit one, or ``epochs`` passes over the corpus."""
    if steps is not None:
        if int(steps) < 1:
            raise ConfigError(f"option 'steps' must be >= 1 (got {steps}).")
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
            self._perm = np.random.default_rng([self.seed, epoch]).permutation(self.n) if self.shuffle else np.arange(self.n)
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
        groups.append(order[cut[j]:j])
        j = cut[j]
    return groups[::-1]


def make_accelerator(device: str | None, mixed_precision: str | None = None, grad_accum: int = 1):
    """An Accelerator for ``device`` (None: CUDA when present, else CPU). bf16 autocast on CUDA when
    the GPU supports it; full precision on CPU, where bf16 autocast is usually slower."""
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
    return Accelerator(cpu=cpu, mixed_precision=mixed_precision, gradient_accumulation_steps=grad_accum,
                       kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True),
                                        InitProcessGroupKwargs(timeout=timedelta(hours=12))])


def run_fingerprint(**parts: Any) -> str:
    """Identifies a run, so that a checkpoint is only resumed by the run that wrote it."""
    payload = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def method_fingerprint(method: Any, ctx: Any, items: Sequence[Any]) -> str:
    """The fingerprint of ``method`` (its name and full config) trained from ``ctx.model`` with
    ``ctx.seed`` on ``items``."""
    cfg = dataclasses.asdict(method.config) if dataclasses.is_dataclass(method.config) else repr(method.config)
    return run_fingerprint(method=getattr(method, "name", type(method).__name__), config=cfg,
                           model=getattr(ctx, "model", None), seed=getattr(ctx, "seed", None),
                           corpus=corpus_fingerprint(items))


def corpus_fingerprint(items: Sequence[Any]) -> str:
    h = hashlib.sha256()
    h.update(str(len(items)).encode())
    for it in items[:1000]:
        h.update(repr(it).encode() if not isinstance(it, str) else it.encode())
    return h.hexdigest()[:16]


def _latest_checkpoint(root: Path, fingerprint: str) -> Path | None:
    if not root.is_dir():
        return None
    best, best_step = None, -1
    for d in root.glob("step-*"):
        meta = d / META
        if not meta.is_file():
            continue
        try:
            m = json.loads(meta.read_text())
        except json.JSONDecodeError:
            continue
        if m.get("fingerprint") != fingerprint:
            log.warning("checkpoint %s belongs to another run (fingerprint %s != %s); not resuming from it",
                        d, m.get("fingerprint"), fingerprint)
            continue
        if m["step"] > best_step:
            best, best_step = d, m["step"]
    return best


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


def train_loop(objective: Objective, items: Sequence[Any], ctx, loop: LoopConfig,
               make_optimizer: Callable[[torch.nn.Module], torch.optim.Optimizer],
               make_scheduler: Callable[[torch.optim.Optimizer], Any] | None = None,
               fingerprint: str | None = None, on_step: Callable[[LoopState], None] | None = None,
               desc: str = "train") -> torch.nn.Module:
    """Optimise ``objective`` on ``items`` for ``loop.steps`` updates and return it unwrapped (on
    the CPU). ``ctx`` is the method's TrainContext: device, seed, progress, checkpoint_dir, and the
    ``accounting`` dict this fills. ``fingerprint`` names the run for resume (default: from the
    objective's class, the loop config, the seed and the corpus)."""
    from tqdm.auto import tqdm

    if loop.steps < 1 or loop.batch_size < 1 or loop.grad_accum < 1:
        raise ConfigError(f"training budget must be positive: steps={loop.steps}, batch_size={loop.batch_size}, "
                          f"grad_accum={loop.grad_accum}.")
    acc = make_accelerator(getattr(ctx, "device", None), grad_accum=loop.grad_accum)
    seed = int(getattr(ctx, "seed", 0))
    fingerprint = fingerprint or run_fingerprint(objective=type(objective).__qualname__, loop=dataclasses.asdict(loop),
                                                 seed=seed, corpus=corpus_fingerprint(items))
    optimizer = make_optimizer(objective)
    scheduler = make_scheduler(optimizer) if make_scheduler else None
    model, optimizer = acc.prepare(objective, optimizer)
    if scheduler is not None:
        # stepped by hand once per optimizer step (an Accelerate-prepared scheduler steps once per
        # process, which would run schedules defined in optimizer steps too fast under DDP)
        acc.register_for_checkpointing(scheduler)

    state = LoopState()
    ckpt_root = Path(ctx.checkpoint_dir)
    latest = _latest_checkpoint(ckpt_root, fingerprint)
    if latest is not None:
        acc.load_state(str(latest))
        saved = json.loads((latest / META).read_text())
        state = LoopState(**{k: v for k, v in saved["state"].items() if k in {f.name for f in dataclasses.fields(LoopState)}})
        state.resumed_from.append(state.step)
        log.info("resuming %s from %s (step %d)", desc, latest, state.step)

    stream = ItemStream(len(items), seed)
    world, rank = acc.num_processes, acc.process_index
    log_every = loop.log_every or max(1, loop.steps // 20)
    bar = tqdm(total=loop.steps, initial=state.step, desc=desc, unit="step", dynamic_ncols=True,
               disable=not (getattr(ctx, "progress", True) and acc.is_local_main_process))
    window: list[float] = []
    monitor, monitor_every = getattr(ctx, "monitor", None), int(getattr(ctx, "monitor_every", 0) or 0)
    if monitor is not None and monitor_every < 1:
        raise ConfigError(f"{desc}: a training monitor needs monitor_every >= 1 (got {monitor_every}).")
    if monitor is not None and acc.unwrap_model(model).result() is None:  # before any step, on every process
        raise ConfigError(f"{desc}: this method has no encoder to monitor during training "
                          f"({type(acc.unwrap_model(model)).__name__}.result() is None).")
    model.train()
    t_start = time.perf_counter()
    seconds_before, paused = state.seconds, 0.0
    while state.step < loop.steps:
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
                raise FloatingPointError(f"{desc}: loss became {loss.item()} at step {state.step}; lower the learning rate.")
            step_loss += float(loss.detach()) / loop.grad_accum
            state.micro += 1
            state.items += len(drawn) * world
            state.tokens += n_tokens * world
        if scheduler is not None:
            scheduler.step()
        state.step += 1
        window.append(step_loss)
        bar.update(1)
        if state.step % log_every == 0 or state.step == loop.steps:
            state.losses.append([state.step, round(sum(window) / len(window), 5)])
            bar.set_postfix(loss=f"{state.losses[-1][1]:.4f}")
            window = []
        if monitor is not None and (state.step % monitor_every == 0 or state.step == loop.steps):
            t_mon = time.perf_counter()
            _run_monitor(monitor, acc, model, state)
            paused += time.perf_counter() - t_mon
        state.seconds = seconds_before + time.perf_counter() - t_start - paused
        if loop.checkpoint_every and state.step % loop.checkpoint_every == 0 and state.step < loop.steps:
            _save_checkpoint(acc, ckpt_root, state, fingerprint)
        if on_step is not None:
            on_step(state)
    bar.close()
    acc.wait_for_everyone()
    if not loop.keep_checkpoints and acc.is_main_process and ckpt_root.is_dir():
        for d in ckpt_root.glob("step-*"):
            shutil.rmtree(d, ignore_errors=True)
    _account(ctx, acc, state, loop)
    unwrapped = acc.unwrap_model(model)
    acc.free_memory()
    return unwrapped.to("cpu").eval()


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


def _save_checkpoint(acc, root: Path, state: LoopState, fingerprint: str) -> None:
    """Write ``step-N`` atomically (temporary folder, then rename) and drop older ones."""
    final = root / f"step-{state.step:09d}"
    tmp = root / f".tmp-step-{state.step:09d}"
    if acc.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True, exist_ok=True)
    acc.wait_for_everyone()
    # safetensors refuses tensors that share storage (tied encoder/decoder weights): use torch.save
    acc.save_state(str(tmp), safe_serialization=False)
    if acc.is_main_process:
        (tmp / META).write_text(json.dumps({"fingerprint": fingerprint, "step": state.step,
                                            "state": dataclasses.asdict(state)}))
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        for d in root.glob("step-*"):
            if d != final:
                shutil.rmtree(d, ignore_errors=True)
    acc.wait_for_everyone()


def _account(ctx, acc, state: LoopState, loop: LoopConfig) -> None:
    a = getattr(ctx, "accounting", None)
    if a is None:
        return
    dev = acc.device
    label = f"cuda:{torch.cuda.get_device_name(dev)}" if dev.type == "cuda" else "cpu"
    a.update({"seconds": round(state.seconds, 3), "steps": state.step, "examples": state.items,
              "tokens": state.tokens, "batch_size": loop.batch_size, "grad_accum": loop.grad_accum,
              "processes": acc.num_processes, "device": label, "mixed_precision": str(acc.mixed_precision),
              "steps_per_second": round(state.step / state.seconds, 4) if state.seconds else None,
              "loss_curve": state.losses, "resumed_from_steps": state.resumed_from})
    if state.monitor:
        a["monitor"] = state.monitor
