"""Training throughput at the core studies' settings, as a fraction of this CPU's measured matmul peak,
beside sentence-transformers' own loop on the same batches and weights, for SimCSE and TSDAE (issue 47).

The settings are the two core studies' (generic-text-minilm, domain-adaptation-minilm): all-MiniLM-L6-v2,
batch 32, 50 steps, each method's own lr and max length (SimCSE 5e-5 at 32 tokens, ``mlp="train_only"``;
TSDAE 3e-5 at the model's own), the batches alternating between the two studies' training texts
(Wikipedia sentences, TwitterPara tweets). One run does, in order:

1. the fp32 and bf16 matmul peaks on the threads in use (``encode_throughput.matmul_peak``), measured again
   at the end; the higher of the two readings is the peak (a reading taken while the CPU was busy is low,
   and would flatter every fraction taken against it);
2. per method, the loss of benchbench's objective and of sentence-transformers' loss on the same batches
   and weights with dropout off (|diff| < 1e-3, else the script exits 1 after writing its record), then
   interleaved timed steps (bench/_train_bench.py: tokenise, forward, backward, clipping at 1.0, fused AdamW)
   of four copies: sentence-transformers fp32, benchbench fp32, benchbench under
   ``torch.autocast("cpu", dtype=torch.bfloat16)``, and benchbench fp32 with other dropout masks (the
   yardstick for how much bf16 changes the result; also a second fp32 timing). FLOPs per step by torch's
   FlopCounterMode over the timed batches; fraction of peak = FLOPs x steps/s / peak (fp32 peak for fp32
   rows, bf16 peak for the bf16 row);
3. after the N steps, on held-out batches with dropout off and in fp32: the loss of the fp32-trained and
   the bf16-trained copies (within ``--bf16-tol`` relative?), and the mean cosine between their sentence
   vectors, beside the same for the other-dropout copy and for the start;
4. lanes: benchbench SimCSE in two concurrent 1-thread processes (each training its own copy) against one
   2-thread process, total sentences/s (subprocesses of this script, ``--lane``);
5. ``OUT_DIR/study_train_throughput.json`` (every number, ``uptime`` at start and end, versions, CPU model,
   threads), and from it ``.md`` (the tables) and ``.svg`` (fraction-of-peak bars). ``--render JSON``
   rewrites the two from a record.

    BENCHBENCH_DATA=../shared/data python bench/study_train_throughput.py          # ~25 min on a quiet 2-core CPU (an estimate)
    BENCHBENCH_DATA=../shared/data python bench/study_train_throughput.py --quick  # tiny-bert smoke run

The first full run's page is a new command page: list ``speed/study_train_throughput.md`` in
``COMMAND_PAGES`` (tests/report/test_leaderboard_figures.py) and the three files in leaderboards/TOPICS.md
when committing them (neither can name a page that does not exist yet).

sentence-transformers' loop here is its tokenizer, its model and its loss with the HF Trainer's default
optimizer and clipping; the Trainer's data loader and callbacks are not on the clock (nor benchbench's).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _train_bench import (
    Side,
    bf16_autocast,
    copy_side,
    flops_per_step,
    interleave,
    model_dir,
    simcse_pair,
    study_text,
    tsdae_pair,
)

NAME = "study_train_throughput"
ST, BB, BF, SEED = "sentence-transformers fp32", "benchbench fp32", "benchbench bf16", "benchbench fp32, other dropout"


def method_settings(name: str) -> dict:
    """The method's own defaults the studies keep: lr, max length (and SimCSE's temperature, TSDAE's noise)."""
    if name == "simcse":
        from benchbench_plugins.simcse import SimCSEConfig

        c = SimCSEConfig(mlp="train_only")
        return {"lr": c.lr, "max_seq_length": c.max_seq_length, "temperature": c.temperature, "mlp": c.mlp}
    from benchbench_plugins.tsdae import TSDAEConfig

    c = TSDAEConfig()
    return {"lr": c.lr, "max_seq_length": c.max_seq_length, "noise_ratio": c.noise_ratio}


def make_pair(name: str, path: str, s: dict):
    if name == "simcse":
        return simcse_pair(path, s["max_seq_length"], s["temperature"])
    return tsdae_pair(path, s["max_seq_length"], s["noise_ratio"])


def mixed_sentences(corpora: list[str], batch_size: int, n_batches: int, offset: int = 0) -> list[str]:
    """``n_batches`` batches of sentences, batch j from corpus j mod len(corpora), each corpus shuffled once
    (seed 0; the loop draws a seeded permutation too); ``offset`` batches skipped (a lane's own batches)."""
    texts = []
    for c in corpora:
        sents = study_text(c)
        texts.append([sents[i] for i in np.random.default_rng(0).permutation(len(sents))])
    out, used = [], [0] * len(texts)
    for j in range(offset + n_batches):
        k = j % len(texts)
        chunk = [texts[k][(used[k] + i) % len(texts[k])] for i in range(batch_size)]
        used[k] += batch_size
        if j >= offset:
            out.extend(chunk)
    return out


def loadavg() -> dict:
    up = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return {"uptime": up, "loadavg": [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]}


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def peaks(quick: bool) -> dict:
    from encode_throughput import matmul_peak

    kw = {"n": 512, "seconds": 0.3} if quick else {}
    return {"fp32": matmul_peak(dtype=torch.float32, **kw), "bf16": matmul_peak(dtype=torch.bfloat16, **kw)}


@torch.no_grad()
def heldout(pair, obj: torch.nn.Module, batches: list) -> tuple[float, torch.Tensor]:
    """(mean loss, sentence vectors) of ``obj`` on held-out batches, dropout off, fp32."""
    obj.eval()
    loss = float(np.mean([float(pair.our_loss(obj, b)) for b in batches]))
    sents = [s for b in batches for s in (b[1] if isinstance(b, tuple) else b)]
    vecs = obj.encoder(**obj.encoder.tokenize(sents))["sentence_embedding"].float()
    obj.train()
    return loss, vecs


def mean_cos(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a, b).mean())


def run_method(name: str, path: str, args, peak: dict) -> dict:
    s = method_settings(name)
    torch.manual_seed(0)
    pair = make_pair(name, path, s)
    n = args.warmup + args.steps
    sents = mixed_sentences(args.corpora, args.batch_size, n + args.heldout)
    batches = pair.make_batches(sents, args.batch_size, 0)
    train, held = batches[:n], batches[n:]
    pair.ref.eval(), pair.ours.eval()
    with torch.no_grad():
        check = [(float(pair.ref_loss(b)), float(pair.our_loss(pair.ours, b))) for b in train[:3]]
    diff = max(abs(a - b) for a, b in check)
    print(
        f"{name}: loss, dropout off: sentence-transformers {check[0][0]:.6f} benchbench {check[0][1]:.6f}; max |diff| {diff:.1e}"
    )
    start_loss, start_vecs = heldout(pair, pair.ours, held)
    sides = [
        Side(ST, pair.ref_loss, pair.ref, s["lr"]),
        copy_side(BB, pair.ours, pair.our_loss, s["lr"]),
        copy_side(BF, pair.ours, pair.our_loss, s["lr"], amp=bf16_autocast),
        copy_side(SEED, pair.ours, pair.our_loss, s["lr"], seed_offset=1),
    ]
    t = time.perf_counter()
    interleave(sides, train, args.warmup)
    print(f"{name}: {n} steps x {len(sides)} copies in {time.perf_counter() - t:.0f} s")
    timed = train[args.warmup :]
    flop_batches = timed[: args.flop_batches] if args.flop_batches else timed
    by = {sd.name: sd for sd in sides}
    flops = {ST: flops_per_step(pair.ref_loss, pair.ref, flop_batches)}
    # the bf16 and other-dropout copies run the same matmuls (autocast changes their dtype, not their count)
    flops[BB] = flops[BF] = flops[SEED] = flops_per_step(by[BB].loss, by[BB].module, flop_batches)
    rows = []
    for sd in sides:
        rate = len(sd.times) / sum(sd.times)
        prec = "bf16" if sd is by[BF] else "fp32"
        rows.append(
            {
                "loop": sd.name,
                "precision": prec,
                "steps_per_s": rate,
                "sentences_per_s": rate * args.batch_size,
                "median_step_s": statistics.median(sd.times),
                "flops_per_step": flops[sd.name],
                "flop_per_s": flops[sd.name] * rate,
                "fraction_of_peak": flops[sd.name] * rate / peak[prec],
                "peak": prec,
                # the same work measure for every row: benchbench's FLOPs per step (TSDAE's reference does
                # more: full cross-attention and the vocabulary projection on padding)
                "useful_fraction_of_fp32_peak": flops[BB] * rate / peak["fp32"],
            }
        )
    rate = {r["loop"]: r["steps_per_s"] for r in rows}
    results = {sd.name: heldout(pair, sd.module, held) for sd in sides[1:]}
    l32, v32 = results[BB]
    l16, v16 = results[BF]
    ls, vs = results[SEED]
    rel = abs(l16 - l32) / abs(l32)
    bf16 = {
        "speedup_vs_fp32": rate[BF] / rate[BB],
        "heldout_batches": len(held),
        "heldout_loss_start": start_loss,
        "heldout_loss_fp32": l32,
        "heldout_loss_bf16": l16,
        "heldout_loss_fp32_other_dropout": ls,
        "rel_loss_diff_bf16": rel,
        "rel_loss_diff_other_dropout": abs(ls - l32) / abs(l32),
        "tolerance_rel": args.bf16_tol,
        "within_tolerance": rel <= args.bf16_tol,
        "train_loss_mean_abs_diff_bf16": float(np.mean(np.abs(np.subtract(by[BF].losses, by[BB].losses)))),
        "train_loss_mean_abs_diff_other_dropout": float(np.mean(np.abs(np.subtract(by[SEED].losses, by[BB].losses)))),
        "cos_fp32_vs_bf16": mean_cos(v32, v16),
        "cos_fp32_vs_other_dropout": mean_cos(v32, vs),
        "cos_fp32_vs_start": mean_cos(v32, start_vecs),
    }
    return {
        "settings": s,
        "loss_check": {
            "sentence_transformers": check[0][0],
            "benchbench": check[0][1],
            "max_abs_diff": diff,
            "batches": len(check),
            "equal": diff < 1e-3,
        },
        "rows": rows,
        "speedup_vs_sentence_transformers": rate[BB] / rate[ST],
        "bf16": bf16,
        "flop_batches": len(flop_batches),
        "final_train_loss": {sd.name: sd.losses[-1] for sd in sides},
    }


# ---- lanes -------------------------------------------------------------------------------------------
def lane(args) -> int:
    """One lane (a subprocess): benchbench SimCSE on its own copy, its own batches; prints one JSON line."""
    torch.set_num_threads(args.threads)
    s = method_settings("simcse")
    torch.manual_seed(args.lane_offset)
    pair = make_pair("simcse", args.model, s)
    n = args.lane_warmup + args.lane_steps
    batches = pair.make_batches(
        mixed_sentences(args.corpora, args.batch_size, n, offset=args.lane_offset * n), args.batch_size, 0
    )
    side = Side("lane", lambda b: pair.our_loss(pair.ours, b), pair.ours, s["lr"])
    interleave([side], batches[: args.lane_warmup], 0)
    t0 = time.time()
    interleave([side], batches[args.lane_warmup :], 0)
    t1 = time.time()
    steps = len(batches) - args.lane_warmup
    out = {"threads": torch.get_num_threads(), "steps": steps, "t0": t0, "t1": t1, "steps_per_s": steps / (t1 - t0)}
    print(json.dumps(out))
    return 0


def run_lanes(path: str, args, threads: list[int]) -> list[dict]:
    """Concurrent lanes with the given thread counts; each lane's JSON line."""
    procs = []
    for i, th in enumerate(threads):
        env = {**os.environ, "OMP_NUM_THREADS": str(th), "MKL_NUM_THREADS": str(th)}
        cmd = [
            sys.executable, str(Path(__file__).resolve()), "--lane", "--threads", str(th), "--model", path,
            "--batch-size", str(args.batch_size), "--lane-steps", str(args.lane_steps),
            "--lane-warmup", str(args.lane_warmup), "--lane-offset", str(i), "--corpus", ",".join(args.corpora),
        ]  # fmt: skip
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        stdout, _ = p.communicate()
        if p.returncode:
            raise SystemExit(f"a lane failed (exit {p.returncode}): {' '.join(p.args)}")
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    return outs


def lanes(path: str, args) -> dict:
    def summary(outs):
        window = max(o["t1"] for o in outs) - min(o["t0"] for o in outs)
        total = sum(o["steps_per_s"] for o in outs)
        return {
            "lanes": outs,
            "steps_per_s_total": total,
            "sentences_per_s_total": total * args.batch_size,
            # the same over the span from the first lane's timed start to the last lane's end
            "sentences_per_s_window": sum(o["steps"] for o in outs) * args.batch_size / window,
        }

    one = summary(run_lanes(path, args, [2]))
    two = summary(run_lanes(path, args, [1, 1]))
    return {
        "method": "simcse",
        "steps_per_lane": args.lane_steps,
        "one_2thread_lane": one,
        "two_1thread_lanes": two,
        "ratio_two_lanes_over_one": two["sentences_per_s_total"] / one["sentences_per_s_total"],
    }


# ---- output ------------------------------------------------------------------------------------------
def render_markdown(rec: dict) -> str:
    """The tables of a record (every number from the JSON)."""
    from tabulate import tabulate

    env = rec["environment"]
    pk = rec["peak_flop_per_s"]
    lines = [
        f"# Training throughput at the core studies' settings ({rec['args']['model']}, batch {rec['args']['batch_size']})",
        "",
        f"Generated by `bench/{NAME}.py` from `{NAME}.json`; do not edit. {env['cpu_model']}, "
        f"{env['threads']} threads, torch {env['torch']}, sentence-transformers {env['sentence_transformers']}, "
        f"{rec['args']['steps']} timed steps per copy after {rec['args']['warmup']} warm-up, interleaved, "
        f"texts {', '.join(rec['args']['corpora'])}; {rec['seconds']:.0f} s. "
        f"Load averages at start {env['start']['loadavg']}, at end {env['end']['loadavg']}.",
        "",
        f"Peak (F.linear matmul, best of start and end): fp32 {pk['fp32'] / 1e9:.1f} GFLOP/s, "
        f"bf16 {pk['bf16'] / 1e9:.1f} GFLOP/s.",
        "",
    ]
    table = []
    for m, r in rec["methods"].items():
        for row in r["rows"]:
            table.append(
                [
                    m,
                    row["loop"],
                    f"{row['steps_per_s']:.3f}",
                    f"{row['sentences_per_s']:.1f}",
                    f"{row['flops_per_step'] / 1e9:.1f}",
                    f"{row['flop_per_s'] / 1e9:.1f}",
                    f"{100 * row['fraction_of_peak']:.1f}% of {row['peak']}",
                    f"{100 * row['useful_fraction_of_fp32_peak']:.1f}%",
                ]
            )
    lines += [
        tabulate(
            table,
            headers=[
                "method",
                "loop",
                "steps/s",
                "sentences/s",
                "GFLOP/step",
                "GFLOP/s",
                "of peak",
                "useful, of fp32 peak",
            ],
            tablefmt="github",
        ),
        "",
        "`useful`: benchbench's FLOPs per step for every row (TSDAE's reference computes more per step).",
        "",
        "| method | losses equal (dropout off) | benchbench / ST | bf16 / fp32 speed | held-out loss fp32 -> bf16 (rel.) "
        "| other dropout (rel.) | cos fp32 vs bf16 | vs other dropout | vs start |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for m, r in rec["methods"].items():
        c, b = r["loss_check"], r["bf16"]
        ok = "within" if b["within_tolerance"] else "OUTSIDE"
        lines.append(
            f"| {m} | {'yes' if c['equal'] else 'NO'} (max diff {c['max_abs_diff']:.1e}) "
            f"| {r['speedup_vs_sentence_transformers']:.2f}x | {b['speedup_vs_fp32']:.2f}x "
            f"| {b['heldout_loss_fp32']:.4f} -> {b['heldout_loss_bf16']:.4f} ({100 * b['rel_loss_diff_bf16']:.2f}%, "
            f"{ok} {100 * b['tolerance_rel']:.0f}%) | {100 * b['rel_loss_diff_other_dropout']:.2f}% "
            f"| {b['cos_fp32_vs_bf16']:.5f} | {b['cos_fp32_vs_other_dropout']:.5f} | {b['cos_fp32_vs_start']:.5f} |"
        )
    if rec.get("lanes"):
        ln = rec["lanes"]
        lines += [
            "",
            f"Lanes (benchbench {ln['method']}, {ln['steps_per_lane']} timed steps a lane, each lane its own copy):",
            "",
            "| lanes | sentences/s (sum of lanes) | sentences/s (over the joint window) |",
            "|---|---|---|",
            f"| one 2-thread | {ln['one_2thread_lane']['sentences_per_s_total']:.1f} "
            f"| {ln['one_2thread_lane']['sentences_per_s_window']:.1f} |",
            f"| two 1-thread | {ln['two_1thread_lanes']['sentences_per_s_total']:.1f} "
            f"| {ln['two_1thread_lanes']['sentences_per_s_window']:.1f} |",
            "",
            f"Two 1-thread lanes / one 2-thread lane: {ln['ratio_two_lanes_over_one']:.2f}x.",
        ]
    return "\n".join(lines) + "\n"


def render_svg(rec: dict) -> str:
    """Fraction-of-peak bars per method and loop, as deterministic SVG (the site's plot settings)."""
    from benchbench.report.site.plots import _plt, _svg

    plt = _plt()
    fig, ax = plt.subplots()
    methods = list(rec["methods"])
    loops = [row["loop"] for row in rec["methods"][methods[0]]["rows"]]
    width = 0.8 / len(loops)
    for j, loop in enumerate(loops):
        vals = [
            100 * next(r for r in rec["methods"][m]["rows"] if r["loop"] == loop)["fraction_of_peak"] for m in methods
        ]
        prec = next(r for r in rec["methods"][methods[0]]["rows"] if r["loop"] == loop)["peak"]
        ax.bar(
            [i + (j - (len(loops) - 1) / 2) * width for i in range(len(methods))],
            vals,
            width,
            label=f"{loop} (of {prec} peak)",
        )
    ax.set_xticks(range(len(methods)), methods)
    ax.set_ylabel("% of the measured matmul peak")
    ax.set_title(f"Training at the core studies' settings ({rec['args']['model']}, batch {rec['args']['batch_size']})")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _svg(fig)


def write_outputs(rec: dict, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{NAME}.json").write_text(json.dumps(rec, indent=1) + "\n")
    (out_dir / f"{NAME}.md").write_text(render_markdown(rec))
    (out_dir / f"{NAME}.svg").write_text(render_svg(rec))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--steps", type=int, default=50, help="timed steps per copy (the studies' budget: 50)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (they still train)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument(
        "--corpus", default="wiki,twitterpara", help="training texts, comma-separated: wiki, twitterpara or FILE"
    )
    ap.add_argument("--methods", default="simcse,tsdae")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's, all cores)")
    ap.add_argument("--heldout", type=int, default=2, help="held-out batches for the bf16 comparison")
    ap.add_argument("--bf16-tol", type=float, default=0.02, help="relative held-out loss difference bf16 may make")
    ap.add_argument("--flop-batches", type=int, default=0, help="timed batches FLOPs are counted on (0: all)")
    ap.add_argument("--lane-steps", type=int, default=20)
    ap.add_argument("--lane-warmup", type=int, default=2)
    ap.add_argument("--no-lanes", action="store_true")
    ap.add_argument("--out-dir", default=None, help="default leaderboards/speed (--quick: a temporary folder)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes for a smoke test (tiny-bert, 2 steps of 4)")
    ap.add_argument("--render", metavar="JSON", help="only rewrite the .md and .svg beside JSON from it")
    ap.add_argument("--lane", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--lane-offset", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:
        args.model = "tiny-bert" if args.model == ap.get_default("model") else args.model
        for k, v in {"steps": 2, "warmup": 1, "batch_size": 4, "heldout": 1, "lane_steps": 2, "lane_warmup": 1}.items():
            if getattr(args, k) == ap.get_default(k):
                setattr(args, k, v)
    args.corpora = args.corpus.split(",")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.render:
        write_outputs(json.loads(Path(args.render).read_text()), Path(args.render).parent)
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.lane:
        return lane(args)
    import sentence_transformers
    import transformers

    t0 = time.perf_counter()
    start = loadavg()
    peak_start = peaks(args.quick)
    print(f"peaks: fp32 {peak_start['fp32'] / 1e9:.1f}, bf16 {peak_start['bf16'] / 1e9:.1f} GFLOP/s")
    path = model_dir(args.model, tempfile.mkdtemp())
    # the peak a fraction is taken against: the higher of the start and end readings (set after the runs)
    peak = dict(peak_start)
    methods = {}
    for m in args.methods.split(","):
        methods[m] = run_method(m, path, args, peak)
    lane_rec = None if args.no_lanes else lanes(path, args)
    peak_end = peaks(args.quick)
    best = {k: max(peak_start[k], peak_end[k]) for k in peak_start}
    for r in methods.values():  # re-take every fraction against the best peak
        for row in r["rows"]:
            row["fraction_of_peak"] = row["flop_per_s"] / best[row["peak"]]
            row["useful_fraction_of_fp32_peak"] *= peak_start["fp32"] / best["fp32"]
    sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=HERE).stdout.strip()
    flags = next((ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags")), "")
    rec = {
        "bench": NAME,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "git_sha": sha,
        "args": {k: v for k, v in vars(args).items() if k not in ("lane", "lane_offset", "render")},
        "environment": {
            "cpu_model": cpu_model(),
            "cpu_count": os.cpu_count(),
            "avx512_bf16": "avx512_bf16" in flags.split(),
            "amx_bf16": "amx_bf16" in flags.split(),
            "threads": torch.get_num_threads(),
            "lane_threads": {"one_lane": 2, "two_lanes": [1, 1]},
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "sentence_transformers": sentence_transformers.__version__,
            "python": platform.python_version(),
            "start": start,
            "end": loadavg(),
        },
        "peak_flop_per_s": best,
        "peak_readings": {"start": peak_start, "end": peak_end},
        "methods": methods,
        "lanes": lane_rec,
        "seconds": time.perf_counter() - t0,
    }
    out_dir = Path(args.out_dir) if args.out_dir else (
        Path(tempfile.gettempdir()) / f"{NAME}_quick" if args.quick else HERE.parent / "leaderboards" / "speed"
    )  # fmt: skip
    write_outputs(rec, out_dir)
    print(render_markdown(rec))
    print(f"wrote {out_dir / NAME}.json, .md, .svg")
    if not all(r["loss_check"]["equal"] for r in methods.values()):
        print("FAIL: benchbench's and sentence-transformers' losses differ by more than 1e-3")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
