"""Pre-train a tiny BERT with masked language modelling on the offline NLI sentences, and save it WITH
its MLM head (``BertForMaskedLM.save_pretrained``), so that BSL's ``mlm`` augmenter has a model whose
head predicts words (no model with a pretrained MLM head exists offline: all-MiniLM-L6-v2 has none).

The BSL augmentation ablation (leaderboards/bsl/) starts every row from this model, so the four views
(back-translation, synonym, mlm, nli-entail) are compared from one start that has seen some language,
and the ``mlm`` view comes from the start's own head (``--model`` = this folder).

    python bench/pretrain_tiny_mlm.py --out ~/.cache/benchbench/tiny-mlm-nli --steps 1000

Standard BERT masking (15% of tokens; 80% [MASK], 10% random, 10% kept) via transformers'
``DataCollatorForLanguageModeling``; AdamW lr 5e-4, linear warm-up 10%, batch 64, max 64 tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder to save the model, tokenizer and a training log in")
    ap.add_argument("--data-dir", default=os.environ.get("BENCHBENCH_DATA"))
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=128)
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import torch
    from transformers import (
        BertConfig,
        BertForMaskedLM,
        DataCollatorForLanguageModeling,
        get_linear_schedule_with_warmup,
    )

    from benchbench import tiny_bert
    from benchbench.store.data import DataStore
    from benchbench.train.nli import nli_sentences

    sentences = nli_sentences(DataStore(args.data_dir))
    start = tiny_bert(args.hidden, args.layers, args.heads, args.intermediate, seed=args.seed)
    tok = start.tokenizer
    cfg = BertConfig(**{**start.model.config.to_dict()})
    torch.manual_seed(args.seed)
    model = BertForMaskedLM(cfg)
    model.bert.load_state_dict(start.model.state_dict(), strict=False)  # the same init as tiny-bert seed 0
    collate = DataCollatorForLanguageModeling(tok, mlm=True, mlm_probability=0.15)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = get_linear_schedule_with_warmup(opt, args.steps // 10, args.steps)
    rng = random.Random(args.seed)
    model.train()
    log, t0 = [], time.perf_counter()
    for step in range(1, args.steps + 1):
        batch = rng.sample(sentences, args.batch_size)
        enc = tok(batch, truncation=True, max_length=args.max_length)
        inputs = collate([{"input_ids": ids} for ids in enc["input_ids"]])
        # the vocabulary projection only at the masked positions (15% of tokens): the same loss as
        # ``model(**inputs).loss`` (its cross-entropy ignores the -100 labels), ~6x less head work
        hidden = model.bert(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).last_hidden_state
        picked = inputs["labels"] != -100
        logits = model.cls(hidden[picked])
        loss = torch.nn.functional.cross_entropy(logits, inputs["labels"][picked])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        if step % 100 == 0 or step == 1:
            log.append({"step": step, "loss": round(loss.item(), 4), "seconds": round(time.perf_counter() - t0, 1)})
            print(log[-1], flush=True)
    out = Path(args.out).expanduser()
    model.eval().save_pretrained(out)
    tok.save_pretrained(out)
    # a hidden file: local_model_label skips hidden files, so the folder's label (the records' name for
    # this model) hashes only what changes the vectors, and a rebuild that reproduces the weights gets the
    # same label (the log holds timings and paths, which no two builds share)
    (out / ".pretrain_log.json").write_text(
        json.dumps({"args": vars(args), "sentences": len(sentences), "log": log}, indent=1)
    )
    print(f"saved to {out} ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
