"""QT's efficiency experiment (paper Appendix, Figure 2), small: the SAME uni-GRU encoder trained with
the Quick-Thoughts objective and with the skip-thought objective on the same ordered corpus (Jane
Austen), SentEval quality after equal wall-clock training budgets.

As in the paper's appendix the sentence vector is the input encoder f only (QT's g is discarded), both
models start from the same initial distribution, Adam lr 5e-4, batch 400 sentences. Evaluation time
is NOT training time: the clock pauses while a point is evaluated (the loop's own clock minus our
evaluation time). Scores: a SentEval subset matching the paper's figure (MR, CR, SUBJ, MPQA, MRPC in
the prototyping classifier setting, SICK-R Pearson), x100.

    OMP_NUM_THREADS=1 python bench/qt_efficiency.py --data-dir ../shared/data --budget 480 --points 4

Writes leaderboards/qt/efficiency.json, efficiency.md and efficiency.png.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

TASKS = ["mr-proto", "cr-proto", "subj-proto", "mpqa-proto", "mrpc-proto", "sick-r"]


class _Done(Exception):
    pass


def equal_quality_speedup(qt_points: list[dict], st_points: list[dict], key: str = "avg") -> dict:
    """Training time skip-thought needed for its best quality over the time QT needed for the same.

    Points are (train_seconds, score) on a grid, so both times are the first grid point at or above
    the level. When skip-thought never rises above its start, there is no level to match: the ratio is
    then only bounded below, by skip-thought's whole budget over QT's first point above that start."""
    st_start, st_trained = st_points[0][key], st_points[1:]
    best = max(st_trained, key=lambda p: p[key])
    if best[key] > st_start:
        q = next((p for p in qt_points[1:] if p[key] >= best[key]), None)
        if q is None:
            return {"kind": "qt-never-reached", "level": best[key], "reading": "QT never reached skip-thought's best"}
        ratio = round(best["train_seconds"] / q["train_seconds"], 2)
        return {
            "kind": "measured",
            "level": best[key],
            "skipthought_seconds": best["train_seconds"],
            "qt_seconds": q["train_seconds"],
            "speedup": ratio,
            "reading": f"skip-thought's best {key} {best[key]} after {best['train_seconds']} s; QT reached it after "
            f"{q['train_seconds']} s: {ratio}x",
        }
    q = next((p for p in qt_points[1:] if p[key] > st_start), None)
    if q is None:
        return {"kind": "neither-improved", "reading": "neither objective rose above the common start"}
    bound = round(st_trained[-1]["train_seconds"] / q["train_seconds"], 2)
    return {
        "kind": "lower-bound",
        "level": st_start,
        "skipthought_seconds": st_trained[-1]["train_seconds"],
        "qt_seconds": q["train_seconds"],
        "speedup_at_least": bound,
        "reading": f"skip-thought never rose above the start ({st_start}) in {st_trained[-1]['train_seconds']} s; QT was "
        f"above it after {q['train_seconds']} s ({q[key]}): more than {bound}x",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default=os.environ.get("BENCHBENCH_DATA", "../shared/data"))
    ap.add_argument("--budget", type=float, default=480.0, help="training seconds per objective")
    ap.add_argument("--points", type=int, default=4, help="evaluation points, evenly spaced in training time")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--emb-dim", type=int, default=100)
    ap.add_argument("--vocab-size", type=int, default=20000)
    ap.add_argument("--max-tokens", type=int, default=40)
    ap.add_argument("--embeddings", default="scratch", choices=["scratch", "glove"])
    ap.add_argument("--tune-embeddings", default="true", choices=["true", "false"])
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--out", default="leaderboards/qt")
    args = ap.parse_args()

    import torch
    from benchbench_plugins import qt

    from benchbench.core.registry import get_registry, make_adapter
    from benchbench.encode.encoding import Embedder
    from benchbench.store.data import DataStore
    from benchbench.train.context import TrainContext
    from benchbench.train.ordered import load_ordered

    reg = get_registry()
    data = DataStore(args.data_dir)
    corpus = load_ordered(data, None)
    tasks = {t: make_adapter(reg, t, data) for t in args.tasks.split(",")}

    def evaluate(encoder) -> dict[str, float]:
        emb = Embedder(encoder, cache=None, progress=False)
        out = {}
        for name, a in tasks.items():
            r = a.evaluate(emb, "test")
            out[name] = round(
                float(r.scores.get("pearson", r.main_score)) if name == "sick-r" else float(r.main_score), 2
            )
        out["avg"] = round(sum(out.values()) / len(out), 2)
        return out

    common = dict(
        hidden=args.hidden,
        emb_dim=args.emb_dim,
        vocab_size=args.vocab_size,
        max_tokens=args.max_tokens,
        embeddings=args.embeddings,
        tune_embeddings=args.tune_embeddings == "true",
        batch_size=400,
        lr=args.lr,
        steps=10**7,
        checkpoint_every=0,
    )
    methods = {
        "qt": qt.QT(qt.QTConfig(encoder="gru", test_vector="f", **common)),
        "skip-thought": qt.SkipThought(qt.SkipThoughtConfig(encoder="gru", **common)),
    }
    thresholds = [args.budget * (k + 1) / args.points for k in range(args.points)]
    results: dict[str, list[dict]] = {}
    for name, method in methods.items():
        points: list[dict] = []
        eval_seconds = [0.0]
        holder: dict = {}
        ctx = TrainContext(
            model=None, seed=0, output_dir=Path(tempfile.mkdtemp(prefix=f"qt-eff-{name}-")), progress=False
        )
        orig_train_loop = qt.train_loop

        def spy_loop(objective, items, ctx_, loop, **kw):  # keep the objective to evaluate it mid-training
            holder["obj"] = objective
            loop.checkpoint_minutes = 0.0

            def on_step(state):
                trained = state.seconds - eval_seconds[0]
                if len(points) < len(thresholds) and trained >= thresholds[len(points)]:
                    t0 = time.perf_counter()
                    enc = holder["obj"].result()
                    enc.pairs = [(enc.pairs[0][0], None)]  # f only, as the paper's appendix
                    holder["obj"].eval()
                    with torch.no_grad():
                        scores = evaluate(enc)
                    holder["obj"].train()
                    points.append(
                        {
                            "train_seconds": round(trained, 1),
                            "steps": state.step,
                            "sentences": state.items * (400 if name == "qt" else 1),
                            "tokens": state.tokens,
                            **scores,
                        }
                    )
                    print(name, points[-1], flush=True)
                    eval_seconds[0] += time.perf_counter() - t0
                    if len(points) == len(thresholds):
                        raise _Done

            return orig_train_loop(objective, items, ctx_, loop, on_step=on_step, **kw)

        qt.train_loop = spy_loop
        try:
            untrained = method.__class__(method.config.__class__(**{**vars(method.config), "steps": 0})).train(
                corpus.sentences, ctx
            )
            untrained.pairs = [(untrained.pairs[0][0], None)]
            start = {"train_seconds": 0.0, "steps": 0, "sentences": 0, "tokens": 0, **evaluate(untrained)}
            print(name, start, flush=True)
            try:
                method.train(corpus.sentences, ctx)
            except _Done:
                pass
        finally:
            qt.train_loop = orig_train_loop
        results[name] = [start, *points]

    speedup = equal_quality_speedup(results["qt"], results["skip-thought"])
    sps = {
        n: round(r[-1]["sentences"] / r[-1]["train_seconds"], 1) if r[-1]["train_seconds"] else None
        for n, r in results.items()
    }
    record = {
        "budget_seconds": args.budget,
        "points": args.points,
        "device": f"cpu:{platform.processor() or platform.machine()}",
        "threads": torch.get_num_threads(),
        "corpus": corpus.describe(),
        "config": {k: v for k, v in common.items() if k != "steps"},
        "tasks": list(tasks),
        "results": results,
        "sentences_per_second": sps,
        "speedup_time_to_equal_quality": speedup,
        "speedup_sentences_per_second": round(sps["qt"] / sps["skip-thought"], 2) if sps.get("skip-thought") else None,
        "paper_speedup": 4.8,
        "command": "OMP_NUM_THREADS=1 python bench/qt_efficiency.py "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "efficiency.json").write_text(json.dumps(record, indent=1))

    from tabulate import tabulate

    rows = [
        [n, p["train_seconds"], p["steps"], p["sentences"], *[p[t] for t in tasks], p["avg"]]
        for n, r in results.items()
        for p in r
    ]
    md = [
        "# QT vs skip-thought: same encoder, same wall-clock budgets (Jane Austen, CPU)",
        "",
        f"Command: `{record['command']}`",
        f"Device: {record['device']}, torch threads {record['threads']}.",
        "",
        tabulate(rows, headers=["objective", "train s", "steps", "sentences", *tasks, "avg"], tablefmt="github"),
        "",
        f"Training throughput (sentences/s): {sps}; ratio QT/ST {record['speedup_sentences_per_second']}.",
        f"Speed-up to equal quality (paper: 4.8x): {speedup['reading']}",
        "",
    ]
    (out / "efficiency.md").write_text("\n".join(md))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = [*tasks, "avg"]
    fig, axes = plt.subplots(1, len(cols), figsize=(2.6 * len(cols), 2.6), sharex=True)
    for ax, t in zip(axes, cols):
        for n, r in results.items():
            ax.plot(
                [p["train_seconds"] / 60 for p in r], [p[t] for p in r], marker="o", label="QT" if n == "qt" else "ST"
            )
        ax.set_title(t)
        ax.set_xlabel("training min")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(out / "efficiency.png", dpi=110)
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
