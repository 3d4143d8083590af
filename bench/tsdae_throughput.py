"""TSDAE training throughput: benchbench's TSDAE vs sentence-transformers' DenoisingAutoEncoderLoss.

Both sides get the same model weights (benchbench's decoder is loaded from the reference loss's
decoder), the same (noisy, clean) sentence batches, batch size and optimizer (AdamW, lr 3e-5), and
the steps are interleaved (one reference step, one benchbench step, ...) so that a shared, noisy CPU
slows both equally. A step is: tokenise both sides, forward, backward, AdamW update.

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
import time
from contextlib import nullcontext

import numpy as np
import torch


def load_sentences(path: str | None, n: int) -> list[str]:
    if path is None:
        root = os.environ.get("BENCHBENCH_DATA")
        if not root:
            sys.exit("set BENCHBENCH_DATA or pass --corpus FILE (one sentence per line)")
        path = os.path.join(root, "corpora", "wiki", "wiki_sentences.txt")
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                out.append(line.strip())
            if len(out) >= n:
                break
    return out


def model_dir(name: str, tmp: str) -> str:
    """A plain HF/sentence-transformers folder both libraries can load (tiny-bert is written out)."""
    from benchbench.encode.models import load_encoder, resolve_model_path

    if name.startswith("tiny-bert"):
        load_encoder(name).save(tmp)
        return tmp
    return resolve_model_path(name)


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

    import tempfile

    from benchbench_plugins.tsdae import TSDAEObjective, build_decoder
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Pooling, Transformer
    from sentence_transformers.sentence_transformer.losses import DenoisingAutoEncoderLoss

    from benchbench.encode.models import load_encoder
    from benchbench.train.loop import adamw
    from benchbench.train.noise import WordNoise

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    torch.manual_seed(0)
    tmp = tempfile.mkdtemp()
    path = model_dir(args.model, tmp)

    # the reference: ST model = Transformer + CLS pooling (TSDAE's recipe), its DAE loss, tied decoder
    tr = Transformer(path, max_seq_length=args.max_seq_length)
    st_model = SentenceTransformer(modules=[tr, Pooling(tr.get_embedding_dimension(), "cls")], device=str(device))
    ref = DenoisingAutoEncoderLoss(st_model, tie_encoder_decoder=True).to(device)

    enc = load_encoder(path, pooling="cls", max_seq_length=args.max_seq_length, normalize=False).to(device)
    missing, _ = enc.model.load_state_dict(
        st_model[0].auto_model.state_dict(), strict=False
    )  # ST keeps an unused pooler
    assert not missing, missing
    ours = TSDAEObjective(
        enc,
        build_decoder(enc, tie=True),
        WordNoise("delete", args.noise_ratio),
        group_by_length=args.group,
        sparse_embedding_grad=False if args.dense_embedding_grad else None,
    ).to(device)
    missing, unexpected = ours.decoder.load_state_dict(ref.decoder.state_dict(), strict=False)
    assert not missing and not unexpected, (missing, unexpected)

    sents = load_sentences(args.corpus, args.batch_size * (args.steps + args.warmup + 1))
    rng = np.random.default_rng(0)
    batches = []
    for i in range(args.steps + args.warmup + 1):
        clean = sents[i * args.batch_size : (i + 1) * args.batch_size]
        batches.append((WordNoise("delete", args.noise_ratio)(clean, rng), clean))

    def ref_loss(noisy, clean):
        feats = [st_model.tokenize(noisy), st_model.tokenize(clean)]
        feats = [{k: v.to(device) if hasattr(v, "to") else v for k, v in f.items()} for f in feats]
        return ref(feats, None)

    def our_loss(noisy, clean):
        src = enc.tokenize(noisy)
        tgt = enc.tokenize(clean)
        return ours(target_ids=tgt["input_ids"].to(device), **{f"src_{k}": v.to(device) for k, v in src.items()})

    # 1. same loss on the same batch and weights (dropout off)
    ref.eval(), ours.eval()
    with torch.no_grad():
        diffs = [abs(float(ref_loss(*b)) - float(our_loss(*b))) for b in batches[:3]]
        l_ref, l_ours = float(ref_loss(*batches[0])), float(our_loss(*batches[0]))
    print(
        f"loss on the same batch: sentence-transformers {l_ref:.6f}  benchbench {l_ours:.6f}  max |diff| over 3 batches {max(diffs):.2e}"
    )
    same = max(diffs) < 1e-3

    # 2. interleaved timing, training mode
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()
    # both sides: fused AdamW, the HF Trainer's default optimizer (what SentenceTransformerTrainer
    # would use) and what benchbench's loop uses; the comparison is of the TSDAE computation itself
    opt_ref = adamw(ref.parameters(), lr=3e-5)
    opt_ours = adamw(ours.parameters(), lr=3e-5)
    ref.train(), ours.train()
    times = {"sentence-transformers": [], "benchbench": []}

    def step(name, fn, opt, b):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        with amp:
            loss = fn(*b)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t

    for i, b in enumerate(batches[1:]):
        order = [("sentence-transformers", ref_loss, opt_ref), ("benchbench", our_loss, opt_ours)]
        if i % 2:
            order.reverse()  # alternate who goes first
        for name, fn, opt in order:
            dt = step(name, fn, opt, b)
            if i >= args.warmup:
                times[name].append(dt)

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
    from torch.utils.flop_counter import FlopCounterMode

    timed = batches[1 + args.warmup :]
    with FlopCounterMode(display=False) as fc:
        for b in timed:
            with amp:
                loss = our_loss(*b)
            loss.backward()
    ours.zero_grad(set_to_none=True)
    flops = fc.get_total_flops() / len(timed)
    if device.type == "cuda":
        peak, peak_name = args.peak_tflops * 1e12, f"{args.peak_tflops} TFLOPS (bf16, given)"
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
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
