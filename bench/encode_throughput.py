"""Encoding throughput: benchbench's pipeline vs ``SentenceTransformer.encode``, side by side.

Same model weights, same texts (every sentence of the chosen STS tasks, in evaluation order, with
their natural repeats), same batch size, same threads. Reports sentences/s for
  (1) sentence-transformers encode,
  (2) benchbench embed() with no cache (de-duplication + token-length sorting),
  (3) benchbench embed() re-run on a warm embedding cache,
the ratios (2)/(1) and (3)/(1), and the largest difference between the two sets of vectors.

    BENCHBENCH_DATA=../shared/data python bench/encode_throughput.py [--tasks sts] [--batch-size 64]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--tasks", default="sts")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--limit", type=int, default=None, help="first N texts only (quick check)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=2, help="alternating runs of each pipeline; the best time counts")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from sentence_transformers import SentenceTransformer

    from benchbench.core.registry import get_registry
    from benchbench.encode.encoding import EmbeddingCache, embed
    from benchbench.encode.models import load_encoder, resolve_model_path
    from benchbench.run.runner import make_adapter
    from benchbench.store.data import DataStore

    reg = get_registry()
    data = DataStore(args.data_dir)
    texts: list[str] = []
    for task in reg.expand(args.tasks):
        adapter = make_adapter(reg, task, data)
        for a, b, _ in adapter.load(adapter.spec.default_splits[0]).values():
            texts += a + b
    texts = texts[: args.limit] if args.limit else texts
    print(
        f"{len(texts)} texts ({len(set(texts))} distinct) from {args.tasks}; batch size {args.batch_size}; "
        f"torch threads {torch.get_num_threads()}; device cpu"
    )

    st = SentenceTransformer(resolve_model_path(args.model), device="cpu")
    ours = load_encoder(args.model)
    st.encode(texts[:64], batch_size=args.batch_size)  # warm-up both
    ours.encode(texts[:64])

    # alternate the two pipelines and keep each one's best time, so a load change on a shared
    # machine does not favour whichever ran second
    t_st = t_ours = float("inf")
    for _ in range(args.repeats):
        t = time.perf_counter()
        ref = st.encode(texts, batch_size=args.batch_size, convert_to_numpy=True)
        t_st = min(t_st, time.perf_counter() - t)
        t = time.perf_counter()
        got = embed(ours, texts, batch_size=args.batch_size, normalize=True, progress=False)
        t_ours = min(t_ours, time.perf_counter() - t)

    with tempfile.TemporaryDirectory() as d:
        cache = EmbeddingCache(d)
        embed(ours, texts, cache=cache, batch_size=args.batch_size, progress=False)  # fill
        t = time.perf_counter()
        cached = embed(ours, texts, cache=EmbeddingCache(d), batch_size=args.batch_size, normalize=True, progress=False)
        t_cached = time.perf_counter() - t

    n = len(texts)
    print(f"{'pipeline':40s} {'seconds':>9s} {'sent/s':>9s} {'vs ST':>7s}")
    for name, sec in (
        ("sentence-transformers encode", t_st),
        ("benchbench embed (no cache)", t_ours),
        ("benchbench embed (warm cache, new process)", t_cached),
    ):
        print(f"{name:40s} {sec:9.2f} {n / sec:9.1f} {t_st / sec:7.2f}x")
    print(
        f"max |difference| of the vectors: ours vs ST {np.abs(got - ref).max():.2e}; cached vs ST {np.abs(cached - ref).max():.2e}"
    )
    print(
        f"ratio no-cache: {t_st / t_ours:.2f}x (target >= 1.3x); ratio cached: {t_st / t_cached:.1f}x (target >= 20x)"
    )


if __name__ == "__main__":
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    main()
