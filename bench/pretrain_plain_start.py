"""Build the studies' plain start: a BERT of all-MiniLM-L6-v2's shape pre-trained from scratch with masked
language modelling on the largest clean text this offline setup holds, with its MLM head, a card stating what
it saw, and its held-out MLM accuracy.

Why: the plain-start study needs a start that learned language (DESIGN.md, "Studies"): its own mean-pooled
STS average must beat random initialisation of its shape, or nothing read against it measures learning.
``tiny-mlm-nli`` (bench/pretrain_tiny_mlm.py: 64 hidden, 1,000 steps on NLI dev/test sentences) does not.

Two steps, so the GPU machine needs nothing but torch and transformers (no benchbench install, no data):

    # here (CPU): the corpus, de-duplicated and decontaminated against every STS/SICK/TwitterPara test sentence
    python bench/pretrain_plain_start.py corpus --data-dir ../shared/data --out .plainstart
    # anywhere (a GPU when lent; resumable: run again with the same --out to continue)
    python bench/pretrain_plain_start.py train --corpus .plainstart/corpus.txt.gz --out .plainstart/model \
        --time-budget-s 420

Corpus: Wikipedia sentences (SimCSE's wiki1m sample held offline), Jane Austen's six novels split into
sentences, and CQADupStack's 389K question titles (so a CQADupStack column read from this start is not
zero-shot: the card says so). Any corpus sentence whose normalised text is a test sentence of STS12-16,
STS-B, SICK or TwitterPara is dropped before training, and the count is recorded.

Training: standard BERT masking (15%; 80/10/10), AdamW (lr 5e-4, wd 0.01, betas 0.9/0.98), linear warm-up
then linear decay, bf16 autocast on CUDA (fp32 on CPU), gradient clipping at 1.0. With ``--time-budget-s``
the number of steps is sized from steps 100-300's pace so that the schedule ENDS inside the budget (a schedule cut
in its middle would leave a model at a high learning rate). 1% of the sentences are held out: the MLM accuracy
on them (fixed masks, seed 0) is the card's measure of what the model learned.

Checkpoints are safetensors + JSON (never pickles): the model, AdamW's moments and the step, so a run resumes
exactly where it stopped.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import os
import random
import re
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
VOCAB = HERE / "benchbench" / "resources" / "bert-uncased-vocab.txt"
SHAPE = {"hidden": 384, "layers": 6, "heads": 6, "intermediate": 1536}  # all-MiniLM-L6-v2's shape


# ---- corpus (CPU, reads the offline data) -----------------------------------------------------------------
def _norm(s: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", s.lower()).split())


def _austen_sentences(folder: Path) -> list[str]:
    out: list[str] = []
    for f in sorted(folder.glob("*.txt")):
        paras = re.split(r"\n\s*\n", f.read_text(encoding="utf-8"))
        for p in paras:
            text = " ".join(p.split())
            out += [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z\"'])", text) if len(s.split()) >= 3]
    return out


def _test_sentences(data: Path) -> set[str]:
    """Normalised test sentences of the studies' tasks (STS12-16 inputs, STS-B test, SICK test, TwitterPara)."""
    seen: set[str] = set()
    for f in sorted((data / "sts").glob("STS1[2-6]*/STS.input.*.txt")):
        for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
            seen.update(_norm(x) for x in line.split("\t")[:2])
    for line in (data / "sts" / "STSBenchmark" / "sts-test.csv").read_text(encoding="utf-8").splitlines():
        seen.update(_norm(x) for x in line.split("\t")[5:7])
    for line in (data / "sts" / "SICK" / "SICK_test_annotated.txt").read_text(encoding="utf-8").splitlines()[1:]:
        seen.update(_norm(x) for x in line.split("\t")[1:3])
    tp = data / "useb" / "twitterpara"
    for name in ("test.data", "Twitter_URL_Corpus_test.txt"):
        for line in (tp / name).read_text(encoding="utf-8", errors="replace").splitlines():
            parts = line.split("\t")
            seen.update(_norm(x) for x in (parts[2:4] if name == "test.data" else parts[:2]))
    seen.discard("")
    return seen


def build_corpus(data: Path, out: Path) -> dict:
    sources = {
        "wiki": [
            s.strip() for s in (data / "corpora/wiki/wiki_sentences.txt").read_text(encoding="utf-8").splitlines()
        ],
        "janeausten": _austen_sentences(data / "corpora/janeausten"),
        "cqadupstack-titles": [
            json.loads(line)["title"].strip()
            for f in sorted((data / "beir/cqadupstack").glob("*/corpus.jsonl.gz"))
            for line in gzip.open(f, "rt", encoding="utf-8")
        ],
    }
    tests = _test_sentences(data)
    kept, seen, counts = [], set(), {}
    for name, sents in sources.items():
        dropped = dup = 0
        for s in sents:
            n = _norm(s)
            if not n:
                continue
            if n in tests:
                dropped += 1
                continue
            if n in seen:
                dup += 1
                continue
            seen.add(n)
            kept.append(s)
        counts[name] = {"read": len(sents), "dropped_as_test_sentence": dropped, "duplicates": dup}
    random.Random(0).shuffle(kept)
    out.mkdir(parents=True, exist_ok=True)
    text = "\n".join(kept) + "\n"
    with gzip.open(out / "corpus.txt.gz", "wt", encoding="utf-8", compresslevel=9) as fh:  # travels to a GPU machine
        fh.write(text)
    manifest = {
        "sentences": len(kept),
        "words": sum(len(s.split()) for s in kept),
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "sources": counts,
        "test_sentences_checked": len(tests),
        "decontaminated_against": ["STS12-16 inputs", "STS-B test", "SICK test", "TwitterPara test (PIT + TURL)"],
    }
    (out / "corpus.json").write_text(json.dumps(manifest, indent=1))
    return manifest


# ---- training (torch + transformers only) -------------------------------------------------------------------
def _tokenizer():
    from transformers import BertTokenizerFast

    # transformers >= 5 reads ``vocab`` and ignores ``vocab_file`` (a 5-token vocabulary); older ones the reverse
    tok = BertTokenizerFast(vocab=str(VOCAB), do_lower_case=True)
    if len(tok) < 1000:
        tok = BertTokenizerFast(vocab_file=str(VOCAB), do_lower_case=True)
    if len(tok) != 30522:
        raise SystemExit(f"{VOCAB}: expected bert-base-uncased's 30,522 tokens, got {len(tok)}")
    return tok


def _mask(ids, tok, gen, p: float = 0.15):
    """BERT's dynamic masking on a padded id tensor: labels -100 except at the chosen 15% of real tokens."""
    import torch

    special = (ids == tok.pad_token_id) | (ids == tok.cls_token_id) | (ids == tok.sep_token_id)
    chosen = (torch.rand(ids.shape, generator=gen, device=ids.device) < p) & ~special
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    r = torch.rand(ids.shape, generator=gen, device=ids.device)
    inp = ids.clone()
    inp[chosen & (r < 0.8)] = tok.mask_token_id
    rand_pos = chosen & (r >= 0.8) & (r < 0.9)
    inp[rand_pos] = torch.randint(len(tok), ids.shape, generator=gen, device=ids.device)[rand_pos]
    return inp, labels


def _batch(rows, device):
    import torch

    n = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), n, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
    return ids.to(device), (ids != 0).long().to(device)


def _loss(model, ids, att, labels):
    import torch.nn.functional as F

    hidden = model.bert(input_ids=ids, attention_mask=att).last_hidden_state
    picked = labels != -100
    logits = model.cls(hidden[picked])  # the vocabulary projection only at masked positions
    return F.cross_entropy(logits.float(), labels[picked]), logits, labels[picked]


def heldout_accuracy(model, tok, rows, device, bf16: bool, batch: int = 256) -> dict:
    import torch

    gen = torch.Generator(device=device).manual_seed(0)
    model.eval()
    right = total = 0
    loss_sum = 0.0
    with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
        for i in range(0, len(rows), batch):
            ids, att = _batch(rows[i : i + batch], device)
            inp, labels = _mask(ids, tok, gen)
            loss, logits, gold = _loss(model, inp, att, labels)
            right += int((logits.argmax(-1) == gold).sum())
            total += int(gold.numel())
            loss_sum += float(loss) * int(gold.numel())
    model.train()
    return {"mlm_accuracy": right / max(total, 1), "mlm_loss": loss_sum / max(total, 1), "masked_tokens": total}


def _save_ckpt(out: Path, model, opt, state: dict) -> None:
    """Model weights and AdamW's moments as safetensors, the rest as JSON; replaced atomically."""
    from safetensors.torch import save_file, save_model

    tmp = out / "ckpt.tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    save_model(model, str(tmp / "model.safetensors"))  # tied embeddings/decoder saved once
    moments = {}
    names = {id(p): n for n, p in model.named_parameters()}
    for group in opt.param_groups:
        for p in group["params"]:
            st = opt.state.get(p)
            if st:
                moments[f"{names[id(p)]}::exp_avg"] = st["exp_avg"]
                moments[f"{names[id(p)]}::exp_avg_sq"] = st["exp_avg_sq"]
                state.setdefault("adam_step", {})[names[id(p)]] = float(st["step"])
    save_file(moments, str(tmp / "optimizer.safetensors"))
    (tmp / "state.json").write_text(json.dumps(state))
    final = out / "ckpt"
    if final.exists():
        old = out / "ckpt.old"
        os.replace(final, old)
        os.replace(tmp, final)
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    else:
        os.replace(tmp, final)


def _load_ckpt(out: Path, model, opt) -> dict | None:
    import torch
    from safetensors.torch import load_file, load_model

    d = out / "ckpt"
    if not (d / "state.json").is_file():
        return None
    load_model(model, str(d / "model.safetensors"), device=str(next(model.parameters()).device))
    state = json.loads((d / "state.json").read_text())
    moments = load_file(str(d / "optimizer.safetensors"), device=str(next(model.parameters()).device))
    for n, p in model.named_parameters():
        if f"{n}::exp_avg" in moments:
            opt.state[p] = {
                "step": torch.tensor(state["adam_step"][n]),
                "exp_avg": moments[f"{n}::exp_avg"],
                "exp_avg_sq": moments[f"{n}::exp_avg_sq"],
            }
    return state


def _lr_at(step: int, warmup: int, total: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


def train(args: argparse.Namespace) -> dict:
    import numpy as np
    import torch
    from transformers import BertConfig, BertForMaskedLM

    device = torch.device(args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu"))
    bf16 = device.type == "cuda" and not args.fp32
    torch.manual_seed(args.seed)
    tok = _tokenizer()
    raw = (
        gzip.decompress(Path(args.corpus).read_bytes())
        if args.corpus.endswith(".gz")
        else Path(args.corpus).read_bytes()
    )
    lines = [s for s in raw.decode("utf-8").splitlines() if s.strip()]
    corpus_sha = hashlib.sha256(raw).hexdigest()
    if args.limit_sentences:
        lines = lines[: args.limit_sentences]
    n_held = max(1, len(lines) // 100)
    held_lines, train_lines = lines[:n_held], lines[n_held:]
    t_tok = time.perf_counter()
    enc = tok(train_lines, truncation=True, max_length=args.max_length)["input_ids"]
    held = tok(held_lines, truncation=True, max_length=args.max_length)["input_ids"]
    tok_s = time.perf_counter() - t_tok
    shape = {k: getattr(args, k) for k in SHAPE}
    cfg = BertConfig(
        vocab_size=len(tok),
        hidden_size=shape["hidden"],
        num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"],
        intermediate_size=shape["intermediate"],
        max_position_embeddings=512,
    )
    model = BertForMaskedLM(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.98), eps=1e-6)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    state = _load_ckpt(out, model, opt) or {"step": 0, "total": args.steps, "log": [], "train_s": 0.0}
    if args.time_budget_s is None and args.steps > state["total"]:
        state["total"] = args.steps  # resumed with a longer budget (the decay is re-drawn from here on)
    gen = torch.Generator(device=device).manual_seed(args.seed + state["step"])
    order_rng = np.random.default_rng(args.seed)
    perm = order_rng.permutation(len(enc))
    epoch_len = len(enc) // args.batch_size
    warmup = min(args.warmup, max(1, state["total"] // 10))
    model.train()
    t0 = time.perf_counter()
    started = state["step"]
    sized = args.time_budget_s is None or started > 0
    while state["step"] < state["total"]:
        step = state["step"]
        e, b = divmod(step, epoch_len)
        if b == 0 and e > 0:
            perm = np.random.default_rng(args.seed + e).permutation(len(enc))
        rows = [enc[i] for i in perm[b * args.batch_size : (b + 1) * args.batch_size]]
        ids, att = _batch(rows, device)
        inp, labels = _mask(ids, tok, gen)
        for g in opt.param_groups:
            g["lr"] = args.lr * _lr_at(step, warmup, state["total"])
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss, _, _ = _loss(model, inp, att, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        state["step"] += 1
        if state["step"] % args.log_every == 0 or state["step"] == 1:
            state["log"].append({"step": state["step"], "loss": round(float(loss.detach()), 4)})
            print(json.dumps(state["log"][-1]), flush=True)
        if not sized and state["step"] - started == 100:  # steps 100-300 are timed: the first ones carry start-up
            if device.type == "cuda":
                torch.cuda.synchronize()
            t_mark = time.perf_counter()
        if not sized and state["step"] - started == 300:  # size the schedule to end inside the time budget
            if device.type == "cuda":
                torch.cuda.synchronize()
            per_step = (time.perf_counter() - t_mark) / 200
            fit = int((args.time_budget_s - (time.perf_counter() - t0)) / per_step) + state["step"]
            state["total"] = max(state["step"] + 1, min(state["total"], fit))
            warmup = min(args.warmup, max(1, state["total"] // 10))
            sized = True
            print(f"sized: {per_step * 1000:.1f} ms/step -> {state['total']} steps", flush=True)
        if args.ckpt_every and state["step"] % args.ckpt_every == 0:
            _save_ckpt(out, model, opt, {**state, "train_s": state["train_s"] + time.perf_counter() - t0})
    if device.type == "cuda":
        torch.cuda.synchronize()
    state["train_s"] += time.perf_counter() - t0
    _save_ckpt(out, model, opt, dict(state))
    if args.save_dtype == "fp16":  # the published weights are the fp16-rounded ones, so they are what is measured
        with torch.no_grad():
            for prm in model.parameters():
                prm.copy_(prm.half().float())
    acc = heldout_accuracy(model, tok, held, device, bf16)
    model.to("cpu")
    (model.half() if args.save_dtype == "fp16" else model.float()).save_pretrained(str(out), safe_serialization=True)
    tok.save_pretrained(str(out))
    tokens = sum(len(r) for r in enc)
    card = {
        "name": out.name,
        "what": "BERT (all-MiniLM-L6-v2's shape) pre-trained from scratch with MLM; no sentence-level training",
        "shape": shape,
        "corpus": {
            "file": Path(args.corpus).name,
            "sha256": corpus_sha,
            "train_sentences": len(enc),
            "heldout_sentences": len(held),
            "train_tokens": tokens,
        },
        "steps": state["step"],
        "batch_size": args.batch_size,
        "max_length": args.max_length,
        "lr": args.lr,
        "warmup": warmup,
        "epochs_seen": round(state["step"] * args.batch_size / max(1, len(enc)), 2),
        "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
        "dtype": "bf16 autocast" if bf16 else "fp32",
        "saved_weights": args.save_dtype
        + (" (rounded from fp32 master weights before the held-out measurement)" if args.save_dtype == "fp16" else ""),
        "train_seconds": round(state["train_s"], 1),
        "tokenize_seconds": round(tok_s, 1),
        "heldout": acc,
        "loss_curve": state["log"],
        "torch": torch.__version__,
    }
    corpus_manifest = Path(args.corpus).parent / "corpus.json"
    if corpus_manifest.is_file():
        card["corpus"]["manifest"] = json.loads(corpus_manifest.read_text())
    (out / "plain_start_card.json").write_text(json.dumps(card, indent=1))
    print(json.dumps({k: card[k] for k in ("steps", "epochs_seen", "train_seconds", "heldout", "device")}))
    return card


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("corpus")
    c.add_argument("--data-dir", default=os.environ.get("BENCHBENCH_DATA"))
    c.add_argument("--out", required=True)
    t = sub.add_parser("train")
    t.add_argument("--corpus", required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--steps", type=int, default=60000)
    t.add_argument("--batch-size", type=int, default=256)
    t.add_argument("--lr", type=float, default=5e-4)
    t.add_argument("--warmup", type=int, default=1000)
    t.add_argument("--max-length", type=int, default=64)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--device", default="auto")
    t.add_argument("--fp32", action="store_true", help="no bf16 autocast on CUDA")
    t.add_argument(
        "--save-dtype",
        choices=("fp32", "fp16"),
        default="fp32",
        help="fp16 halves the folder (a GPU machine returns at most 64 MB)",
    )
    t.add_argument("--time-budget-s", type=float, default=None)
    t.add_argument("--ckpt-every", type=int, default=2000)
    t.add_argument("--log-every", type=int, default=500)
    t.add_argument("--limit-sentences", type=int, default=0, help="a quick check on the first N sentences")
    for k, v in SHAPE.items():
        t.add_argument(f"--{k}", type=int, default=v)
    args = ap.parse_args()
    if args.cmd == "corpus":
        print(json.dumps(build_corpus(Path(args.data_dir), Path(args.out)), indent=1))
    else:
        if math.isfinite(args.lr) and args.lr <= 0:
            ap.error("--lr must be positive")
        train(args)


if __name__ == "__main__":
    main()
