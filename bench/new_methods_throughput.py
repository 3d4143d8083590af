"""Training throughput of the newer method plugins side by side with SimCSE, in one run, on the same
base model, corpus and batch size, through the build path a run takes (``Method.train`` with a
``TrainContext``: tokenisation in ``collate``, forward, backward, optimizer step; the loop's own clock,
``ctx.accounting["seconds"]``, which excludes loading the model).

Each method keeps its own paper defaults except the budget (``--steps``, ``--batch-size``); its max
length is printed. Runs are interleaved (round 1: every method, round 2: every method, ...) so that a
shared, noisy CPU slows all of them alike; the table gives the median over rounds (the first round is a
warm-up and is dropped when there are several). Next to the wall clock it gives the CPU time of the
training loop per step (``time.process_time`` around ``train_loop``, all threads): on a CPU shared with
other jobs that is the steadier measure of the work a method does.

    BENCHBENCH_DATA=../shared/data nice python bench/new_methods_throughput.py \
        --model tiny-bert --steps 10 --batch-size 32 --rounds 3 [--methods simcse,esimcse,mirror-bert]

Another method is added to ``METHODS`` (name -> options it needs so that it runs on this corpus).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

METHODS: dict[str, dict] = {
    "simcse": {},
    "esimcse": {},
    "mirror-bert": {"max_sentences": None},  # the whole sample, so that --steps is not cut to one pass
    "promptbert": {},  # 2 prompts a sentence + 2 x 50 template-alone rows a step (template denoising)
    "sncse": {},  # 3 prompts a sentence; the spaCy negations are made (and cached) before the loop's clock
    # the paper's generator (DistilBERT) is not available offline: the studies' tiny-mlm-nli (2 layers,
    # 64 wide) is far cheaper, so DiffCSE's figure here holds its two BERT passes, not a DistilBERT one
    "diffcse": {"generator": "~/.cache/benchbench/tiny-mlm-nli"},
    "simcse-plus-plus": {},  # SimCSE + a third, dropout-free pass for the negatives + the d x d DCL term
    "whitenedcse": {},  # 3 views a sentence; 128 groups need a hidden size that is a multiple (MiniLM: 384)
    # two views + the frozen lower network on the masked rows (no gradient) + 2 head layers and the LM head
    # (vocabulary projection on the chosen tokens only); skip_from 6 is all of MiniLM's layers; on a
    # 2-layer tiny-bert pass --set skip_from=1 (half, as the paper's 6 of 12)
    "infocse": {},
    # x and its back-translation, each in the template (the back-translations are made and cached by Apertium
    # before the loop's clock) + a 16-layer, one-head decoder and the MLM head on the non-pad tokens
    "denosent": {},
    # two dropout views + the two teachers' forward passes a step (eval, no gradient) + the lists' terms; the
    # teachers (DiffCSE with the studies' generator plain-mlm-minilm-shape, then SimCSE; 2 steps each) are trained first,
    # outside the loop's clock (``cpu_seconds`` keeps the method's own, last, loop)
    "rankcse": {
        "teacher_set": "diffcse.generator=~/.cache/benchbench/plain-mlm-minilm-shape,diffcse.steps=2,diffcse.batch_size=8,"
        "simcse.steps=2,simcse.batch_size=8",
    },
}


def sentences(n: int) -> list[str]:
    root = os.environ.get("BENCHBENCH_DATA")
    if not root:
        sys.exit("set BENCHBENCH_DATA (the offline data folder: corpora/wiki/wiki_sentences.txt)")
    out = []
    with open(Path(root) / "corpora" / "wiki" / "wiki_sentences.txt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                out.append(line.strip())
            if len(out) >= n:
                break
    return out


def one_run(
    name: str,
    model: str,
    corpus: list[str],
    steps: int,
    batch: int,
    device: str | None,
    max_len: int | None = None,
    sets: dict | None = None,
) -> dict:
    import dataclasses

    from benchbench import TrainContext, build_config, get_registry

    reg = get_registry()
    cls = reg.methods[name]
    same = (
        {"max_seq_length": max_len}
        if max_len and "max_seq_length" in {f.name for f in dataclasses.fields(cls.Config)}
        else {}
    )
    fields = {f.name for f in dataclasses.fields(cls.Config)}
    extra = {k: v for k, v in (sets or {}).items() if k in fields}  # --set: only to a method with the option
    cfg = build_config(cls, {**METHODS.get(name, {}), **same, **extra, "steps": steps, "batch_size": batch})
    import benchbench.train.fit as fit_module

    real, cpu = fit_module.train_loop, []

    def timed(*args, **kw):  # CPU seconds of the loop itself: robust to other processes on a shared machine
        t = time.process_time()
        try:
            return real(*args, **kw)
        finally:
            cpu.append(time.process_time() - t)

    fit_module.train_loop = timed
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ctx = TrainContext(model=model, seed=1, output_dir=Path(tmp), progress=False, device=device, registry=reg)
            cls(cfg).train(corpus, ctx)
    finally:
        fit_module.train_loop = real
    a = ctx.accounting
    return {
        "cpu_seconds": cpu[-1] if cpu else float("nan"),  # the method's own loop: the last (teachers train first)
        "seconds": a["seconds"],
        "steps": a["steps"],
        "examples": a["examples"],
        "device": a["device"],
        "max_seq_length": getattr(cfg, "max_seq_length", None),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="tiny-bert")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default=None)
    ap.add_argument(
        "--max-seq-length", type=int, default=None, help="one training max length for all (default: each method's own)"
    )
    ap.add_argument(
        "--threads", type=int, default=None, help="torch intra-op threads (1: no spinning threads in the CPU time)"
    )
    ap.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="an option for every method that has it"
    )
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    import torch

    if a.threads:
        torch.set_num_threads(a.threads)
    names = a.methods.split(",")
    corpus = sentences(max(2000, a.steps * a.batch_size))
    runs: dict[str, list[dict]] = {n: [] for n in names}
    t0 = time.time()
    for r in range(a.rounds):
        for n in names:
            sets = dict(kv.split("=", 1) for kv in a.set)
            runs[n].append(one_run(n, a.model, corpus, a.steps, a.batch_size, a.device, a.max_seq_length, sets))
            print(f"round {r + 1} {n}: {runs[n][-1]['seconds']:.2f} s", file=sys.stderr, flush=True)
    rows = []
    for n in names:
        kept = runs[n][1:] if len(runs[n]) > 1 else runs[n]
        sec = statistics.median(x["seconds"] for x in kept)
        cpu = statistics.median(x["cpu_seconds"] for x in kept)
        steps, ex = kept[0]["steps"], kept[0]["examples"]
        rows.append(
            {
                "method": n,
                "max_seq_length": kept[0]["max_seq_length"],
                "steps_per_s": steps / sec,
                "sentences_per_s": ex / sec,
                "seconds": sec,
                "cpu_ms_per_step": 1000 * cpu / steps,
                "spread": (min(x["seconds"] for x in kept), max(x["seconds"] for x in kept)),
                "device": kept[0]["device"],
            }
        )
    base = next((r for r in rows if r["method"] == "simcse"), rows[0])
    print(
        f"model {a.model}, batch {a.batch_size}, {a.steps} steps x {a.rounds} rounds (median of "
        f"{max(1, a.rounds - 1)}), torch {torch.__version__}, threads {torch.get_num_threads()}, {time.time() - t0:.0f} s"
    )
    print(
        "\n| method | max length | steps/s | sentences/s | vs simcse | seconds (min-max) | CPU ms/step | CPU vs simcse | device |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['method']} | {r['max_seq_length']} | {r['steps_per_s']:.2f} | {r['sentences_per_s']:.1f} | "
            f"{r['steps_per_s'] / base['steps_per_s']:.2f}x | {r['seconds']:.2f} ({r['spread'][0]:.2f}-{r['spread'][1]:.2f}) | "
            f"{r['cpu_ms_per_step']:.0f} | {r['cpu_ms_per_step'] / base['cpu_ms_per_step']:.2f}x | {r['device']} |"
        )
    if a.json:
        Path(a.json).write_text(json.dumps({"args": vars(a), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
