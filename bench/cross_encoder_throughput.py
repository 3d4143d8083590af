"""Cross-encoder scoring throughput (pairs/s) vs bi-encoder cosine throughput on this machine.

    OMP_NUM_THREADS=1 python bench/cross_encoder_throughput.py --model all-MiniLM-L6-v2 --pairs 512

Pairs: the first N of STS-B test (real data via BENCHBENCH_DATA), scored by the Trans-Encoder
cross-encoder built from --model (head untrained: speed does not depend on the weights' values),
max 64 tokens per pair as the paper; the bi-encoder encodes both sides at max 32 tokens and takes
the cosine (no embedding cache). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import torch

from benchbench import CrossEncoderScorer, Embedder, load_encoder, make_adapter
from benchbench.core.registry import get_registry
from benchbench.store.data import DataStore


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--pairs", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    data = make_adapter(get_registry(), "stsb", DataStore(os.environ.get("BENCHBENCH_DATA"))).load("test")["stsb"]
    a, b = data[0][: args.pairs], data[1][: args.pairs]
    bi = load_encoder(args.model, max_seq_length=32).to(args.device)
    cross = CrossEncoderScorer.from_encoder(bi, max_length=64, seed=0).to(args.device)
    cross.batch_size = args.batch_size
    cross.score_pairs(a[:8], b[:8])  # warm-up
    t0 = time.perf_counter()
    cross.score_pairs(a, b)
    t_cross = time.perf_counter() - t0
    t0 = time.perf_counter()
    Embedder(bi, cache=None, batch_size=args.batch_size, progress=False).cosine_pairs(a, b)
    t_bi = time.perf_counter() - t0
    print(
        json.dumps(
            {
                "model": args.model,
                "pairs": len(a),
                "device": args.device,
                "cpu": f"{platform.machine()} x{os.cpu_count()}",
                "torch_threads": torch.get_num_threads(),
                "cross_pairs_per_s": round(len(a) / t_cross, 1),
                "bi_cosine_pairs_per_s": round(len(a) / t_bi, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
