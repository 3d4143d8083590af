"""``benchbench sweep``, ``analyze pos`` and ``labelling-work``: the commands over sets of runs."""

from __future__ import annotations

import json
from typing import Any

from benchbench.core.hookspecs import hookimpl
from benchbench.run.sweep import base_options, expand, run_sweep


def _csv(text: str | None) -> list[str]:
    return [x.strip() for x in (text or "").split(",") if x.strip()]


@hookimpl
def benchbench_register_commands(register: Any) -> None:
    """``sweep``, ``analyze pos`` and ``labelling-work`` on benchbench's parser."""
    _add_sweep(register)
    _add_analyze(register)
    _add_labelling_work(register)


def _add_sweep(register: Any) -> None:
    s = register("sweep", help="methods x tasks x seeds x setups x sizes as Ray tasks (resumable)")
    s.add_argument("--methods", required=True)
    s.add_argument("--tasks", required=True)
    from benchbench.cli.main import _parse_seeds

    s.add_argument("--seeds", type=_parse_seeds, default="1", help="comma list or ranges, e.g. 1-5 or 1,3,5-7")
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
    from benchbench.cli.main import _add_encode_arguments, _add_train_precision_argument

    _add_encode_arguments(s)
    _add_train_precision_argument(s)
    s.set_defaults(func=cmd_sweep)


def _add_analyze(register: Any) -> None:
    a = register("analyze", help="analyses of trained encoders")
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
    p.set_defaults(func=cmd_pos)


def _add_labelling_work(register: Any) -> None:
    lw = register("labelling-work", help="smallest labelled set whose supervised model matches a score (Table 10)")
    lw.add_argument("--task", required=True)
    lw.add_argument("--target", type=float, required=True, help="the unsupervised method's main score to match")
    lw.add_argument("--lo", type=int, default=100)
    lw.add_argument("--hi", type=int, default=65536)
    lw.add_argument("--tolerance", type=int, default=100)
    lw.add_argument("--model", default=None)
    lw.add_argument("--seed", type=int, default=1)
    lw.add_argument("--output", default="results")
    lw.add_argument("--data-dir", default=None)
    lw.set_defaults(func=cmd_lw)


def cmd_sweep(args) -> int:
    from benchbench.cli.main import _parse_set, encode_options, train_options
    from benchbench.train.setups import parse_sizes

    runs = expand(
        _csv(args.methods),
        _csv(args.tasks),
        args.seeds,
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
        **encode_options(args),
        **train_options(args),
    )
    out = run_sweep(runs, base, args.executor, args.address, args.workers, args.cpus_per_run, args.gpus_per_run)
    for o in out:
        line = f"{o.status:8s} {o.run.label} " + " ".join(f"{t}={v:.2f}" for t, v in o.scores.items() if v is not None)
        print(line if o.status != "failed" else f"{line}\n         {o.error.splitlines()[0]}")
    failed = sum(o.status == "failed" for o in out)
    print(f"{len(out)} runs: {len(out) - failed} ok, {failed} failed; results in {args.output}/")
    return 1 if failed else 0


def cmd_pos(args) -> int:
    from pathlib import Path

    from benchbench.core.registry import get_registry, make_adapter
    from benchbench.encode.cache import EmbeddingCache, default_cache_dir
    from benchbench.encode.encoding import Embedder
    from benchbench.encode.models import load_encoder
    from benchbench.evaluate.analysis import pos
    from benchbench.store.data import DataStore

    reg = get_registry()
    data = DataStore(args.data_dir)
    datasets = {
        t: pos.relevant_pairs(make_adapter(reg, t, data), "test", args.max_pairs, args.seed) for t in _csv(args.tasks)
    }
    cache = EmbeddingCache(default_cache_dir())
    embedders = {}
    for item in _csv(args.encoders):
        name, _, path = item.partition("=")
        embedders[name] = Embedder(load_encoder(path or name), cache=cache, progress=False)
    out = Path(args.output)
    res = pos.analyze(embedders, datasets, pos.get_tagger(reg, args.tagger), cache_dir=out / "tags")
    from benchbench.store.files import atomic_write_text

    atomic_write_text(  # --output is the root: never written through a link in it
        out / "pos.json",
        json.dumps(
            {
                "result": res,
                "tagger": args.tagger,
                "pairs": {k: len(v) for k, v in datasets.items()},
                "encoders": _csv(args.encoders),
                "seed": args.seed,
            },
            indent=1,
        ),
        root=out,
    )
    atomic_write_text(out / "pos.md", pos.markdown(res), root=out)
    for ds in res:
        pos.bar_plot(res, out / f"pos-{ds}.png", ds)
    print(pos.markdown(res))
    return 0


def cmd_lw(args) -> int:
    from benchbench.run.runner import RunOptions
    from benchbench.run.runner import run as run_fn
    from benchbench.train.setups import equivalent_labelling_work, setup_string

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
    print("| labelled pairs | score |\n|---|---|\n" + "\n".join(f"| {k} | {v:.2f} |" for k, v in sorted(seen.items())))
    print(
        f"equivalent labelling work for {args.target:.2f} on {args.task}: "
        + (f"{n} labelled pairs" if n else f"not reached with {args.hi} pairs")
    )
    return 0
