"""Fidelity of plugins/whitenedcse.py against the official WhitenedCSE code (SupstarZh/WhitenedCSE).

The published code does not run as is (see the plugin's table): ``whitenedcse/models.py`` does not
parse and imports modules the repository lacks. This bench therefore reads the reference files from a
bare git mirror (``--mirror``; the ``fetch`` tool's copy by default) and runs their OWN code with the
least repair that lets it run, each repair stated:

* ``shuffled_group_whitening.py`` imported as is; ``torch.symeig`` (removed in torch 2) supplied as
  ``torch.linalg.eigh(A, UPLO="U")``, which is what ``symeig(upper=True)`` computed;
* from ``models.py``: ``MLPLayer``, ``Similarity``, ``Pooler`` and ``cl_forward`` extracted with ``ast``
  after the one unparsable line is repaired (``config.num_pos`` passed by keyword); the missing
  ``whiten_norm``/``whitening`` imports are not needed by these.

1. SGW alone: the reference module (train mode, 128 groups, 3 blocks) vs ``shuffled_group_whitening``
   on the same input with the torch generator at the same state: outputs and input gradients.
2. Training steps: a tiny BERT with hidden size 384 (128 groups of 3, the paper's group count), dropout
   0.1, 3 views; the reference's ``cl_forward`` on (batch, 3, length) inputs vs ``WhitenedCSEObjective``
   (``whiten_rows="reference"``), the same weights, batches of real STS-B sentences and RNG states
   (the reference's encoder is wrapped to see benchbench's row order, so the dropout masks are the
   same; rows only move). Per SGD step: loss, every gradient, every weight after the step.
3. Controls the bench must see: ``whiten_rows="view"`` and ``shuffle=False`` each differ from the
   reference. And the size of benchbench's one numeric departure, ``whiten_eps`` 1e-5 (printed).

    nice python bench/fidelity_whitenedcse.py [--mirror DIR] [--steps 3]
"""

from __future__ import annotations

import argparse
import ast
import copy
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import torch
from _reference import sts_sentences

MIRROR = "/work/.mirror/SupstarZh+WhitenedCSE/repo"
TOL = 1e-4
BROKEN = "ShuffledGroupWhitening(config.hidden_size, num_groups=128, config.num_pos)"
REPAIRED = "ShuffledGroupWhitening(config.hidden_size, num_groups=128, num_pos=config.num_pos)"


def git(mirror: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", mirror, *args], check=True, capture_output=True, text=True).stdout


def reference(mirror: str, tmp: Path):
    """The reference's SGW module and the four pieces of models.py, and the commit."""
    (tmp / "ref_wcse").mkdir()
    (tmp / "ref_wcse" / "__init__.py").write_text("")
    (tmp / "ref_wcse" / "sgw.py").write_text(git(mirror, "show", "HEAD:whitenedcse/shuffled_group_whitening.py"))
    # torch 2 keeps a stub ``torch.symeig`` that raises; the reference calls symeig(upper=True)
    torch.symeig = lambda a, eigenvectors=True, upper=True: torch.linalg.eigh(a, UPLO="U" if upper else "L")
    sys.path.insert(0, str(tmp))
    import ref_wcse.sgw as sgw

    src = git(mirror, "show", "HEAD:whitenedcse/models.py")
    assert src.count(BROKEN) == 1, "the reference's models.py changed: re-read it"
    src = src.replace(BROKEN, REPAIRED)
    from transformers.modeling_outputs import SequenceClassifierOutput

    ns = {
        "torch": torch,
        "nn": torch.nn,
        "dist": torch.distributed,
        "SequenceClassifierOutput": SequenceClassifierOutput,
    }
    ns["ShuffledGroupWhitening"] = sgw.ShuffledGroupWhitening
    for node in ast.parse(src).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name in {
            "MLPLayer",
            "Similarity",
            "Pooler",
            "cl_forward",
        }:
            exec(ast.get_source_segment(src, node), ns)
    return sgw, SimpleNamespace(**ns), git(mirror, "rev-parse", "HEAD").strip()


def check_sgw(sgw) -> tuple[float, float]:
    from benchbench_plugins.whitenedcse import shuffled_group_whitening

    g = torch.Generator().manual_seed(0)
    x = torch.randn(3 * 40, 384, generator=g) * torch.linspace(0.5, 3, 384) + torch.randn(384, generator=g)
    ref = sgw.ShuffledGroupWhitening(384, num_groups=128, num_pos=3).train()
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    torch.manual_seed(5)
    out_ref = ref(xa)
    torch.manual_seed(5)
    out = shuffled_group_whitening(xb, 3, 128, shuffle=True)
    w = torch.randn(out.shape, generator=g)
    (out_ref * w).sum().backward()
    (out * w).sum().backward()
    return (out - out_ref).abs().max().item(), (xa.grad - xb.grad).abs().max().item()


class Reorder(torch.nn.Module):
    """The reference's encoder argument: the same BERT, given the k-fold batch in benchbench's row order
    (view-major) and answering in the reference's (the views of a sentence adjacent)."""

    def __init__(self, bert: torch.nn.Module, n: int, k: int):
        super().__init__()
        self.bert, self.n, self.k = bert, n, k

    def forward(self, input_ids, attention_mask=None, **_):
        n, k = self.n, self.k
        order = torch.arange(n * k).view(n, k).T.reshape(-1)  # view-major row r -> reference row order[r]
        out = self.bert(input_ids=input_ids[order], attention_mask=attention_mask[order], return_dict=True)
        back = torch.argsort(order)
        return SimpleNamespace(
            last_hidden_state=out.last_hidden_state[back], pooler_output=None, hidden_states=None, attentions=None
        )


def tiny():
    from benchbench import tiny_bert

    enc = tiny_bert(384, 1, 2, 64, pooling="cls", max_seq_length=32, seed=0)  # dropout 0.1 (BERT's default)
    return enc


def check_steps(models, steps: int, n: int = 16, **variant) -> list[tuple]:
    from benchbench_plugins.whitenedcse import WhitenedCSEObjective

    enc = tiny()
    torch.manual_seed(1)
    ours = WhitenedCSEObjective(enc, 0.05, num_pos=3, num_groups=128, **variant)
    bert = copy.deepcopy(enc.model)
    config = copy.deepcopy(enc.model.config)
    config.num_pos = 3
    mlp = models.MLPLayer(config)
    mlp.dense.load_state_dict(ours.dense.state_dict())
    cls = SimpleNamespace(model_args=SimpleNamespace(pooler_type="cls", temp=0.05, do_mlm=False), mlp=mlp)
    cls.pooler, cls.sim = models.Pooler("cls"), models.Similarity(temp=0.05)
    cls.config, cls.device, cls.training = SimpleNamespace(use_return_dict=True), torch.device("cpu"), True
    wrapper = Reorder(bert, n, 3)
    opt_ours = torch.optim.SGD(ours.parameters(), lr=0.05)
    opt_ref = torch.optim.SGD(list(bert.parameters()) + list(mlp.parameters()), lr=0.05)
    sents = sts_sentences(steps * n)
    rows = []
    for step in range(steps):
        tok = enc.tokenize(sents[step * n : (step + 1) * n])
        ids, mask = tok["input_ids"], tok["attention_mask"]
        ours.train()
        wrapper.train()
        mlp.train()
        torch.manual_seed(100 + step)
        loss_ours = ours(input_ids=ids, attention_mask=mask)
        torch.manual_seed(100 + step)
        out = models.cl_forward(
            cls, wrapper, input_ids=torch.stack([ids] * 3, 1), attention_mask=torch.stack([mask] * 3, 1)
        )
        opt_ours.zero_grad()
        opt_ref.zero_grad()
        loss_ours.backward()
        out.loss.backward()
        pairs = list(zip(enc.model.parameters(), bert.parameters())) + list(
            zip(ours.dense.parameters(), mlp.dense.parameters())
        )
        grad = max((a.grad - b.grad).abs().max().item() for a, b in pairs)
        gmax = max(b.grad.abs().max().item() for _, b in pairs)
        opt_ours.step()
        opt_ref.step()
        weights = max((a - b).abs().max().item() for a, b in pairs)
        rows.append((step + 1, out.loss.item(), abs(loss_ours.item() - out.loss.item()), grad, gmax, weights))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", default=MIRROR, help="bare git dir of SupstarZh/WhitenedCSE")
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    import transformers

    transformers.logging.set_verbosity_error()
    with tempfile.TemporaryDirectory() as tmp:
        sgw, models, commit = reference(a.mirror, Path(tmp))
        print(
            f"reference: SupstarZh/WhitenedCSE@{commit[:7]}, transformers {transformers.__version__}, torch {torch.__version__}"
        )
        d_out, d_grad = check_sgw(sgw)
        print(
            f"\nSGW alone (120 x 384, 128 groups, 3 blocks): max |output diff| {d_out:.2e}, max |input grad diff| {d_grad:.2e}"
        )
        rows = check_steps(models, a.steps)
        print("\ntraining steps (tiny BERT 384 wide, dropout 0.1, batch 16, 3 views, SGD lr 0.05): cl_forward")
        print("| step | ref loss | |loss diff| | max |grad diff| | max |grad| | max |weight diff| after SGD |")
        print("|---|---|---|---|---|---|")
        for s, lr_, dl, dg, gm, dw in rows:
            print(f"| {s} | {lr_:.5f} | {dl:.2e} | {dg:.2e} | {gm:.2e} | {dw:.2e} |")
        ok = (
            d_out < TOL
            and d_grad < TOL
            and all(dl < TOL and dg / gm < TOL and dw < TOL for _, _, dl, dg, gm, dw in rows)
        )
        eps = check_steps(models, 1, whiten_eps=1e-5)[0]
        print(
            f"\nbenchbench's default whiten_eps 1e-5 (the reference has none): |loss diff| {eps[2]:.2e}, relative gradient diff {eps[3] / eps[4]:.2e}"
        )
        for name, kw in (("whiten_rows='view'", {"whiten_rows": "view"}), ("shuffle=False", {"shuffle": False})):
            dl = check_steps(models, 1, **kw)[0][2]
            print(f"control {name}: |loss diff| vs the reference {dl:.2e} (must exceed 1e-3)")
            ok = ok and dl > 1e-3
    print(
        f"\ntolerance {TOL:g}: loss, SGW output/gradient and weights absolute; step gradients relative to the largest"
    )
    print("(float32; W = U S^-1/2 U^T of 3x3 covariances amplifies rounding where S is small)")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
