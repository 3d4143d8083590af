"""GPU throughput and model FLOP utilisation (MFU), benchbench beside sentence-transformers, in one run.

    BENCHBENCH_DATA=../shared/data python bench/gpu_mfu.py [--model all-MiniLM-L6-v2] [--json out.json]

1. Encoding, the STS texts (``--tasks sts``): sentences/s and MFU of benchbench's evaluation encoder
   (``benchbench.encode.backends``: torch fp32, and bf16 with SDPA attention) and of
   ``SentenceTransformer.encode`` (fp32, and the model cast to bf16), plus each bf16 row's min cosine to
   fp32. MFU = useful FLOPs (real tokens only, no padding; bench/encode_throughput.py's count) per second
   over a matmul peak measured in this run for the same dtype (a large square ``F.linear``; fp32 without
   TF32).
2. Training, bf16 autocast: TSDAE (benchbench's TSDAEObjective vs sentence-transformers'
   DenoisingAutoEncoderLoss, tied decoder) and unsupervised SimCSE (SimCSEObjective, no MLP, vs
   MultipleNegativesRankingLoss on (s, s) pairs, scale 20 = 1/0.05): steps/s (median of interleaved
   steps, warm-up dropped) and MFU = FLOPs of one step (forward + backward, torch's FlopCounterMode,
   padding included) x steps/s over the measured bf16 matmul peak.

Without a GPU it runs on the CPU with small sizes and says so on its first line and in the JSON: the
numbers then only show that the script works (bf16 on CPUs without bf16 units is emulated).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from encode_throughput import load_texts, matmul_peak, useful_flops


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _timed(fn, device: torch.device) -> float:
    _sync(device)
    t = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - t


def _min_cos(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min())


def encode_section(args, device: torch.device, texts: list[str], peak: dict[str, float]) -> list[dict]:
    """Encode rows: benchbench fp32/bf16 and sentence-transformers fp32/bf16, interleaved, best of repeats."""
    from sentence_transformers import SentenceTransformer

    from benchbench.encode.backends import evaluation_encoder
    from benchbench.encode.encoding import embed
    from benchbench.encode.models import load_encoder, resolve_model_path

    ours = load_encoder(args.model)
    path = resolve_model_path(args.model)
    st32 = SentenceTransformer(path, device=str(device))
    st16 = SentenceTransformer(path, device=str(device)).to(torch.bfloat16)
    bs = args.encode_batch_size
    runs = {
        "benchbench fp32": (evaluation_encoder(ours, "torch", "fp32", str(device))[0], "fp32"),
        "benchbench bf16 (SDPA)": (evaluation_encoder(ours, "torch", "bf16", str(device))[0], "bf16"),
        "sentence-transformers fp32": (st32, "fp32"),
        "sentence-transformers bf16": (st16, "bf16"),
    }

    def call(name: str):
        enc = runs[name][0]
        if name.startswith("sentence-transformers"):
            return enc.encode(texts, batch_size=bs, convert_to_numpy=True)
        return embed(enc, texts, batch_size=bs, normalize=True, progress=False)

    for name, (enc, _) in runs.items():  # warm-up (kernels, allocator)
        if name.startswith("sentence"):
            enc.encode(texts[:bs], batch_size=bs)
        else:
            enc.encode(texts[:bs])
    best = dict.fromkeys(runs, float("inf"))
    vecs: dict[str, np.ndarray] = {}
    for _ in range(args.repeats):
        for name in runs:
            out: list = []
            best[name] = min(best[name], _timed(lambda name=name: out.append(call(name)), device))
            vecs[name] = np.asarray(out[0], dtype=np.float32)
    # the FLOPs each pipeline does: embed() encodes each distinct text once, sentence-transformers every repeat
    flops = {False: useful_flops(ours, texts, distinct=True), True: useful_flops(ours, texts)}
    ref = vecs["benchbench fp32"]
    return [
        {
            "what": f"encode {name}",
            "per_s": len(texts) / best[name],
            "unit": "sentences/s",
            "tflops": flops[name.startswith("sentence")] / best[name] / 1e12,
            "mfu": flops[name.startswith("sentence")] / best[name] / peak[dtype],
            "peak": dtype,
            "min_cos_vs_fp32": _min_cos(vecs[name], ref),
        }
        for name, (_, dtype) in runs.items()
    ]


def _batches(sents: list[str], batch: int, n: int) -> list[list[str]]:
    return [sents[i * batch : (i + 1) * batch] for i in range(n)]


def _train_rows(
    name: str, sides: dict, batches: list, args, device: torch.device, peak: dict[str, float]
) -> list[dict]:
    """Interleaved AdamW steps of each side under bf16 autocast; FLOPs of one step per side."""
    from torch.utils.flop_counter import FlopCounterMode

    from benchbench.train.loop import adamw

    amp = torch.autocast(device.type, dtype=torch.bfloat16)
    opts = {k: adamw(module.parameters(), lr=3e-5) for k, (module, _) in sides.items()}
    for module, _ in sides.values():
        module.train()

    def step(k: str, b) -> None:
        module, loss_fn = sides[k]
        with amp:
            loss = loss_fn(b)
        loss.backward()
        opts[k].step()
        opts[k].zero_grad(set_to_none=True)

    times: dict[str, list[float]] = {k: [] for k in sides}
    for i, b in enumerate(batches):
        order = list(sides) if i % 2 == 0 else list(sides)[::-1]  # alternate who goes first
        for k in order:
            dt = _timed(lambda k=k, b=b: step(k, b), device)
            if i >= args.warmup:
                times[k].append(dt)
    rows = []
    for k, (module, loss_fn) in sides.items():
        with FlopCounterMode(display=False) as fc:
            with amp:
                loss = loss_fn(batches[0])
            loss.backward()
        opts[k].zero_grad(set_to_none=True)
        rate = 1 / statistics.median(times[k])
        flops = fc.get_total_flops()
        rows.append(
            {
                "what": f"train {name} {k} (bf16 autocast)",
                "per_s": rate,
                "unit": "steps/s",
                "tflops": flops * rate / 1e12,
                "mfu": flops * rate / peak["bf16"],
                "peak": "bf16",
                "flops_per_step": flops,
            }
        )
    return rows


def train_section(args, device: torch.device, sents: list[str], peak: dict[str, float]) -> list[dict]:
    """TSDAE and SimCSE, benchbench's objectives beside sentence-transformers' losses on the same weights."""
    from benchbench_plugins.simcse import SimCSEObjective
    from benchbench_plugins.tsdae import TSDAEObjective, build_decoder
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Pooling, Transformer
    from sentence_transformers.sentence_transformer.losses import (
        DenoisingAutoEncoderLoss,
        MultipleNegativesRankingLoss,
    )

    from benchbench.encode.models import load_encoder, resolve_model_path
    from benchbench.train.noise import WordNoise

    path, n_steps = resolve_model_path(args.model), args.train_steps + args.warmup
    batches = _batches(sents, args.train_batch_size, n_steps)
    rng = np.random.default_rng(0)
    noise = WordNoise("delete", 0.6)
    noisy = [(noise(b, rng), b) for b in batches]

    def st_model():
        tr = Transformer(path, max_seq_length=args.max_seq_length)
        return SentenceTransformer(modules=[tr, Pooling(tr.get_embedding_dimension(), "cls")], device=str(device))

    def feats(model, texts):
        return {k: v.to(device) for k, v in model.tokenize(texts).items() if hasattr(v, "to")}

    def ours_enc():
        return load_encoder(path, pooling="cls", max_seq_length=args.max_seq_length, normalize=False).to(device)

    # TSDAE
    st = st_model()
    ref = DenoisingAutoEncoderLoss(st, tie_encoder_decoder=True).to(device)
    enc = ours_enc()
    tsdae = TSDAEObjective(enc, build_decoder(enc, tie=True), noise).to(device)

    def ours_tsdae(b):
        src, tgt = enc.tokenize(b[0]), enc.tokenize(b[1])
        return tsdae(target_ids=tgt["input_ids"].to(device), **{f"src_{k}": v.to(device) for k, v in src.items()})

    rows = _train_rows(
        "TSDAE",
        {
            "benchbench": (tsdae, ours_tsdae),
            "sentence-transformers": (ref, lambda b: ref([feats(st, b[0]), feats(st, b[1])], None)),
        },
        noisy,
        args,
        device,
        peak,
    )
    # SimCSE (unsupervised: the same sentence twice, dropout makes the two views)
    st = st_model()
    mnrl = MultipleNegativesRankingLoss(st, scale=20.0).to(device)
    enc = ours_enc()
    simcse = SimCSEObjective(enc, temperature=0.05, mlp=False).to(device)

    def ours_simcse(b):
        return simcse(**{k: v.to(device) for k, v in enc.tokenize(b).items()})

    rows += _train_rows(
        "SimCSE",
        {
            "benchbench": (simcse, ours_simcse),
            "sentence-transformers": (mnrl, lambda b: mnrl([feats(st, b), feats(st, b)], None)),
        },
        batches,
        args,
        device,
        peak,
    )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--tasks", default="sts", help="STS tasks whose texts are encoded")
    ap.add_argument("--limit", type=int, default=None, help="texts encoded (default: all on GPU, 256 on CPU)")
    ap.add_argument("--encode-batch-size", type=int, default=None, help="default: 256 on GPU, 32 on CPU")
    ap.add_argument("--train-batch-size", type=int, default=None, help="default: 64 on GPU, 8 on CPU")
    ap.add_argument("--train-steps", type=int, default=None, help="timed steps a side (default: 30 on GPU, 3 on CPU)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed first steps (default: 5 on GPU, 1 on CPU)")
    ap.add_argument("--max-seq-length", type=int, default=128, help="training max length")
    ap.add_argument("--repeats", type=int, default=None, help="encode repeats, best counts (default: 3 GPU, 1 CPU)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--json", default=None, help="also write every row to this file")
    args = ap.parse_args()
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    gpu = device.type == "cuda"
    for k, on_gpu, on_cpu in (
        ("limit", None, 256),
        ("encode_batch_size", 256, 32),
        ("train_batch_size", 64, 8),
        ("train_steps", 30, 3),
        ("warmup", 5, 1),
        ("repeats", 3, 1),
    ):
        if getattr(args, k) is None:
            setattr(args, k, on_gpu if gpu else on_cpu)
    if gpu:
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32: the fp32 peak and rows without TF32
        where = f"GPU {torch.cuda.get_device_name(0)}"
    else:
        where = (
            f"NO GPU: running on the CPU ({torch.get_num_threads()} threads, load {os.getloadavg()[0]:.1f}) with small "
            f"sizes ({args.limit} texts, {args.train_steps} steps of {args.train_batch_size}); these numbers only "
            f"show that the script works, not GPU speed (bf16 is emulated on CPUs without bf16 units)"
        )
    print(where, flush=True)
    size = 8192 if gpu else 1024
    peak = {
        "fp32": matmul_peak(size, torch.float32, str(device)),
        "bf16": matmul_peak(size, torch.bfloat16, str(device)),
    }
    print(
        f"measured matmul peak ({size}^3): fp32 {peak['fp32'] / 1e12:.2f} TFLOP/s, bf16 {peak['bf16'] / 1e12:.2f} TFLOP/s",
        flush=True,
    )
    texts = load_texts(args.tasks, args.data_dir, args.limit)
    rows = encode_section(args, device, texts, peak)
    sents = list(dict.fromkeys(texts))  # training text: the same STS sentences, repeated when too few
    need = args.train_batch_size * (args.train_steps + args.warmup)
    sents = (sents * (need // max(len(sents), 1) + 1))[:need]
    rows += train_section(args, device, sents, peak)
    print(f"{'what':58s} {'rate':>20s} {'TFLOP/s':>8s} {'MFU':>7s} {'min cos':>8s}")
    for r in rows:
        cos = f"{r['min_cos_vs_fp32']:.5f}" if "min_cos_vs_fp32" in r else ""
        rate = f"{r['per_s']:.2f} {r['unit']}"
        print(f"{r['what']:58s} {rate:>20s} {r['tflops']:8.3f} {100 * r['mfu']:6.2f}% {cos:>8s}")
    print(
        f"MFU against the matmul peak of the row's dtype measured above ({'GPU' if gpu else 'CPU, small sizes'}); "
        f"{len(texts)} texts encoded, training max length {args.max_seq_length}."
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"device": str(device), "gpu": gpu, "where": where, "peak": peak, "rows": rows}, indent=2)
        )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    sys.exit(main())
