"""Fidelity of plugins/infocse.py against the official InfoCSE code (caskcsg/sentemb, ``InfoCSE/``).

The reference is not vendored: this script extracts ``InfoCSE/infocse/models_cls_mlm.py`` and
``InfoCSE/train_cls_mlm.py`` from a bare git mirror of caskcsg/sentemb (``--mirror``; the ``fetch``
tool's copy by default) into a temporary folder and runs the reference's OWN code from there:

1. training steps: the reference's ``BertForCL`` (its ``__init__``: the frozen ``BertForMaskedLM`` of
   ``skip_from`` layers, ``BertLMPredictionHead``, ``c_head`` of ``n_head_layers`` ``BertLayer``s,
   ``cl_init``'s BatchNorm ``ProjectionMLP``) and its ``cl_forward`` (InfoNCE + ``mlm_weight`` x the
   masked-LM loss through [CLS]) against ``InfoCSEObjective``, with the same weights (the reference's
   frozen network and heads loaded from ours, as ``train_cls_mlm.py`` loads them from one checkpoint),
   the same batches (real STS-B sentences, masked by benchbench's collate, fed to both) and the same
   torch RNG state before each forward, dropout 0.1 everywhere (both sides draw their dropout masks in
   the same order on the same rows, so train mode is compared as it runs). Three SGD steps; per step:
   the loss, every gradient, every trained weight after the step. Run at the published weight 1e-5 and
   temperature 0.05, and at weight 1 and temperature 1 (where an error in the masked-LM term cannot
   hide under the 1e-5).
2. masking: the reference collator's ``mask_tokens`` (``mlm_probability`` 0.4) against the plugin's
   masker (transformers' ``torch_mask_tokens``) on the same padded STS-B batches, the reference under
   ``torch.manual_seed(s)`` and ours with a generator seeded with ``s``: masked ids and labels compared
   element by element over many draws.

Shims, written here and not the reference's, for transformers 5 (the reference pins 4.2.1): ``BertModel``
no longer has ``get_extended_attention_mask`` (supplied with 4.2.1's formula, (1 - mask) x -10000, on the
reference's encoder instance), and ``BertLayer`` returns a tensor where 4.2.1 returned a tuple that
``cl_forward`` indexes with ``[0]`` (each ``c_head`` layer wrapped to return a 1-tuple). transformers 5
also needs ``all_tied_weights_keys`` set on the reference's ``BertForCL`` (it ties nothing).

    python bench/fidelity_infocse.py [--mirror /work/.mirror/caskcsg+sentemb/repo]
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

MIRROR = "/work/.mirror/caskcsg+sentemb/repo"
TOL = 1e-5
SKIP_FROM, HEAD_LAYERS = 1, 2


def extract(mirror: str, dest: Path) -> str:
    (dest / "infocse").mkdir(parents=True, exist_ok=True)
    (dest / "infocse" / "__init__.py").write_text("")  # the package's imports the inference tool: not needed
    for f in ("infocse/models_cls_mlm.py", "train_cls_mlm.py"):
        (dest / f).write_bytes(
            subprocess.run(
                ["git", "--git-dir", mirror, "show", f"HEAD:InfoCSE/{f}"], check=True, capture_output=True
            ).stdout
        )
    return subprocess.run(
        ["git", "--git-dir", mirror, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


class TupleLayer(torch.nn.Module):
    """transformers 4.2.1's ``BertLayer`` return (a tuple) around transformers 5's (a tensor)."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, hidden, mask):
        return (self.layer(hidden, mask),)


def extended_mask(attention_mask, input_shape, device):
    """transformers 4.2.1's ``get_extended_attention_mask`` for an encoder (what ``cl_forward`` calls)."""
    ext = attention_mask[:, None, None, :].to(torch.float32)
    return (1.0 - ext) * -10000.0


def make_pair(models, mlm_weight: float, temperature: float):
    """(ours, reference) with the same weights everywhere, dropout 0.1, eager attention on both."""
    from benchbench_plugins.infocse import InfoCSEObjective

    from benchbench import tiny_bert

    enc = tiny_bert(32, 2, 2, 64, pooling="cls", max_seq_length=32, seed=0)
    enc.model.config._attn_implementation = "eager"
    torch.manual_seed(1)
    ours = InfoCSEObjective(enc, None, temperature, mlm_weight, 0.4, SKIP_FROM, HEAD_LAYERS, True)
    with torch.no_grad():  # a frozen network that differs from the encoder's lower layers (mixing would show)
        for p in ours.frozen.parameters():
            p.add_(0.02 * torch.randn_like(p))

    models.BertForCL.all_tied_weights_keys = {}
    args = SimpleNamespace(pooler_type="cls", batchnorm=True, temp=temperature, do_mlm=True, mlm_eval=True)
    args.skip_from, args.n_head_layers, args.mlm_weight = SKIP_FROM, HEAD_LAYERS, mlm_weight
    args.hard_negative_weight, args.mlp_only_train = 0, True
    ref = models.BertForCL(copy.deepcopy(enc.model.config), model_args=args)
    ref.bert.load_state_dict(enc.model.state_dict(), strict=False)  # ours has no BERT pooler (unused: cls)
    ref.bert.get_extended_attention_mask = extended_mask
    ref.mlm.bert.load_state_dict(ours.frozen.state_dict(), strict=False)  # train_cls_mlm: strict=False
    ref.lm_head.load_state_dict(ours.lm_head.predictions.state_dict())
    for i, layer in enumerate(ref.c_head):
        layer.load_state_dict(ours.c_head[i].state_dict())
        ref.c_head[i] = TupleLayer(layer)
    ref.mlp.net.load_state_dict(ours.mlp.state_dict())
    ref.train(), ours.train()
    return enc, ours, ref


def _named(ours, ref) -> list[tuple[str, torch.nn.Parameter, torch.nn.Parameter]]:
    """Every trained parameter of ours with the reference's counterpart."""
    pairs = []
    rb = dict(ref.bert.named_parameters())
    pairs += [(f"encoder.{k}", p, rb[k]) for k, p in ours.encoder.model.named_parameters()]
    pairs += [(f"mlp.{k}", p, q) for (k, p), q in zip(ours.mlp.named_parameters(), ref.mlp.net.parameters())]
    for i, layer in enumerate(ours.c_head):
        rl = dict(ref.c_head[i].layer.named_parameters())
        pairs += [(f"c_head.{i}.{k}", p, rl[k]) for k, p in layer.named_parameters()]
    # ours: the head's ``bias`` IS its decoder's bias (tied, as in transformers 4.2.1's head); the
    # reference's standalone head under transformers 5 keeps them apart and uses the decoder's
    rh = dict(ref.lm_head.named_parameters())
    rh["bias"] = rh["decoder.bias"]
    pairs += [(f"lm_head.{k}", p, rh[k]) for k, p in ours.lm_head.predictions.named_parameters()]
    return pairs


def check_training_steps(
    models, mlm_weight: float, temperature: float, steps: int = 3, n: int = 8, control: bool = False
) -> list:
    """``control``: ours is fed the UNMASKED sentence for its frozen network (a mistake the comparison must see)."""
    enc, ours, ref = make_pair(models, mlm_weight, temperature)
    sents = sts_sentences(200)
    params = [p for p in ours.parameters() if p.requires_grad]
    opt_ours, opt_ref = torch.optim.SGD(params, lr=0.05), torch.optim.SGD(ref.parameters(), lr=0.05)
    rows = []
    for step in range(steps):
        batch = ours.collate(sents[step * n : (step + 1) * n], np.random.default_rng(step))
        batch.pop("n_tokens")
        ids, mask, tt = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
        torch.manual_seed(100 + step)
        mine = dict(batch, mlm_input_ids=ids.repeat_interleave(2, 0)) if control else batch
        loss_ours = ours(**mine)
        torch.manual_seed(100 + step)
        loss_ref = ref(  # the reference's layout: (batch, 2 views, length); rows 2i + v are ours
            input_ids=torch.stack([ids, ids], 1),
            attention_mask=torch.stack([mask, mask], 1),
            token_type_ids=torch.stack([tt, tt], 1),
            mlm_input_ids=batch["mlm_input_ids"].view(n, 2, -1),
            mlm_labels=batch["mlm_labels"].view(n, 2, -1),
            return_dict=True,
        ).loss
        for opt, loss in ((opt_ours, loss_ours), (opt_ref, loss_ref)):
            opt.zero_grad()
            loss.backward()
        pairs = _named(ours, ref)
        grad = max((p.grad - q.grad).abs().max().item() for _, p, q in pairs if p.grad is not None)
        largest = max(p.grad.abs().max().item() for _, p, _ in pairs if p.grad is not None)
        head = [(p, q) for k, p, q in pairs if k.startswith(("c_head", "lm_head")) and p.grad is not None]
        head_grad = max((p.grad - q.grad).abs().max().item() for p, q in head) / max(
            p.grad.abs().max().item() for p, _ in head
        )  # relative to the head's largest gradient: at weight 1e-5 all of them are ~1e-5 of the rest
        opt_ours.step(), opt_ref.step()
        weights = max((p - q).abs().max().item() for _, p, q in pairs)
        frozen = max((p - q).abs().max().item() for p, q in zip(ours.frozen.parameters(), ref.mlm.bert.parameters()))
        rows.append(
            (
                step + 1,
                loss_ours.item(),
                abs(loss_ours.item() - loss_ref.item()),
                grad,
                largest,
                head_grad,
                weights,
                frozen,
            )
        )
    return rows


def check_masking(train_py: Path, draws: int = 200) -> dict:
    from benchbench_plugins.infocse import InfoCSEObjective

    from benchbench import tiny_bert

    enc = tiny_bert(16, 1, 2, 32, pooling="cls", max_seq_length=32)
    ns: dict = {"torch": torch, "Optional": __import__("typing").Optional, "Tuple": tuple}
    exec(function_source(train_py, "mask_tokens"), ns)
    me = SimpleNamespace(tokenizer=enc.tokenizer, mlm_probability=0.4)
    obj = InfoCSEObjective(enc, None, 0.05, 1e-5, 0.4, 1, 1, True)
    ids = enc.tokenize(sts_sentences(64))["input_ids"].repeat_interleave(2, 0)
    differ, chosen = 0, 0
    for s in range(draws):
        torch.manual_seed(s)
        ref_in, ref_labels = ns["mask_tokens"](me, ids)
        obj.masker.generator = torch.Generator().manual_seed(s)
        ours_in, ours_labels = obj.masker.torch_mask_tokens(ids.clone(), torch.isin(ids, obj.special_ids))
        differ += int(((ref_in != ours_in) | (ref_labels != ours_labels)).any(1).sum())
        chosen += int((ref_labels != -100).sum())
    real = int((~torch.isin(ids, obj.special_ids)).sum()) * draws
    return {"rows": ids.shape[0] * draws, "rows that differ": differ, "share chosen (reference)": chosen / real}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", default=MIRROR, help="bare git dir of caskcsg/sentemb")
    a = ap.parse_args()
    import transformers

    transformers.logging.set_verbosity_error()
    with tempfile.TemporaryDirectory() as tmp:
        commit = extract(a.mirror, Path(tmp))
        sys.path.insert(0, tmp)
        import infocse.models_cls_mlm as models

        steps = {wt: check_training_steps(models, *wt) for wt in ((1e-5, 0.05), (1.0, 1.0))}
        masking = check_masking(Path(tmp) / "train_cls_mlm.py")
        control = check_training_steps(models, 1.0, 1.0, steps=1, control=True)[0]
    print(
        f"reference: caskcsg/sentemb@{commit[:7]} InfoCSE/infocse/models_cls_mlm.py (BertForCL, cl_forward), "
        f"transformers {transformers.__version__}, torch {torch.__version__}; tolerance {TOL}"
    )
    print(
        "\n| mlm_weight, temperature | step | loss | |loss diff| | max |grad diff| | largest |grad| "
        "| head grads: max |diff| / largest | max |weight diff| | frozen: max |diff| |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    ok = True
    for wt, rows in steps.items():
        for s, loss, dl, dg, big, dh, dw, df in rows:
            print(f"| {wt} | {s} | {loss:.5f} | {dl:.2e} | {dg:.2e} | {big:.2e} | {dh:.2e} | {dw:.2e} | {df:.1e} |")
            ok = ok and max(dl, dg, dw, dh) < TOL and df == 0.0
    print(
        f"\ncontrol (ours given the unmasked sentence at weight 1, step 1): |loss diff| {control[2]:.2e}, "
        f"max |grad diff| {control[3]:.2e}, head grads {control[5]:.2e} of their largest"
    )
    ok = ok and control[3] > 100 * TOL
    print(f"\nmasking, reference mask_tokens vs torch_mask_tokens (0.4), same seeds: {masking}")
    ok = ok and masking["rows that differ"] == 0
    print("\nPASS" if ok else "\nFAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
