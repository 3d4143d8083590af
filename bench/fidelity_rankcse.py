"""Fidelity of plugins/rankcse.py against the RankCSE reference code (perceptiveshawty/RankCSE, a
community implementation: the authors' code is not public).

The reference is not vendored: this script extracts ``rankcse/models.py`` from a bare git mirror
(``--mirror``; the ``fetch`` tool's copy by default) into a temporary folder and runs its OWN code:
``BertForCL`` (``cl_init``: ``MLPLayer``, ``Similarity``, ``Divergence``, ``ListNet``/``ListMLE``) and
``cl_forward`` (InfoNCE + the consistency term + the distillation term), against ``RankCSEObjective``
with the same weights (the reference's encoder and MLP loaded from ours), the same batches (real STS-B
sentences, tokenised by benchbench's collate) and the same torch RNG state before each forward, dropout
0.1 (both sides draw their dropout masks in the same order on the same rows, interleaved (sentence,
view)). Two tiny BERT teachers (matrices redrawn at std 0.5 so that their lists spread); the teachers' similarity matrix the reference feeds to ``cl_forward``
is computed by a transcription of ``rankcse/trainers.py``'s inline block (``CLTrainer._inner_training_loop``:
not a function, so it cannot be called): the teacher encodes the student's token ids for both views
in eval mode, [CLS] before the pooler (``Teacher.encode``, ``cls_before_pooler``), ``cos(z1T, z2T) /
tau2``, ``alpha_ x first + (1 - alpha_) x second``. Three SGD steps per setting; per step: the teacher
matrix, the loss, every gradient, every trained weight after the step. Settings: ListMLE and ListNet at
the script's values (temp 0.05, tau2 0.05, gamma 1, alpha 0.33) and at other values (temp 0.1, tau2 0.2,
gamma 0.5, alpha 0.3: a swapped temperature or weight cannot hide).

Shims, written here and not the reference's: ``torch.randperm`` (ListMLE's tie-breaking shuffle, drawn
from the global RNG) returns the permutation benchbench's collate drew for the batch, during the
reference's call only; transformers 5 needs ``all_tied_weights_keys`` set on the reference's
``BertForCL`` (it ties nothing); its ``init_weights`` runs and is then overwritten by ours.

    python bench/fidelity_rankcse.py [--mirror /work/.mirror/perceptiveshawty+RankCSE/repo]
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
from _reference import sts_sentences

MIRROR = "/work/.mirror/perceptiveshawty+RankCSE/repo"
TOL = 1e-5


def extract(mirror: str, dest: Path) -> str:
    (dest / "rankcse").mkdir(parents=True, exist_ok=True)
    (dest / "rankcse" / "__init__.py").write_text("")  # the package's own imports the inference tool: not needed
    (dest / "rankcse" / "models.py").write_bytes(
        subprocess.run(
            ["git", "--git-dir", mirror, "show", "HEAD:rankcse/models.py"], check=True, capture_output=True
        ).stdout
    )
    return subprocess.run(
        ["git", "--git-dir", mirror, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def reference_teacher_scores(teachers, weights, ids, mask, tt, tau2: float) -> torch.Tensor:
    """rankcse/trainers.py's teacher block, transcribed: both views' rows (bs * 2, len) through each
    teacher (eval, no_grad), [CLS] before the pooler, ``cos(z1T, z2T) / tau2``, the weighted sum."""
    bs = ids.shape[0]
    flat = {
        "input_ids": torch.stack([ids, ids], 1).view(-1, ids.shape[-1]),
        "attention_mask": torch.stack([mask, mask], 1).view(-1, ids.shape[-1]),
        "token_type_ids": torch.stack([tt, tt], 1).view(-1, ids.shape[-1]),
    }
    sims = []
    with torch.no_grad():
        for t in teachers:
            t.model.eval()
            emb = t.model(**flat, return_dict=True).last_hidden_state[:, 0].view(bs, 2, -1)
            cos = torch.nn.CosineSimilarity(dim=-1)
            sims.append(cos(emb[:, 0].unsqueeze(1), emb[:, 1].unsqueeze(0)) / tau2)
    if len(sims) == 1:
        return sims[0]
    return (weights[0] * sims[0]) + ((1.0 - weights[0]) * sims[1])


def make_pair(models, s: dict):
    """(ours, reference, teachers) with the same weights, dropout 0.1, eager attention on both."""
    from benchbench_plugins.rankcse import RankCSEObjective

    from benchbench import tiny_bert

    enc = tiny_bert(32, 2, 2, 64, pooling="cls", max_seq_length=32, seed=0)
    teachers = [tiny_bert(32, 2, 2, 64, pooling="cls", max_seq_length=32, seed=k) for k in (5, 6)]
    with torch.no_grad():  # at BERT's init (std 0.02) every [CLS] cosine is 0.99998: no ranking to distil
        for k, t in enumerate(teachers):
            torch.manual_seed(50 + k)
            for p in t.model.parameters():
                if p.dim() == 2:
                    p.normal_(0.0, 0.5)  # [CLS] cosines 0.7-1.0 on these sentences
    for m in [enc, *teachers]:
        m.model.config._attn_implementation = "eager"
    torch.manual_seed(1)
    weights = [s["alpha"], 1.0 - s["alpha"]]
    ours = RankCSEObjective(enc, teachers, weights, s["temp"], s["tau2"], s["loss"], "reference", 1.0, s["gamma"])
    models.BertForCL.all_tied_weights_keys = {}
    args = SimpleNamespace(pooler_type="cls", temp=s["temp"], do_mlm=False, mlp_only_train=True)
    args.hard_negative_weight, args.beta_, args.gamma_, args.tau2 = 0, 1.0, s["gamma"], s["tau2"]
    args.distillation_loss = s["loss"]
    ref = models.BertForCL(copy.deepcopy(enc.model.config), model_args=args)
    ref.bert.load_state_dict(enc.model.state_dict(), strict=False)  # ours has no BERT pooler (unused: cls)
    ref.mlp.dense.load_state_dict(ours.mlp[0].state_dict())
    ref.train(), ours.train()
    return ours, ref, teachers, weights


def _named(ours, ref) -> list[tuple[str, torch.nn.Parameter, torch.nn.Parameter]]:
    rb = dict(ref.bert.named_parameters())
    pairs = [(f"encoder.{k}", p, rb[k]) for k, p in ours.encoder.model.named_parameters()]
    pairs += [(f"mlp.{k}", p, q) for (k, p), q in zip(ours.mlp[0].named_parameters(), ref.mlp.dense.parameters())]
    return pairs


def check_training_steps(models, s: dict, steps: int = 3, n: int = 8, control: bool = False) -> list:
    """``control``: ours scales the teachers' lists by tau2 / 2 (the README's reading of the paper's tau3),
    a mistake the comparison must see."""
    ours, ref, teachers, weights = make_pair(models, s)
    if control:
        ours.tau2 = s["tau2"] / 2
    sents = sts_sentences(200)
    opt_ours = torch.optim.SGD([p for p in ours.parameters() if p.requires_grad], lr=0.05)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.05)
    rows = []
    real_randperm = torch.randperm
    for step in range(steps):
        batch = ours.collate(sents[step * n : (step + 1) * n], np.random.default_rng(step))
        batch.pop("n_tokens")
        ids, mask, tt = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
        teacher_ref = reference_teacher_scores(teachers, weights, ids, mask, tt, s["tau2"])
        teacher_ours = ours.teacher_scores({k: v for k, v in batch.items() if k.startswith("t")})
        torch.manual_seed(100 + step)
        loss_ours = ours(**batch)
        torch.manual_seed(100 + step)
        torch.randperm = lambda *a, **k: batch["perm"].clone()  # the shim: the batch's own shuffle
        try:
            loss_ref = ref(  # the reference's layout: (batch, 2 views, length)
                input_ids=torch.stack([ids, ids], 1),
                attention_mask=torch.stack([mask, mask], 1),
                token_type_ids=torch.stack([tt, tt], 1),
                teacher_top1_sim_pred=teacher_ref.clone(),
                return_dict=True,
            ).loss
        finally:
            torch.randperm = real_randperm
        for opt, loss in ((opt_ours, loss_ours), (opt_ref, loss_ref)):
            opt.zero_grad()
            loss.backward()
        pairs = _named(ours, ref)
        grad = max((p.grad - q.grad).abs().max().item() for _, p, q in pairs if p.grad is not None)
        largest = max(p.grad.abs().max().item() for _, p, _ in pairs if p.grad is not None)
        opt_ours.step(), opt_ref.step()
        weights_diff = max((p - q).abs().max().item() for _, p, q in pairs)
        rows.append(
            (
                step + 1,
                (teacher_ours - teacher_ref).abs().max().item(),
                loss_ours.item(),
                abs(loss_ours.item() - loss_ref.item()),
                grad,
                largest,
                weights_diff,
            )
        )
    return rows


SETTINGS = {
    "listmle, script values": {"loss": "listmle", "temp": 0.05, "tau2": 0.05, "gamma": 1.0, "alpha": 0.33},
    "listnet, script values": {"loss": "listnet", "temp": 0.05, "tau2": 0.05, "gamma": 1.0, "alpha": 0.33},
    "listmle, other values": {"loss": "listmle", "temp": 0.1, "tau2": 0.2, "gamma": 0.5, "alpha": 0.3},
    "listnet, other values": {"loss": "listnet", "temp": 0.1, "tau2": 0.2, "gamma": 0.5, "alpha": 0.3},
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", default=MIRROR, help="bare git dir of perceptiveshawty/RankCSE")
    a = ap.parse_args()
    import transformers

    transformers.logging.set_verbosity_error()
    with tempfile.TemporaryDirectory() as tmp:
        commit = extract(a.mirror, Path(tmp))
        sys.path.insert(0, tmp)
        import rankcse.models as models

        results = {name: check_training_steps(models, s) for name, s in SETTINGS.items()}
        control = check_training_steps(models, SETTINGS["listnet, other values"], steps=1, control=True)[0]
    print(
        f"reference: perceptiveshawty/RankCSE@{commit[:7]} rankcse/models.py (BertForCL, cl_forward, ListNet, "
        f"ListMLE, Divergence) + rankcse/trainers.py's teacher block (transcribed), transformers "
        f"{transformers.__version__}, torch {torch.__version__}; tolerance {TOL}"
    )
    print(
        "\n| setting | step | max |teacher matrix diff| | loss | |loss diff| | max |grad diff| | largest |grad| "
        "| max |weight diff| |"
    )
    print("|---|---|---|---|---|---|---|---|")
    ok = True
    for name, rows in results.items():
        for st, dt, loss, dl, dg, big, dw in rows:
            print(f"| {name} | {st} | {dt:.2e} | {loss:.5f} | {dl:.2e} | {dg:.2e} | {big:.2e} | {dw:.2e} |")
            ok = ok and max(dt, dl, dg, dw) < TOL
    print(
        f"\ncontrol (ours with the teachers at tau2 / 2, listnet, other values, step 1): "
        f"max |teacher matrix diff| {control[1]:.2e}, |loss diff| {control[3]:.2e}, max |grad diff| {control[4]:.2e}"
    )
    ok = ok and control[1] > 100 * TOL and control[4] > 100 * TOL
    print("\nPASS" if ok else "\nFAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
