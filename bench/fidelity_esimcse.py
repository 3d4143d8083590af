"""Fidelity of plugins/esimcse.py against the official ESimCSE code (caskcsg/sentemb, ``ESimCSE/``).

The reference is not vendored: this script extracts ``ESimCSE/esimcse/*.py`` and ``ESimCSE/train.py``
from a bare git mirror of caskcsg/sentemb (``--mirror``; the ``fetch`` tool's copy by default) into a
temporary folder and imports the reference's OWN functions from there:

1. training steps: ``BertForCL`` (``cl_forward``: loss with the queue ``pre_z1``, the EMA of the
   momentum encoder) driven by ``CLTrainer.compute_loss`` (the momentum encoder's keys, the FIFO queue
   of ``neg_size``), three optimizer steps (SGD) on the same tiny BERT, the same batches and the same
   weights as ``ESimCSEObjective``; dropout 0 on both sides so train mode is deterministic. Compared
   per step: loss, queue, momentum-encoder weights.
2. word repetition: the reference's ``prepare_features`` (``--dup_type bpe``) on real STS-B sentences,
   its ``random`` calls recorded; ``repeat_at`` with the recorded positions must give the same ids;
   and the number of repeated tokens drawn by ``repetition_positions`` vs the reference's ``randrange``
   (same lengths, many draws).
3. the reference's momentum-encoder start: ``BertForCL.from_pretrained`` of a saved BERT leaves
   ``momentum_model`` out of the checkpoint (randomly initialised), which benchbench departs from.

Compatibility shim (no numeric effect): transformers >= 5 calls ``tie_weights`` from ``init_weights``
and needs ``all_tied_weights_keys``, which the reference's ``BertForCL.__init__`` (written for 4.2.1)
never sets; it is set to ``{}`` (BertForCL without the MLM head ties nothing).

    nice python bench/fidelity_esimcse.py [--mirror /work/.mirror/caskcsg+sentemb/repo] [--markdown]
"""

from __future__ import annotations

import argparse
import copy
import random
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from _reference import function_source, sts_sentences

MIRROR = "/work/.mirror/caskcsg+sentemb/repo"
FILES = ["ESimCSE/esimcse/__init__.py", "ESimCSE/esimcse/models.py", "ESimCSE/esimcse/trainers.py"]
FILES += ["ESimCSE/esimcse/tool.py", "ESimCSE/train.py"]


def extract(mirror: str, dest: Path) -> str:
    """The reference files at the mirror's HEAD into ``dest``; returns the commit."""
    for f in FILES:
        out = dest / f.removeprefix("ESimCSE/")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(
            subprocess.run(["git", "--git-dir", mirror, "show", f"HEAD:{f}"], check=True, capture_output=True).stdout
        )
    return subprocess.run(
        ["git", "--git-dir", mirror, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def tiny(hidden=32, layers=2, heads=2, inter=64):
    """A benchbench tiny BERT with every dropout at 0 (train mode deterministic on both sides)."""
    from benchbench import tiny_bert

    enc = tiny_bert(hidden, layers, heads, inter, pooling="cls", max_seq_length=32, seed=0)
    for m in enc.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    enc.model.config.hidden_dropout_prob = enc.model.config.attention_probs_dropout_prob = 0.0
    return enc


def check_training_steps(models, steps: int = 3, n: int = 6, queue: int = 8, momentum: float = 0.9) -> list[tuple]:
    from benchbench_plugins.esimcse import ESimCSEObjective

    torch.manual_seed(0)
    enc = tiny()
    ours = ESimCSEObjective(enc, temperature=0.05, dup_rate=0.32, momentum=momentum, queue_size=queue)
    with torch.no_grad():  # a start where the momentum encoder differs from the online one (EMA visible)
        for p in ours.momentum_encoder.parameters():
            p.add_(0.01 * torch.randn_like(p))
    models.BertForCL.all_tied_weights_keys = {}
    args = SimpleNamespace(momentum=momentum, do_mlm=False, pooler_type="cls", temp=0.05, hard_negative_weight=0)
    args.mlp_only_train, args.neg_size = True, queue
    ref = models.BertForCL(copy.deepcopy(enc.model.config), model_args=args)
    ref.bert.load_state_dict(enc.model.state_dict(), strict=False)  # ours has no BERT pooler (unused: cls)
    ref.momentum_model.load_state_dict(ours.momentum_encoder.model.state_dict(), strict=False)
    ref.mlp.dense.load_state_dict(ours.mlp[0].state_dict())
    compute_loss = {}
    exec(
        function_source(Path(models.__file__).with_name("trainers.py"), "compute_loss"), {"torch": torch}, compute_loss
    )
    trainer = SimpleNamespace(model_args=args, pre_z1=None, args=SimpleNamespace(past_index=-1), label_smoother=None)

    sents = sts_sentences(200)
    opt_ours = torch.optim.SGD([p for p in ours.parameters() if p.requires_grad], lr=0.5)
    opt_ref = torch.optim.SGD([p for p in ref.parameters() if p.requires_grad], lr=0.5)
    rows = []
    for step in range(steps):
        batch = ours.collate(sents[step * n : (step + 1) * n], np.random.default_rng(step))
        batch.pop("n_tokens")
        ids, mask = batch["input_ids"], batch["attention_mask"]
        ours.train()
        loss_ours = ours(**batch)
        inputs = {  # the reference's layout: (batch, 2 sentences, length), original first
            "input_ids": torch.stack([ids[:n], ids[n:]], 1),
            "attention_mask": torch.stack([mask[:n], mask[n:]], 1),
        }
        loss_ref = compute_loss["compute_loss"](trainer, ref, inputs)
        for opt, loss in ((opt_ours, loss_ours), (opt_ref, loss_ref)):
            opt.zero_grad()
            loss.backward()
            opt.step()
        q_ours = ours.negatives()
        q_ref = trainer.pre_z1
        mom_ref = dict(ref.momentum_model.named_parameters())
        mom_diff = max((p - mom_ref[k]).abs().max().item() for k, p in ours.momentum_encoder.model.named_parameters())
        online_ref = dict(ref.bert.named_parameters())
        online_diff = max((p - online_ref[k]).abs().max().item() for k, p in enc.model.named_parameters())
        rows.append(
            (
                step + 1,
                abs(loss_ours.item() - loss_ref.item()),
                tuple(q_ours.shape) == tuple(q_ref.shape),
                (q_ours - q_ref).abs().max().item(),
                mom_diff,
                online_diff,
            )
        )
    return rows


class RecordingRandom(random.Random):
    """``random`` as the reference calls it, remembering what ``randrange``/``sample`` returned."""

    def __init__(self, seed):
        super().__init__(seed)
        self.calls: list[tuple[str, object]] = []

    def randrange(self, *a, **k):
        v = super().randrange(*a, **k)
        self.calls.append(("randrange", v))
        return v

    def sample(self, *a, **k):
        v = super().sample(*a, **k)
        self.calls.append(("sample", v))
        return v


def check_repetition(train_py: Path, n_sent: int = 2000, draws: int = 20) -> dict:
    from benchbench_plugins.esimcse import repeat_at, repetition_positions

    from benchbench import tiny_bert

    tok = tiny_bert(16, 1, 2, 32).tokenizer
    sents = sts_sentences(n_sent)
    rnd = RecordingRandom(0)
    ns = {
        "model_args": SimpleNamespace(dup_type="bpe", dup_rate=0.32, add_stop=False),
        "data_args": SimpleNamespace(max_seq_length=32, pad_to_max_length=False),
        "tokenizer": tok,
        "sent0_cname": "text",
        "sent1_cname": "text",
        "sent2_cname": None,
        "random": rnd,
        "np": np,
    }
    exec(function_source(train_py, "prepare_features"), ns)
    feats = ns["prepare_features"]({"text": list(sents)})
    orig_ids = tok(sents, truncation=True, max_length=32)["input_ids"]
    calls = iter(rnd.calls)
    same, repeated_any = 0, 0
    for orig, (ref_orig, ref_rep) in zip(orig_ids, feats["input_ids"]):
        assert orig == ref_orig
        positions: list[int] = []
        if int(0.32 * len(orig)) > 0:
            kind, k = next(calls)
            kind2, positions = next(calls)
            assert (kind, kind2) == ("randrange", "sample") and len(positions) == k
        mine = repeat_at(orig, sorted(positions))
        same += int(mine == ref_rep)
        repeated_any += int(len(ref_rep) > len(orig))
    # the number of repeated tokens: our sampler vs the reference's randrange, on the same lengths
    lengths = [len(x) for x in orig_ids] * draws
    rng, pyr = np.random.default_rng(1), random.Random(1)
    ours_k = Counter(len(repetition_positions(n, 0.32, rng)) for n in lengths)
    ref_k = Counter(pyr.randrange(min(10, int(0.32 * n))) if int(0.32 * n) > 0 else 0 for n in lengths)
    tv = 0.5 * sum(abs(ours_k[k] - ref_k[k]) for k in set(ours_k) | set(ref_k)) / len(lengths)
    mean = lambda c: sum(k * v for k, v in c.items()) / sum(c.values())  # noqa: E731
    return {
        "sentences": len(sents),
        "identical ids": same,
        "with a repetition": repeated_any,
        "k mean ours/ref": (round(mean(ours_k), 4), round(mean(ref_k), 4)),
        "k total variation": round(tv, 4),
        "k max ours/ref": (max(ours_k), max(ref_k)),
    }


def check_momentum_start(models) -> float:
    """max |momentum_model - bert| right after the reference's ``from_pretrained``."""
    from transformers import BertConfig, BertModel

    models.BertForCL.all_tied_weights_keys = {}
    cfg = BertConfig(vocab_size=200, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    with tempfile.TemporaryDirectory() as d:
        torch.manual_seed(3)
        BertModel(cfg).save_pretrained(d)
        args = SimpleNamespace(momentum=0.995, do_mlm=False, pooler_type="cls", temp=0.05, hard_negative_weight=0)
        args.mlp_only_train = True
        m = models.BertForCL.from_pretrained(d, model_args=args)
    return max((a - b).abs().max().item() for a, b in zip(m.bert.parameters(), m.momentum_model.parameters()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", default=MIRROR, help="bare git dir of caskcsg/sentemb")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    import transformers

    transformers.logging.set_verbosity_error()
    with tempfile.TemporaryDirectory() as tmp:
        commit = extract(a.mirror, Path(tmp))
        sys.path.insert(0, tmp)
        import esimcse.models as models

        steps = check_training_steps(models)
        rep = check_repetition(Path(tmp) / "train.py")
        start = check_momentum_start(models)
    tol = 1e-4
    print(
        f"reference: caskcsg/sentemb@{commit[:7]} (ESimCSE/), transformers {transformers.__version__}, torch {torch.__version__}"
    )
    print("\n| step | |loss diff| | queue shapes equal | max |queue diff| | max |momentum diff| | max |online diff| |")
    print("|---|---|---|---|---|---|")
    for s, dl, qs, dq, dm, do in steps:
        print(f"| {s} | {dl:.2e} | {qs} | {dq:.2e} | {dm:.2e} | {do:.2e} |")
    print("\nword repetition (reference prepare_features, dup_type bpe, dup_rate 0.32, max length 32):")
    for k, v in rep.items():
        print(f"  {k}: {v}")
    print(
        f"\nreference momentum encoder after from_pretrained: max |momentum_model - bert| = {start:.3f} (random start)"
    )
    ok = all(dl < tol and qs and dq < tol and dm < tol and do < tol for _, dl, qs, dq, dm, do in steps)
    ok = ok and rep["identical ids"] == rep["sentences"] and rep["k total variation"] < 0.02
    print("\nPASS" if ok else "\nFAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
