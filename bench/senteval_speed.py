"""Speed of the SentEval transfer suite from cached sentence vectors.

Runs the eight tasks of suite ``senteval`` (MR, CR, SUBJ, MPQA, SST-2, TREC, MRPC, SICK-E) with a
SentEval classifier setting ("default" unless --setting), vectors from the embedding cache (the
first run encodes them once), and prints per task: wall seconds, CPU seconds of this process,
dev and test accuracy. The vectors are read before the clock starts, so the time is the protocol.

Side by side, in the same run (--compare N): N of the first outer fold's inner models of MR (or CR,
SUBJ, MPQA: the first of them in --tasks) trained one after
another the way SentEval does (a torch ``nn.Linear`` + torch optimiser + a Python loop over
minibatches), then the same N models batched; prints both times and the ratio.

    BENCHBENCH_DATA=../shared/data python bench/senteval_speed.py [--setting default] [--tasks mr,cr] \
        [--model all-MiniLM-L6-v2] [--workers 0] [--compare 8] [--json out.json]

--workers: processes the classifier splits its models over (0, the default: one per core, as the
harness runs it; 1: a single core). Numbers are identical either way.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

TASKS = ["mr", "cr", "subj", "mpqa", "sst2", "trec", "mrpc", "sicke"]


def cpu_seconds() -> float:
    """CPU seconds of this process and of its finished worker processes (the classifier forks one per core)."""
    return sum(
        r.ru_utime + r.ru_stime
        for r in (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN))
    )


def load_features(model: str, tasks: list[str], data_dir: str | None) -> dict:
    """task -> (TransferData, features, setting name), through the harness's cache."""
    from benchbench.core.registry import get_registry, make_adapter
    from benchbench.encode.cache import EmbeddingCache, default_cache_dir
    from benchbench.encode.encoding import Embedder
    from benchbench.encode.models import load_encoder
    from benchbench.evaluate.adapters import senteval as se
    from benchbench.store.data import DataStore

    reg = get_registry()
    store = DataStore(data_dir)
    emb = Embedder(load_encoder(model), EmbeddingCache(default_cache_dir()), progress=True)
    out = {}
    for t in tasks:
        ad = make_adapter(reg, t, store)
        data = ad.load()
        vecs = emb.embed(data.texts(), desc=t)
        out[t] = (data, se.featurize(data, vecs, ad.param("pair_features", "abs_prod")), ad.param("setting", "default"))
    return out


def run_suite(feats: dict, setting: str | None, workers: int = 0) -> dict:
    from benchbench.evaluate.adapters import _classifier as C
    from benchbench.evaluate.adapters import senteval as se

    results = {}
    for t, (data, f, spec_setting) in feats.items():
        s = setting or spec_setting
        w0, c0 = time.perf_counter(), cpu_seconds()
        out = se.run_protocol(data, f, C.with_overrides(s, workers=workers))
        results[t] = {
            "senteval_task": data.task,
            "setting": s,
            "workers": workers,
            "seconds": time.perf_counter() - w0,
            "cpu_seconds": cpu_seconds() - c0,
            **{k: out[k] for k in ("devacc", "acc", "f1") if k in out},
            "l2": out.get("l2"),
        }
        r = results[t]
        print(
            f"{t:6s} {data.task:15s} {r['seconds']:8.1f} s wall {r['cpu_seconds']:8.1f} s cpu   dev {r['devacc']:6.2f}  "
            f"test {r['acc']:6.2f}" + (f"  F1 {r['f1']:.2f}" if "f1" in r else ""),
            flush=True,
        )
    return results


def compare_sequential(feats: dict, n: int, setting: str) -> dict:
    """N inner models of the first cross-validated task run (MR, CR, SUBJ or MPQA): SentEval's
    sequential loop vs the batched trainer, same models."""

    import torch
    from sklearn.model_selection import StratifiedKFold

    from benchbench.evaluate.adapters import _classifier as C

    s = C.get_setting(setting)
    task = next((t for t in ("mr", "cr", "subj", "mpqa") if t in feats), None)
    if task is None:
        raise SystemExit("--compare needs one of mr, cr, subj, mpqa in --tasks")
    data, f, _ = feats[task]
    X, y = f["all"], data.labels["all"]
    tr, _ = next(StratifiedKFold(s.kfold, shuffle=True, random_state=1111).split(X, y))
    inner = list(StratifiedKFold(s.kfold, shuffle=True, random_state=1111).split(tr, y[tr]))
    jobs = [(fold, tr[itr], tr[ite], l2) for fold, (itr, ite) in enumerate(inner) for l2 in s.l2_grid][:n]
    torch.set_num_threads(1)
    t0, c0 = time.perf_counter(), cpu_seconds()
    seq = []
    for _, rows, dev, l2 in jobs:  # SentEval's MLP(nhid=0).fit, one model at a time
        best, _, _ = C.senteval_sequential_fit(X, y, rows, dev, l2, s)
        seq.append(best)
    t_seq, c_seq = time.perf_counter() - t0, cpu_seconds() - c0
    t0, c0 = time.perf_counter(), cpu_seconds()
    streams = {}
    for fold, rows, dev, l2 in jobs:  # one stream per inner fold, one model per L2 value
        streams.setdefault(fold, (rows, dev, []))[2].append(l2)
    fits = []
    for rows, dev, l2s in streams.values():
        fits += [
            f.dev_acc
            for f in C.train_streams(torch.as_tensor(X), torch.as_tensor(y), [C.Stream(rows, dev, tuple(l2s))], 2, s)[0]
        ]
    t_bat, c_bat = time.perf_counter() - t0, cpu_seconds() - c0
    agree = sum(a == b for a, b in zip(seq, fits))
    print(
        f"\n{n} {task.upper()} inner models ({setting}): SentEval-style sequential {t_seq:.1f} s wall / {c_seq:.1f} s cpu; "
        f"batched {t_bat:.1f} s wall / {c_bat:.1f} s cpu; speed-up {t_seq / t_bat:.1f}x wall, {c_seq / c_bat:.1f}x cpu; "
        f"identical dev accuracies: {agree}/{n}"
    )
    if agree < n:
        print("  sequential:", [round(a, 4) for a in seq], "\n  batched:   ", [round(a, 4) for a in fits])
    return {
        "task": task,
        "n": n,
        "sequential_s": t_seq,
        "sequential_cpu_s": c_seq,
        "batched_s": t_bat,
        "batched_cpu_s": c_bat,
        "identical_dev_acc": agree,
        "sequential_dev_acc": seq,
        "batched_dev_acc": fits,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--setting", default=None, help="default | prototyping (default: each task spec's own)")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument(
        "--workers", type=int, default=0, help="classifier worker processes (0: one per core); 1 = one core"
    )
    ap.add_argument("--compare", type=int, default=0, help="also time N models sequentially vs batched")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if not (args.data_dir or os.environ.get("BENCHBENCH_DATA")):
        print("set BENCHBENCH_DATA or --data-dir", file=sys.stderr)
        return 2
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    feats = load_features(args.model, tasks, args.data_dir)
    import torch

    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start\n")
    w0, c0 = time.perf_counter(), cpu_seconds()
    results = run_suite(feats, args.setting, args.workers)
    total, total_cpu = time.perf_counter() - w0, cpu_seconds() - c0
    print(
        f"\ntotal {total:.1f} s wall ({total / 60:.2f} min), {total_cpu:.1f} s cpu; load average now {os.getloadavg()[0]:.1f}"
    )
    report = {
        "model": args.model,
        "tasks": results,
        "total_seconds": total,
        "total_cpu_seconds": total_cpu,
        "load_average_end": os.getloadavg()[0],
    }
    if args.compare:
        report["compare"] = compare_sequential(feats, args.compare, args.setting or "default")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
