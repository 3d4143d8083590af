"""Where each study row's dev curve levels off: the evidence for a study's budget (DESIGN.md, Studies: "a
budget the data can support"), per row rather than the study page's median (report/study_view.budget_reading).

    python bench/study_curve_levels.py leaderboards/studies/post-training-minilm [--all-versions] [--tolerance 0.5]

For each (method, training text) with trained records holding a dev curve (``train.monitor``): the seed-mean
curve at every common step, and the first step from which it stays within ``--tolerance`` points of its last
point. One row per training text: the STS tasks share one training (the wiki text), so their records carry
one curve, counted once. Prints Markdown. Without ``--all-versions``, only the newest code version's records
are read (a study's rows must not mix code versions); with it, every version's, each row naming its own.
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

from benchbench.report.learning import dev_curve_of
from benchbench.store.results import ResultStore, code_version


def levels(store: Path, all_versions: bool, tolerance: float) -> list[str]:
    recs = [r for r in ResultStore(store).records() if (r.get("train") or {}).get("steps") and dev_curve_of(r)]
    if not recs:
        return [f"{store}: no trained record with a dev curve"]
    newest = max(recs, key=lambda r: r.get("created_at") or "")
    keep = [r for r in recs if all_versions or code_version(r) == code_version(newest)]
    rows: dict[tuple[str, str, str], dict[str, list[tuple[float, float]]]] = defaultdict(dict)
    for r in keep:
        t = r.get("train") or {}
        text = str(t.get("train_data_sha256") or r.get("task"))[:12]
        rows[(r["method"], str((t.get("corpus") or {}).get("name") or r.get("task")), code_version(r))][
            f"{r['seed']}.{text}"
        ] = dev_curve_of(r)
    out = [
        f"| method | training text | code | seeds | seed-mean dev curve (step: score) | within ±{tolerance:g} of its last point from step |",
        "| --- | --- | --- | ---: | --- | ---: |",
    ]  # fmt: skip
    settles = []
    for (method, text, version), by_seed in sorted(rows.items()):
        curves = [dict(c) for c in by_seed.values()]
        steps = sorted(set.intersection(*(set(c) for c in curves)))
        if len(steps) < 2:
            continue
        mean = [statistics.fmean(c[s] for c in curves) for s in steps]
        settle = next(s for i, s in enumerate(steps) if all(abs(v - mean[-1]) <= tolerance for v in mean[i:]))
        settles.append(settle)
        shown = " ".join(f"{s:g}:{v:.1f}" for s, v in zip(steps, mean, strict=True))
        out.append(f"| {method} | {text} | {version} | {len(curves)} | {shown} | {settle:g} of {steps[-1]:g} |")
    if settles:
        out.append(
            f"\nmedian level-off step over {len(settles)} rows: {statistics.median(settles):g}; latest: {max(settles):g}"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stores", nargs="+", type=Path)
    ap.add_argument("--all-versions", action="store_true")
    ap.add_argument("--tolerance", type=float, default=0.5)
    args = ap.parse_args()
    for s in args.stores:
        print(f"## {s.name}\n")
        print("\n".join(levels(s, args.all_versions, args.tolerance)) + "\n")


if __name__ == "__main__":
    main()
