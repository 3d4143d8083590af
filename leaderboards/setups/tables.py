"""Tables for leaderboards/setups/ from the records under leaderboards/setups/records:

* seeds.md: TwitterPara over seeds 1-3 (run_seeds.sh: 100 steps, batch 8, from all-MiniLM-L6-v2):
  mean ± std, the dagger against named rivals, a paired t-test across seeds and a paired bootstrap
  over TwitterPara's pairs per seed (``benchbench significance``, from the stored per-item scores);
  the session-5 smoke records (30 steps, 1-2 seeds, older code) are listed apart;
* corpus_size.md: the TSDAE corpus-size curve (``unsupervised@corpus=N``, Figure 3).

    python leaderboards/setups/tables.py
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from benchbench.store.results import ResultStore
from benchbench.report.significance import report, select
from benchbench.report.stats import format_mean_std

HERE = Path(__file__).parent
ROOT = HERE / "records"
STEPS = 100  # the budget of run_seeds.sh


def seeds(records: list[dict]) -> str:
    current = [
        r for r in records if r["setup"] == "unsupervised" and (r["method"] == "sbert" or r["config"].get("steps") == STEPS)
    ]
    chosen = select(current, "twitterpara", ["tsdae", "ct", "simcse", "sbert"])
    text = [
        "# TwitterPara over 3 seeds (TSDAE paper Table 2 setting, CPU budget)",
        "",
        f"`run_seeds.sh`: from all-MiniLM-L6-v2, {STEPS} optimizer steps, batch 8, seeds 1-3 (sbert: the base",
        "model as it ships, no training), per-item scores stored (`--store-items`). Main score: TwitterPara",
        "AP x100 (mean of TURL and PIT-2015). Device: CPU (2 cores shared with 2-3 other jobs, one thread).",
        "",
        "## tsdae vs ct, simcse, sbert",
        "",
        report(chosen, "tsdae", ["ct", "simcse", "sbert"], ROOT, resamples=1000),
        "## ct vs tsdae, simcse, sbert",
        "",
        report(chosen, "ct", ["tsdae", "simcse", "sbert"], ROOT, resamples=1000),
    ]
    old = [r for r in records if r["setup"] == "unsupervised" and r not in current]
    by: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for r in old:
        by[(r["method"], r["config_hash"])][r["seed"]] = r["splits"]["test"]["main_score"]
    if by:
        text += [
            "## Earlier smoke records (session 5: 30 steps, code before the fidelity fixes; not compared)",
            "",
            "| method | config | seeds | AP |",
            "|---|---|---|---|",
        ]
        text += [
            f"| {m} | {h} | {','.join(map(str, sorted(s)))} | {format_mean_std(s)} |" for (m, h), s in sorted(by.items())
        ]
    sup = [r for r in records if r["setup"].startswith("supervised")]
    if sup:
        text += ["", "## Supervised upper bound (TURL train, `run_supervised.py`)", ""]
        text += [
            f"- {r['method']} `{r['setup']}` seed {r['seed']}: AP {r['splits']['test']['main_score']:.2f}" for r in sup
        ]
    return "\n".join(text) + "\n"


def corpus_curve(records: list[dict]) -> str:
    rows = sorted(
        (int(r["setup"].split("=")[1]), r)
        for r in records
        if r["method"] == "tsdae" and r["setup"].startswith("unsupervised@corpus=")
    )
    base = [r for r in records if r["method"] == "sbert" and r["setup"] == "unsupervised" and r["seed"] == 1]
    out = [
        "# TSDAE corpus-size curve on TwitterPara (TSDAE paper Figure 3, CPU budget)",
        "",
        "`benchbench sweep --methods tsdae --tasks twitterpara --seeds 1 --corpus-sizes 32,128,512,2048,8192",
        "--model all-MiniLM-L6-v2 --set steps=200 --set batch_size=8 --executor local --store-items`: each point",
        "trains 200 steps x 8 sentences (1,600 drawn) on a seeded subset of N of TwitterPara's own unlabelled",
        "sentences (N < 1,600: repeated epochs; N >= 1,600: fewer than N are seen). AP x100, seed 1.",
        "",
        "| sentences N | distinct in corpus | AP | TURL AP | PIT AP | train s |",
        "|---|---|---|---|---|---|",
    ]
    for n, r in rows:
        t = r["splits"]["test"]
        info = (r.get("train") or {}).get("corpus") or {}
        out.append(
            f"| {n} | {info.get('subsampled_to', info.get('sentences', ''))} | {t['main_score']:.2f} | "
            f"{t['scores'].get('ap_turl', float('nan')):.2f} | {t['scores'].get('ap_pit', float('nan')):.2f} | "
            f"{(r.get('train') or {}).get('seconds', 0):.0f} |"
        )
    if base:
        out += ["", f"Start (all-MiniLM-L6-v2 untrained, `sbert`): AP {base[0]['splits']['test']['main_score']:.2f}."]
    reading = HERE / "corpus_size_reading.md"
    if reading.is_file():
        out += ["", reading.read_text().strip()]
    return "\n".join(out) + "\n"


def main() -> None:
    records = list(ResultStore(ROOT).records())
    (HERE / "seeds.md").write_text(seeds(records))
    (HERE / "corpus_size.md").write_text(corpus_curve(records))
    print((HERE / "seeds.md").read_text())
    print((HERE / "corpus_size.md").read_text())


if __name__ == "__main__":
    main()
