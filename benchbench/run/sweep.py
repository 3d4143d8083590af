"""``benchbench sweep``: methods x tasks x seeds x setups x sizes, each run a Ray task.

Ray (an existing distributed engine) schedules the runs: local Ray by default (``ray.init`` with
``--workers`` CPUs), a cluster with ``--address``. Each run is one ``runner.run`` call for ONE
(method, task, seed, setup) with its resources (``--cpus-per-run``, ``--gpus-per-run``), writing to
the SAME result store as a sequential run -- so a sweep is resumable (a stored key is skipped by the
runner itself, under its key lock) and its records are those of running the runs one by one. A run
that fails is reported with its error; the others go on.

Ray is an optional extra (``pip install 'benchbench[sweep]'``), imported only when a sweep runs on
it; ``executor="local"`` runs the same expansion in this process, one run after another.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from benchbench.core.errors import ConfigError
from benchbench.train.setups import parse_setup, setup_string


@dataclass
class SweepRun:
    """One cell of the sweep: the runner options of a single (method, task, seed, setup) run."""

    method: str
    task: str
    seed: int
    setup: str
    # RunOptions fields of this run alone, over the sweep's shared ``base`` (``benchbench reproduce``:
    # each paper row has its own ``--set`` options and scoring)
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.method}/{self.task}/seed{self.seed}/{self.setup}"


@dataclass
class Outcome:
    run: SweepRun
    status: str  # "done" | "skipped" (already stored) | "failed" | "nothing" (no data/split)
    scores: dict[str, float] = field(default_factory=dict)  # task -> main score of the stored record
    error: str | None = None


def expand(
    methods: Sequence[str],
    tasks: Sequence[str],
    seeds: Sequence[int],
    setups: Sequence[str],
    corpus_sizes: Sequence[int | None] = (None,),
    labelled_sizes: Sequence[int | None] = (None,),
) -> list[SweepRun]:
    """The cross product, sizes folded into the setup string (``unsupervised@corpus=1024``; a size
    is applied only to setups with the matching stage; a setup given with its own ``@`` sizes is
    kept as written). Order: setup, size, method, task, seed (deterministic)."""
    out: list[SweepRun] = []
    for st in setups:
        base = parse_setup(st)
        if "@" in st:
            variants = [st]
        else:
            cs = corpus_sizes if "target" in base.stages else [None]
            ls = labelled_sizes if "in-domain" in base.stages else [None]
            variants = [setup_string(base.name, c, n) for c, n in itertools.product(cs, ls)]
        for v, m, t, s in itertools.product(variants, methods, tasks, seeds):
            out.append(SweepRun(m, t, int(s), v))
    return [SweepRun(*k) for k in dict.fromkeys((r.method, r.task, r.seed, r.setup) for r in out)]  # de-duplicated


def run_one(run: SweepRun, base: dict[str, Any], env: dict[str, str] | None = None) -> Outcome:
    """Execute one run with the runner (in a Ray worker or here); never raises: a failure is an Outcome."""
    for k, v in (env or {}).items():
        os.environ[k] = v
    from benchbench.run.runner import RunOptions
    from benchbench.run.runner import run as run_fn

    try:
        opts = RunOptions(
            **{**base, **run.options, "method": run.method, "tasks": run.task, "seeds": [run.seed], "setup": run.setup}
        )
        rep = run_fn(opts)
        scores = {
            r["task"]: next((s.get("main_score") for s in r.get("splits", {}).values()), None) for r in rep.records
        }
        status = (
            "skipped"
            if rep.skipped and len(rep.skipped) == len(rep.records)
            else ("done" if rep.records else "nothing")
        )
        return Outcome(run, status, scores)
    except Exception as e:
        return Outcome(run, "failed", error=f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}")


def _forwarded_env() -> dict[str, str]:
    """Environment the workers need to see the same data, tasks, plugins and caches as this process."""
    keep = ("BENCHBENCH_", "HF_", "TRANSFORMERS_", "OMP_NUM_THREADS", "PYTHONPATH")
    return {k: v for k, v in os.environ.items() if k.startswith(keep)}


def run_sweep(
    runs: Sequence[SweepRun],
    base: dict[str, Any],
    executor: str = "ray",
    address: str | None = None,
    workers: int | None = None,
    cpus_per_run: float = 1.0,
    gpus_per_run: float = 0.0,
) -> list[Outcome]:
    """Run every cell; ``base`` holds the shared ``RunOptions`` fields (output, data_dir, model,
    overrides, ...); a run's own ``options`` replace them for that run. ``executor="ray"``: one Ray
    task per run with ``num_cpus=cpus_per_run`` and ``num_gpus=gpus_per_run``; local Ray with
    ``workers`` CPUs unless ``address`` names a cluster. Outcomes come back in the order of ``runs``."""
    bad = (set(base) | {k for r in runs for k in r.options}) & {"method", "tasks", "seeds", "setup"}
    if bad:
        raise ConfigError(f"run_sweep: {sorted(bad)} are sweep axes, not shared or per-run options.")
    env = _forwarded_env()
    if executor == "local":
        return [run_one(r, base, env) for r in runs]
    if executor != "ray":
        raise ConfigError(f"sweep executor {executor!r}: choose 'ray' or 'local'.")
    try:
        import ray
    except ImportError as e:
        raise ConfigError(
            "benchbench sweep needs Ray: pip install 'benchbench[sweep]' (or pip install ray), "
            "or pass --executor local to run the cells one by one."
        ) from e
    started = False
    if not ray.is_initialized():
        kw: dict[str, Any] = {"runtime_env": {"env_vars": env}, "include_dashboard": False, "log_to_driver": False}
        if address:
            ray.init(address=address, **kw)
        else:
            ray.init(num_cpus=workers or os.cpu_count() or 1, num_gpus=0 if not gpus_per_run else None, **kw)
        started = True
    try:
        task = ray.remote(num_cpus=cpus_per_run, num_gpus=gpus_per_run, max_retries=0)(run_one)
        refs = [task.remote(r, base, env) for r in runs]
        out: list[Outcome] = []
        for r, ref in zip(runs, refs, strict=True):
            try:
                out.append(ray.get(ref))
            except Exception as e:
                out.append(Outcome(r, "failed", error=f"ray: {type(e).__name__}: {e}"))
        return out
    finally:
        if started:
            ray.shutdown()


def base_options(**kw: Any) -> dict[str, Any]:
    """Shared RunOptions fields for a sweep, validated against RunOptions (unknown names are errors)."""
    from benchbench.run.runner import RunOptions

    names = {f.name for f in dataclasses.fields(RunOptions)}
    unknown = set(kw) - names
    if unknown:
        raise ConfigError(f"sweep options {sorted(unknown)} are not run options.")
    return {k: v for k, v in kw.items() if v is not None}


# ---- command line: `benchbench sweep`, `benchbench analyze pos`, `benchbench labelling-work` -----------
