"""Fidelity of plugins/diffcse.py against the official DiffCSE code (voidism/DiffCSE).

The reference is not vendored: this script extracts ``diffcse/models.py`` and ``train.py`` from a bare
git mirror of voidism/DiffCSE (``--mirror``; the ``fetch`` tool's copy by default) into a temporary
folder and runs the reference's OWN code from there:

1. training steps: the reference's ``BertForCL`` (its ``cl_init``: pooler, ``ProjectionMLP``,
   ``Similarity``, the generator loaded by ``from_pretrained(generator_name)``) and its ``cl_forward``
   (SimCSE loss + conditional replaced-token detection) against ``DiffCSEObjective``, on the same tiny
   BERT, generator, discriminator, heads and batches (real STS-B sentences, masked by benchbench's
   collate, fed to both), three SGD steps; every dropout at 0 so train mode is deterministic (BatchNorm
   runs on batch statistics on both sides). Compared per step: the loss, and every trained weight
   (encoder, discriminator, projection MLP, ELECTRA head). Run at the paper's lambda = 0.005 and
   temperature 0.05, and at lambda = 1 and temperature 1: with dropout off the two views are equal,
   so at 0.05 the contrastive term is near 0; at 1 both terms are large and an error in either shows.
2. masking: the reference collator's ``mask_tokens`` (with ``custom_mlm_prob`` = 0.30, as its trainer
   sets it) against ``mask_for_generator`` on the same padded STS-B batches, many draws: the shares of
   tokens chosen, turned into [MASK], randomised and kept, and that special tokens never change.

One shim, written here and not the reference's: the reference's discriminator is a ``BertModel`` from
its patched ``modeling_bert.py`` (transformers 4.2.1) whose ``forward`` takes ``cls_input`` and puts it
in place of the embedding layer's output at position 0 (lines 960-961) before the encoder. That file
does not import under transformers 5, so ``ConditionedBert`` below does those two lines with the
current ``BertModel``'s own embedding layer and encoder; benchbench's plugin does the same through a
forward hook on a full ``BertModel`` call, so the two sides still run different code. transformers >= 5
also needs ``all_tied_weights_keys`` set on the reference's ``BertForCL`` (it ties nothing).

    python bench/fidelity_diffcse.py [--mirror /work/.mirror/voidism+DiffCSE/repo]
"""

from __future__ import annotations

import argparse
import copy
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from _reference import function_source, sts_sentences

MIRROR = "/work/.mirror/voidism+DiffCSE/repo"


def extract(mirror: str, dest: Path) -> str:
    """``diffcse/models.py`` and ``train.py`` at the mirror's HEAD into ``dest`` (the package's
    ``__init__`` left empty: it imports the reference's inference tool, not needed here)."""
    (dest / "diffcse").mkdir(parents=True, exist_ok=True)
    (dest / "diffcse" / "__init__.py").write_text("")
    for f in ("diffcse/models.py", "train.py"):
        (dest / f).write_bytes(
            subprocess.run(["git", "--git-dir", mirror, "show", f"HEAD:{f}"], check=True, capture_output=True).stdout
        )
    return subprocess.run(
        ["git", "--git-dir", mirror, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def no_dropout(module: torch.nn.Module) -> None:
    for m in module.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0


class ConditionedBert(torch.nn.Module):
    """The reference's patched ``BertModel.forward`` as far as ``cl_forward`` uses it: embeddings,
    position 0 replaced by ``cls_input``, the encoder under the usual extended attention mask."""

    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask=None, cls_input=None, **_):
        emb = self.bert.embeddings(input_ids=input_ids)
        if cls_input is not None:
            emb = torch.cat([cls_input.unsqueeze(1), emb[:, 1:, :]], dim=1)
        ext = (1.0 - attention_mask[:, None, None, :].to(emb.dtype)) * torch.finfo(
            emb.dtype
        ).min  # BERT's additive mask
        return SimpleNamespace(last_hidden_state=self.bert.encoder(emb, attention_mask=ext)[0])


def make_pair(models, gen_dir: Path, lambda_weight: float, temperature: float):
    """(ours, reference) with the same weights everywhere, every dropout 0."""
    from benchbench_plugins.diffcse import DiffCSEObjective, load_generator

    from benchbench import tiny_bert

    enc = tiny_bert(32, 2, 2, 64, pooling="cls", max_seq_length=32, seed=0)
    enc.model.config.hidden_dropout_prob = enc.model.config.attention_probs_dropout_prob = 0.0
    enc.model.config._attn_implementation = "eager"
    no_dropout(enc)
    torch.manual_seed(1)
    ours = DiffCSEObjective(enc, load_generator(str(gen_dir), enc), temperature, lambda_weight, 0.30, batchnorm=True)
    no_dropout(ours)
    with torch.no_grad():  # a discriminator that differs from the encoder (their updates must not mix)
        for p in ours.discriminator.parameters():
            p.add_(0.02 * torch.randn_like(p))

    models.BertForCL.all_tied_weights_keys = {}
    args = SimpleNamespace(pooler_type="cls", batchnorm=True, temp=temperature, generator_name=str(gen_dir))
    args.before_mlp, args.mlp_only_train, args.lambda_weight, args.hard_negative_weight = False, True, lambda_weight, 0
    ref = models.BertForCL(copy.deepcopy(enc.model.config), model_args=args)
    ref.bert.load_state_dict(enc.model.state_dict(), strict=False)  # ours has no BERT pooler (unused: cls)
    ref.discriminator = ConditionedBert(copy.deepcopy(ours.discriminator))
    ref.mlp.net.load_state_dict(ours.mlp.state_dict())
    ref.electra_head = copy.deepcopy(ours.electra_head)
    gen_diff = max((a - b).abs().max().item() for a, b in zip(ref.generator.parameters(), ours.generator.parameters()))
    assert gen_diff == 0.0, "the reference's generator (from_pretrained(generator_name)) differs from ours"
    no_dropout(ref)
    ref.train(), ours.train()
    return enc, ours, ref


def check_training_steps(
    models, gen_dir: Path, lambda_weight: float, temperature: float, steps: int = 3, n: int = 8
) -> list[tuple]:
    enc, ours, ref = make_pair(models, gen_dir, lambda_weight, temperature)
    sents = sts_sentences(200)
    opt_ours = torch.optim.SGD([p for p in ours.parameters() if p.requires_grad], lr=0.05)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.05)  # its generator gets no gradient (no_grad)
    rows = []
    for step in range(steps):
        batch = ours.collate(sents[step * n : (step + 1) * n], np.random.default_rng(step))
        batch.pop("n_tokens")
        ids, mask, mlm = batch["input_ids"], batch["attention_mask"], batch["mlm_input_ids"]
        loss_ours = ours(**batch)
        out = ref(  # the reference's layout: (batch, 2 views, length); both views' rows of ours, paired
            input_ids=torch.stack([ids, ids], 1),
            attention_mask=torch.stack([mask, mask], 1),
            mlm_input_ids=torch.stack([mlm[:n], mlm[n:]], 1),
            mlm_labels=torch.zeros_like(torch.stack([ids, ids], 1)),  # only tested for None by cl_forward
            return_dict=True,
        )
        loss_ref = out.loss
        for opt, loss in ((opt_ours, loss_ours), (opt_ref, loss_ref)):
            opt.zero_grad()
            loss.backward()
            opt.step()

        def diff(a, b):
            da, db = dict(a.named_parameters()), dict(b.named_parameters())
            return max((p - db[k]).abs().max().item() for k, p in da.items() if k in db)

        rows.append(
            (
                step + 1,
                loss_ours.item(),
                abs(loss_ours.item() - loss_ref.item()),
                diff(enc.model, ref.bert),
                diff(ours.discriminator, ref.discriminator.bert),
                max((a - b).abs().max().item() for a, b in zip(ours.mlp.parameters(), ref.mlp.net.parameters())),
                max(
                    (a - b).abs().max().item()
                    for a, b in zip(ours.electra_head.parameters(), ref.electra_head.parameters())
                ),
            )
        )
    return rows


def check_masking(train_py: Path, gen_dir: Path, draws: int = 200) -> dict:
    from benchbench_plugins.diffcse import DiffCSEObjective, load_generator, mask_for_generator

    from benchbench import tiny_bert

    enc = tiny_bert(16, 1, 2, 32, pooling="cls", max_seq_length=32)
    tok = enc.tokenizer
    tok.custom_mlm_prob = 0.30  # what the reference's CLTrainer sets from --masking_ratio
    ns: dict = {"torch": torch, "Optional": __import__("typing").Optional, "Tuple": tuple}
    exec(function_source(train_py, "mask_tokens"), ns)
    me = SimpleNamespace(tokenizer=tok, mlm_probability=0.15)
    obj = DiffCSEObjective(enc, load_generator(str(gen_dir), enc))
    sents = sts_sentences(64)
    ids = enc.tokenize(sents)["input_ids"]
    special = torch.isin(ids, obj.special_ids)
    counts = {"ref": np.zeros(4), "ours": np.zeros(4)}  # chosen->[MASK], chosen->random id, unchanged, special changed
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    for _ in range(draws):
        ref_in, labels = ns["mask_tokens"](me, ids)
        ours_in = mask_for_generator(ids, special, 0.30, len(tok), tok.mask_token_id, rng)
        for key, out, chosen in (("ref", ref_in, labels != -100), ("ours", ours_in, None)):
            if chosen is None:  # ours does not return what it chose: a kept token is indistinguishable
                to_mask = out == tok.mask_token_id
                changed = (out != ids) & ~to_mask
            else:
                to_mask = chosen & (out == tok.mask_token_id)
                changed = chosen & (out != ids) & ~to_mask
            counts[key] += [
                int((to_mask & ~special).sum()),
                int((changed & ~special).sum()),
                int(((out == ids) & ~special).sum()),
                int(((out != ids) & special).sum()),
            ]
    n_real = int((~special).sum()) * draws
    shares = {k: (v / n_real).round(4).tolist() for k, v in counts.items()}
    return {"tokens per draw (non-special)": int((~special).sum()), "draws": draws, **shares}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", default=MIRROR, help="bare git dir of voidism/DiffCSE")
    a = ap.parse_args()
    import transformers
    from transformers import BertConfig, BertForMaskedLM

    from benchbench import tiny_bert

    transformers.logging.set_verbosity_error()
    with tempfile.TemporaryDirectory() as tmp:
        commit = extract(a.mirror, Path(tmp))
        sys.path.insert(0, tmp)
        import diffcse.models as models

        gen_dir = Path(tmp) / "generator"  # a tiny masked LM with the bundled bert-base-uncased vocabulary
        tok = tiny_bert(16, 1, 2, 32).tokenizer
        cfg = BertConfig(vocab_size=len(tok), hidden_size=24, num_hidden_layers=1, num_attention_heads=2)
        cfg.intermediate_size, cfg.hidden_dropout_prob, cfg.attention_probs_dropout_prob = 48, 0.0, 0.0
        torch.manual_seed(5)
        BertForMaskedLM(cfg).save_pretrained(gen_dir)
        tok.save_pretrained(gen_dir)
        steps = {lt: check_training_steps(models, gen_dir, *lt) for lt in ((0.005, 0.05), (1.0, 1.0))}
        masking = check_masking(Path(tmp) / "train.py", gen_dir)
    tol = 1e-4
    print(
        f"reference: voidism/DiffCSE@{commit[:7]}, transformers {transformers.__version__}, torch {torch.__version__}"
    )
    print(
        "\n| lambda, temperature | step | loss | |loss diff| | max |encoder diff| | max |discriminator diff| | max |MLP diff| | max |head diff| |"
    )
    print("|---|---|---|---|---|---|---|---|")
    ok = True
    for lam, rows in steps.items():
        for s, loss, dl, de, dd, dm, dh in rows:
            print(f"| {lam} | {s} | {loss:.4f} | {dl:.2e} | {de:.2e} | {dd:.2e} | {dm:.2e} | {dh:.2e} |")
            ok = ok and max(dl, de, dd, dm, dh) < tol
    print("\nmasking (shares of non-special tokens: [MASK], random id, unchanged; then special tokens changed):")
    for k, v in masking.items():
        print(f"  {k}: {v}")
    ref, mine = np.array(masking["ref"]), np.array(masking["ours"])
    ok = ok and np.abs(ref[:3] - mine[:3]).max() < 0.01 and ref[3] == 0 and mine[3] == 0
    print("\nPASS" if ok else "\nFAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
