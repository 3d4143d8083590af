"""Tables for leaderboards/setups/: mean ± std over seeds, the dagger against named rivals, and a
paired t-test across seeds (benchbench.stats), from the records under leaderboards/setups/records.

    python leaderboards/setups/tables.py [--method tsdae --rivals ct,simcse,sbert]
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from benchbench.stats import TEST_NAMES, dagger, format_mean_std, paired_test

HERE = Path(__file__).parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--method", default="tsdae")
    ap.add_argument("--rivals", default="ct,simcse,sbert")
    args = ap.parse_args()
    scores: dict[tuple[str, str, str], dict[int, float]] = defaultdict(dict)
    for p in sorted((HERE / "records").rglob("*.json")):
        if "runs" in p.parts:
            continue
        r = json.loads(p.read_text())
        if "splits" not in r or "test" not in r["splits"]:
            continue
        scores[(r["method"], r["setup"], r["task"])][int(r["seed"])] = float(r["splits"]["test"]["main_score"])
    rivals = args.rivals.split(",")
    lines = ["| method | setup | task | seeds | main score (mean ± std) | dagger vs " + "/".join(rivals) + " | paired t-test p |",
             "|---|---|---|---|---|---|---|"]
    for (m, st, t), by_seed in sorted(scores.items()):
        d, p = "", ""
        if m == args.method:
            named = {r: scores[(r, "unsupervised", t)] for r in rivals if (r, "unsupervised", t) in scores}
            shared = min((len(set(by_seed) & set(v)) for v in named.values()), default=0)
            d = "†" if dagger(by_seed, named) else ("no" if shared >= 2 else "n/a (< 2 shared seeds)")
            ps = []
            for r, v in named.items():
                try:
                    ps.append(f"{r}: {paired_test(by_seed, v).p_value:.3g}")
                except Exception as e:
                    ps.append(f"{r}: n/a ({type(e).__name__}: < 2 shared seeds)")
            p = "; ".join(ps)
        lines.append(f"| {m} | {st} | {t} | {','.join(map(str, sorted(by_seed)))} | {format_mean_std(by_seed)} | {d} | {p} |")
    lines += ["", f"† = beats every named rival ({', '.join(rivals)}) in every shared seed (benchbench.stats.dagger).",
              f"Test: {TEST_NAMES['ttest']}.", "Main score: TwitterPara AP (mean of TURL and PIT-2015), x100."]
    (HERE / "seeds.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
