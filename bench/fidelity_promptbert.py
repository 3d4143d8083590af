"""PromptBERT's loss and encoding equal the official code's own functions on the same weights and batch.

The official repository (github.com/kongds/Prompt-BERT) is NOT vendored: give its git directory (what
the ``fetch`` tool or ``git clone --bare`` leaves) and this script extracts ``prompt_bert/models.py``
into a temporary folder, and executes its ``MLPLayer``, ``Similarity``, ``cl_forward`` and
``sentemb_forward`` (the module's other imports, e.g. ``transformers.file_utils``, are gone from
transformers 5, so the functions are taken out of the module by name with ``ast``, not imported).

The reference batch is built with the official string handling of ``train.py`` (the ``run.sh
unsup-bert`` templates -> ``bs``/``es``; ``bs + s[:32] + es``; ``cls.mask_embedding_template``), which
is checked token for token against benchbench's collate. Compared, on a tiny random BERT (2 layers) and
its MLP copied into the reference's ``MLPLayer``:

* the training loss, ``cl_forward`` vs ``PromptBERTObjective.forward``: eval mode (no dropout) and
  train mode (dropout on, the same torch seed before each: the template-alone forwards and the batch
  forward draw their dropout masks in the same order and shapes), and the logits (cos/temp matrix);
* the encoding, ``sentemb_forward`` (the official trainer's STS-B dev encoder: template inserted around
  ``[CLS] s [SEP]``, [MASK] vector, no delta, no MLP) vs ``PromptEncoder.encode``;
* template denoising at encoding time, ``evaluation.py``'s ``get_delta`` (256 rows) subtracted as its
  ``batcher`` does, vs ``PromptEncoder(denoise=True).encode``.

    python bench/fidelity_promptbert.py [--git-dir /work/.mirror/kongds+Prompt-BERT/repo] [--model all-MiniLM-L6-v2]

Prints one line per comparison with max |diff| and exits non-zero when one is >= 1e-4.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import torch

TOL = 1e-4
# run.sh "unsup-bert"
TEMPLATE = '*cls*_This_sentence_of_"*sent_0*"_means*mask*.*sep+*'
TEMPLATE2 = '*cls*_This_sentence_:_"*sent_0*"_means*mask*.*sep+*'
SENTS = [
    "a man is playing a guitar on the stage tonight .",
    "two dogs run across a snowy field .",
    "short one .",
    "the stock market fell sharply today after the announcement of new tariffs on imported steel and "
    "aluminium , which analysts said could hurt growth in the coming quarters .",
    "how do i install ubuntu on a usb stick without losing data ?",
]


def extract(git_dir: str, path: str, dest: Path) -> Path:
    out = dest / Path(path).name
    out.write_text(
        subprocess.run(
            ["git", f"--git-dir={git_dir}", "show", f"HEAD:{path}"], check=True, capture_output=True, text=True
        ).stdout
    )
    return out


def load_defs(py: Path, names: set[str], namespace: dict) -> dict:
    """Execute the top-level defs ``names`` of ``py`` (only those) in ``namespace``."""
    tree = ast.parse(py.read_text())
    body = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in names]
    missing = names - {n.name for n in body}
    if missing:
        raise SystemExit(f"{py}: no top-level {sorted(missing)}")
    exec(compile(ast.Module(body=body, type_ignores=[]), str(py), "exec"), namespace)
    return namespace


def parse_template(template: str, tok) -> tuple[str, str]:
    """train.py's template handling: '*cls*_This..._"*sent_0*"_means*mask*.*sep+*' -> (bs, es) strings."""
    t = template.replace("*mask*", tok.mask_token).replace("*sep+*", "").replace("*cls*", "").replace("*sent_0*", " ")
    t = t.split(" ")
    return t[0].replace("_", " "), t[1].replace("_", " ")


class NoHeadMask(torch.nn.Module):
    """The reference passes ``head_mask=None``; transformers 5's BertModel has no such argument."""

    def __init__(self, bert):
        super().__init__()
        self.bert = bert
        self.embeddings = bert.embeddings

    def forward(self, *a, head_mask=None, **kw):
        assert head_mask is None
        return self.bert(*a, **kw)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--git-dir", default="/work/.mirror/kongds+Prompt-BERT/repo")
    ap.add_argument("--model", default="tiny-bert:32:2:2:64", help="base model (a BERT: tiny-bert, all-MiniLM-L6-v2)")
    args = ap.parse_args()

    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from benchbench_plugins.promptbert import PromptBERTConfig, PromptBERTObjective, PromptEncoder
    from transformers.modeling_outputs import BaseModelOutputWithPoolingAndCrossAttentions, SequenceClassifierOutput

    from benchbench import load_encoder, tiny_bert

    tmp = Path(tempfile.mkdtemp(prefix="promptbert-ref-"))
    models_py = extract(args.git_dir, "prompt_bert/models.py", tmp)
    eval_py = extract(args.git_dir, "evaluation.py", tmp)
    ns = {
        "torch": torch,
        "nn": nn,
        "F": F,
        "dist": dist,
        "SequenceClassifierOutput": SequenceClassifierOutput,
        "BaseModelOutputWithPoolingAndCrossAttentions": BaseModelOutputWithPoolingAndCrossAttentions,
    }
    ref = load_defs(models_py, {"MLPLayer", "Similarity", "cl_forward", "sentemb_forward"}, ns)
    ref_eval = load_defs(eval_py, {"get_delta"}, {"torch": torch})

    enc = tiny_bert(32, 2, 2, 64, seed=3) if args.model == "tiny-bert:32:2:2:64" else load_encoder(args.model)
    tok, bert = enc.tokenizer, enc.model
    c = PromptBERTConfig()
    assert (c.template, c.template2) == ('This sentence of "[X]" means [MASK].', 'This sentence : "[X]" means [MASK].')
    torch.manual_seed(0)
    obj = PromptBERTObjective(PromptEncoder(enc, c.template), c)

    # ---- the reference model object (cls) ----
    bs1, es1 = parse_template(TEMPLATE, tok)
    bs2, es2 = parse_template(TEMPLATE2, tok)
    margs = types.SimpleNamespace(
        mask_embedding_sentence=True,
        mask_embedding_sentence_delta=True,
        mask_embedding_sentence_different_template=TEMPLATE2,
        mask_embedding_sentence_delta_freeze=False,
        mask_embedding_sentence_autoprompt=False,
        mask_embedding_sentence_delta_no_position=False,
        mask_embedding_sentence_org_mlp=False,
        mask_embedding_sentence_delta_no_delta_eval=False,
        mask_embedding_sentence_avg=False,
        mlp_only_train=True,
        dot_sim=False,
        norm_instead_temp=False,
        hard_negative_weight=0.0,
        only_embedding_training=False,
        temp=c.temperature,
        mask_embedding_sentence_num_masks=1,
    )
    cls = types.SimpleNamespace(
        model_args=margs, config=types.SimpleNamespace(use_return_dict=True, hidden_size=enc.dim)
    )
    cls.mlp = ref["MLPLayer"](cls.config)
    cls.mlp.load_state_dict({"dense.weight": obj.mlp[0].weight.detach(), "dense.bias": obj.mlp[0].bias.detach()})
    cls.sim = ref["Similarity"](temp=margs.temp)
    cls.mask_token_id, cls.pad_token_id = tok.mask_token_id, tok.pad_token_id
    cls.bs = tok.encode(bs1, add_special_tokens=False)
    cls.es = tok.encode(es1, add_special_tokens=False)
    cls.mask_embedding_template = tok.encode(bs1 + es1)
    cls.mask_embedding_template2 = tok.encode(bs2 + es2)
    encoder = NoHeadMask(bert)

    # ---- the reference batch: train.py's prepare_features + the collator's padding ----
    b1, e1 = tok.encode(bs1)[:-1], tok.encode(es1)[1:]
    b2, e2 = tok.encode(bs2)[:-1], tok.encode(es2)[1:]
    rows = []
    for s in SENTS:
        ids = tok.encode(s, add_special_tokens=False)[:32]
        rows += [b1 + ids + e1, b2 + ids + e2]
    width = max(map(len, rows))
    input_ids = torch.tensor([r + [tok.pad_token_id] * (width - len(r)) for r in rows]).view(len(SENTS), 2, -1)
    attention_mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows]).view(len(SENTS), 2, -1)

    batch = obj.collate(SENTS, None)
    batch.pop("n_tokens")
    assert torch.equal(batch["input_ids"], input_ids.view(-1, width)), "collate differs from train.py's features"
    assert torch.equal(batch["attention_mask"], attention_mask.view(-1, width))
    assert obj.templates[0].wrap([]) == cls.mask_embedding_template
    assert obj.templates[1].wrap([]) == cls.mask_embedding_template2

    failed = 0

    def report(what: str, a: torch.Tensor, b: torch.Tensor) -> None:
        nonlocal failed
        d = float((a.detach().float() - b.detach().float()).abs().max())
        failed += d >= TOL
        print(f"{'ok ' if d < TOL else 'BAD'} {what:<72} max|diff| {d:.2e}")

    for mode in ("eval", "train"):
        obj.train(mode == "train")
        cls.training = mode == "train"
        torch.manual_seed(11)
        out = ref["cl_forward"](cls, encoder, input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
        torch.manual_seed(11)
        ours = obj(**batch)
        report(f"loss, {mode} mode: cl_forward vs PromptBERTObjective.forward", out.loss, ours)
        if mode == "eval":
            h1, h2 = obj.views(**batch)
            z1, z2 = obj.mlp(h1), obj.mlp(h2)
            sim = torch.nn.functional.cosine_similarity(z1[:, None], z2[None], dim=-1) / c.temperature
            report("logits (cos/temp) eval mode", out.logits, sim)

    # ---- encoding: the trainer's sentemb_forward (template inserted, [MASK], no delta, no MLP) ----
    margs.mask_embedding_sentence_delta = False
    pe = PromptEncoder(enc, c.template).eval()  # eval() sets bert's mode too; encode() restores the wrapper's
    plain = tok(SENTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        ref_vec = ref["sentemb_forward"](
            cls, encoder, input_ids=plain["input_ids"], attention_mask=plain["attention_mask"], return_dict=True
        ).pooler_output
    report("encode: sentemb_forward vs PromptEncoder.encode", ref_vec, torch.from_numpy(pe.encode(SENTS)))

    # ---- denoised encoding: evaluation.py's get_delta + its batcher's subtraction ----
    eargs = types.SimpleNamespace()
    delta, template_len = ref_eval["get_delta"](bert, TEMPLATE, tok, "cpu", eargs)
    texts = [
        TEMPLATE.replace("*mask*", tok.mask_token)
        .replace("_", " ")
        .replace("*sep+*", "")
        .replace("*cls*", "")
        .replace("*sent 0*", s)
        .strip()
        for s in SENTS
    ]  # the batcher (sentences already end in . or ?)
    feats = tok(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        h = bert(**feats).last_hidden_state[feats["input_ids"] == tok.mask_token_id]
    ref_den = h - delta[feats["attention_mask"].sum(-1) - template_len]
    report(
        "denoised encode: get_delta + batcher vs PromptEncoder(denoise=True)",
        ref_den,
        torch.from_numpy(PromptEncoder(enc, c.template, denoise=True).eval().encode(SENTS)),
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
