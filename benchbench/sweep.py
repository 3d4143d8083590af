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
import json
import os
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError
from .setups import parse_setup, setup_string


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
    from .runner import RunOptions
    from .runner import run as run_fn

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
    from .runner import RunOptions

    names = {f.name for f in dataclasses.fields(RunOptions)}
    unknown = set(kw) - names
    if unknown:
        raise ConfigError(f"sweep options {sorted(unknown)} are not run options.")
    return {k: v for k, v in kw.items() if v is not None}


# ---- command line: `benchbench sweep`, `benchbench analyze pos`, `benchbench labelling-work` -----------


def _csv(text: str | None) -> list[str]:
    return [x.strip() for x in (text or "").split(",") if x.strip()]


def add_subcommands(sub: Any) -> None:
    """Registers the subcommands on cli.py's parser (each sets ``func``)."""
    from .setups import parse_sizes

    s = sub.add_parser("sweep", help="methods x tasks x seeds x setups x sizes as Ray tasks (resumable)")
    s.add_argument("--methods", required=True)
    s.add_argument("--tasks", required=True)
    s.add_argument("--seeds", default="1", help="comma list or range, e.g. 1-5")
    s.add_argument("--setups", default="unsupervised", help="comma list of --setup values")
    s.add_argument("--corpus-sizes", default=None, help="e.g. 128,256,...,65536: unsupervised@corpus=N (Figure 3)")
    s.add_argument("--labelled-sizes", default=None, help="e.g. 500,1000: in-domain labelled pairs (Figure 2)")
    s.add_argument("--model", default=None)
    s.add_argument("--output", default="results")
    s.add_argument("--data-dir", default=None)
    s.add_argument("--device", default=None)
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    s.add_argument("--executor", default="ray", choices=["ray", "local"])
    s.add_argument("--address", default=None, help="Ray cluster address (default: a local Ray)")
    s.add_argument("--workers", type=int, default=None, help="local Ray: CPUs to use (default: all)")
    s.add_argument("--cpus-per-run", type=float, default=1.0)
    s.add_argument("--gpus-per-run", type=float, default=0.0)
    s.add_argument(
        "--store-items", action="store_true", help="per-item scores beside each record (benchbench significance)"
    )

    def cmd_sweep(args) -> int:
        from .cli import _parse_seeds, _parse_set

        runs = expand(
            _csv(args.methods),
            _csv(args.tasks),
            _parse_seeds(args.seeds),
            _csv(args.setups),
            parse_sizes(args.corpus_sizes),
            parse_sizes(args.labelled_sizes),
        )
        base = base_options(
            model=args.model,
            output=args.output,
            data_dir=args.data_dir,
            device=args.device,
            overrides=_parse_set(args.set),
            progress=False,
            store_items=args.store_items or None,
        )
        out = run_sweep(runs, base, args.executor, args.address, args.workers, args.cpus_per_run, args.gpus_per_run)
        for o in out:
            line = f"{o.status:8s} {o.run.label} " + " ".join(
                f"{t}={v:.2f}" for t, v in o.scores.items() if v is not None
            )
            print(line if o.status != "failed" else f"{line}\n         {o.error.splitlines()[0]}")
        failed = sum(o.status == "failed" for o in out)
        print(f"{len(out)} runs: {len(out) - failed} ok, {failed} failed; results in {args.output}/")
        return 1 if failed else 0

    s.set_defaults(func=cmd_sweep)

    a = sub.add_parser("analyze", help="analyses of trained encoders")
    asub = a.add_subparsers(dest="analysis", required=True)
    p = asub.add_parser("pos", help="POS of the word whose deletion lowers a relevant pair's cosine most (TSDAE §7.2)")
    p.add_argument(
        "--encoders", required=True, help="comma list NAME=PATH_OR_MODEL (saved encoder folders or model names)"
    )
    p.add_argument("--tasks", default="twitterpara,cqadupstack")
    p.add_argument("--tagger", default="spacy", help="a registered tagger: spacy (offline wheel) or stanza")
    p.add_argument("--max-pairs", type=int, default=None, help="sample this many relevant pairs per task (by --seed)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--output", default="leaderboards/setups/pos")

    def cmd_pos(args) -> int:
        from pathlib import Path

        from .analysis import pos
        from .data import DataStore
        from .encoding import Embedder, EmbeddingCache, default_cache_dir
        from .models import load_encoder
        from .registry import get_registry
        from .runner import make_adapter

        reg = get_registry()
        data = DataStore(args.data_dir)
        datasets = {
            t: pos.relevant_pairs(make_adapter(reg, t, data), "test", args.max_pairs, args.seed)
            for t in _csv(args.tasks)
        }
        cache = EmbeddingCache(default_cache_dir())
        embedders = {}
        for item in _csv(args.encoders):
            name, _, path = item.partition("=")
            embedders[name] = Embedder(load_encoder(path or name), cache=cache, progress=False)
        out = Path(args.output)
        res = pos.analyze(embedders, datasets, pos.get_tagger(reg, args.tagger), cache_dir=out / "tags")
        out.mkdir(parents=True, exist_ok=True)
        (out / "pos.json").write_text(
            json.dumps(
                {
                    "result": res,
                    "tagger": args.tagger,
                    "pairs": {k: len(v) for k, v in datasets.items()},
                    "encoders": _csv(args.encoders),
                    "seed": args.seed,
                },
                indent=1,
            )
        )
        (out / "pos.md").write_text(pos.markdown(res))
        for ds in res:
            pos.bar_plot(res, out / f"pos-{ds}.png", ds)
        print(pos.markdown(res))
        return 0

    p.set_defaults(func=cmd_pos)

    lw = sub.add_parser(
        "labelling-work", help="smallest labelled set whose supervised model matches a score (Table 10)"
    )
    lw.add_argument("--task", required=True)
    lw.add_argument("--target", type=float, required=True, help="the unsupervised method's main score to match")
    lw.add_argument("--lo", type=int, default=100)
    lw.add_argument("--hi", type=int, default=65536)
    lw.add_argument("--tolerance", type=int, default=100)
    lw.add_argument("--model", default=None)
    lw.add_argument("--seed", type=int, default=1)
    lw.add_argument("--output", default="results")
    lw.add_argument("--data-dir", default=None)

    def cmd_lw(args) -> int:
        from .runner import RunOptions
        from .runner import run as run_fn
        from .setups import equivalent_labelling_work, setup_string

        def score_at(n: int) -> float:  # one stored supervised@labelled=n run per point (resumable)
            rep = run_fn(
                RunOptions(
                    method="sbert",
                    tasks=args.task,
                    model=args.model,
                    seeds=[args.seed],
                    setup=setup_string("supervised", labelled=n),
                    output=args.output,
                    data_dir=args.data_dir,
                    progress=False,
                )
            )
            return float(rep.records[0]["splits"]["test"]["main_score"])

        n, seen = equivalent_labelling_work(score_at, args.target, args.lo, args.hi, args.tolerance)
        print(
            "| labelled pairs | score |\n|---|---|\n" + "\n".join(f"| {k} | {v:.2f} |" for k, v in sorted(seen.items()))
        )
        print(
            f"equivalent labelling work for {args.target:.2f} on {args.task}: "
            + (f"{n} labelled pairs" if n else f"not reached with {args.hi} pairs")
        )
        return 0

    lw.set_defaults(func=cmd_lw)
