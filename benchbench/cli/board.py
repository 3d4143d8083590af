"""Subcommands ``leaderboard``, ``reproduce``, ``export`` and ``import-mteb`` (added to ``benchbench``'s
parser by ``cli.build_parser``; kept here so the shared cli.py only needs a one-line hook)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from benchbench.core.hookspecs import hookimpl


@hookimpl
def benchbench_register_commands(register: Any) -> None:
    lb = register("leaderboard", help="build leaderboards/README.md, latex/ and site/ from stored records")
    lb.add_argument("--results", default="leaderboards", help="folder searched recursively for result records")
    lb.add_argument("--out", default="leaderboards")
    lb.add_argument(
        "--check", action="store_true", help="fail (exit 1) naming each generated file that differs from a rebuild"
    )
    lb.add_argument("--screenshot", action="store_true", help="also refresh site/screenshot.png with headless chromium")
    lb.add_argument(
        "--committed",
        action="store_true",
        help="read the records as committed at git HEAD (what CI's clean clone sees), not the working tree",
    )
    lb.set_defaults(func=cmd_leaderboard)

    rp = register("reproduce", help="run what a paper table needs and compare with the published numbers")
    rp.add_argument(
        "name", help="tsdae-table2, tsdae-table3, qt-table1, bsl-table1, tenc-table1, tenc-pairs, or a .toml"
    )
    rp.add_argument("--results", default="leaderboards/results", help="records are read from and written to here")
    rp.add_argument("--dry-run", action="store_true", help="list the runs, run nothing")
    rp.add_argument("--compare-only", action="store_true", help="run nothing; compare what is stored")
    rp.add_argument("--tasks", default=None, help="comma list: run only these tasks (the table shows all)")
    rp.add_argument("--md", default=None, help="also write the side-by-side table (Markdown) to this file")
    rp.add_argument("--model", default=None)
    rp.add_argument("--steps", type=int, default=None)
    from benchbench.cli.main import _parse_seeds

    rp.add_argument("--seeds", type=_parse_seeds, default=None, help="e.g. 1-5 or 1,3 (default: the paper's)")
    rp.add_argument("--batch-size", type=int, default=None)
    rp.add_argument("--lr", type=float, default=None)
    rp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    rp.add_argument("--device", default=None)
    rp.add_argument("--data-dir", default=None)
    rp.add_argument("--encode-batch-size", type=int, default=None)
    rp.add_argument("--workers", type=int, default=None, help="run on local Ray with N CPUs (default: one by one)")
    rp.add_argument("--address", default=None, help="run on this Ray cluster (default: one by one, in this process)")
    rp.add_argument("--cpus-per-run", type=float, default=1.0)
    rp.add_argument("--gpus-per-run", type=float, default=0.0)
    from benchbench.cli.main import _add_encode_arguments

    _add_encode_arguments(rp)
    rp.set_defaults(func=cmd_reproduce)

    ex = register("export", help="export a results dir (MTEB result layout)")
    ex.add_argument("--format", choices=["mteb"], default="mteb")
    ex.add_argument("--results", default="leaderboards")
    ex.add_argument("--out", required=True)
    ex.set_defaults(func=cmd_export)

    im = register("import-mteb", help="import MTEB result JSON files as records labelled imported")
    im.add_argument("src", help="an MTEB results folder (or one file)")
    im.add_argument("--out", default="leaderboards/imported-mteb")
    im.add_argument("--model", default=None, help="model name (default: from model_meta.json or the folder)")
    im.set_defaults(func=cmd_import)


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from benchbench.report.site import DAMAGED, build, check, screenshot

    if getattr(
        args, "committed", False
    ):  # records as committed: others' uncommitted records must not leak into a committed build
        import subprocess
        import tempfile

        tmp = tempfile.mkdtemp(prefix="benchbench-lb-")
        rel = Path(args.results).resolve().relative_to(Path.cwd().resolve()).as_posix()
        arch = subprocess.run(["git", "archive", "HEAD", rel], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=arch, check=True)
        args.results = str(Path(tmp) / rel)
    if args.check:
        problems = check(args.results, args.out)
        stale = [p for p in problems if not p.startswith(DAMAGED)]
        for p in problems:  # a damaged record is named as such (regenerating does not repair it)
            print(p if p.startswith(DAMAGED) else f"stale leaderboard: {p}", file=sys.stderr)
        if stale:
            print(
                "regenerate with: benchbench leaderboard --results leaderboards --out leaderboards --screenshot "
                "and commit leaderboards/README.md, leaderboards/latex, leaderboards/site, leaderboards/.benchbench-manifest.json",
                file=sys.stderr,
            )
        if problems:
            return 1
        print("leaderboard up to date")
        return 0
    notes: list[str] = []
    written = build(args.results, args.out, shoot=screenshot if args.screenshot else None, notes=notes)
    print(f"wrote {len(written)} files under {args.out}")
    for why in notes:  # the screenshot could not be taken: the old one (if any) was kept
        print(f"screenshot not taken: {why}", file=sys.stderr)
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    from benchbench.cli.main import encode_options
    from benchbench.report.reproduce import Budget, reproduce

    sets = dict(s.split("=", 1) for s in args.set)
    b = Budget(
        model=args.model,
        steps=args.steps,
        seeds=args.seeds,
        batch_size=args.batch_size,
        lr=args.lr,
        sets=sets,
        device=args.device,
        data_dir=args.data_dir,
        encode_batch_size=args.encode_batch_size,
        tasks=args.tasks.split(",") if args.tasks else None,
        **encode_options(args),
    )
    return reproduce(
        args.name,
        args.results,
        b,
        dry_run=args.dry_run,
        md=args.md,
        compare_only=args.compare_only,
        workers=args.workers,
        address=args.address,
        cpus_per_run=args.cpus_per_run,
        gpus_per_run=args.gpus_per_run,
    )


def cmd_export(args: argparse.Namespace) -> int:
    from benchbench.report.mteb_io import export

    print(f"wrote {len(export(args.results, args.out))} MTEB result files under {args.out}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from benchbench.report.mteb_io import import_dir, import_file, save_imported

    src = Path(args.src)
    if src.is_file():
        n = len(save_imported(import_file(src, args.model), args.out))
    else:
        n = len(import_dir(src, args.out, args.model))
    print(f"imported {n} records into {args.out} (labelled imported: MTEB)")
    return 0
