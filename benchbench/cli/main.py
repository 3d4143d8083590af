"""The command line: ``benchbench run | list | plugins | table``."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from benchbench.core.errors import BenchbenchError


def _parse_seeds(s: str) -> list[int]:
    """argparse's face of ``core.seeds.parse_seeds`` (``1-5``, ``1,3,5-7``): the one seed grammar of
    ``run``, ``sweep`` and ``study run``; its message becomes argparse's usage error."""
    from benchbench.core.seeds import parse_seeds

    try:
        return parse_seeds(s)
    except BenchbenchError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _positive_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


# --steps, --batch-size, --lr and --max-seq-length are checked while the arguments are parsed, before
# anything loads; the text itself goes on to the method's config, which converts it as it converts a
# --set value. "none" passes: an option typed ``X | None`` takes it (e.g. --max-seq-length none: no
# truncation), any other is refused by the config.
def _steps_int(s: str) -> str:
    """``--steps``: a positive budget, or 0 for the method's step-0 row (its start through its own
    pooling, head and template)."""
    return "0" if s.strip() == "0" else _budget_int(s)


def _budget_int(s: str) -> str:
    if s.strip().lower() in ("none", "null"):
        return s
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer such as 1000, got {s!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer such as 1000, got {v}")
    return s


def _learning_rate(s: str) -> str:
    if s.strip().lower() in ("none", "null"):
        return s
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number such as 3e-5, got {s!r}") from None
    if not (v > 0 and v < float("inf")):  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be a positive finite number such as 3e-5, got {s!r}")
    return s


def _parse_set(items: list[str]) -> dict[str, str]:
    out = {}
    for it in items or []:
        if "=" not in it:
            raise BenchbenchError(f"--set expects key=value, got {it!r}")
        k, v = it.split("=", 1)
        out[k.strip()] = v.strip()
    return out


# Commands beyond run/list/plugins/table/neighbours come through the benchbench_register_commands hook
# (llm's pattern): the built-in ones below, and third-party modules under the entry-point group
# ``benchbench.commands``. That group is separate from ``benchbench`` so that building the parser
# (every --help) imports only small command modules, never the method plugins and torch.
BUILTIN_COMMANDS = (
    "benchbench.cli.board",
    "benchbench.cli.sweep",
    "benchbench.cli.significance",
    "benchbench.cli.study",
)
COMMANDS_GROUP = "benchbench.commands"


def add_plugin_commands(sub: Any) -> None:
    import importlib
    import importlib.metadata

    import pluggy

    from benchbench.core import hookspecs
    from benchbench.core.errors import PluginError
    from benchbench.core.registry import disabled_plugins

    pm = pluggy.PluginManager("benchbench")
    pm.add_hookspecs(hookspecs)
    for name in BUILTIN_COMMANDS:
        pm.register(importlib.import_module(name), name)
    disabled = disabled_plugins()
    for ep in sorted(importlib.metadata.entry_points(group=COMMANDS_GROUP), key=lambda e: e.name):
        if ep.name in disabled:
            continue
        try:
            pm.register(ep.load(), f"{COMMANDS_GROUP}:{ep.name}")
        except Exception as e:
            logging.getLogger(__name__).warning(
                "Command plugin %r (%s) failed to import: %s: %s; its commands are left out.",
                ep.name, ep.value, type(e).__name__, e,
            )  # fmt: skip
    owner: dict[str, str] = {}

    for impl in pm.hook.benchbench_register_commands.get_hookimpls():

        def register(name: str, _plugin: str = impl.plugin_name, **kw: Any) -> argparse.ArgumentParser:
            if name in sub.choices:
                raise PluginError(
                    f"Plugin {_plugin!r} registers command {name!r}, which {owner.get(name, 'benchbench')!r} "
                    "already provides; rename one of them."
                )
            owner[name] = _plugin
            return sub.add_parser(name, **kw)

        impl.function(register=register)


def _add_run_arguments(r: argparse.ArgumentParser) -> None:
    """``run``'s options (the largest command: its own function keeps build_parser readable). Long because
    it declares every run option, each with its help, in one place."""
    from benchbench.train.setups import SETUPS

    r.add_argument("--method", required=True)
    r.add_argument("--model", default=None, help="base model: HF id, local dir, all-MiniLM-L6-v2 (offline), tiny-bert")
    r.add_argument("--tasks", required=True, help="comma list of suites and tasks, e.g. useb or sts,stsb")
    r.add_argument("--seeds", type=_parse_seeds, default=[1])
    r.add_argument("--split", default=None, help="comma list of splits (default: each task's default)")
    r.add_argument(
        "--setup",
        default="unsupervised",
        metavar="SETUP",
        help=f"one of {', '.join(SETUPS)}, optionally with @corpus=N or @labelled=N (default: unsupervised)",
    )
    r.add_argument("--data-dir", default=None, help="data root (default: $BENCHBENCH_DATA)")
    r.add_argument("--output", default="results")
    r.add_argument(
        "--force",
        action="store_true",
        help="re-evaluate the requested splits even if stored (other stored splits are kept; the trained "
        "encoder is reused; its embeddings are re-encoded and the cache rewritten); does not retrain",
    )
    r.add_argument(
        "--retrain",
        action="store_true",
        help="discard the trained encoder and its checkpoints, train again and re-evaluate every stored split",
    )
    r.add_argument("--json", action="store_true", help="print the result records as JSON")
    r.add_argument("--device", default=None)
    r.add_argument("--no-cache", action="store_true", help="do not use the embedding cache")
    r.add_argument("--encode-batch-size", type=_positive_int, default=None)
    r.add_argument("--steps", type=_steps_int, default=None, help="optimizer steps; 0: the untrained step-0 row")
    r.add_argument("--batch-size", type=_budget_int, default=None)
    r.add_argument("--lr", type=_learning_rate, default=None)
    r.add_argument("--max-seq-length", type=_budget_int, default=None)
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="any method option")
    r.add_argument(
        "--eval-every",
        type=int,
        default=0,
        metavar="N",
        help="learning curve: score the encoder on --eval-split every N training steps (stored in the "
        "record's train.monitor; the result is still the encoder at the end of the budget)",
    )
    r.add_argument("--eval-split", default="dev", help="split the learning curve is scored on (default: dev)")
    r.add_argument(
        "--eval-task",
        default=None,
        help="task whose --eval-split scores the learning curve (default: the task trained on), e.g. stsb "
        "for tasks without a dev split",
    )
    r.add_argument(
        "--seeded-init",
        action="store_true",
        help="a random-init --model (tiny-bert:H:L:A:I) drawn from each seed instead of seed 0 (a study's "
        "random-init row): its seeds are draws of the init",
    )
    r.add_argument(
        "--score",
        default="bi",
        choices=["bi", "cross"],
        help="pairwise tasks: cosine of the bi-encoder (default) or the method's cross-encoder",
    )
    r.add_argument(
        "--store-items",
        action="store_true",
        help="also store per-item scores (each pair's similarity, each query's metric) beside each record, "
        "for a paired bootstrap between runs (`benchbench significance`); tasks that support it: "
        "twitterpara, pairs, askubuntu, cqadupstack",
    )
    r.add_argument(
        "--corpus",
        default=None,
        metavar="PATH",
        help="training text for methods that train on ordered text (QT: a file or folder of books) or a "
        "general corpus (BSL); part of the result key. Default: the method's own default corpus",
    )
    r.add_argument(
        "--train-task",
        default=None,
        metavar="TASK",
        help="train on this task's unlabelled text and score every --tasks task with that encoder (trained once "
        "per seed): e.g. adapt to twitterpara, then read the STS tasks; part of the result key",
    )
    _add_encode_arguments(r)
    _add_train_precision_argument(r)
    r.add_argument("--format", default="github", help="table format (tabulate): github, latex, html, ...")
    r.add_argument(
        "--reference",
        action="store_true",
        help="also show reference rows beside a training method's row: the start read untrained with its own mean "
        "pooling (plm-mean) and the method at step 0 (its pooling and head before any update), stored as runs of "
        "their own in --output. Each costs one evaluation of the tasks the first time (no training) and nothing "
        "once stored; --json computes none",
    )


def _add_encode_arguments(r: argparse.ArgumentParser) -> None:
    """How the evaluated encoder encodes (``benchbench.encode.backends``): ``run``, ``sweep``,
    ``study run`` and ``reproduce`` take the same two options (:func:`encode_options` reads them)."""
    r.add_argument(
        "--encode-backend",
        default="torch",
        choices=["torch", "onnx", "openvino", "onnx-int8"],
        help="runtime that encodes for evaluation: torch (default), onnx (ONNX Runtime, CPU), openvino (CPU); "
        "exact to torch fp32. onnx-int8 is lossy (int8 weights): its results get their own key and are marked lossy",
    )
    r.add_argument(
        "--encode-dtype",
        default="auto",
        choices=["auto", "fp32", "bf16"],
        help="torch's number format for evaluation: auto (bf16 with SDPA attention on CUDA, fp32 on CPU), fp32, "
        "bf16; vectors are fp32 before any scoring. Recorded, with the backend, in the record and the cache key",
    )


def encode_options(args: argparse.Namespace) -> dict[str, str]:
    """The RunOptions fields of :func:`_add_encode_arguments`' options."""
    return {"encode_backend": args.encode_backend, "encode_dtype": args.encode_dtype}


def _add_train_precision_argument(r: argparse.ArgumentParser) -> None:
    """The number format training runs in (``benchbench.train.context.TRAIN_PRECISIONS``): ``run``,
    ``sweep`` and ``study run`` take it (:func:`train_options` reads it)."""
    r.add_argument(
        "--train-precision",
        default="auto",
        choices=["auto", "fp32", "bf16"],
        help="number format of training: auto (default: bf16 autocast on a bf16-capable GPU, fp32 on the CPU), "
        "fp32 (no autocast, the GPU too), bf16 (bf16 autocast on the CPU too: ~2x faster training on a CPU with "
        "AVX512-BF16, other weights than fp32's). Recorded in the record's train section; fp32 and bf16 are part "
        "of the result key (auto keeps every stored result's key)",
    )


def train_options(args: argparse.Namespace) -> dict[str, str]:
    """The RunOptions field of :func:`_add_train_precision_argument`'s option."""
    return {"train_precision": args.train_precision}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="benchbench", description="Train and evaluate unsupervised sentence-embedding methods."
    )
    p.add_argument("-v", "--verbose", action="store_true")
    sub = p.add_subparsers(dest="cmd", required=True)

    _add_run_arguments(
        sub.add_parser("run", help="train (if the method trains) and evaluate a method on tasks or suites")
    )

    ls = sub.add_parser("list", help="list methods, tasks or suites")
    ls.add_argument("what", choices=["methods", "tasks", "suites"])
    ls.add_argument(
        "--mteb",
        action="store_true",
        help="with tasks: list the tasks of the installed mteb that run as mteb:NAME (English STS, pair "
        "classification, reranking and retrieval) instead of benchbench's own",
    )
    sub.add_parser("plugins", help="list loaded plugins and what each registered")

    t = sub.add_parser("table", help="print a table of stored results")
    t.add_argument("--output", default="results")
    t.add_argument("--tasks", default=None)
    t.add_argument("--split", default="test")
    t.add_argument("--format", default="github")
    t.add_argument("--method", default=None, help="comma list of methods to include")
    t.add_argument("--no-provenance", action="store_true")
    t.add_argument(
        "--resamples",
        type=int,
        default=10_000,
        help="resamples of the tie test that marks each column's rank-1 group (the studies' test); 0: no test",
    )
    nb = sub.add_parser(
        "neighbours", help="nearest sentences of a text corpus to query sentences under a trained encoder (faiss)"
    )
    nb.add_argument("--model", required=True, help="a saved encoder folder (e.g. a run's encoder/) or a model name")
    nb.add_argument("--corpus", required=True, help="text file or folder (one sentence a line, or running text)")
    nb.add_argument("--query", action="append", required=True, help="query sentence; repeat for several")
    nb.add_argument("-k", type=int, default=5)
    nb.add_argument("--batch-size", type=int, default=1024, help="sentences encoded at a time (the corpus is streamed)")
    t.add_argument(
        "--columns",
        default=None,
        help="comma list of record fields shown as extra columns, e.g. "
        "train.seconds,train.flops,train.tokens (training cost)",
    )
    add_plugin_commands(sub)
    return p


def _run_overrides(args) -> dict[str, str]:
    overrides = {
        k: getattr(args, k) for k in ("steps", "batch_size", "lr", "max_seq_length") if getattr(args, k) is not None
    }
    overrides.update(_parse_set(args.set))
    return overrides


def _check_run_request(args, overrides: dict[str, str]) -> None:
    """What ``run`` can check from names alone, before torch, transformers and the method plugins load:
    the method, ``--setup``, the option names (``--set`` and the budget flags) against the method's
    Config, the tasks and suites, and ``--model``. The names come from the plugin manifest
    (``registry_summary``: no plugin is imported while it is current; when it is not, the full load
    that ``run`` needs anyway, once, which refreshes it); option values are converted by the types the
    manifest records (a bad ``--set lr=abc`` fails here too). The runner checks it all again with the
    real classes."""
    import difflib

    from benchbench.core.errors import ConfigError
    from benchbench.core.methods import coerce_token
    from benchbench.core.registry import registry_summary
    from benchbench.encode.model_names import check_model_name
    from benchbench.train.setups import parse_setup, split_stage_options, stage_configs

    summary = registry_summary()
    method = summary.method(args.method)
    setup = parse_setup(args.setup)
    options = list(method.options)
    method_overrides, stage_options = split_stage_options(overrides, set(options), setup)
    for key in method_overrides:
        if key.replace("-", "_") not in options:
            close = difflib.get_close_matches(key.replace("-", "_"), options, n=3, cutoff=0.6)
            hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ConfigError(
                f"Method {args.method!r} has no option {key!r}.{hint} Its options: {', '.join(options) or '(none)'}."
            )
    types = getattr(method, "option_types", {}) or {}
    for key, value in method_overrides.items():  # values as the Config will convert them (NaN, types)
        k = key.replace("-", "_")
        if isinstance(value, str) and k in types:
            coerce_token(value, types[k], f"option {key!r} of method {args.method!r}")
    stage_configs(setup, stage_options)
    summary.expand(args.tasks)
    if not method.fixed_model and check_model_name(args.model or method.default_model or ""):
        os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers loads: a cached model loads without retries


def cmd_run(args) -> int:
    overrides = _run_overrides(args)
    _check_run_request(args, overrides)
    _quiet_transformers(args)

    from benchbench.core.registry import get_registry
    from benchbench.report.leaderboard import render, summarise
    from benchbench.run.runner import RunOptions, run

    reg = get_registry()
    t0 = time.perf_counter()
    opts = RunOptions(
        method=args.method,
        tasks=args.tasks,
        model=args.model,
        seeds=args.seeds,
        setup=args.setup,
        overrides=overrides,
        data_dir=args.data_dir,
        output=args.output,
        force=args.force,
        retrain=args.retrain,
        splits=args.split.split(",") if args.split else None,
        device=args.device,
        no_cache=args.no_cache,
        encode_batch_size=args.encode_batch_size,
        eval_every=args.eval_every,
        eval_split=args.eval_split,
        eval_task=args.eval_task,
        seeded_init=args.seeded_init,
        corpus=args.corpus,
        train_task=args.train_task,
        score=args.score,
        store_items=args.store_items,
        **encode_options(args),
        **train_options(args),
    )
    report = run(opts, reg)
    elapsed = time.perf_counter() - t0
    if report.rank != 0:  # a helper process of a multi-GPU run: rank 0 prints the table
        return 0
    if args.json:
        print(json.dumps(report.records, indent=1, default=str))
        return 0
    refs, ref_notes, ref_cost = _reference_rows(args, opts, reg)
    suites = {s: reg.suites[s].tasks for s in report.requested if s in reg.suites}
    splits = args.split.split(",") if args.split else ["test"]
    for split in splits:
        headers, rows, notes = summarise(
            refs.records + report.records,
            report.tasks,
            suites,
            split=split,
            missing=report.missing,
            references=refs.rows,
        )
        for task, lacking in report.unavailable.items():
            notes.append(f"{task}: has no {', '.join(lacking)} split (not evaluated; never replaced by another split)")
        for s in suites:
            notes.extend(f"{s}: {n}" for n in reg.suites[s].notes)
        print(render(headers, rows, notes + ref_notes, fmt=args.format, title=f"split: {split} (scores x100)"))
    print(
        f"{len(report.records) - len(report.skipped)} evaluated, {len(report.skipped)} already stored (skipped; --force to re-evaluate, --retrain to train again) "
        f"in {elapsed:.1f}s; results in {args.output}/" + ref_cost,
        file=sys.stderr,
    )
    return 0


@dataclasses.dataclass
class _References:
    records: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    rows: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)


def _reference_rows(args, opts, reg) -> tuple[_References, list[str], str]:
    """``run``'s reference rows (``benchbench.run.references``) with --reference: their records
    and table rows, the notes that say what each row means, and the stderr text of what they cost."""
    from benchbench.run.references import records_of, reference_rows, references_for, run_references

    if not args.reference:  # opt-in: they add records (and, for a step-0 row, an encoder) to --output
        return _References(), [], ""
    planned, why = references_for(opts, reg)
    notes = [f"reference rows: {why}"] if why else []
    if not planned:
        return _References(), notes, ""
    t0 = time.perf_counter()
    done = run_references(planned, reg)
    spent = time.perf_counter() - t0
    refs = _References(records_of(done), reference_rows(done))
    notes = [f"{ref.label}: {ref.means}" for ref, _ in done] + notes
    notes.append("reference rows: computed as ordinary runs under their own keys and reused once stored")
    n_new = sum(len(r.records) - len(r.skipped) for _, r in done)
    n_old = sum(len(r.skipped) for _, r in done)
    return (
        refs,
        notes,
        f"; reference rows: {n_new} evaluated, {n_old} already stored in {spent:.1f}s",
    )


def cmd_list(args) -> int:
    from tabulate import tabulate

    from benchbench.core.registry import registry_summary

    if args.mteb:
        return _list_mteb(args)
    reg = registry_summary()  # names only: imports no plugin (and no torch) when its manifest is current
    if args.what == "methods":
        rows = [
            (n, reg.owner[("methods", n)], "yes" if getattr(c, "trains", True) else "no", getattr(c, "description", ""))
            for n, c in sorted(reg.methods.items())
        ]
        print(tabulate(rows, headers=["method", "plugin", "trains", "description"]))
    elif args.what == "tasks":
        rows = []
        for n, t in sorted(reg.tasks.items()):
            kind = getattr(t, "kind", getattr(t, "kind", "?"))
            rows.append(
                (n, kind, ",".join(getattr(t, "splits", [])), getattr(t, "main_metric", ""), ",".join(reg.suites_of(n)))
            )
        print(tabulate(rows, headers=["task", "kind", "splits", "main metric", "suites"]))
        print(f"\n{MTEB_NAMING} `benchbench list tasks --mteb` lists those of the installed mteb.")
    else:
        rows = [(n, ", ".join(s.tasks), s.description) for n, s in sorted(reg.suites.items())]
        print(tabulate(rows, headers=["suite", "tasks", "description"]))
    return 0


MTEB_NAMING = (
    "MTEB's tasks run as mteb:NAME, NAME as MTEB spells it (e.g. --tasks mteb:STSBenchmark): any English STS, "
    "pair-classification, reranking or retrieval task of the installed mteb, scored by MTEB's protocol."
)


def _list_mteb(args) -> int:
    """``list tasks --mteb``: every task ``mteb:NAME`` resolves in the installed mteb (imports mteb: seconds)."""
    from tabulate import tabulate

    from benchbench.evaluate.adapters.hf import mteb_tasks

    if args.what != "tasks":
        raise BenchbenchError(f"--mteb lists tasks: `benchbench list tasks --mteb` (not {args.what}).")
    version, found = mteb_tasks()
    rows = [(f"mteb:{name}", kind, ",".join(splits), metric) for name, kind, splits, metric in found]
    print(tabulate(rows, headers=["task", "MTEB type", "splits", "main metric"]))
    print(
        f"\n{len(rows)} tasks of mteb {version}. {MTEB_NAMING} Aggregate tasks (CQADupstackRetrieval) are left "
        "out: they have no dataset of their own."
    )
    return 0


def cmd_plugins(args) -> int:
    from benchbench.core.registry import registry_summary

    reg = registry_summary()  # names only: imports no plugin (and no torch) when its manifest is current
    for plugin, items in reg.plugins.items():
        print(f"{plugin}:")
        for it in items:
            print(f"  {it}")
    for plugin, why in reg.broken.items():  # listed, not fatal: the other plugins still work
        print(f"{plugin}: BROKEN: {why}")
    for spec, why in getattr(reg, "broken_specs", {}).items():  # its tasks are disabled, the rest work
        print(f"task spec {spec}: BROKEN: {why}")
    for plugin in reg.disabled:
        print(f"{plugin}: disabled (BENCHBENCH_DISABLE_PLUGINS)")
    return 0


def cmd_table(args) -> int:
    from benchbench.core.registry import get_registry
    from benchbench.report.aggregate import load_records
    from benchbench.report.leaderboard import provenance, render, summarise

    reg = get_registry()
    # each record once however many folders under --output hold it (a copy that disagrees is an error
    # naming both paths); damaged or misplaced records are named in a warning and left out
    records = load_records(args.output, store_layout=True)
    if args.tasks:
        tasks = reg.expand(args.tasks)
        requested = [n.strip() for n in args.tasks.split(",")]
    else:
        tasks = list(dict.fromkeys(r["task"] for r in records))
        requested = [s for s, suite in reg.suites.items() if all(t in tasks for t in suite.tasks)]
    suites = {s: reg.suites[s].tasks for s in requested if s in reg.suites}
    if args.method:
        records = [r for r in records if r["method"] in args.method.split(",")]
    records = [r for r in records if r["task"] in tasks]
    headers, rows, notes = summarise(
        records,
        tasks,
        suites,
        split=args.split,
        columns=[c.strip() for c in args.columns.split(",")] if args.columns else None,
        ties=args.resamples or None,
        root=args.output,
    )
    print(render(headers, rows, notes, fmt=args.format, title=f"split: {args.split} (scores x100)"))
    if not args.no_provenance:
        from benchbench.report.escaping import escape_text

        print(
            "\n"
            + escape_text("How these numbers were produced:", args.format)
            + "\n"
            + "\n".join(escape_text(line, args.format) for line in provenance(records))
        )
    return 0


def cmd_neighbours(args) -> int:
    """Cosine nearest neighbours (QT paper Table 5 style): the corpus is streamed through the encoder
    in batches into an exact faiss inner-product index of normalised vectors."""
    import faiss
    import numpy as np

    from benchbench.encode.models import load_encoder
    from benchbench.store.data import DataStore
    from benchbench.train.ordered import load_ordered

    enc = load_encoder(args.model)
    sentences = load_ordered(DataStore(), args.corpus).sentences

    def unit(texts: list[str]) -> np.ndarray:
        v = np.asarray(enc.encode(texts), dtype=np.float32)
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)

    index = None
    for a in range(0, len(sentences), args.batch_size):
        v = unit(sentences[a : a + args.batch_size])
        if index is None:
            index = faiss.IndexFlatIP(v.shape[1])
        index.add(v)
    if index is None:
        print(f"benchbench: error: --corpus {args.corpus} holds no sentences.", file=sys.stderr)
        return 2
    scores, ids = index.search(unit(args.query), min(args.k, index.ntotal))
    for q, row, sc in zip(args.query, ids, scores):
        print(f"query: {q}")
        for j, c in zip(row, sc):
            print(f"  {c:.4f}  {sentences[int(j)]}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    if not args.verbose:
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if args.cmd not in ("list", "plugins", "run"):  # those stay fast (run: until its names are checked)
        _quiet_transformers(args)
    command = {
        "run": cmd_run,
        "list": cmd_list,
        "plugins": cmd_plugins,
        "table": cmd_table,
        "neighbours": cmd_neighbours,
    }.get(args.cmd, getattr(args, "func", None))
    try:
        with _stop_on_signals():
            return command(args)
    except BenchbenchError as e:
        print(f"benchbench: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        code = _interrupted(e)
        if argv is None:  # the process's own command line (console script, python -m), not a caller's
            _exit_now(code)
        return code


def _quiet_transformers(args) -> None:
    """transformers' own logging down to errors and no progress bars, unless --verbose (its import
    costs seconds: commands that can fail fast call this after their checks)."""
    if args.verbose:
        return
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except Exception:
        pass


class _Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM outside the training loop (which takes both over while it trains, to stop at
    a safe point and say which step it kept)."""

    def __init__(self, signum: int):
        super().__init__()
        self.signum = signum


def _raise_interrupted(signum: int, _frame: Any) -> None:
    raise _Interrupted(signum)


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[None]:
    """SIGTERM, like SIGINT, ends a command through ``_interrupted`` (one line on stderr, exit status
    128 + signal) instead of dying silently. Every write benchbench makes is atomic, so stopping at any
    instant keeps whatever was finished. Ignored signals (nohup, a background job) stay ignored, and the
    handlers before are restored (main() also runs inside tests and notebooks)."""
    before = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(sig) not in (signal.SIG_IGN, None):
                before[sig] = signal.signal(sig, _raise_interrupted)
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _interrupted(e: KeyboardInterrupt) -> int:
    """The one line an interrupted command prints (the training loop's own says which step it kept),
    and its exit status: 130 for SIGINT, 143 for SIGTERM, as a shell reports a process they ended."""
    signum = int(getattr(e, "signum", signal.SIGINT))
    what = str(e) or (
        f"interrupted ({signal.Signals(signum).name}); every result already stored and every trained encoder "
        "already marked complete is kept: run the same command to go on (stored results are skipped)."
    )
    if os.environ.get("RANK", "0") == "0":  # one line for a multi-process run, not one per process
        print(f"benchbench: {what}", file=sys.stderr)
    return 128 + signum


def _exit_now(code: int) -> None:
    """End an interrupted process at once. Python's teardown of torch and transformers takes seconds
    and keeps nothing: every ``finally`` (locks, temporary files) has already run while the interrupt
    unwound, and every file benchbench writes is renamed into place whole."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
