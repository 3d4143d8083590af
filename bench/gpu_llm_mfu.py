"""LLM2Vec on a GPU: training throughput of its MNTP and SimCSE stages and encoding throughput, with MFU.

    python bench/gpu_llm_mfu.py                                  # the 1-8B shapes below, on the CUDA device
    python bench/gpu_llm_mfu.py --model /models/Meta-Llama-3-8B  # a local Hugging Face folder (repeatable)
    python bench/gpu_llm_mfu.py --quick                          # CPU smoke test: tiny-llama, 2 steps a stage

What runs is the plugin's own path (``plugins/llm2vec.py``): the decoder made bidirectional, its weights in
bf16 (``weights_dtype="bfloat16"``), a fresh LoRA (r 16, q/k/v/o/gate/up/down) per stage, activation
checkpointing of every decoder layer (``gradient_checkpointing=True``), each stage's objective
(``MNTPObjective``: 20% masked, the shifted head on masked positions; ``SimCSEStageObjective``: two passes,
attention dropout 0.3) trained by the one training loop (``train_loop``: bf16 autocast on CUDA, clipping,
fused AdamW over the adapter), the adapter merged after each stage, then ``LLM2VecEncoder`` encoding.
Defaults are the paper's per-device batches (MNTP 32, SimCSE 128) at the method's 128-token cut.

Models (``--model``, repeatable), never fetched (``HF_HUB_OFFLINE=1``; a lent GPU machine reaches nothing):
``shape:NAME`` builds a random-weight Llama of a published model's shape on the device (``SHAPES``: nothing
to carry, and throughput does not depend on the weights' values; the text is tokenized by the offline
WordPiece vocabulary, ids < 30522 of the shape's vocabulary, so only its token counts differ from the real
tokenizer's); any other name goes through ``load_decoder``: a local folder, a cached hub snapshot, ``tiny-llama``.

Text: ``--texts FILE`` (one sentence a line), else synthetic sentences of ``--max-seq-length`` random
words from the bundled vocabulary, so every training row is full (no padding: the regime of the reference's
MNTP blocks). Reported per row: step time (median of the timed steps, warm-up dropped), sentences/s,
tokens/s (non-padding positions through the model: SimCSE's two passes both count), TFLOP/s, MFU, HFU, peak
GPU memory.

FLOP model. Counted, not assumed: torch's ``FlopCounterMode`` over one full step's batch (forward and
backward, sliced into chunks of rows of the same padded width, so it fits without checkpointing): every
matmul and attention kernel the step runs. With LoRA the frozen weights get no weight gradient, so a step is
about 2N (forward) + 2N (the activations' gradient) FLOPs a token plus attention, the LM head (MNTP) and the
adapter's own, not the 6N of full fine-tuning; the JSON gives ``4N x tokens`` (N: the decoder layers' linear
weights) beside the count as a check. On a CPU, torch's fused CPU attention kernel is not counted (the GPU's
flash, memory-efficient and cuDNN kernels are). MFU counts the model's
FLOPs without the recomputation; HFU counts them with it (checkpointing replays each layer's forward in the
backward pass: the same count, measured with checkpointing on). Encoding: the forward's FLOPs, counted the
same way. The peak is the device's bf16 dense tensor peak from ``DENSE_BF16_PEAK`` (keyed by device name:
H100 SXM and H200 989 TFLOP/s), else ``--peak-tflops``, else the bf16 matmul peak measured in this run; the
measured peak is reported beside it either way.

On a lent GPU machine (no network; its image has torch, transformers, peft and accelerate): carry a wheel of
``isal`` (the one benchbench import that image lacks on this path, bench/device_studies_pack.py shows how), then
``python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . && python3 bench/gpu_llm_mfu.py``.

Results: ``leaderboards/speed/gpu_llm_mfu.json`` and ``.md`` (``--out DIR`` elsewhere). ``--quick`` writes
to a fresh temporary folder only (or ``--out``), and says that its numbers only show that the script works.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # models only from local paths or offline names
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).parent))
from encode_throughput import matmul_peak

# bf16 dense tensor-core peaks (TFLOP/s, no sparsity) from the vendors' datasheets; the first substring of
# torch.cuda.get_device_name() that matches wins, so the specific names come before "H100"
DENSE_BF16_PEAK: list[tuple[str, float]] = [
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("GH200", 989.0),
    ("H200", 989.0),
    ("H100", 989.0),  # H100 SXM5 ("NVIDIA H100 80GB HBM3")
    ("H800", 989.0),
    ("A100", 312.0),
    ("A800", 312.0),
    ("L40S", 362.0),
    ("L4", 121.0),
]

# published shapes (config.json of each model); all built as LlamaForCausalLM (Mistral-7B-v0.2 is a Llama
# with grouped-query attention and no sliding window)
SHAPES: dict[str, dict[str, Any]] = {
    "sheared-llama-1.3b": dict(
        hidden_size=2048,
        num_hidden_layers=24,
        num_attention_heads=16,
        num_key_value_heads=16,
        intermediate_size=5504,
        vocab_size=32000,
        tie_word_embeddings=False,
    ),
    "llama-3.2-1b": dict(
        hidden_size=2048,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        intermediate_size=8192,
        vocab_size=128256,
        tie_word_embeddings=True,
    ),
    "llama-3.2-3b": dict(
        hidden_size=3072,
        num_hidden_layers=28,
        num_attention_heads=24,
        num_key_value_heads=8,
        intermediate_size=8192,
        vocab_size=128256,
        tie_word_embeddings=True,
    ),
    "llama-2-7b": dict(
        hidden_size=4096,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        intermediate_size=11008,
        vocab_size=32000,
        tie_word_embeddings=False,
    ),
    "mistral-7b": dict(
        hidden_size=4096,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        intermediate_size=14336,
        vocab_size=32000,
        tie_word_embeddings=False,
    ),
    "llama-3-8b": dict(
        hidden_size=4096,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        intermediate_size=14336,
        vocab_size=128256,
        tie_word_embeddings=False,
    ),
    # for tests of this path on a CPU
    "tiny": dict(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        vocab_size=30522,
        tie_word_embeddings=False,
    ),
}
DEFAULT_MODELS = ["shape:sheared-llama-1.3b", "shape:llama-3.2-3b", "shape:llama-3-8b"]
OUT = REPO / "leaderboards" / "speed"


def datasheet_peak(device_name: str) -> tuple[str, float] | None:
    """(the matching key, TFLOP/s) of ``DENSE_BF16_PEAK`` for a CUDA device name, or None."""
    for key, tflops in DENSE_BF16_PEAK:
        if key in device_name:
            return key, tflops
    return None


def peak_of(device: torch.device, override_tflops: float | None, measured: float) -> tuple[float, str]:
    """(FLOP/s, where it comes from): ``--peak-tflops``, else the device's datasheet bf16 dense peak, else the
    bf16 matmul peak measured in this run."""
    if override_tflops:
        return override_tflops * 1e12, f"--peak-tflops {override_tflops:g}"
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        hit = datasheet_peak(name)
        if hit is not None:
            return hit[1] * 1e12, f"{name}: bf16 dense datasheet peak ({hit[0]}: {hit[1]:g} TFLOP/s)"
        return measured, f"{name}: not in DENSE_BF16_PEAK, so the bf16 matmul peak measured here"
    return measured, "CPU: the bf16 matmul peak measured here"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _mem_reset(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def _mem_gib(device: torch.device) -> float | None:
    return round(torch.cuda.max_memory_allocated(device) / 2**30, 2) if device.type == "cuda" else None


# ---- models and text ------------------------------------------------------------------------------
def build_model(name: str, device: torch.device):
    """(DecoderLM with bidirectional attention and bf16 weights on ``device``, tokenizer, parameter count)."""
    from benchbench_plugins import llm2vec as L

    from benchbench.encode.decoder import make_bidirectional, set_pad_token, tiny_tokenizer

    if name.startswith("shape:"):
        from transformers import LlamaConfig, LlamaForCausalLM

        key = name.removeprefix("shape:")
        if key not in SHAPES:
            raise SystemExit(f"unknown shape {key!r}; known: {', '.join(SHAPES)}")
        tok = tiny_tokenizer("llama")
        set_pad_token(tok)
        cfg = LlamaConfig(
            **SHAPES[key],
            max_position_embeddings=4096,
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
            attn_implementation="sdpa",
        )
        torch.manual_seed(0)
        with torch.device(device):
            model = LlamaForCausalLM._from_config(cfg, dtype=torch.bfloat16)
        make_bidirectional(model)
        lm = L.DecoderLM(model.model, model.get_output_embeddings())
    else:
        lm, tok = L.load_lm(name, L.WEIGHTS_DTYPES["bfloat16"])
        lm.to(device)
    return lm, tok, int(sum(p.numel() for p in lm.parameters()))  # a tied embedding counted once


def synthetic_texts(n: int, words: int, seed: int = 0) -> list[str]:
    """``n`` sentences of ``words`` random alphabetic words of the bundled uncased vocabulary."""
    from benchbench.encode.models import BUNDLED_VOCAB

    vocab = [w for w in BUNDLED_VOCAB.read_text(encoding="utf-8").splitlines() if w.isalpha() and len(w) >= 3]
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(vocab, words)) for _ in range(n)]


def linear_params(lm) -> int:
    """N of the FLOP check: the weights of the decoder layers' linear maps (what 2N FLOPs a token runs through)."""
    return int(sum(p.numel() for n, p in lm.body.named_parameters() if n.endswith("proj.weight") and "lora_" not in n))


# ---- FLOP counting --------------------------------------------------------------------------------
def count_step_flops(obj, batch: dict, device: torch.device, chunk: int) -> float:
    """FLOPs of one training step's forward and backward on ``batch``, counted by FlopCounterMode over
    slices of ``chunk`` rows (the same padded width: the ops are row-wise, except the SimCSE loss's b x b
    scores, negligible). The adapter's gradients are dropped after."""
    from torch.utils.flop_counter import FlopCounterMode

    amp = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")
    tensors = {k: v for k, v in batch.items() if isinstance(v, torch.Tensor)}
    rows = len(tensors["input_ids"])
    total = 0
    obj.train()
    for i in range(0, rows, chunk):
        part = {k: v[i : i + chunk].to(device) for k, v in tensors.items()}
        with FlopCounterMode(display=False) as fc:
            with amp:
                loss = obj(**part)
            loss.backward()
        total += fc.get_total_flops()
    obj.zero_grad(set_to_none=True)
    return float(total)


def count_encode_flops(enc, texts: list[str], batch_size: int) -> float:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as fc:
        for i in range(0, len(texts), batch_size):
            enc.encode(texts[i : i + batch_size])
    return float(fc.get_total_flops())


# ---- the sections ---------------------------------------------------------------------------------
@dataclass
class Budget:
    steps: int  # timed steps a stage
    warmup: int  # untimed first steps
    mntp_batch: int
    simcse_batch: int
    max_seq_length: int
    encode_texts: int
    encode_batch: int
    flop_chunk: int
    checkpointing: bool


def train_stage(stage: str, lm, tok, texts: list[str], b: Budget, device: torch.device, peak: float) -> dict:
    """One stage as the method runs it (fresh LoRA, checkpointing, its objective, the one loop), timed per
    step; its FLOPs counted on its first batch before the loop (per token, scaled to the timed steps' mean
    tokens). The adapter is merged after."""
    from benchbench_plugins import llm2vec as L

    from benchbench.train.loop import LoopConfig, adamw, seed_everything, train_loop

    c = L.LLM2VecConfig(gradient_checkpointing=b.checkpointing, weights_dtype="bfloat16")
    own_dropout = float(getattr(lm.body.config, "attention_dropout", 0.0) or 0.0)
    batch_size = b.mntp_batch if stage == "mntp" else b.simcse_batch
    seed_everything(0)
    L.add_lora(lm, c)
    L.set_attention_dropout(lm, c.simcse_dropout if stage == "simcse" else own_dropout)
    if stage == "mntp":
        obj = L.MNTPObjective(lm, tok, c.mask_ratio, b.max_seq_length, None)
    else:
        obj = L.SimCSEStageObjective(lm, tok, c.loss_scale, b.max_seq_length, c.simcse_train_pool, None)
    first = obj.collate(texts[:batch_size], np.random.default_rng(0))
    flops = count_step_flops(obj, first, device, b.flop_chunk)  # the model's FLOPs: no recomputation
    hw_flops = flops
    if b.checkpointing:
        L.set_gradient_checkpointing(lm, True)
        hw_flops = count_step_flops(obj, first, device, b.flop_chunk)  # with each layer's forward replayed
    _mem_reset(device)
    stamps: list[tuple[float, int, int]] = []

    def on_step(state) -> None:
        _sync(device)
        stamps.append((time.perf_counter(), state.items, state.tokens))

    lr = L.PUBLISHED[stage]["lr"]
    with tempfile.TemporaryDirectory(prefix="gpu_llm_mfu-") as tmp:
        ctx = SimpleNamespace(
            device=str(device), seed=0, progress=False, task=None, accounting={}, checkpoint_dir=Path(tmp)
        )
        loop = LoopConfig(
            steps=b.warmup + b.steps,
            batch_size=batch_size,
            checkpoint_every=0,
            checkpoint_minutes=0,
            max_grad_norm=c.max_grad_norm,
        )
        _sync(device)
        stamps.append((time.perf_counter(), 0, 0))
        trained = train_loop(
            obj, texts, ctx, loop, make_optimizer=lambda m: adamw(m.parameters(), lr=lr), on_step=on_step
        )
    mem = _mem_gib(device)
    lm = L.merge_lora(trained.lm).to(device)
    if b.checkpointing:
        L.set_gradient_checkpointing(lm, False)
    L.set_attention_dropout(lm, own_dropout)
    timed = stamps[b.warmup :]  # stamps[i] ends step i; step i's time is stamps[i] - stamps[i - 1]
    dts = [t1 - t0 for (t0, _, _), (t1, _, _) in itertools.pairwise(timed)]
    toks = [k1 - k0 for (_, _, k0), (_, _, k1) in itertools.pairwise(timed)]
    dt = statistics.median(dts)
    tokens = statistics.mean(toks)
    # the counted batch's FLOPs per token, times the timed steps' tokens (equal with full synthetic rows)
    scale = tokens / max(int(first["n_tokens"]), 1)
    flops, hw_flops = flops * scale, hw_flops * scale
    row = {
        "what": f"train {stage}",
        "batch_size": batch_size,
        "steps_timed": len(dts),
        "step_seconds": dt,
        "sentences_per_s": batch_size / dt,
        "tokens_per_s": tokens / dt,
        "tokens_per_step": tokens,
        "flops_per_step": flops,
        "hw_flops_per_step": hw_flops,
        "approx_4N_flops_per_step": 4 * linear_params(lm) * tokens,
        "tflops": flops / dt / 1e12,
        "mfu": flops / dt / peak,
        "hfu": hw_flops / dt / peak,
        "peak_memory_gib": mem,
        "loss_curve": ctx.accounting.get("loss_curve"),
    }
    return {"row": row, "lm": lm}


def encode_section(lm, tok, texts: list[str], b: Budget, device: torch.device, peak: float) -> dict:
    """``LLM2VecEncoder`` (left padding, the mean over the text's tokens) on the merged bf16 model:
    ``encode_batch`` texts a call, best of two passes after a warm-up."""
    from benchbench_plugins import llm2vec as L

    enc = L.LLM2VecEncoder(lm.body, tok).to(device)
    texts = texts[: b.encode_texts]
    enc.encode(texts[: b.encode_batch])  # warm-up
    flops = count_encode_flops(enc, texts, b.encode_batch)
    _mem_reset(device)
    best = float("inf")
    for _ in range(2):
        _sync(device)
        t0 = time.perf_counter()
        for i in range(0, len(texts), b.encode_batch):
            enc.encode(texts[i : i + b.encode_batch])
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    n_tokens = sum(min(len(x), L.ENCODE_MAX_LENGTH) for x in tok(texts)["input_ids"])
    return {
        "what": "encode",
        "batch_size": b.encode_batch,
        "texts": len(texts),
        "seconds": best,
        "sentences_per_s": len(texts) / best,
        "tokens_per_s": n_tokens / best,
        "flops": flops,
        "approx_2N_flops": 2 * linear_params(lm) * n_tokens,
        "tflops": flops / best / 1e12,
        "mfu": flops / best / peak,
        "hfu": flops / best / peak,
        "peak_memory_gib": _mem_gib(device),
    }


def run_model(name: str, texts: list[str], b: Budget, device: torch.device, peak: float) -> list[dict]:
    t0 = time.perf_counter()
    lm, tok, n_params = build_model(name, device)
    common = {"model": name, "params": n_params, "max_seq_length": b.max_seq_length}
    print(f"{name}: {_size(n_params)} parameters, built in {time.perf_counter() - t0:.1f} s", flush=True)
    rows = []
    for stage in ("mntp", "simcse"):
        try:
            out = train_stage(stage, lm, tok, texts, b, device, peak)
        except torch.OutOfMemoryError as e:  # a shape too large for this device at this batch: said, not fatal
            rows.append({**common, "what": f"train {stage}", "oom": str(e).splitlines()[0]})
            print(f"  train {stage}: out of memory", flush=True)
            return rows
        lm = out["lm"]
        rows.append({**common, **out["row"]})
        _print(rows[-1])
    rows.append({**common, **encode_section(lm, tok, texts, b, device, peak)})
    _print(rows[-1])
    del lm
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return rows


def _size(n: int) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e8 else f"{n / 1e6:.2f}M"


def _print(r: dict) -> None:
    mem = f"{r['peak_memory_gib']:.1f} GiB" if r.get("peak_memory_gib") is not None else "-"
    print(
        f"  {r['what']:13s} {r['sentences_per_s']:10.1f} sent/s {r['tokens_per_s']:12.0f} tok/s "
        f"{r['tflops']:9.3f} TFLOP/s  MFU {100 * r['mfu']:6.2f}%  HFU {100 * r['hfu']:6.2f}%  {mem}",
        flush=True,
    )


def markdown(result: dict) -> str:
    lines = [
        "# LLM2Vec on a GPU: throughput and MFU (bench/gpu_llm_mfu.py)",
        "",
        f"- where: {result['where']}",
        f"- peak: {result['peak_tflops']:.1f} TFLOP/s ({result['peak_source']}); bf16 matmul measured here: "
        f"{result['measured_bf16_tflops']:.1f} TFLOP/s",
        f"- setting: bf16 weights, LoRA r 16 on q/k/v/o/gate/up/down, gradient checkpointing "
        f"{'on' if result['budget']['checkpointing'] else 'off'}, bf16 autocast, max length "
        f"{result['budget']['max_seq_length']}, {result['budget']['steps']} timed steps after "
        f"{result['budget']['warmup']} warm-up; text: {result['text']}",
        f"- command: `{result['command']}`; commit {result['commit']}; {result['date']}; "
        f"{result['seconds']:.0f} s in all",
        "- MFU: the step's FLOPs counted by FlopCounterMode without recomputation, per second, over the peak; "
        "HFU: with the recomputation",
        "",
        "| model | params | what | batch | sentences/s | tokens/s | TFLOP/s | MFU | HFU | peak memory |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in result["rows"]:
        head = f"| {r['model']} | {_size(r['params'])} | {r['what']} |"
        if "oom" in r:
            lines.append(f"{head} - | out of memory | | | | | |")
            continue
        mem = f"{r['peak_memory_gib']:.1f} GiB" if r.get("peak_memory_gib") is not None else "-"
        lines.append(
            f"{head} {r['batch_size']} | {r['sentences_per_s']:.1f} | {r['tokens_per_s']:.0f} | {r['tflops']:.1f} | "
            f"{100 * r['mfu']:.1f}% | {100 * r['hfu']:.1f}% | {mem} |"
        )
    return "\n".join(lines) + "\n"


def _commit() -> str:
    import subprocess

    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", action="append", default=None, help=f"repeatable (default: {' '.join(DEFAULT_MODELS)})")
    ap.add_argument("--quick", action="store_true", help="CPU smoke test: tiny-llama, 2 steps a stage, a temp folder")
    ap.add_argument("--texts", default=None, help="one sentence a line (default: synthetic full-length rows)")
    ap.add_argument("--steps", type=int, default=5, help="timed steps a stage")
    ap.add_argument("--warmup", type=int, default=2, help="untimed first steps a stage")
    ap.add_argument("--mntp-batch-size", type=int, default=32)
    ap.add_argument("--simcse-batch-size", type=int, default=128)
    ap.add_argument("--max-seq-length", type=int, default=128)
    ap.add_argument("--encode-texts", type=int, default=2048)
    ap.add_argument("--encode-batch-size", type=int, default=64)
    ap.add_argument("--flop-chunk", type=int, default=8, help="rows a FLOP-counting slice (memory, not the count)")
    ap.add_argument("--no-gradient-checkpointing", action="store_true")
    ap.add_argument("--peak-tflops", type=float, default=None, help="override the datasheet table")
    ap.add_argument("--device", default=None)
    ap.add_argument("--out", default=None, help=f"folder for gpu_llm_mfu.json/.md (default {OUT}; --quick: a temp one)")
    args = ap.parse_args(argv)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if args.quick:
        args.model = args.model or ["tiny-llama"]
        args.steps, args.warmup = 1, 1  # two steps a stage, the second timed
        args.mntp_batch_size, args.simcse_batch_size, args.max_seq_length = 4, 4, 32
        args.encode_texts, args.encode_batch_size, args.flop_chunk = 8, 4, 4
    elif device.type != "cuda" and args.out is None:
        print("no CUDA device: use --quick for the CPU smoke test (or --out DIR to time the CPU anyway)")
        return 2
    args.model = args.model or DEFAULT_MODELS
    out = Path(args.out) if args.out else (Path(tempfile.mkdtemp(prefix="gpu_llm_mfu-")) if args.quick else OUT)
    b = Budget(
        steps=args.steps,
        warmup=args.warmup,
        mntp_batch=args.mntp_batch_size,
        simcse_batch=args.simcse_batch_size,
        max_seq_length=args.max_seq_length,
        encode_texts=args.encode_texts,
        encode_batch=args.encode_batch_size,
        flop_chunk=args.flop_chunk,
        checkpointing=not args.no_gradient_checkpointing,
    )
    if b.steps < 1 or b.warmup < 0:
        raise SystemExit("--steps must be >= 1 and --warmup >= 0")
    t_start = time.perf_counter()
    if device.type == "cuda":
        where = f"GPU {torch.cuda.get_device_name(device)}, torch {torch.__version__}"
    else:
        where = (
            f"NO GPU: the CPU ({torch.get_num_threads()} threads, load {os.getloadavg()[0]:.1f}); these numbers only "
            f"show that the script works, not GPU speed"
        )
    print(where, flush=True)
    size = 8192 if device.type == "cuda" else 512
    measured = matmul_peak(size, torch.bfloat16, str(device), seconds=2.0 if device.type == "cuda" else 0.3)
    peak, source = peak_of(device, args.peak_tflops, measured)
    print(f"peak {peak / 1e12:.1f} TFLOP/s ({source}); bf16 matmul measured {measured / 1e12:.2f} TFLOP/s", flush=True)
    need = max(b.mntp_batch, b.simcse_batch) * (b.steps + b.warmup) + b.encode_texts
    if args.texts:
        texts = [t.strip() for t in Path(args.texts).read_text(encoding="utf-8").splitlines() if t.strip()]
        text = f"{args.texts} ({len(texts)} lines)"
        texts = (texts * (need // max(len(texts), 1) + 1))[:need]
    else:
        texts = synthetic_texts(need, b.max_seq_length)
        text = f"synthetic: {b.max_seq_length} random vocabulary words a sentence (full {b.max_seq_length}-token rows)"
    rows: list[dict] = []
    for name in args.model:
        rows += run_model(name, texts, b, device, peak)
    result = {
        "device": str(device),
        "gpu": device.type == "cuda",
        "quick": bool(args.quick),
        "where": where,
        "peak_tflops": peak / 1e12,
        "peak_source": source,
        "measured_bf16_tflops": measured / 1e12,
        "budget": b.__dict__,
        "text": text,
        "command": "python bench/gpu_llm_mfu.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "commit": _commit(),
        "date": time.strftime("%Y-%m-%d"),
        "seconds": time.perf_counter() - t_start,
        "rows": rows,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_llm_mfu.json").write_text(json.dumps(result, indent=2))
    (out / "gpu_llm_mfu.md").write_text(markdown(result))
    print(f"wrote {out / 'gpu_llm_mfu.json'} and {out / 'gpu_llm_mfu.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
