"""Fidelity of the SentEval transfer suite: our dev/test accuracy (and MRPC F1) next to the numbers
facebookresearch/SentEval's own code computed for the same vectors and setting.

The reference is a JSON-lines file with one object per SentEval task: {"task": "MR", "mode":
"default", "devacc": .., "acc": .., "f1": ..} (the format of ../shared/reference/senteval_default.json,
produced by SentEval at 5d6dc11 with its PyTorch classifier on all-MiniLM-L6-v2 vectors).
Our numbers come from a run of bench/senteval_speed.py (--results its --json output), from
result records of ``benchbench run`` (--records the --output folder; --method), or are computed here. Exit status 1 if any test accuracy differs by more than --tolerance points.

    BENCHBENCH_DATA=../shared/data python bench/senteval_fidelity.py \
        --reference ../shared/reference/senteval_default.json [--results speed.json] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

OURS = {
    "MR": "mr",
    "CR": "cr",
    "SUBJ": "subj",
    "MPQA": "mpqa",
    "SST2": "sst2",
    "TREC": "trec",
    "MRPC": "mrpc",
    "SICKEntailment": "sicke",
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--reference",
        default=None,
        help="SentEval's numbers (JSON lines); default: $BENCHBENCH_DATA/../reference/senteval_<setting>.json",
    )
    ap.add_argument("--results", default=None, help="JSON written by bench/senteval_speed.py --json")
    ap.add_argument("--records", default=None, help="a benchbench results folder (the run's --output)")
    ap.add_argument("--method", default="sbert", help="with --records: whose records")
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--setting", default="default")
    ap.add_argument("--tolerance", type=float, default=0.5)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    ref_path = args.reference
    if ref_path is None:
        base = args.data_dir or os.environ.get("BENCHBENCH_DATA")
        if not base:
            print("pass --reference or set BENCHBENCH_DATA", file=sys.stderr)
            return 2
        ref_path = str(Path(base).parent / "reference" / f"senteval_{args.setting}.json")
    ref = {}
    for line in Path(ref_path).read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            if r.get("mode", args.setting) == args.setting:
                ref[r["task"]] = r
    if args.results:
        ours = json.loads(Path(args.results).read_text())["tasks"]
    elif args.records:
        ours = {}
        for f in sorted(Path(args.records).glob(f"{args.method}/*/unsupervised/*/seed*/*.json")):
            rec = json.loads(f.read_text())
            res = rec.get("splits", {}).get("test", {})
            det = res.get("details", {})
            if (
                rec.get("task_kind") == "senteval"
                and args.model in rec.get("model", "")
                and det.get("setting") == args.setting
            ):
                ours[rec["task"]] = {**res["scores"], "seconds": det.get("classifier_seconds")}
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from senteval_speed import load_features, run_suite

        tasks = [OURS[t] for t in ref if t in OURS]
        ours = run_suite(load_features(args.model, tasks, args.data_dir), args.setting)
    rows, worst = [], 0.0
    for task, r in ref.items():
        o = ours.get(OURS.get(task, task.lower()))
        if o is None:
            rows.append([task, r.get("devacc"), None, r.get("acc"), None, None, r.get("f1"), None])
            continue
        d = o["acc"] - r["acc"]
        worst = max(worst, abs(d))
        rows.append([task, r["devacc"], o["devacc"], r["acc"], o["acc"], round(d, 2), r.get("f1"), o.get("f1")])
    head = ["task", "SentEval dev", "ours dev", "SentEval test", "ours test", "test diff", "SentEval F1", "ours F1"]
    from tabulate import tabulate

    print(f"setting {args.setting}; reference {ref_path}")
    print(tabulate(rows, head, tablefmt="github" if args.markdown else "simple", floatfmt=".2f", missingval="-"))
    missing = [r[0] for r in rows if r[4] is None]
    print(
        f"largest |test diff| = {worst:.2f} (tolerance {args.tolerance})"
        + (f"; no result of ours for {', '.join(missing)}" if missing else "")
    )
    return 0 if worst <= args.tolerance and not missing else 1


if __name__ == "__main__":
    sys.exit(main())
