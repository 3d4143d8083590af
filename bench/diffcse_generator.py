"""What DiffCSE's generator does to real sentences: the edit statistics behind the ``replace`` option.

DiffCSE's reference code takes the generator's top token at EVERY position (``replace="all"``); the
paper describes (as ELECTRA does) an edit of the MASKED positions only (``replace="masked"``). With a
generator that copies the tokens it was not asked about, the two agree. This script measures, for a
generator and the paper's masking (30%, 80/10/10) on real STS-B sentences, through the plugin's own
``collate`` and ``edit``:

- the share of real tokens masked or randomised for the generator;
- the generator's top-1 accuracy at those positions (it restores the original token);
- how often it copies a token it was NOT asked about (unmasked positions);
- the share of real tokens the edit changes (the RTD positives) under each ``replace`` rule, and so
  the accuracy of a discriminator that always answers "replaced" (or always "original").

    BENCHBENCH_DATA=../shared/data python bench/diffcse_generator.py \
        --generator ~/.cache/benchbench/tiny-mlm-nli --model all-MiniLM-L6-v2 [--out leaderboards/new_methods]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import torch
from _reference import sts_sentences


def measure(generator: str, model: str, n: int, batch: int) -> dict:
    from benchbench_plugins.diffcse import DiffCSEObjective, load_generator

    from benchbench import load_encoder, model_label_of

    enc = load_encoder(model, pooling="cls")
    enc.max_seq_length = 32  # the paper's training length
    gen = load_generator(generator, enc)
    sums = dict.fromkeys(("real", "asked", "restored", "unasked", "copied", "all", "masked"), 0)
    for replace in ("all", "masked"):
        obj = DiffCSEObjective(enc, gen, replace=replace)
        obj.train()  # the reference runs the generator in train mode (dropout on)
        sents = sts_sentences(n)
        for i in range(0, len(sents), batch):
            torch.manual_seed(i)
            b = obj.collate(sents[i : i + batch], np.random.default_rng(i))
            ids, mask = torch.cat([b["input_ids"]] * 2), torch.cat([b["attention_mask"]] * 2).bool()
            with torch.no_grad():
                top = obj.generator(input_ids=b["mlm_input_ids"], attention_mask=mask.long()).logits.argmax(-1)
                _, replaced = obj.edit(b["mlm_input_ids"], ids, mask.long())
            real = mask.clone()
            real[:, 0] = False  # [CLS] is put back by the edit: never a candidate
            sums[replace] += int(replaced[real].sum())
            if replace == "all":
                asked = (b["mlm_input_ids"] != ids) & real
                sums["real"] += int(real.sum())
                sums["asked"] += int(asked.sum())
                sums["restored"] += int(((top == ids) & asked).sum())
                sums["unasked"] += int((real & ~asked).sum())
                sums["copied"] += int(((top == ids) & real & ~asked).sum())
    return {
        "generator": model_label_of(os.path.expanduser(generator)),
        "model": model_label_of(model),
        "sentences": n,
        "real tokens (both views, [CLS] excluded)": sums["real"],
        "asked (masked or randomised)": round(sums["asked"] / sums["real"], 4),
        "restored at asked positions": round(sums["restored"] / max(1, sums["asked"]), 4),
        "copied at unasked positions": round(sums["copied"] / max(1, sums["unasked"]), 4),
        'edited share, replace="all"': round(sums["all"] / sums["real"], 4),
        'edited share, replace="masked"': round(sums["masked"] / sums["real"], 4),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--generator", default="~/.cache/benchbench/tiny-mlm-nli")
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--sentences", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--out", default=None, help="folder for diffcse_generator.md")
    a = ap.parse_args()
    import transformers

    transformers.logging.set_verbosity_error()
    r = measure(os.path.expanduser(a.generator), a.model, a.sentences, a.batch)
    r["generator"] = model_label_of_shown(a.generator, r["generator"])
    lines = ["| quantity | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in r.items())]
    print("\n".join(lines))
    if a.out:
        cmd = "BENCHBENCH_DATA=../shared/data python bench/diffcse_generator.py " + " ".join(sys.argv[1:])
        body = f"# DiffCSE's generator on real sentences\n\n`{cmd}`\n\n" + "\n".join(lines) + "\n"
        (Path(a.out) / "diffcse_generator.md").write_text(body)
    return 0


def model_label_of_shown(given: str, label: str) -> str:
    """The label, never a machine path (a folder named under ~ keeps its label)."""
    return label if not label.startswith(("/", "~")) else Path(given).name


if __name__ == "__main__":
    raise SystemExit(main())
