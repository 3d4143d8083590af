"""What a study will cost on the machine at hand, from a short measured probe (``study run --estimate``).

A study file states the wall time it expects (``[cost] cpu_hours``); this module measures it instead of
trusting it. The probe runs real cells through the runner, into a scratch folder, with the embedding
cache off (a cached start would make evaluation look free):
- each task is scored once by the study's first training-free row (the start): evaluation seconds;
- each training method trains ``PROBE_STEPS`` steps at the study's batch size on the first task: training
  seconds per step (model loading and the first, slowest steps included, so the projection errs high).
The projection adds, per cell, steps x seconds-per-step, the task's evaluation and, with [curves], one
evaluation of the curve's split per curve point; with ``train_task`` a row trains once per seed for
all its columns, so its training is counted once. A cell that trains nothing (the start, a step-0 row) is
counted once per task, not per seed: the embedding cache serves the other seeds of a seed-invariant encoder. A method whose budget is not counted in steps (its
options lack ``steps``) is not probed and the estimate says so rather than guessing.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from benchbench.run.study import Study, plan

PROBE_STEPS = 4


@dataclass
class Estimate:
    study: str
    seconds_per_step: dict[str, float] = field(default_factory=dict)  # method -> training s/step (probe)
    eval_seconds: dict[str, float] = field(default_factory=dict)  # task -> s to score it once
    unprobed: list[str] = field(default_factory=list)  # methods whose budget is not in steps
    cells: int = 0
    projected_seconds: float = 0.0
    probe_seconds: float = 0.0

    def lines(self, declared_hours: float = 0.0) -> list[str]:
        out = [f"study {self.study}: {self.cells} cells; probe took {self.probe_seconds:.0f} s on this machine"]
        out += [f"  train {m}: {s:.2f} s/step" for m, s in sorted(self.seconds_per_step.items())]
        out += [f"  evaluate {t}: {s:.1f} s" for t, s in sorted(self.eval_seconds.items())]
        if self.unprobed:
            out.append(f"  not estimated (budget not in steps): {', '.join(self.unprobed)}")
        hours = self.projected_seconds / 3600
        out.append(
            f"projected: {hours:.2f} h of wall time"
            + (" plus the unprobed methods' cells" if self.unprobed else "")
            + (f" (the study file expects {declared_hours:g} h)" if declared_hours else "")
        )
        return out


def _seconds(report: Any, key: str) -> float:
    recs = [r for r in report.records if r]
    if not recs:
        raise RuntimeError(f"the probe stored no record ({key})")
    if key == "train":
        return float((recs[0].get("train") or {}).get("seconds") or 0.0)
    return float(recs[0].get("eval_seconds") or 0.0)


def estimate(study: Study, tasks: Sequence[str], methods: Sequence[str], seeds: Sequence[int], **base: Any) -> Estimate:
    """Probe and project the cost of ``study``'s cells on ``tasks`` x ``methods`` x ``seeds`` (``base``:
    RunOptions fields shared by the probe's runs, e.g. ``data_dir``)."""
    from benchbench.core.registry import get_registry
    from benchbench.run.runner import RunOptions
    from benchbench.run.runner import run as run_cells

    reg = get_registry()
    cells = [c for c in plan(study, tasks, seeds) if c.method in methods]
    est = Estimate(study.name, cells=len(cells))
    start = time.perf_counter()
    free = study.start or next((m for m in study.methods if not reg.method(m).trains), "")
    with tempfile.TemporaryDirectory(prefix="benchbench-estimate-") as tmp:

        def one(method: str, task: str, overrides: dict[str, str], tag: str) -> Any:
            trains = reg.method(method).trains and study.train_task
            opts = RunOptions(
                train_task=study.train_task if trains else None,
                method=method,
                tasks=task,
                seeds=[seeds[0]],
                model=study.model,
                output=f"{tmp}/{tag}",
                no_cache=True,
                progress=False,
                overrides=overrides,
                **base,
            )
            return run_cells(opts)

        for t in dict.fromkeys([*tasks, *(study.curve_for(t)[0] or t for t in tasks)]):
            if free:
                est.eval_seconds[t] = _seconds(one(free, t, study.overrides(free), f"eval-{t}"), "eval")
        for m in dict.fromkeys(c.method for c in cells):
            cls = reg.method(m)
            if m == free or not cls.trains:
                continue
            opts = study.overrides(m)
            if "steps" not in opts:
                est.unprobed.append(m)
                continue
            rep = one(m, tasks[0], {**opts, "steps": str(PROBE_STEPS)}, f"train-{m}")
            est.seconds_per_step[m] = _seconds(rep, "train") / PROBE_STEPS
    est.probe_seconds = time.perf_counter() - start
    trained: set[tuple[str, int, str]] = set()  # with train_task, one training per (row, seed) serves every column
    untrained: set[tuple[str, str, str]] = set()  # (row, options, task) of the cells that train nothing
    for c in cells:
        per_step = est.seconds_per_step.get(c.method)
        steps = int(c.options["overrides"].get("steps", 0) or 0)
        row = (c.method, repr(sorted(c.options["overrides"].items())))
        if per_step is None or not steps:
            # the start and the step-0 rows: seeds other than the first are served by the embedding cache
            # (keyed on the weights) when the untrained encoder does not depend on the seed. A step-0 head
            # initialised per seed does, and is then counted low; the start's rows never are.
            if (*row, c.task) in untrained:
                continue
            untrained.add((*row, c.task))
        total = est.eval_seconds.get(c.task, 0.0)
        once = (c.method, c.seed, row[1])
        if study.train_task and once in trained:
            per_step = None
        trained.add(once)
        if per_step is not None and steps:
            total += per_step * steps
            every = int(c.options.get("eval_every") or 0)
            if every:
                on = c.options.get("eval_task") or c.task
                total += (steps // every + 1) * est.eval_seconds.get(on, 0.0)
        est.projected_seconds += total
    return est
