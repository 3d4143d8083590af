"""SimCSE++ (Xu et al., EMNLP 2023, "Improving Contrastive Learning for Sentence Embeddings from Two
Perspectives"): unsupervised SimCSE with its two fixes on, at the reference code's values.

* Off-dropout negatives: the positive pair is still the sentence's two dropout views, but each
  negative pair's similarity is taken between the sentences encoded with dropout OFF (a third forward
  pass, with gradient), because dropout noise in the negatives only adds variance.
* Dimension-wise contrastive learning (DCL), weight 0.1: each dimension of one view, standardised over
  the batch, must match the same dimension of the other view among all dimensions (temperature 5).

Both live in ``plugins/_contrastive.py`` as options of ``simcse`` (``off_dropout_negatives``,
``dcl_weight``, ``dcl_temperature``); this method is ``simcse`` with both on and the reference run's
SimCSE settings (batch 64, lr 3e-5, MLP at training only). The paper reports +1.8 STS points over
SimCSE with BERT-base (its abstract; the paper's tables were not readable offline, so no per-task
numbers are transcribed here).

| item | paper | reference code (Jiahao004/SimCSE-plus-plus, commit 899e49b, ``simcse/models_re_vicreg.py``) | benchbench |
|---|---|---|---|
| which code | - | ``run_re_vicreg.sh`` -> ``train_re_vicreg.py`` -> ``models_re_vicreg.py``. At HEAD (51d2db5) that file's ``cl_forward`` has the DCL term commented out and ``--sampling_strategy`` defaults to ``None``, so the script as published trains plain SimCSE; 899e49b (the file's first upload) has both fixes always on | 899e49b's loss (bench/fidelity_simcse_plus_plus.py runs its ``cl_forward``) |
| negatives | without dropout | a second forward of the originals with every ``nn.Dropout`` in eval mode, with gradient, through the MLP; negatives cos(g_i, g_j)/t, j != i; the positive joins the denominator | same, as cross-entropy over that row with the positive on the diagonal (``off_dropout_infonce``) |
| what "dropout off" switches off | dropout | ``nn.Dropout`` modules (in transformers 4.x, all of BERT's dropout) | the whole encoder in eval mode: transformers >= 4.48's BERT reads the attention module's own flag for attention dropout, which switching the Dropout modules alone leaves ON |
| positive weight | - | ``pos_ratio`` (dataclass default 0.9; ``run_re_vicreg.sh`` passes 1) | 1, not an option |
| DCL | dimension-wise InfoNCE on standardised vectors | ``BatchNorm1d(affine=False)`` (batch statistics, eps 1e-5) on each view, C = z1^T z2 / batch / ``sw_temp``, mean over rows of -C_kk + logsumexp_l C_kl; ``loss += sw_weight * cov_loss`` on the two dropout views | same with ``F.batch_norm`` (no running statistics: the reference's are never read) |
| DCL weight / temperature | - | ``--sw_weight`` 0.1 / ``--sw_temp`` 5 (defaults; the run's output folder says ``t5_w0.1``) | ``dcl_weight`` 0.1 / ``dcl_temperature`` 5 |
| batch / lr / max length / epochs / temperature | BERT-base, 1M Wikipedia sentences | 64 / 3e-5 / 32 / 1 / 0.05; HF Trainer: AdamW without weight decay, linear decay, clip 1.0, fp16 | same on the task's own sentences; max length 32 for training only |
| pooling / MLP | [CLS] | ``--pooler_type cls --mlp_only_train`` | ``pooling="cls"``, ``mlp="train_only"`` |
| checkpoint selection | STS-B dev | every 125 steps, ``--load_best_model_at_end`` | off by default (``select_on_stsb_dev``, as ``simcse``): the last step |
| several GPUs | - | vectors gathered across GPUs | one process |
| base model | bert-base-uncased | bert-base-uncased | offline: all-MiniLM-L6-v2 or a tiny random BERT |
"""

from __future__ import annotations

from dataclasses import dataclass

from benchbench_plugins.simcse import SimCSE, SimCSEConfig

from benchbench import hookimpl


@dataclass
class SimCSEPlusPlusConfig(SimCSEConfig):
    """SimCSE's options at the reference run's values (``run_re_vicreg.sh`` at 899e49b). The two
    ingredients are ordinary options here: every value is in the result key."""

    batch_size: int = 64
    lr: float = 3e-5
    mlp: str = "train_only"
    off_dropout_negatives: bool = True
    dcl_weight: float = 0.1
    dcl_temperature: float = 5.0


class SimCSEPlusPlus(SimCSE):
    name = "simcse-plus-plus"
    Config = SimCSEPlusPlusConfig
    description = "SimCSE++: SimCSE with off-dropout negatives and a dimension-wise contrastive term (weight 0.1)"


@hookimpl
def benchbench_register_methods(register):
    register(SimCSEPlusPlus.name, SimCSEPlusPlus)


__all__ = ["SimCSEPlusPlus", "SimCSEPlusPlusConfig"]
