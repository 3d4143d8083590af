"""Print the QT learning-check table (trained vs its untrained start, per task) from stored records.

    python bench/qt_learning_table.py --results leaderboards/qt/results --hashes H1,H2,...

Rows are the given config hashes (method found from the records); each trained row's untrained start is
the record whose config equals it except ``steps=0``. Scores x100: SentEval-proto accuracy per task and
their average, SICK-R Pearson, STS14 Spearman/Pearson over all pairs.

    python bench/qt_learning_table.py --hashes H1,H2 --seeds 1,2,3

prints instead, per model, trained vs untrained per seed (the untrained start of a seed is that seed's own
initialisation) and the gain's mean +- std over seeds with a paired t-test (benchbench.report.stats).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

SENTEVAL = ["mr", "cr", "subj", "mpqa", "sst2", "trec", "mrpc", "sicke"]


def load(results: Path, seed: int = 1) -> dict[str, dict]:
    """config hash -> {"method", "config", "train", task -> split scores} for one seed."""
    out: dict[str, dict] = {}
    for f in results.glob(f"*/*/*/*/seed{seed}/*.json"):
        r = json.loads(f.read_text())
        row = out.setdefault(r["config_hash"], {"method": r["method"], "config": r["config"], "train": {}})
        if r.get("train"):
            row["train"] = r["train"]
        row[r["task"]] = r["splits"]["test"]
    return out


def scores(row: dict, suffix: str) -> dict[str, float | None]:
    s: dict[str, float | None] = {}
    for t in SENTEVAL:
        s[t] = row[t + suffix]["main_score"] if t + suffix in row else None
    vals = [v for v in s.values() if v is not None]
    s["avg"] = sum(vals) / len(vals) if len(vals) == len(SENTEVAL) else None
    s["sick-r"] = row["sick-r"]["scores"]["pearson"] if "sick-r" in row else None
    sts = row.get("sts14", {}).get("scores", {})
    s["sts14 sp"] = sts.get("spearman_all")
    s["sts14 pe"] = sts.get("pearson_all")
    return s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default="leaderboards/qt/results")
    ap.add_argument("--hashes", required=True, help="comma list: trained config hashes, glove-avg's too")
    ap.add_argument("--suffix", default="-proto", help="'-proto' (senteval-proto) or '' (senteval)")
    ap.add_argument("--seeds", default="", help="comma list: the per-seed gain table instead")
    args = ap.parse_args()
    if args.seeds:
        return seed_table(
            Path(args.results), args.hashes.split(","), [int(x) for x in args.seeds.split(",")], args.suffix
        )
    rows = load(Path(args.results))
    cols = [*SENTEVAL, "avg", "sick-r", "sts14 sp", "sts14 pe"]
    print("| model | hash | " + " | ".join(cols) + " | train steps | train s |")
    print("|---" * (len(cols) + 4) + "|")

    def fmt(v):
        return "" if v is None else f"{v:.2f}"

    for h in args.hashes.split(","):
        row = rows[h]
        name = _name(row)
        s = scores(row, args.suffix)
        tr = row["train"]
        label = name if row["method"] == "glove-avg" else f"{name} trained"
        print(
            f"| {label} | {h} | "
            + " | ".join(fmt(s[k]) for k in cols)
            + f" | {tr.get('steps', '')} | {tr.get('seconds', '')} |"
        )
        start = _start_of(rows, h)
        if start is None or row["method"] == "glove-avg":
            continue
        s0 = scores(rows[start], args.suffix)
        print(f"| {name} untrained | {start} | " + " | ".join(fmt(s0[k]) for k in cols) + " | 0 | |")
        d = {k: (s[k] - s0[k]) if s[k] is not None and s0[k] is not None else None for k in cols}
        print(
            f"| {name} trained - untrained | | "
            + " | ".join(("" if v is None else f"{v:+.2f}") for v in d.values())
            + " | | |"
        )
    return 0


def _name(row: dict) -> str:
    c = row["config"]
    return row["method"] if row["method"] != "qt" else f"{c['encoder']}-QT ({c['embeddings']})"


def _start_of(rows: dict[str, dict], h: str) -> str | None:
    """The untrained start of config ``h``: the same method and config except ``steps=0``."""
    row = rows[h]
    want = {**row["config"], "steps": 0}
    return next((k for k, r in rows.items() if r["method"] == row["method"] and r["config"] == want and k != h), None)


def seed_table(results: Path, hashes: list[str], seeds: list[int], suffix: str) -> int:
    from benchbench.report.stats import format_mean_std, paired_test

    by_seed = {sd: load(results, sd) for sd in seeds}
    print(
        "| model | metric | "
        + " | ".join(f"seed {sd} trained / untrained" for sd in seeds)
        + " | gain mean +- std | t-test p |"
    )
    print("|---" * (len(seeds) + 4) + "|")
    for h in hashes:
        for metric in ("avg", "sick-r", "sts14 sp"):
            trained: dict[int, float] = {}
            untrained: dict[int, float] = {}
            cells = []
            for sd in seeds:
                rows = by_seed[sd]
                start = _start_of(rows, h) if h in rows else None
                a = scores(rows[h], suffix)[metric] if h in rows else None
                b = scores(rows[start], suffix)[metric] if start else None
                if a is not None and b is not None:
                    trained[sd], untrained[sd] = a, b
                cells.append("" if a is None or b is None else f"{a:.2f} / {b:.2f}")
            name = _name(next(by_seed[sd][h] for sd in seeds if h in by_seed[sd]))
            gains = {sd: trained[sd] - untrained[sd] for sd in trained}
            p = paired_test(trained, untrained).p_value if len(gains) >= 2 else None
            print(
                f"| {name} | {metric} | "
                + " | ".join(cells)
                + f" | {format_mean_std(gains) if gains else ''} | {'' if p is None else f'{p:.3f}'} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
