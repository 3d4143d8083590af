"""Fidelity of plugins/mirror_bert.py against the official Mirror-BERT code (cambridgeltl/mirror-bert).

The reference is not vendored: this script extracts ``src/*.py`` from a bare git mirror of
cambridgeltl/mirror-bert (``--mirror``; the ``fetch`` tool's copy by default) into a temporary folder
and imports the reference's OWN code from there, with pytorch-metric-learning 0.9.98 (the version its
requirements.txt pins; ``--pml`` names a folder holding it, installed there with
``pip install --no-deps --target`` when missing):

1. the training loss: ``ContrastiveLearningPairwise.forward`` (``NTXentLoss(0.04)`` on the pooled
   views) vs ``MirrorBERTObjective.forward``, the same tiny BERT, the same tokenized batch, train mode
   with dropout 0.1 and the same torch seed (so the same dropout masks), for [CLS] pooling and for
   the masked mean (the reference's ``agg_mode="mean_std"``); and the gradient of the loss;
2. drophead: the reference's ``set_drophead`` hook vs ``drophead_hook`` (dropout 0, drophead 0.2, as
   ``mirror_sentence_bert_drophead.sh``), same seed; compatibility shim: transformers >= 5's
   ``BertSelfAttention`` lost ``transpose_for_scores``, which the hook calls; it is restored with
   transformers 4.2.1's definition (a view and a permute);
3. random span masking: the reference's ``erase_and_mask`` on real STS-B sentences with its
   ``np.random.randint`` drawing from the same generator as ``mask_span``: identical strings;
4. the departure: the reference's sentence scripts pool with ``agg_mode="mean"``, the mean over all
   50 padded positions; its loss is reported next to ours (masked mean) on the same weights.

    nice python bench/fidelity_mirror_bert.py [--mirror /work/.mirror/cambridgeltl+mirror-bert/repo]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.util
import io
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from _reference import function_source, sts_sentences

MIRROR = "/work/.mirror/cambridgeltl+mirror-bert/repo"
PML = "pytorch-metric-learning==0.9.98"


def extract(mirror: str, dest: Path) -> str:
    for f in ("src/contrastive_learning.py", "src/data_loader.py", "src/drophead.py"):
        out = dest / f
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(
            subprocess.run(["git", "--git-dir", mirror, "show", f"HEAD:{f}"], check=True, capture_output=True).stdout
        )
    return subprocess.run(
        ["git", "--git-dir", mirror, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def ensure_pml(folder: str) -> None:
    if not (Path(folder) / "pytorch_metric_learning").is_dir():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", folder, PML], check=True)
    sys.path.insert(0, folder)


def batch_for(obj, sents, seed=0):
    b = obj.collate(sents, np.random.default_rng(seed))
    b.pop("n_tokens")
    a = {k[2:]: v for k, v in b.items() if k.startswith("a_")}
    m = {k[2:]: v for k, v in b.items() if k.startswith("b_")}
    return b, a, m


def loss_pair(cl_mod, pooling: str, agg: str, sents, dropout=0.1, drophead=0.0, ref_drophead=None, seed=7):
    """(ours, reference) loss and max |grad diff| on the same tiny BERT and batch."""
    from benchbench_plugins.mirror_bert import MirrorBERTObjective, drophead_hook, self_attention_modules, set_dropout

    from benchbench import tiny_bert

    enc = tiny_bert(32, 2, 4, 64, pooling=pooling, max_seq_length=50, seed=0)
    set_dropout(enc.model, dropout)
    ref_model = copy.deepcopy(enc.model)
    hooks = (
        [m.register_forward_hook(drophead_hook(drophead)) for m in self_attention_modules(enc.model)]
        if drophead
        else []
    )
    if drophead:
        ref_drophead(ref_model, drophead)
    ours = MirrorBERTObjective(enc, temperature=0.04, span_mask=5).train()
    with contextlib.redirect_stdout(io.StringIO()):  # its __init__ prints the loss
        ref = cl_mod.ContrastiveLearningPairwise(
            ref_model, 2e-5, 0.01, use_cuda=False, agg_mode=agg, infoNCE_tau=0.04
        ).train()
    batch, a, m = batch_for(ours, sents)
    torch.manual_seed(seed)
    lo = ours(**batch)
    torch.manual_seed(seed)
    lr = ref(a, m)
    lo.backward()
    lr.backward()
    gref = dict(ref_model.named_parameters())
    gdiff = max(
        (p.grad - gref[k].grad).abs().max().item() for k, p in enc.model.named_parameters() if p.grad is not None
    )
    for h in hooks:
        h.remove()
    return lo.item(), lr.item(), gdiff


def padded_mean_departure(cl_mod, sents) -> tuple[float, float]:
    """Eval-mode loss: ours (masked mean, batch padded to its longest) vs the reference's
    ``agg_mode="mean"`` on the batch padded to max_length 50, as its collate does."""
    from benchbench_plugins.mirror_bert import MirrorBERTObjective

    from benchbench import tiny_bert

    enc = tiny_bert(32, 2, 4, 64, pooling="mean", max_seq_length=50, seed=0)
    ours = MirrorBERTObjective(enc, temperature=0.04, span_mask=5).eval()
    with contextlib.redirect_stdout(io.StringIO()):  # its __init__ prints the loss
        ref = cl_mod.ContrastiveLearningPairwise(
            enc.model, 2e-5, 0.01, use_cuda=False, agg_mode="mean", infoNCE_tau=0.04
        )
    ref.eval()
    batch, _, _ = batch_for(ours, sents)
    from benchbench_plugins.mirror_bert import mask_span

    tok = enc.tokenizer
    v2 = [mask_span(s, 5, np.random.default_rng(0), tok.mask_token) for s in sents]
    kw = dict(max_length=50, padding="max_length", truncation=True, return_tensors="pt")
    with torch.no_grad():
        return ours(**batch).item(), ref(dict(tok(sents, **kw)), dict(tok(v2, **kw))).item()


def check_span_mask(data_loader_py: Path, n: int = 2000) -> tuple[int, int, int]:
    from benchbench_plugins.mirror_bert import mask_span

    sents = sts_sentences(n)
    rng_ref = np.random.default_rng(0)
    fake_np = type("np", (), {"random": type("r", (), {"randint": staticmethod(lambda k: int(rng_ref.integers(k)))})})
    ns = {"np": fake_np}
    exec(function_source(data_loader_py, "erase_and_mask"), ns)
    rng = np.random.default_rng(0)
    ours = [mask_span(s, 5, rng, "[MASK]") for s in sents]
    ref = [ns["erase_and_mask"](s, None, mask_len=5) for s in sents]
    return len(sents), sum(a == b for a, b in zip(ours, ref)), sum(a != s for a, s in zip(ours, sents))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", default=MIRROR, help="bare git dir of cambridgeltl/mirror-bert")
    ap.add_argument("--pml", default=str(Path(tempfile.gettempdir()) / "pml-0.9.98"))
    a = ap.parse_args()
    import warnings

    import transformers

    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    ensure_pml(a.pml)
    import pytorch_metric_learning

    sents = sts_sentences(400)[::25][:12]
    with tempfile.TemporaryDirectory() as tmp:
        commit = extract(a.mirror, Path(tmp))
        cl = load_module(Path(tmp) / "src" / "contrastive_learning.py", "ref_contrastive_learning")
        dh = load_module(Path(tmp) / "src" / "drophead.py", "ref_drophead")
        from transformers.models.bert.modeling_bert import BertSelfAttention

        def transpose_for_scores(self, x):  # transformers 4.2.1's BertSelfAttention.transpose_for_scores
            return x.view(x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)).permute(0, 2, 1, 3)

        BertSelfAttention.transpose_for_scores = transpose_for_scores
        rows = [
            ("cls", "cls", *loss_pair(cl, "cls", "cls", sents)),
            ("mean (masked)", "mean_std", *loss_pair(cl, "mean", "mean_std", sents)),
        ]
        for seed in (7, 8, 9):
            o, r, g = loss_pair(cl, "mean", "mean_std", sents, 0.0, 0.2, dh.set_drophead, seed=seed)
            rows.append((f"mean + drophead 0.2, dropout 0 (seed {seed})", "mean_std + set_drophead", o, r, g))
        pad_ours, pad_ref = padded_mean_departure(cl, sents)
        n, same, masked = check_span_mask(Path(tmp) / "src" / "data_loader.py")
    tol = 1e-4
    print(
        f"reference: cambridgeltl/mirror-bert@{commit[:7]}, pytorch-metric-learning {pytorch_metric_learning.__version__}, "
        f"transformers {transformers.__version__}, torch {torch.__version__}"
    )
    print("\n| ours (pooling) | reference agg_mode | loss ours | loss reference | |diff| | max |grad diff| |")
    print("|---|---|---|---|---|---|")
    ok = True
    for p, agg, lo, lr, g in rows:
        d = abs(lo - lr)
        ok = ok and ((d < tol and g < tol) or (np.isnan(lr) and "drophead" in p))
        print(f"| {p} | {agg} | {lo:.6f} | {lr:.6f} | {d:.2e} | {g:.2e} |")
    print(
        f"\ndeparture (eval mode): ours masked mean {pad_ours:.6f} vs the reference's padded mean "
        f"(agg_mode='mean', padding to 50) {pad_ref:.6f}: |diff| {abs(pad_ours - pad_ref):.3f}"
    )
    print(f"span masking: {same}/{n} strings identical to erase_and_mask with the same draws ({masked} masked)")
    ok = ok and same == n
    print("\nPASS" if ok else "\nFAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
