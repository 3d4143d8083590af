"""Back-translation throughput with Apertium (sentences/s, each pivot) and the view cache's second pass.

    BENCHBENCH_DATA=../shared/data OMP_NUM_THREADS=1 python bench/backtranslation_throughput.py --n 1000 \
        --out leaderboards/bsl/backtranslation_throughput.json

The first pass translates ``--n`` NLI sentences (a seeded sample of the offline general corpus) through
each pivot; the second pass asks for the same views again and must transform nothing (cache hits).
A fresh cache file is used, so the first pass is a cold measurement.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
from benchbench_plugins.augmenters import BackTranslate, BackTranslateConfig

from benchbench import ViewCache
from benchbench.store.data import DataStore
from benchbench.train.nli import nli_sentences


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--pivots", default="spa,cat")
    ap.add_argument("--batch-lines", type=int, default=2000)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    sents = nli_sentences(DataStore(a.data_dir))
    pick = np.sort(np.random.default_rng(0).permutation(len(sents))[: a.n])
    texts = [sents[i] for i in pick]
    with tempfile.TemporaryDirectory() as d:
        cache = ViewCache(Path(d) / "views.sqlite")
        bt = BackTranslate(
            BackTranslateConfig(pivots=tuple(a.pivots.split(",")), batch_lines=a.batch_lines), cache=cache
        )
        rows = {}
        for v, pivot in enumerate(bt.cfg.pivots):
            t0 = time.perf_counter()
            out = bt.apply(texts, v)
            dt = time.perf_counter() - t0
            changed = sum(x != y for x, y in zip(texts, out)) / len(texts)
            rows[pivot] = {
                "seconds": round(dt, 2),
                "sentences_per_s": round(len(texts) / dt, 1),
                "changed_share": round(changed, 3),
            }
        misses = cache.misses
        t0 = time.perf_counter()
        for v in range(len(bt.cfg.pivots)):
            bt.apply(texts, v)
        second = time.perf_counter() - t0
    rec = {
        "bench": "backtranslation_throughput",
        "engine": "apertium",
        "sentences": len(texts),
        "pivots": rows,
        "second_pass": {
            "seconds": round(second, 3),
            "transformed": cache.misses - misses,
            "sentences_per_s": round(len(texts) * len(rows) / max(second, 1e-9), 1),
        },
        "batch_lines": a.batch_lines,
        "device": f"cpu ({platform.processor() or platform.machine()}), shared 2 cores",
    }
    print(json.dumps(rec, indent=1))
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(rec, indent=1) + "\n")


if __name__ == "__main__":
    main()
