"""TSDAE training throughput: benchbench's TSDAE vs sentence-transformers' DenoisingAutoEncoderLoss.

Both sides get the same model weights (benchbench's decoder is loaded from the reference loss's
decoder), the same (noisy, clean) sentence batches, batch size and optimizer (AdamW, lr 3e-5), and
the steps are interleaved (one reference step, one benchbench step, ...) so that a shared, noisy CPU
slows both equally. A step is: tokenise both sides, forward, backward, clipping at 1.0, AdamW update
(bench/_train_bench.py, shared with study_train_throughput.py).

Before timing, the two losses are compared on the same batch and weights with dropout off; they
must agree to |diff| < 1e-3 (the script exits 1 otherwise).

    python bench/tsdae_throughput.py --model all-MiniLM-L6-v2 --steps 20 --batch-size 8

On CUDA both sides run under bf16 autocast. The script reports model FLOP utilisation: FLOPs of the
timed benchbench steps counted by torch's FlopCounterMode, times steps/s, over --peak-tflops on CUDA
and over the fp32 matmul peak measured in the same run on the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _train_bench import Side, copy_side, flops_per_step, interleave, load_sentences, model_dir, tsdae_pair


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--corpus", default=None)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per side")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--max-seq-length", type=int, default=128)
    ap.add_argument("--noise-ratio", type=float, default=0.6)
    ap.add_argument("--device", default=None)
    ap.add_argument("--peak-tflops", type=float, default=989.0, help="bf16 dense peak of the GPU (H100 SXM: 989)")
    ap.add_argument(
        "--group",
        action="store_true",
        help="benchbench with per-length-group padding (group_by_length; off by default, as in the method)",
    )
    ap.add_argument(
        "--dense-embedding-grad",
        action="store_true",
        help="benchbench with dense lookup gradients (sparse_embedding_grad=False; the method's default on CPU is sparse)",
    )
    ap.add_argument("--json", default=None, help="also write the numbers to this file")
    args = ap.parse_args()

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    torch.manual_seed(0)
    path = model_dir(args.model, tempfile.mkdtemp())
    pair = tsdae_pair(
        path,
        args.max_seq_length,
        args.noise_ratio,
        device,
        group_by_length=args.group,
        sparse_embedding_grad=False if args.dense_embedding_grad else None,
    )
    sents = load_sentences(args.corpus, args.batch_size * (args.steps + args.warmup + 1))
    batches = pair.make_batches(sents, args.batch_size, 0)

    # 1. same loss on the same batch and weights (dropout off)
    pair.ref.eval(), pair.ours.eval()
    with torch.no_grad():
        diffs = [abs(float(pair.ref_loss(b)) - float(pair.our_loss(pair.ours, b))) for b in batches[:3]]
        l_ref, l_ours = float(pair.ref_loss(batches[0])), float(pair.our_loss(pair.ours, batches[0]))
    print(
        f"loss on the same batch: sentence-transformers {l_ref:.6f}  benchbench {l_ours:.6f}  max |diff| over 3 batches {max(diffs):.2e}"
    )
    same = max(diffs) < 1e-3

    # 2. interleaved timing, training mode (bench/_train_bench.py: a step is tokenise, forward, backward,
    # clipping at 1.0 and fused AdamW, the HF Trainer's default optimizer and benchbench's loop's)
    amp = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if device.type == "cuda" else None
    kw = {"amp": amp} if amp else {}
    sides = [
        Side("sentence-transformers", pair.ref_loss, pair.ref, 3e-5, **kw),
        copy_side("benchbench", pair.ours, pair.our_loss, 3e-5, **kw),
    ]
    interleave(sides, batches[1:], args.warmup)
    times = {s.name: s.times for s in sides}
    rate = {k: len(v) / sum(v) for k, v in times.items()}
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = rate["benchbench"] / rate["sentence-transformers"]
    ratio_med = med["sentence-transformers"] / med["benchbench"]
    print(
        f"device {device} threads {torch.get_num_threads()}  model {args.model}  batch {args.batch_size}  "
        f"timed steps {args.steps} per side (interleaved)"
    )
    for k in times:
        print(f"  {k:22s} {rate[k]:7.3f} steps/s   median step {med[k] * 1000:8.1f} ms")
    print(f"  speed-up benchbench / sentence-transformers: {ratio:.2f}x (mean)  {ratio_med:.2f}x (median)")
    out = {
        "device": str(device),
        "model": args.model,
        "batch_size": args.batch_size,
        "steps": args.steps,
        "steps_per_s": rate,
        "median_step_s": med,
        "speedup_mean": ratio,
        "speedup_median": ratio_med,
        "loss_ref": l_ref,
        "loss_benchbench": l_ours,
        "max_abs_loss_diff": max(diffs),
    }
    # model FLOPs (torch's FlopCounterMode: the matmuls of forward and backward, padding included, no
    # optimizer) over the very batches timed, so FLOPs and seconds cover the same work. The peak: the
    # GPU's bf16 dense figure (--peak-tflops) on CUDA; on the CPU the fp32 matmul peak measured now
    # (bench/encode_throughput.py's matmul_peak), since the CPU steps run in fp32.
    ours = sides[1]
    flops = flops_per_step(ours.loss, ours.module, batches[1 + args.warmup :], ours.amp)
    if device.type == "cuda":
        peak, peak_name = args.peak_tflops * 1e12, f"{args.peak_tflops} TFLOPS (bf16, given)"
    else:
        from encode_throughput import matmul_peak

        peak = matmul_peak()
        peak_name = f"{peak / 1e9:.1f} GFLOP/s (fp32 matmul peak, measured now)"
    mfu = flops * rate["benchbench"] / peak
    out.update(flops_per_step=flops, mfu=mfu, peak_flops=peak)
    print(
        f"  model FLOPs per benchbench step {flops / 1e9:.1f} GFLOP (mean of the timed batches); MFU {100 * mfu:.1f}% of {peak_name}"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    if not same:
        print("FAIL: the losses differ by more than 1e-3")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
