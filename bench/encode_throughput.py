"""Encoding throughput: benchbench's pipeline and its evaluation backends vs ``SentenceTransformer.encode``,
side by side in one run.

Same model weights, same texts (every sentence of the chosen STS tasks, in evaluation order, with
their natural repeats), same batch size, same threads. Reports, per pipeline, seconds, sentences/s, the
ratio to sentence-transformers, useful FLOP/s (real tokens only, no padding: the transformer's matmuls
and attention, over the texts each pipeline encodes: distinct ones for benchbench, every repeat for
sentence-transformers) as a % of a matmul peak measured in the same run (the best of three large
fp32 torch matmuls on the same threads), the largest vector difference and smallest cosine against
torch fp32, and where torch eager's time goes by op (torch.profiler):
  (1) sentence-transformers encode,
  (2) benchbench embed(), torch eager fp32 (de-duplication + token-length sorting),
  (3) each --backends entry through benchbench embed(): onnx, openvino, onnx-int8 (lossy), torch-bf16,
  (4) benchbench embed() re-run on a warm embedding cache.
``--sweep`` instead times the CPU runtimes over thread counts and batch sizes (the settings in
benchbench/encode/backends.py were chosen with it).

    BENCHBENCH_DATA=../shared/data python bench/encode_throughput.py [--tasks sts] [--limit 3000]
        [--backends onnx,openvino,onnx-int8] [--batch-size 64] [--sweep]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
import torch


def matmul_peak(
    n: int | None = None, dtype: torch.dtype = torch.float32, device: str = "cpu", seconds: float = 2.0
) -> float:
    """FLOP/s of a large square matmul on this device and thread count: the 'peak' MFU is taken against.
    Through ``F.linear`` (a @ b.T), the op a transformer's layers run: on CPUs without bf16 units a bf16
    ``a @ b`` can take a slow path (an earlier session measured 1 GFLOP/s against 10 for linear), which
    would put MFU over 100%. This CPU has AVX512-BF16: at 2048^3, 2026-11-27, quiet, bf16 ``a @ b`` 419,
    bf16 linear 426 and fp32 linear 179 GFLOP/s.
    ``n`` None: the best of 1024^3, 2048^3 and 4096^3 (on this 2-core CPU, quiet, 2026-11-27: 180, 160
    and 160 GFLOP/s; one size alone would understate the peak and flatter every % taken against it)."""
    if n is None:
        return max(matmul_peak(size, dtype, device, seconds / 2) for size in (1024, 2048, 4096))
    a = torch.randn(n, n, dtype=dtype, device=device)
    b = torch.randn(n, n, dtype=dtype, device=device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    mm = torch.nn.functional.linear
    mm(a, b)  # warm-up
    sync()
    best, t_end = float("inf"), time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t = time.perf_counter()
        mm(a, b)
        sync()
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best


def useful_flops(enc, texts: list[str], *, distinct: bool = False) -> float:
    """Forward FLOPs of a BERT-style encoder over ``texts`` counting real tokens only: per layer and
    sequence of n tokens, 2n(4h^2 + 2hi) for the projections and feed-forward, 4n^2 h for attention.
    ``distinct``: each distinct text once, the work benchbench's embed() does (it de-duplicates); a
    pipeline that encodes every repeat (sentence-transformers) is counted over all of ``texts``, so
    neither side's FLOP/s is inflated by work it skipped."""
    if distinct:
        texts = list(dict.fromkeys(texts))
    cfg = enc.model.config
    h, i, layers = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    n = np.asarray(enc.lengths(texts), dtype=np.float64)
    return float(layers * (2 * n * (4 * h * h + 2 * h * i) + 4 * n * n * h).sum())


def load_texts(tasks: str, data_dir: str | None, limit: int | None) -> list[str]:
    from benchbench.core.registry import get_registry, make_adapter
    from benchbench.store.data import DataStore

    reg = get_registry()
    data = DataStore(data_dir)
    texts: list[str] = []
    for task in reg.expand(tasks):
        adapter = make_adapter(reg, task, data)
        for a, b, _ in adapter.load(adapter.spec.default_splits[0]).values():
            texts += a + b
    return texts[:limit] if limit else texts


def _compare(got: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    g, r = got.astype(np.float64), ref.astype(np.float64)
    cos = (g * r).sum(1) / np.maximum(np.linalg.norm(g, axis=1) * np.linalg.norm(r, axis=1), 1e-12)
    return float(np.abs(got - ref).max()), float(cos.min())


def where_time_goes(ours, texts: list[str], batch_size: int, peak: float, n: int = 2000) -> str:
    """torch eager's time by op over ``n`` distinct texts (torch.profiler): the share of the linear
    layers' matmuls (aten::addmm) and the FLOP/s they reach at the model's own shapes (padding included:
    what the kernels compute), beside attention and the rest. Says where the gap to the peak is."""
    from torch.profiler import ProfilerActivity, profile

    from benchbench.encode.encoding import embed

    sample = list(dict.fromkeys(texts))[:n]
    embed(ours, sample[:batch_size], batch_size=batch_size, progress=False)  # warm-up
    with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
        embed(ours, sample, batch_size=batch_size, progress=False)
    rows = {e.key: e for e in prof.key_averages()}
    total = sum(e.self_cpu_time_total for e in rows.values())
    mm = rows.get("aten::addmm")
    attn = sum(e.self_cpu_time_total for k, e in rows.items() if "attention" in k or k == "aten::bmm")
    if mm is None or not total:
        return "profile: no aten::addmm rows (not a torch eager BERT?)"
    mm_s = mm.self_cpu_time_total / 1e6
    return (
        f"where torch eager's time goes ({len(sample)} distinct texts, batch {batch_size}, torch.profiler): "
        f"linear-layer matmuls {100 * mm.self_cpu_time_total / total:.0f}% of op time at "
        f"{mm.flops / mm_s / 1e9:.1f} GFLOP/s ({100 * mm.flops / mm_s / peak:.0f}% of the peak, padding "
        f"included); attention {100 * attn / total:.0f}%; the rest (GELU, copies, LayerNorm, adds) "
        f"{100 * (total - mm.self_cpu_time_total - attn) / total:.0f}%"
    )


def sweep(ours, texts: list[str]) -> None:
    """sentences/s of the CPU runtimes per thread count and batch size (encode() on length-sorted batches)."""
    from benchbench.encode import backends
    from benchbench.encode.encoding import embed

    print(f"{'backend':10s} {'threads':>7s} {'batch':>6s} {'sent/s':>9s}")
    for threads in sorted({1, torch.get_num_threads()}):
        torch.set_num_threads(threads)
        for name in ("torch", "onnx", "openvino"):
            backends._LAST.clear()
            enc = ours if name == "torch" else backends.evaluation_encoder(ours, name, "auto")[0]
            for bs in (32, 64, 128):
                embed(enc, texts[:64], batch_size=bs, progress=False)
                t = time.perf_counter()
                embed(enc, texts, batch_size=bs, progress=False)
                print(f"{name:10s} {threads:7d} {bs:6d} {len(texts) / (time.perf_counter() - t):9.1f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--tasks", default="sts")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--limit", type=int, default=None, help="first N texts only (quick check)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=2, help="alternating runs of each pipeline; the best time counts")
    ap.add_argument(
        "--backends",
        default="onnx,openvino,onnx-int8",
        help="comma list beside torch eager: onnx, openvino, onnx-int8, torch-bf16 (bf16 is emulated, slow, on "
        "CPUs without bf16 units)",
    )
    ap.add_argument("--sweep", action="store_true", help="time the CPU runtimes over threads and batch sizes")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from sentence_transformers import SentenceTransformer

    from benchbench.encode import backends
    from benchbench.encode.cache import EmbeddingCache
    from benchbench.encode.encoding import embed
    from benchbench.encode.models import load_encoder, resolve_model_path

    texts = load_texts(args.tasks, args.data_dir, args.limit)
    ours = load_encoder(args.model)
    if args.sweep:
        sweep(ours, texts)
        return
    peak = matmul_peak()
    flops_all = useful_flops(ours, texts)  # what sentence-transformers encodes: every text, repeats too
    flops_distinct = useful_flops(ours, texts, distinct=True)  # what embed() encodes
    print(
        f"{len(texts)} texts ({len(set(texts))} distinct) from {args.tasks}; batch size {args.batch_size}; "
        f"torch threads {torch.get_num_threads()}; device cpu; load {os.getloadavg()[0]:.2f} (shared machine)"
    )

    st = SentenceTransformer(resolve_model_path(args.model), device="cpu")
    pipelines = {
        "sentence-transformers encode": lambda: st.encode(texts, batch_size=args.batch_size, convert_to_numpy=True),
        "benchbench torch eager fp32": lambda: embed(
            ours, texts, batch_size=args.batch_size, normalize=True, progress=False
        ),
    }
    for name in [b.strip() for b in args.backends.split(",") if b.strip()]:
        backend, dtype = ("torch", "bf16") if name == "torch-bf16" else (name, "auto")
        t = time.perf_counter()
        enc = backends.evaluation_encoder(ours, backend, dtype, "cpu")[0]
        print(f"  {name}: built in {time.perf_counter() - t:.1f} s (export cached after the first run)")
        enc.encode(texts[:64])  # warm-up
        pipelines[f"benchbench {name}{' (lossy)' if name in backends.LOSSY_BACKENDS else ''}"] = lambda enc=enc: embed(
            enc, texts, batch_size=args.batch_size, normalize=True, progress=False
        )
    st.encode(texts[:64], batch_size=args.batch_size)
    ours.encode(texts[:64])

    # alternate the pipelines and keep each one's best time, so a load change on a shared machine does
    # not favour whichever ran last
    best = dict.fromkeys(pipelines, float("inf"))
    vecs: dict[str, np.ndarray] = {}
    for _ in range(args.repeats):
        for name, fn in pipelines.items():
            t = time.perf_counter()
            vecs[name] = fn()
            best[name] = min(best[name], time.perf_counter() - t)

    # the peak again after the pipelines, the best of the two: a load change on a shared machine during
    # the short peak window would otherwise inflate every % (a peak taken at a busy moment is too low)
    peak = max(peak, matmul_peak())
    with tempfile.TemporaryDirectory() as d:
        embed(ours, texts, cache=EmbeddingCache(d), batch_size=args.batch_size, progress=False)  # fill
        t = time.perf_counter()
        name = "benchbench warm cache, new process"
        vecs[name] = embed(
            ours, texts, cache=EmbeddingCache(d), batch_size=args.batch_size, normalize=True, progress=False
        )
        best[name] = time.perf_counter() - t

    n, t_st = len(texts), best["sentence-transformers encode"]
    ref = vecs["benchbench torch eager fp32"]
    print(
        f"{'pipeline':38s} {'seconds':>8s} {'sent/s':>8s} {'vs ST':>7s} {'GFLOP/s':>8s} {'% peak':>7s} "
        f"{'max|diff|':>9s} {'min cos':>9s}"
    )
    for name, sec in best.items():
        diff, cos = _compare(vecs[name], ref)
        flops = flops_all if name.startswith("sentence") else flops_distinct
        rate = "" if "cache" in name else f"{flops / sec / 1e9:8.1f} {100 * flops / sec / peak:6.1f}%"
        print(
            f"{name:38s} {sec:8.2f} {n / sec:8.1f} {t_st / sec:6.2f}x {rate:>16s} {diff:9.2e} {cos:9.6f}",
            flush=True,
        )
    print(where_time_goes(ours, texts, args.batch_size, peak))
    print(
        f"% peak: useful FLOP/s over an fp32 matmul peak of {peak / 1e9:.1f} GFLOP/s (the best of 1024^3, 2048^3 "
        f"and 4096^3, before and after; int8 rows can pass 100%: their matmuls are not fp32). Useful FLOPs count "
        f"real tokens only, of the texts each pipeline encodes: {flops_distinct / 1e9:.1f} GFLOP for the "
        f"{len(set(texts))} distinct texts benchbench encodes, {flops_all / 1e9:.1f} GFLOP for all {n} that "
        f"sentence-transformers encodes.\nmax|diff| and min cos: against benchbench torch eager fp32 "
        f"(the exact reference). Timings: best of {args.repeats}; load at the end {os.getloadavg()[0]:.2f}."
    )


if __name__ == "__main__":
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    main()
