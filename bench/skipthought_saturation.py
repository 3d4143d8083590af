"""Why skip-thought's SentEval scores fall in leaderboards/qt/efficiency.md: its encoder's final GRU state
saturates. Trains the efficiency experiment's skip-thought (uni-GRU 256 on fixed GloVe 6B-50d, 20k-word
decoder vocabulary, batches of 400 random sentences (each with its two neighbours, as the loop draws them), Adam 1e-3, global clip 5.0) and prints, every
5 steps, the loss, NaN check and the test vectors' statistics on 200 held-out Jane Austen sentences:
mean |h|, the share of coordinates with |h| > 0.999, and the mean per-coordinate std across sentences.

    OMP_NUM_THREADS=1 python bench/skipthought_saturation.py --steps 30
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default="../shared/data")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()
    from benchbench_plugins import qt

    from benchbench.store.data import DataStore
    from benchbench.train.ordered import load_ordered

    corpus = load_ordered(DataStore(args.data_dir), None).sentences
    train = [corpus[i] for i in range(len(corpus) - 400)]
    probe = [corpus[i] for i in range(len(corpus) - 200, len(corpus))]
    spec = qt.TowerSpec(kind="gru", hidden=256, emb_dim=50, embeddings="glove", tune_embeddings=False, max_tokens=40)
    f = qt.build_tower(spec, None, train, 20000, seed=0)
    obj = qt.SkipThoughtObjective(f, train, 40, qt.Vocab.from_corpus(train, 20000))
    opt = torch.optim.Adam([p for p in obj.parameters() if p.requires_grad], lr=args.lr)
    rng = np.random.default_rng(0)

    def stats() -> dict:
        f.eval()
        with torch.no_grad():
            v = f(**f.features(probe))
        f.train()
        return {
            "nan": bool(torch.isnan(v).any()),
            "mean_abs": round(float(v.abs().mean()), 4),
            "saturated_share": round(float((v.abs() > 0.999).float().mean()), 4),
            "std_across_sentences": round(float(v.std(0).mean()), 4),
        }

    print(json.dumps({"step": 0, **stats()}), flush=True)
    for step in range(1, args.steps + 1):
        batch = obj.collate([int(i) for i in rng.choice(np.arange(1, len(train) - 1), 400, replace=False)], rng)
        batch.pop("n_tokens")
        loss = obj(**batch)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(obj.parameters(), 5.0)
        opt.step()
        if step % 5 == 0:
            print(json.dumps({"step": step, "loss": round(loss.item(), 3), **stats()}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
