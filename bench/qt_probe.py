"""Probe what lets Quick-Thoughts learn within a CPU budget on Jane Austen (a prototyping bench, not a
result): trains one QT pair with the plugin's own objective (QTObjective / qt_loss / build_tower) in a
plain Adam loop over shuffled windows of contiguous sentences, prints the training loss and a held-out
window's loss, and scores the [f; g] encoder on a quick SentEval proxy at chosen steps.

    OMP_NUM_THREADS=1 python bench/qt_probe.py --steps 300 --eval-at 0,100,300 --lr 5e-4

Final numbers come from the harness (bench/qt_learning_check*.sh), not from here.
"""

from __future__ import annotations

import argparse
import json
import os
import time

PROXY = ["mr-proto", "cr-proto", "subj-proto", "mpqa-proto", "trec-proto"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default=os.environ.get("BENCHBENCH_DATA", "../shared/data"))
    ap.add_argument("--encoder", default="gru")
    ap.add_argument("--embeddings", default="scratch")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--emb-dim", type=int, default=100)
    ap.add_argument("--vocab-size", type=int, default=20000)
    ap.add_argument("--max-tokens", type=int, default=40)
    ap.add_argument("--batch-size", type=int, default=400)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--eval-at", default="0,200", help="comma list of steps at which to score the proxy")
    ap.add_argument("--tasks", default=",".join(PROXY))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--log", default=None, help="append a JSON line with the run here")
    args = ap.parse_args()

    import numpy as np
    import torch
    from benchbench_plugins import qt

    from benchbench.core.registry import get_registry, make_adapter
    from benchbench.encode.encoding import Embedder
    from benchbench.store.data import DataStore
    from benchbench.train.ordered import load_ordered

    reg = get_registry()
    data = DataStore(args.data_dir)
    sents = load_ordered(data, None).sentences
    tasks = {t: make_adapter(reg, t, data) for t in args.tasks.split(",") if t}

    def evaluate(encoder) -> dict[str, float]:
        emb = Embedder(encoder, cache=None, progress=False)
        out = {}
        for name, a in tasks.items():
            r = a.evaluate(emb, "test")
            out[name] = round(
                float(r.scores.get("pearson", r.main_score)) if name == "sick-r" else float(r.main_score), 2
            )
        out["avg"] = round(sum(out.values()) / max(1, len(out)), 2)
        return out

    torch.manual_seed(args.seed)
    spec = qt.TowerSpec(
        kind=args.encoder,
        hidden=args.hidden,
        emb_dim=args.emb_dim,
        embeddings=args.embeddings,
        tune_embeddings=args.embeddings != "glove",
        max_tokens=args.max_tokens,
    )
    f = qt.build_tower(spec, None, sents, args.vocab_size, seed=args.seed)
    g = (
        qt.build_tower(spec, None, vocab_words=f.vocab.words[4:], seed=args.seed + 1)
        if args.embeddings != "glove"
        else qt.build_tower(spec, None, seed=args.seed + 1)
    )
    obj = qt.QTObjective(f, g, sents, args.batch_size, 3)
    starts = qt.window_starts(len(sents), args.batch_size)
    held = starts[-1]  # the last window: scored for a held-out loss, never trained on
    train_starts = starts[:-1]
    opt = torch.optim.Adam([p for p in obj.parameters() if p.requires_grad], lr=args.lr)
    rng = np.random.default_rng(args.seed)
    eval_at = sorted({int(s) for s in args.eval_at.split(",") if s})
    held_batch = obj.collate([held], rng)

    def held_loss() -> float:
        obj.eval()
        with torch.no_grad():
            v = float(obj(**{k: v for k, v in held_batch.items() if k != "n_tokens"}))
        obj.train()
        return round(v, 4)

    log = {"args": vars(args), "loss": [], "held": [], "evals": []}
    order: list[int] = []
    t_train = 0.0
    for step in range(args.steps + 1):
        if step in eval_at:
            t0 = time.perf_counter()
            scores = evaluate(qt.QTEncoder([(obj.f, obj.g)]))
            obj.train()
            log["evals"].append(
                {"step": step, "train_s": round(t_train, 1), **scores, "eval_s": round(time.perf_counter() - t0, 1)}
            )
            log["held"].append([step, held_loss()])
            print("EVAL", log["evals"][-1], "held", log["held"][-1], flush=True)
        if step == args.steps:
            break
        t0 = time.perf_counter()
        if not order:
            order = list(rng.permutation(train_starts))
        batch = obj.collate([order.pop()], rng)
        batch.pop("n_tokens")
        loss = obj(**batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        t_train += time.perf_counter() - t0
        log["loss"].append(round(loss.item(), 4))
        if (step + 1) % 25 == 0:
            recent = log["loss"][-25:]
            print(f"step {step + 1} loss(avg25) {sum(recent) / len(recent):.4f} train_s {t_train:.1f}", flush=True)
    if args.log:
        with open(args.log, "a") as fh:
            fh.write(json.dumps(log) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
