"""python bench/tenc_cross_phase.py MODEL POOLING [JSON options]. Cross-encoder phase only (bi->cross, cycle 1) of plugins/trans_encoder.py: 300 STS-B train pairs
(seeded) labelled by the start bi-encoder's cosines, both orders; STS-B dev Spearman of the cross-encoder
at its start and after the phase (dev selection every epoch end)."""

import json
import logging
import random
import sys
import time

import torch
from benchbench_plugins import trans_encoder as te

from benchbench import DataStore, TrainContext, get_registry, make_adapter

torch.set_num_threads(int(__import__("os").environ.get("BENCH_THREADS", "2")))
model, pooling = sys.argv[1], sys.argv[2]
over = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
ds = DataStore()  # BENCHBENCH_DATA
reg = get_registry()
stsb = make_adapter(reg, "stsb", ds)
tr = stsb.load("train")
pairs = [(x, y) for a, b, _ in tr.values() for x, y in zip(a, b)]
pairs = random.Random(1).sample(list(dict.fromkeys(pairs)), 300)
dev = te._DevSplit(stsb, "dev", over.pop("dev_max_pairs", 1000))
cfg = te.TransEncoderConfig(pooling=pooling, **over)
m = te.TransEncoder(cfg)
ctx = TrainContext(model=model, seed=1, output_dir=None, device="cpu", progress=False, logger=logging.getLogger("m"))
t0 = time.time()
track = te._Track(model, model, model, cfg, 1, torch.device("cpu"))
y = te._bi_cosines(track.bi, pairs, 128)
ex = [(a, b, float(v)) for (a, b), v in zip(pairs, y)] + [(b, a, float(v)) for (a, b), v in zip(pairs, y)]
start = dev.score(track.cross, "cross")
m._phase(track, "cross", ex, 1, (dev, "dev", "stsb"), ctx, epochs=1, seed=1010)
hist = [(h["at"], round(h["dev"], 2)) for h in track.history]
print(
    json.dumps(
        {
            "model": model,
            "pooling": pooling,
            **over,
            "steps": ctx.accounting["cross_phase_steps"],
            "dev_start": round(start, 2),
            "dev_best": round(track.best["cross"][0], 2),
            "history": hist,
            "bi_dev": round(dev.score(track.bi, "bi"), 2),
            "seconds": round(time.time() - t0),
        }
    )
)
