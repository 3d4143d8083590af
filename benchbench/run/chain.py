"""One method's training as the start of another's: ``train_method(name, ctx, overrides)``.

Why: some methods start from an encoder that another unsupervised method trained (Trans-Encoder
starts from a SimCSE or TSDAE bi-encoder). Training that start inside the second method would
duplicate the runner's bookkeeping, so the start is trained exactly as ``benchbench run --method
NAME`` would train it -- the runner's own train-or-reuse (``train/reuse.py``), on that
method's corpus for the same task, with the same seed and base model, into the same run folder
under the same output directory. Hence a start trained by an earlier ``benchbench run`` (or an
earlier chained run) is reused from disk, and a start trained here is reused by a later ``benchbench
run --method NAME`` with the same config.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchbench.core.errors import ConfigError
from benchbench.core.methods import build_config, config_hash, provenance_of
from benchbench.store.files import is_complete
from benchbench.train.context import TrainContext


@dataclass
class TrainedMethod:
    """A method trained (or reused) by ``train_method``: where its encoder is saved and what it is."""

    method: str
    config_hash: str
    config: dict[str, Any]
    model: str  # the base model label of its result key
    path: Path  # the saved encoder folder (``load_encoder(str(path))`` reads it)
    reused: bool  # True: found complete on disk, not trained by this call
    info: dict[str, Any] = field(default_factory=dict)  # the training accounting (steps, seconds, corpus...)

    def describe(self) -> dict[str, Any]:
        """What a record keeps about this start (JSON-ready)."""
        return {
            "method": self.method,
            "config_hash": self.config_hash,
            "config": self.config,
            "model": self.model,
            "path": _store_relative(self.path),  # under the result store: a record names no machine path
            "reused": self.reused,
            "train_seconds": self.info.get("seconds"),
            "steps": self.info.get("steps"),
        }


def _store_relative(path: Path) -> str:
    """``runs/<method>/...`` for a folder under a result store's ``runs/`` (:func:`output_root`); else
    the folder's name."""
    p = Path(path)
    root = output_root(p)
    return p.name if root == p else p.relative_to(root).as_posix()


def output_root(run_dir: Path | str | None) -> Path:
    """The result store a run folder belongs to: run folders live at ``<output>/runs/<method>/<model>/
    <setup>/<config hash>/seed<N>/train-<data>``, so the nearest ``runs`` ancestor's parent. A folder
    outside that layout (a method called directly, not by the runner) is its own root."""
    if run_dir is None:
        raise ConfigError("train_method: the calling method's ctx.output_dir is None; run it through the runner.")
    p = Path(run_dir)
    for anc in p.parents:
        if anc.name == "runs":
            return anc.parent
    return p


def _curve_of(ctx: TrainContext, task: str) -> dict[str, Any]:
    """The caller's learning curve (a study cell's --eval-every) when on the same task: the method then
    trains exactly as its own cell would, so the cell that later reuses this encoder keeps its curve."""
    if task != ctx.task:
        return {}
    return {"monitor": ctx.monitor, "monitor_every": ctx.monitor_every, "monitor_start": ctx.monitor_start}


def train_method(
    name: str, ctx: TrainContext, overrides: dict[str, Any] | None = None, *, task: str | None = None
) -> TrainedMethod:
    """Train the registered method ``name`` (config: its defaults with ``overrides``, as ``--set``)
    on its own corpus for ``task`` (default ``ctx.task``) with ``ctx.seed`` and ``ctx.model``, or
    reuse the encoder a previous run of the same method/config/model/seed stored under the same
    output directory; returns where the encoder is saved. Raises ``ConfigError`` for a method that
    trains nothing or saves no encoder, ``UnknownNameError`` for an unknown name."""
    from benchbench.core.registry import get_registry, make_adapter
    from benchbench.encode.models import model_label_of
    from benchbench.encode.sizes import resolve_for_model
    from benchbench.run.energy import Meter
    from benchbench.run.runner import process_rank
    from benchbench.store.data import DataStore
    from benchbench.store.results import ResultKey
    from benchbench.train.reuse import train_or_reuse, training_folder

    reg = ctx.registry or get_registry()
    method_cls = reg.method(name)
    if not getattr(method_cls, "trains", True) or getattr(method_cls, "fixed_model", None):
        raise ConfigError(
            f"train_method: method {name!r} trains no encoder from a base model (a training-free baseline); "
            "choose a method that trains one."
        )
    task = task or ctx.task
    if not task:
        raise ConfigError(f"train_method: no task to train {name!r} on (ctx.task is None and no task= given).")
    model = ctx.model or method_cls.default_model or ""
    config = resolve_for_model(method_cls, build_config(method_cls, dict(overrides or {})), model)
    chash = config_hash(config)
    label = model_label_of(model) if model else "-"
    root = output_root(ctx.output_dir)
    data = ctx.data if ctx.data is not None else DataStore(None)
    adapter = make_adapter(reg, task, data)
    # the folder ``benchbench run --method NAME --setup unsupervised`` trains in (runner._run)
    seed_dir = training_folder(root, ResultKey(name, chash, label, "unsupervised", ctx.seed, task))
    sub = TrainContext(
        model=model,
        seed=ctx.seed,
        output_dir=root,
        task=task,
        device=ctx.device,
        data=data,
        registry=reg,
        progress=ctx.progress,
        logger=ctx.logger,
        **_curve_of(ctx, task),
    )
    plugin = reg.owner.get(("methods", name), "?")
    rank, _ = process_rank()
    method = method_cls(config)
    _, info = train_or_reuse(
        method,
        adapter,
        sub,
        plugin,
        seed_dir,
        False,
        {},
        main=rank == 0,
        provenance=provenance_of(method),
        meter=Meter,
        root=root,
    )
    path = Path(sub.output_dir) / "encoder"  # train_or_reuse points sub.output_dir at its run folder
    if rank == 0 and not is_complete(path):
        raise ConfigError(
            f"train_method: method {name!r} (plugin {plugin!r}) returned an encoder without save(); "
            "it cannot be the start of another method."
        )
    return TrainedMethod(
        name,
        chash,
        dataclasses.asdict(config),
        label,
        path,
        bool(info.get("reused_from_disk")),
        {k: v for k, v in info.items() if k != "reused_from_disk"},
    )


__all__ = ["TrainedMethod", "output_root", "train_method"]
