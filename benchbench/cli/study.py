"""``benchbench study list | run | report NAME``: declared, controlled comparisons (the files and running:
``run/study.py``; the table and its statistics: ``report/study_view.py``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from benchbench.core.hookspecs import hookimpl


@hookimpl
def benchbench_register_commands(register: Any) -> None:
    s = register("study", help="declared comparisons: one base model, one budget, >= 5 seeds (list | run | report)")
    sub = s.add_subparsers(dest="study_cmd", required=True)
    sub.add_parser("list", help="the built-in studies").set_defaults(func=cmd_list)
    r = sub.add_parser("run", help="run (or resume) every cell of a study, per-item scores stored")
    r.add_argument("name", help="a built-in study or a study .toml file")
    r.add_argument("--output", default="results")
    r.add_argument("--data-dir", default=None)
    r.add_argument("--executor", default="local", choices=["local", "ray"])
    r.add_argument("--workers", type=int, default=None, help="local Ray: CPUs to use")
    r.add_argument("--dry-run", action="store_true", help="print the cells and their options, run nothing")
    r.add_argument(
        "--estimate",
        action="store_true",
        help="measure a short probe on this machine (each task scored once, each method trained a few steps, "
        "into a scratch folder) and print the study's projected wall time beside the one its file declares",
    )
    r.add_argument(
        "--supersede",
        action="store_true",
        help="first set aside (under OUTPUT/.superseded/, kept) this study's records that another code version "
        "wrote, so their cells run again and every row comes from this code version",
    )
    r.add_argument(
        "--tasks",
        default=None,
        help="only the study's cells on these tasks/suites (comma list; the rest stay to run later), "
        "e.g. to cover every method on one task first",
    )
    r.add_argument("--methods", default=None, help="only the study's cells of these methods (comma list)")
    from benchbench.cli.main import _add_encode_arguments, _add_train_precision_argument, _parse_seeds

    r.add_argument("--seeds", type=_parse_seeds, default=None, help="only these of the study's seeds (e.g. 1-3)")

    _add_encode_arguments(r)  # an exact backend keeps the cells' keys; onnx-int8 (lossy) makes other cells
    _add_train_precision_argument(r)  # auto keeps the cells' keys; fp32/bf16 make other cells (or [budget] precision)
    r.set_defaults(func=cmd_run)
    d = sub.add_parser(
        "rederive",
        help="re-compute the study's sampled cell from scratch (its cheapest trained cell of the primary endpoint, "
        "first seed) and compare it with the stored record: exit 1 when it differs (CI runs this)",
    )
    d.add_argument("name", help="a built-in study or a study .toml file")
    d.add_argument("--results", required=True, help="the folder holding the study's committed records")
    d.add_argument("--data-dir", default=None)
    d.set_defaults(func=cmd_rederive)
    p = sub.add_parser("report", help="the study's table with tie groups, from stored records")
    p.add_argument("name")
    p.add_argument("--results", default="results")
    p.add_argument("--out", default=None, help="also write the Markdown table here")
    p.add_argument("--no-cache", action="store_true", help="recompute every column's statistics")
    p.set_defaults(func=cmd_report)


def cmd_list(args: argparse.Namespace) -> int:
    from benchbench.run import study

    for name in study.available():
        st = study.load_study(name)
        pre = "  (preliminary: < 5 seeds)" if st.preliminary else ""
        print(
            f"{name}  v{st.version}  {st.tier}  {st.model}  {len(st.methods)} methods x {len(st.tasks)} tasks x "
            f"{len(st.seeds)} seeds{pre}"
        )
        if st.question:
            print(f"    question: {st.question}")
        if st.primary:
            p = st.primary
            print(f"    primary endpoint: {p['task']} {p['split']} {p['statistic']}, against {p['comparison']}")
        if st.cpu_hours:
            print(f"    expected cost: {st.cpu_hours:g} h on a 2-core CPU ({st.cost_measured or 'how: not stated'})")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    import os

    from benchbench.core.registry import get_registry
    from benchbench.run import study as studies

    if args.data_dir:
        os.environ["BENCHBENCH_DATA"] = args.data_dir  # the sweep's workers find the data the same way
    st = studies.load_study(args.name)
    reg = get_registry()
    tasks = studies.subset(st, "tasks", reg.expand(list(st.tasks)), reg.expand(args.tasks) if args.tasks else None)
    methods = studies.subset(st, "methods", list(st.methods), args.methods.split(",") if args.methods else None)
    seeds = studies.subset(st, "seeds", list(st.seeds), args.seeds)
    cells = [c for c in studies.plan(st, tasks, seeds) if c.method in methods]
    if args.estimate:
        from benchbench.run.study_estimate import estimate

        est = estimate(st, tasks, methods, seeds, **({"data_dir": args.data_dir} if args.data_dir else {}))
        print("\n".join(est.lines(st.cpu_hours)))
        return 0
    if args.dry_run:
        for c in cells:
            print(c.label, " ".join(f"{k}={v}" for k, v in c.options["overrides"].items()))
        print(f"{len(cells)} cells")
        return 0
    from benchbench.cli.main import encode_options, train_options

    if "auto" not in (args.train_precision, st.train_precision) and args.train_precision != st.train_precision:
        from benchbench.core.errors import ConfigError

        raise ConfigError(
            f"--train-precision {args.train_precision}: study {st.name!r} trains in {st.train_precision} "
            "([budget] precision); drop the option or pass that value."
        )
    if args.supersede:
        moved = studies.supersede(st, args.output)
        if moved:
            print(
                f"set aside {sum(moved.values())} records of other code versions "
                f"({', '.join(f'{k}: {n}' for k, n in moved.items())}) under {args.output}/.superseded/; "
                "their cells run again now"
            )
    older = studies.other_code_versions(st, args.output)
    if older:
        print(
            f"note: {args.output} holds {sum(older.values())} records of this study from other code versions "
            f"({', '.join(f'{k}: {n}' for k, n in older.items())}); new cells come from this commit, so rows may mix "
            "code versions (the report marks them [≠code]). For one code version per study, pass --supersede (or run "
            "into a fresh --output)."
        )

    run_fields = {**encode_options(args), **train_options(args)}  # the RunOptions every cell shares
    out = studies.run(st, args.output, args.executor, cells=cells, workers=args.workers, encode=run_fields)
    failed = [o for o in out if o.status == "failed"]
    for o in failed:
        print(f"failed {o.run.label}: {(o.error or '').splitlines()[0]}")
    print(f"{len(out)} cells: {len(out) - len(failed)} ok, {len(failed)} failed; results in {args.output}/")
    return 1 if failed else 0


def cmd_rederive(args: argparse.Namespace) -> int:
    from benchbench.run.rederive import rederive, sampled_cell
    from benchbench.run.study import load_study
    from benchbench.store.results import ResultStore

    st = load_study(args.name)
    records = list(ResultStore(args.results).records())
    row, task, seed = sampled_cell(st, records)
    print(f"re-deriving {row}/{task}/seed{seed} of {st.name} from scratch (embedding cache off) ...", flush=True)
    got = rederive(st, records, data_dir=args.data_dir)
    print(got.line())
    return 0 if got.ok else 1


def cmd_report(args: argparse.Namespace) -> int:
    from benchbench.core.registry import get_registry
    from benchbench.report import study_provenance, study_view
    from benchbench.run.study import load_study
    from benchbench.store.results import ResultStore

    st = load_study(args.name)
    tasks = get_registry().expand(list(st.tasks))
    records = list(ResultStore(args.results).records())
    label = None
    if study_provenance.is_local(st.model) and not Path(st.model).is_dir():  # not on this machine: the records' label
        label = study_provenance.records_model_label(st, records)[0]
    table = study_view.collect(st, records, args.results, tasks, model_label=label)
    text = study_view.report_markdown(st, table, model_label=label, results=args.results, cache=not args.no_cache)
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)
    return 0
