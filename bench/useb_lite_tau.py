"""Validate CQADupStack-lite: do encoders rank the same on the lite pools as on the full corpora?

Runs the harness (``benchbench run`` through its Python API, records stored under ``--output``) for
each encoder on ``cqadupstack`` (full: every forum's whole corpus) and ``cqadupstack-lite``, then
prints both MAP@100s per encoder and Kendall's tau (scipy) between the two rankings, overall and
per forum. Encoders are ``method[@model][+key=value...]`` specs.

    BENCHBENCH_DATA=../shared/data python bench/useb_lite_tau.py --output leaderboards/useb_lite/results
"""

from __future__ import annotations

import argparse
import json
import sys

DEFAULT = "bm25,glove-avg,sbert,plm-cls,plm-mean@tiny-bert,plm-cls@tiny-bert,tsdae@tiny-bert+steps=200+batch_size=16"


def parse(spec: str) -> tuple[str, str | None, dict[str, str]]:
    head, *opts = spec.split("+")
    method, _, model = head.partition("@")
    return method, model or None, dict(o.split("=", 1) for o in opts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--encoders", default=DEFAULT)
    ap.add_argument("--output", default="leaderboards/useb_lite/results")
    ap.add_argument("--json", default=None, help="write the comparison here")
    args = ap.parse_args()
    from scipy.stats import kendalltau

    from benchbench.run.runner import RunOptions, run

    rows = []
    for spec in args.encoders.split(","):
        method, model, overrides = parse(spec)
        rep = run(
            RunOptions(
                method=method,
                model=model,
                tasks="cqadupstack,cqadupstack-lite",
                overrides=overrides,
                output=args.output,
                progress=False,
            )
        )
        by_task = {r["task"]: r["splits"]["test"] for r in rep.records}
        rows.append(
            {
                "encoder": spec,
                "full": by_task["cqadupstack"]["main_score"],
                "lite": by_task["cqadupstack-lite"]["main_score"],
                "forums": {
                    f: (
                        by_task["cqadupstack"]["subsets"][f]["map@100"],
                        by_task["cqadupstack-lite"]["subsets"][f]["map@100"],
                    )
                    for f in by_task["cqadupstack-lite"]["subsets"]
                },
            }
        )
        print(f"{spec}: full {rows[-1]['full']:.2f} lite {rows[-1]['lite']:.2f}", file=sys.stderr, flush=True)
    tau = kendalltau([r["full"] for r in rows], [r["lite"] for r in rows]).statistic
    forums = sorted(rows[0]["forums"])
    per_forum = {
        f: kendalltau([r["forums"][f][0] for r in rows], [r["forums"][f][1] for r in rows]).statistic for f in forums
    }
    print("| encoder | CQADupStack full MAP@100 | CQADupStack-lite MAP@100 |\n|---|---|---|")
    for r in sorted(rows, key=lambda r: -r["full"]):
        print(f"| {r['encoder']} | {r['full']:.2f} | {r['lite']:.2f} |")
    print(f"\nKendall tau (macro MAP@100, {len(rows)} encoders): {tau:.3f}")
    print(
        "per forum: "
        + ", ".join(f"{f} {t:.2f}" for f, t in per_forum.items())
        + f"; mean {sum(per_forum.values()) / len(per_forum):.3f}"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "kendall_tau": tau, "per_forum_tau": per_forum}, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
