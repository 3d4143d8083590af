"""``benchbench significance``: seed-level and item-level tests from stored records."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from benchbench.core.errors import ConfigError
from benchbench.core.hookspecs import hookimpl
from benchbench.report.significance import report, select


@hookimpl
def benchbench_register_commands(register: Any) -> None:
    s = register(
        "significance",
        help="mean ± std, dagger, paired test across seeds and paired bootstrap over items, from stored records",
    )
    s.add_argument("--results", default="results", help="results folder (records and their per-item files)")
    s.add_argument("--task", required=True)
    s.add_argument("--method", required=True)
    s.add_argument("--rivals", required=True, help="comma list of rival methods")
    s.add_argument("--setup", default="unsupervised")
    s.add_argument("--split", default="test")
    s.add_argument("--model", default=None, help="only records of this base model (as stored, e.g. sentence-...)")
    s.add_argument("--config", action="append", default=[], metavar="METHOD=HASH", help="pick one configuration")
    s.add_argument("--test", default="ttest", choices=["ttest", "wilcoxon"])
    s.add_argument("--resamples", type=int, default=2000)
    s.add_argument(
        "--margin",
        type=float,
        default=1.0,
        help="equivalence margin in points: ≈ only where TOST shows |diff| < margin (the studies' default 1.0)",
    )
    s.add_argument("--out", default=None, help="also write the Markdown here")

    def cmd(args: argparse.Namespace) -> int:
        from benchbench.store.results import ResultStore

        configs = {}
        for c in args.config:
            if "=" not in c:
                raise ConfigError(f"--config {c!r}: expected METHOD=HASH.")
            k, v = c.split("=", 1)
            configs[k.strip()] = v.strip()
        rivals = [r.strip() for r in args.rivals.split(",") if r.strip()]
        if not rivals:
            raise ConfigError("--rivals is empty: name at least one rival method.")
        records = list(ResultStore(args.results).records())
        chosen = select(records, args.task, [args.method, *rivals], args.setup, args.split, configs, args.model)
        text = report(chosen, args.method, rivals, args.results, args.split, args.test, args.resamples, args.margin)
        print(text, end="")
        if args.out:
            from benchbench.store.files import atomic_write_text

            atomic_write_text(args.out, text, root=Path(args.out).parent)  # never through a link at --out
        return 0

    s.set_defaults(func=cmd)
