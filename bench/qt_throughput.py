"""Quick-Thoughts training throughput: sentences per second through the shared training loop.

Trains the QT objective (f and g, windows of --batch-size contiguous sentences) on the Jane Austen
corpus (or, without the data dir, synthetic sentences of 20-40 tokens) for --steps optimizer steps and
reports sentences/s and tokens/s from the loop's own accounting (the first --warmup steps are
excluded by timing two runs: warmup steps, and warmup + steps). On a GPU pass --device cuda --bf16.

    OMP_NUM_THREADS=1 python bench/qt_throughput.py --encoder gru --hidden 1200 --steps 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default=os.environ.get("BENCHBENCH_DATA", "../shared/data"))
    ap.add_argument("--encoder", default="gru", choices=["gru", "bigru", "bow"])
    ap.add_argument("--hidden", type=int, default=1200)
    ap.add_argument("--emb-dim", type=int, default=300)
    ap.add_argument("--vocab-size", type=int, default=50000)
    ap.add_argument("--batch-size", type=int, default=400)
    ap.add_argument("--max-tokens", type=int, default=50)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--device", default=None)
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast (GPU)")
    ap.add_argument("--out", default=None, help="append the JSON result to this file")
    args = ap.parse_args()
    if args.bf16:
        os.environ["ACCELERATE_MIXED_PRECISION"] = "bf16"

    import numpy as np
    import torch
    from benchbench_plugins import qt

    from benchbench.train.context import TrainContext

    corpus_name = "janeausten"
    try:
        from benchbench.store.data import DataStore
        from benchbench.train.ordered import load_ordered

        sentences = load_ordered(DataStore(args.data_dir), None).sentences
    except Exception:
        rng = np.random.default_rng(0)
        sentences = [" ".join(f"w{rng.integers(0, 5000)}" for _ in range(rng.integers(20, 40))) for _ in range(20000)]
        corpus_name = "synthetic"
    cfg = dict(
        encoder=args.encoder,
        hidden=args.hidden,
        emb_dim=args.emb_dim,
        vocab_size=args.vocab_size,
        batch_size=args.batch_size,
        max_tokens=args.max_tokens,
        checkpoint_every=0,
    )
    acc = {}
    for label, steps in (("warmup", args.warmup), ("timed", args.warmup + args.steps)):
        ctx = TrainContext(
            model=None, seed=0, output_dir=Path(tempfile.mkdtemp(prefix="qt-tp-")), device=args.device, progress=False
        )
        qt.QT(qt.QTConfig(steps=steps, **cfg)).train(sentences, ctx)
        acc[label] = dict(ctx.accounting)
    secs = acc["timed"]["seconds"] - acc["warmup"]["seconds"]
    sents = acc["timed"]["sentences"] - acc["warmup"]["sentences"]
    toks = acc["timed"]["tokens"] - acc["warmup"]["tokens"]
    res = {
        "encoder": args.encoder,
        "hidden": args.hidden,
        "emb_dim": args.emb_dim,
        "vocab_size": args.vocab_size,
        "batch_size": args.batch_size,
        "steps": args.steps,
        "corpus": corpus_name,
        "device": acc["timed"]["device"],
        "cpu": platform.processor() or platform.machine(),
        "torch_threads": torch.get_num_threads(),
        "mixed_precision": acc["timed"]["mixed_precision"],
        "seconds": round(secs, 2),
        "sentences_per_second": round(sents / secs, 1),
        "tokens_per_second": round(toks / secs, 1),
        "flops_per_second_estimate": round((acc["timed"]["flops"] - acc["warmup"]["flops"]) / secs, 1),
    }
    print(json.dumps(res))
    if args.out:
        with open(args.out, "a") as f:
            f.write(json.dumps(res) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
