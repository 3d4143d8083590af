"""Fidelity of SimCSE++ (plugins/_contrastive.py through ``simcse``'s objective) against the official
code (Jiahao004/SimCSE-plus-plus, ``simcse/models_re_vicreg.py``).

The reference is not vendored: the file is read from a bare git mirror (``--mirror``; the ``fetch``
tool's copy by default) at ``--commit`` (899e49b, the first upload, where ``cl_forward`` has both
fixes on; at HEAD the DCL term is commented out) into a temporary folder and imported; its OWN
``cl_forward``, ``Pooler``, ``MLPLayer`` and ``Similarity`` compute the reference side.

Same tiny BERT, same weights, same batches of real STS-B sentences, hidden dropout 0.1 ON (so the two
views differ and the off-dropout pass matters) and attention dropout 0 (under transformers >= 4.48
the reference's way of switching dropout off, ``nn.Dropout.eval()``, no longer reaches BERT's
attention dropout; benchbench switches the whole encoder to eval: see the plugin's table). Both sides
draw the views' dropout masks from the same RNG state; the reference stacks the two views of a
sentence next to each other, benchbench stacks the two copies of the batch, so the reference's
encoder is wrapped in a module that only reorders rows (identical inputs to the same BERT, hence the
same masks). Compared at each of ``--steps`` SGD steps: loss, every gradient, and every weight after
the step. Then the same with the reference's ``pos_ratio`` 1 / ``sw_weight`` 0 (off-dropout alone)
and with the plain SimCSE loss + DCL (``simcse`` with ``dcl_weight`` only), against the reference's
``models_vicreg.py`` (same commit; its DCL temperature is fixed at 10 there).

    nice python bench/fidelity_simcse_plus_plus.py [--mirror DIR] [--commit 899e49b] [--steps 3]
"""

from __future__ import annotations

import argparse
import copy
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import torch
from _reference import sts_sentences

MIRROR = "/work/.mirror/Jiahao004+SimCSE-plus-plus/repo"
TOL = 1e-5


def extract(mirror: str, commit: str, dest: Path) -> str:
    for f in ("simcse/models_re_vicreg.py", "simcse/models_vicreg.py"):
        out = dest / "ref_spp" / Path(f).name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(
            subprocess.run(
                ["git", "--git-dir", mirror, "show", f"{commit}:{f}"], check=True, capture_output=True
            ).stdout
        )
    (dest / "ref_spp" / "__init__.py").write_text("")
    return subprocess.run(
        ["git", "--git-dir", mirror, "rev-parse", commit], check=True, capture_output=True, text=True
    ).stdout.strip()


class Reorder(torch.nn.Module):
    """The reference's encoder argument: the same BERT, given the doubled batch in benchbench's row
    order (all first views, then all second views) and answering in the reference's (views of one
    sentence adjacent). Rows only move; the BERT sees exactly benchbench's input."""

    def __init__(self, bert: torch.nn.Module, n: int):
        super().__init__()
        self.bert, self.n = bert, n

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, **_):
        n = self.n
        order = torch.cat([torch.arange(0, 2 * n, 2), torch.arange(1, 2 * n, 2)]) if len(input_ids) == 2 * n else None
        if order is None:
            return self.bert(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
        out = self.bert(input_ids=input_ids[order], attention_mask=attention_mask[order], return_dict=True)
        back = torch.argsort(order)
        return SimpleNamespace(
            last_hidden_state=out.last_hidden_state[back], pooler_output=None, hidden_states=None, attentions=None
        )


def tiny():
    from benchbench import tiny_bert

    enc = tiny_bert(32, 2, 2, 64, pooling="cls", max_seq_length=32, seed=0)
    for name, m in enc.model.named_modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0 if "attention.self" in name else 0.1
    enc.model.config.attention_probs_dropout_prob = 0.0
    return enc


def run(
    mod, *, off_dropout: bool, dcl_weight: float, dcl_temp: float, steps: int, n: int = 8, control=False
) -> list[tuple]:
    """``control``: benchbench's side WITHOUT off-dropout negatives against the reference with them
    (the bench must see the difference)."""
    from benchbench_plugins.simcse import SimCSEObjective

    enc = tiny()
    torch.manual_seed(1)
    ours = SimCSEObjective(enc, 0.05, True, off_dropout_negatives=off_dropout and not control, dcl_weight=dcl_weight)
    ours.dcl_temperature = dcl_temp
    bert = copy.deepcopy(enc.model)
    wrapper = Reorder(bert, n)
    args = SimpleNamespace(pos_ratio=1, sw_temp=dcl_temp, sw_weight=dcl_weight, pooler_type="cls", temp=0.05)
    mlp = mod.MLPLayer(enc.model.config)
    mlp.dense.load_state_dict(ours.mlp[0].state_dict())
    cls = SimpleNamespace(model_args=args, pooler=mod.Pooler("cls"), pooler_type="cls", mlp=mlp)
    cls.sim, cls.bn = mod.Similarity(temp=0.05), torch.nn.BatchNorm1d(enc.dim, affine=False)
    cls.config = SimpleNamespace(use_return_dict=True)
    opt_ours = torch.optim.SGD(ours.parameters(), lr=0.1)
    opt_ref = torch.optim.SGD(list(bert.parameters()) + list(mlp.parameters()), lr=0.1)
    sents = sts_sentences(steps * n)
    rows = []
    for step in range(steps):
        tok = dict(enc.tokenize(sents[step * n : (step + 1) * n]))
        tok.pop("token_type_ids", None)
        ours.train()
        torch.manual_seed(100 + step)
        loss_ours = ours(**tok)
        wrapper.train()  # HF Trainer's training_step: the reference's eval() of the Dropouts is undone
        torch.manual_seed(100 + step)
        ids, mask = tok["input_ids"], tok["attention_mask"]
        out = mod.cl_forward(
            cls, wrapper, input_ids=torch.stack([ids, ids], 1), attention_mask=torch.stack([mask, mask], 1)
        )
        loss_ref = out.loss
        opt_ours.zero_grad()
        opt_ref.zero_grad()
        loss_ours.backward()
        loss_ref.backward()
        pairs = list(zip(enc.model.parameters(), bert.parameters())) + list(
            zip(ours.mlp.parameters(), mlp.parameters())
        )
        grad = max((a.grad - b.grad).abs().max().item() for a, b in pairs)
        gnorm = max(b.grad.abs().max().item() for _, b in pairs)
        opt_ours.step()
        opt_ref.step()
        weights = max((a - b).abs().max().item() for a, b in pairs)
        rows.append((step + 1, loss_ref.item(), abs(loss_ours.item() - loss_ref.item()), grad, gnorm, weights))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", default=MIRROR, help="bare git dir of Jiahao004/SimCSE-plus-plus")
    ap.add_argument("--commit", default="899e49b")
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    import transformers

    transformers.logging.set_verbosity_error()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        commit = extract(a.mirror, a.commit, Path(tmp))
        sys.path.insert(0, tmp)
        import ref_spp.models_re_vicreg as re_vicreg
        import ref_spp.models_vicreg as vicreg

        print(
            f"reference: Jiahao004/SimCSE-plus-plus@{commit[:7]}, transformers {transformers.__version__}, torch {torch.__version__}"
        )
        cases = [
            ("SimCSE++ (off-dropout + DCL 0.1 / t 5)", re_vicreg, dict(off_dropout=True, dcl_weight=0.1, dcl_temp=5.0)),
            ("off-dropout alone (sw_weight 0)", re_vicreg, dict(off_dropout=True, dcl_weight=0.0, dcl_temp=5.0)),
        ]
        for title, mod, kw in cases:
            rows = run(mod, steps=a.steps, **kw)
            print(f"\n{title}: models_re_vicreg.cl_forward")
            print("| step | ref loss | |loss diff| | max |grad diff| | max |grad| | max |weight diff| after SGD |")
            print("|---|---|---|---|---|---|")
            for s, lr_, dl, dg, gn, dw in rows:
                print(f"| {s} | {lr_:.5f} | {dl:.2e} | {dg:.2e} | {gn:.2e} | {dw:.2e} |")
            ok = ok and all(dl < TOL and dg < TOL and dw < TOL for _, _, dl, dg, _, dw in rows)
        control = run(re_vicreg, off_dropout=True, dcl_weight=0.1, dcl_temp=5.0, steps=1, control=True)[0]
        print(
            f"\ncontrol: benchbench WITHOUT off-dropout vs the reference's SimCSE++: |loss diff| {control[2]:.2e} (must exceed 1e-3)"
        )
        ok = ok and control[2] > 1e-3
        vic = dcl_against_vicreg(vicreg)
        print(
            f"\nSimCSE + DCL (simcse dcl_weight 0.1, dcl_temperature 10) vs models_vicreg.cl_forward: |loss diff| {vic[0]:.2e}, max |grad diff| {vic[1]:.2e}"
        )
        ok = ok and vic[0] < TOL and vic[1] < TOL
    print(f"\ntolerance {TOL:g} (float32)")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def dcl_against_vicreg(mod, n: int = 8) -> tuple[float, float]:
    """``simcse`` with only the DCL term (weight 0.1, temperature 10) against models_vicreg.py's
    cl_forward (plain SimCSE + DCL, weight and temperature hard-coded 0.1 / 10); dropout off on both
    sides (its views come from one doubled pass in the reference's order)."""
    from benchbench_plugins.simcse import SimCSEObjective

    enc = tiny()
    for m in enc.model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    torch.manual_seed(1)
    ours = SimCSEObjective(enc, 0.05, True, dcl_weight=0.1, dcl_temperature=10.0)
    bert = copy.deepcopy(enc.model)
    args = SimpleNamespace(pooler_type="cls", temp=0.05, do_mlm=False)
    mlp = mod.MLPLayer(enc.model.config)
    mlp.dense.load_state_dict(ours.mlp[0].state_dict())
    cls = SimpleNamespace(model_args=args, pooler=mod.Pooler("cls"), pooler_type="cls", mlp=mlp, training=True)
    cls.sim, cls.bn = mod.Similarity(temp=0.05), torch.nn.BatchNorm1d(enc.dim, affine=False)
    cls.config = SimpleNamespace(use_return_dict=True)
    tok = dict(enc.tokenize(sts_sentences(n)))
    tok.pop("token_type_ids", None)
    ours.train()
    loss_ours = ours(**tok)
    ids, mask = tok["input_ids"], tok["attention_mask"]
    loss_ref = mod.cl_forward(
        cls, Reorder(bert, n), input_ids=torch.stack([ids, ids], 1), attention_mask=torch.stack([mask, mask], 1)
    ).loss
    loss_ours.backward()
    loss_ref.backward()
    pairs = list(zip(enc.model.parameters(), bert.parameters())) + list(zip(ours.mlp.parameters(), mlp.parameters()))
    return abs(loss_ours.item() - loss_ref.item()), max((a.grad - b.grad).abs().max().item() for a, b in pairs)


if __name__ == "__main__":
    raise SystemExit(main())
