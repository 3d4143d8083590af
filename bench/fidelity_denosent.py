"""Fidelity of plugins/denosent.py against the official DenoSent code (xinghaow99/DenoSent).

The reference's own functions are read from a bare git mirror (``--mirror``; the ``fetch`` tool's copy by
default) and run, unedited, on a stand-in ``self`` that holds a deep copy of benchbench's modules:

* ``train.py`` ``map_fn`` (the input pipeline: cut to 32 tokens with [CLS]/[SEP], decode, template,
  pad to 32 + 8) vs ``DenoSentObjective.collate`` on real STS-B sentences and their Apertium
  back-translations: the token ids of every row (up to padding) and the [MASK] positions;
* ``model.py`` ``DenoSentModel.forward`` (contrast + denoising, weights 5 and 7, temperature 0.05,
  noise dropout 0.825, dropout everywhere on) vs ``DenoSentObjective.forward`` on the same padded
  tensors and torch RNG state: the loss, every gradient, and every weight after each of a few AdamW
  steps (both sides their own optimizer); plus each term alone (weights 1/0 and 0/1).

``wandb.log`` is a no-op; ``TokenClassifierOutput`` is transformers' own. The discrete noise has no
reference function: the published pairs were made outside the repository (OPUS-MT en->zh->en per the
paper), so only the pipeline after it is compared.

    nice python bench/fidelity_denosent.py [--mirror DIR] [--steps 3]
"""

from __future__ import annotations

import argparse
import copy
import subprocess
import sys
from types import SimpleNamespace

import torch
from _reference import sts_sentences

MIRROR = "/work/.mirror/xinghaow99+DenoSent/repo"
TOL = 1e-5
W_TOL = 1e-4  # a tenth of one AdamW step at lr 1e-3: Adam turns a 1e-7 gradient difference into a step-sized one


def git(mirror: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", mirror, *args], check=True, capture_output=True, text=True).stdout


def function_from(src: str, name: str, ns: dict):
    import ast
    import textwrap

    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            exec(textwrap.dedent(ast.get_source_segment(src, node)), ns)
            return ns[name]
    raise LookupError(name)


def reference(mirror: str, tokenizer, template: str):
    from transformers.modeling_outputs import TokenClassifierOutput

    wandb = SimpleNamespace(log=lambda *a, **k: None)
    ns = {"torch": torch, "nn": torch.nn, "wandb": wandb, "TokenClassifierOutput": TokenClassifierOutput}
    ns["Optional"] = __import__("typing").Optional
    forward = function_from(git(mirror, "show", "HEAD:model.py"), "forward", ns)
    cfg = SimpleNamespace(pooler="mask", max_length=32, prompt_format=template)
    mns = {"tokenizer": tokenizer, "config": cfg, "model_args": SimpleNamespace(max_length=32)}
    map_fn = function_from(git(mirror, "show", "HEAD:train.py"), "map_fn", mns)
    return forward, map_fn, git(mirror, "rev-parse", "HEAD").strip()


def build(layers: int = 2):
    from benchbench_plugins.denosent import DenoSentConfig, DenoSentEncoder, DenoSentObjective, mlm_head

    from benchbench import tiny_bert

    base = tiny_bert(64, 2, 2, 128, max_seq_length=128, seed=0)  # dropout 0.1 (BERT's default)
    enc = DenoSentEncoder(base, DenoSentConfig().template)
    c = DenoSentConfig(decoder_layers=layers, decoder_ffn=128)
    torch.manual_seed(1)
    return DenoSentObjective(enc, c, mlm_head(enc)), c


def ref_self(obj, c, cw=None, gw=None):
    tok = obj.encoder.tokenizer
    r = copy.deepcopy(obj)
    config = SimpleNamespace(
        do_contrastive=True,
        do_generative=True,
        contrastive_temp=c.temperature,
        contrastive_weight=c.contrastive_weight if cw is None else cw,
        generative_weight=c.generative_weight if gw is None else gw,
    )
    return r, SimpleNamespace(
        config=config,
        pooler="mask",
        device=torch.device("cpu"),
        tokenizer=tok,
        encoder=r.encoder.model,
        sent_embedding_projector=r.projector,
        decoder_noise_dropout=r.noise_dropout,
        decoder=r.decoder,
        prediction_head=r.head,
        sim=torch.nn.CosineSimilarity(dim=-1),
    )


def check_inputs(obj, map_fn, sents, noisy):
    """Rows equal up to padding, and the [MASK] positions: (rows, rows differing, max |mask pos diff|)."""
    from benchbench_plugins.augmenters import BackTranslate

    obj.noise = BackTranslate()  # the plugin's default discrete noise (cached: the views made in main)
    batch = obj.collate(sents, None)
    obj.noise = None
    ref = [map_fn({"sent0": a, "sent1": b}) for a, b in zip(sents, noisy)]
    rows = [r["input_ids"] for r in ref] + [r["positive_input_ids"] for r in ref]
    bad = 0
    for i, row in enumerate(rows):
        ours = batch["input_ids"][i][batch["attention_mask"][i].bool()].tolist()
        bad += ours != [t for t in row if t != obj.pad_id]
    mask_id = obj.encoder.tokenizer.mask_token_id
    pos = torch.tensor([row.index(mask_id) for row in rows])
    return len(rows), bad, int((pos - batch["mask_pos"]).abs().max())


def padded(obj, map_fn, sents, noisy):
    ref = [map_fn({"sent0": a, "sent1": b}) for a, b in zip(sents, noisy)]
    t = lambda k: torch.tensor([r[k] for r in ref])  # noqa: E731
    mask_id = obj.encoder.tokenizer.mask_token_id
    ids = torch.cat([t("input_ids"), t("positive_input_ids")])
    return {
        "ref": dict(
            input_ids=t("input_ids"),
            attention_mask=t("attention_mask"),
            positive_input_ids=t("positive_input_ids"),
            positive_attention_mask=t("positive_attention_mask"),
        ),
        "ours": dict(
            input_ids=ids,
            attention_mask=torch.cat([t("attention_mask"), t("positive_attention_mask")]),
            mask_pos=(ids == mask_id).int().argmax(1),
        ),
    }


def check_steps(forward, map_fn, sents, noisy, steps, n=8, cw=None, gw=None) -> list[tuple]:
    obj, c = build()
    if cw is not None:
        obj.cw, obj.gw = float(cw), float(gw)
    r, rs = ref_self(obj, c, cw, gw)
    opt_o = torch.optim.AdamW(obj.parameters(), lr=1e-3, weight_decay=0.0)
    opt_r = torch.optim.AdamW(r.parameters(), lr=1e-3, weight_decay=0.0)
    rows = []
    for s in range(steps):
        b = padded(obj, map_fn, sents[s * n : (s + 1) * n], noisy[s * n : (s + 1) * n])
        obj.train()
        r.train()
        torch.manual_seed(100 + s)
        lo = obj(**b["ours"])
        torch.manual_seed(100 + s)
        lr_ = forward(rs, **b["ref"]).loss
        opt_o.zero_grad()
        opt_r.zero_grad()
        lo.backward()
        lr_.backward()
        # a term with weight 0 is skipped by benchbench (no gradient) and multiplied by 0 by the reference
        g = lambda p: p.grad if p.grad is not None else torch.zeros_like(p)  # noqa: E731
        pairs = [(a, b_) for a, b_ in zip(obj.parameters(), r.parameters()) if b_.grad is not None]
        dg = max((g(a) - b_.grad).abs().max().item() for a, b_ in pairs)
        gm = max(b_.grad.abs().max().item() for _, b_ in pairs)
        opt_o.step()
        opt_r.step()
        dw = max((a - b_).abs().max().item() for a, b_ in zip(obj.parameters(), r.parameters()))
        rows.append((s + 1, lr_.item(), abs(lo.item() - lr_.item()), dg, gm, dw, len(pairs)))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", default=MIRROR, help="bare git dir of xinghaow99/DenoSent")
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    import transformers
    from benchbench_plugins.augmenters import BackTranslate

    transformers.logging.set_verbosity_error()
    obj, c = build()
    forward, map_fn, commit = reference(a.mirror, obj.encoder.tokenizer, c.template)
    print(
        f"reference: xinghaow99/DenoSent@{commit[:7]}, transformers {transformers.__version__}, torch {torch.__version__}"
    )
    sents = sts_sentences(max(200, 8 * a.steps))
    noisy = BackTranslate().apply(sents, 0)  # Apertium en->es->en (the plugin's default discrete noise)
    print(f"discrete noise: Apertium en->es->en of {len(sents)} STS-B sentences, e.g. {sents[0]!r} -> {noisy[0]!r}")
    n_rows, bad, dpos = check_inputs(obj, map_fn, sents, noisy)
    print(
        f"\ninputs: train.py map_fn vs collate: {n_rows} rows, {bad} differ (up to padding), max |[MASK] position diff| {dpos}"
    )
    ok = bad == 0 and dpos == 0
    print(
        "\n| terms | step | ref loss | abs loss diff | max abs grad diff | max abs grad | max abs weight diff after AdamW | params with grad |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for label, cw, gw in (("5 * contrast + 7 * denoise", None, None), ("contrast only", 1, 0), ("denoise only", 0, 1)):
        for s, lref, dl, dg, gm, dw, npar in check_steps(forward, map_fn, sents, noisy, a.steps, cw=cw, gw=gw):
            print(f"| {label} | {s} | {lref:.5f} | {dl:.2e} | {dg:.2e} | {gm:.2e} | {dw:.2e} | {npar} |")
            ok = ok and dl < TOL * max(1.0, abs(lref)) and dg <= TOL * gm and dw < W_TOL
    print(
        f"\ntolerance {TOL:g}: loss relative, gradients relative to the largest; weights {W_TOL:g} absolute (AdamW lr 1e-3; float32)"
    )
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
