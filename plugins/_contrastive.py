"""SimCSE++'s two fixes (Xu et al., EMNLP 2023) as ingredients any in-batch contrastive trainer can take.

1. Off-dropout negatives: the negative pairs' similarities are taken between vectors encoded with
   dropout OFF (one more forward pass of the original sentences, with gradient), while the positive
   pair keeps its two dropout views. The paper's argument: the dropout noise in the negatives only
   adds variance to the gradient; the positives need it (without it they are identical).
   With p_i = cos(h_i, h_i+)/t and n_ij = cos(g_i, g_j)/t (g: dropout off), the loss of sentence i is
   -p_i + log(e^{p_i} + sum_{j != i} e^{n_ij}): cross-entropy over the row of n whose diagonal is
   replaced by p (the reference code's ``cl_forward`` in ``models_re_vicreg.py``, ``pos_ratio`` 1).
2. Dimension-wise contrastive learning (DCL): the contrast transposed. Each view's vectors are
   standardised per dimension over the batch (BatchNorm without affine, batch statistics), the
   d x d cross-correlation C = z1^T z2 / n / t_dcl is formed, and each dimension k of view 1 must pick
   out dimension k of view 2 among all d: mean over k of cross-entropy(C[k], k). Added to the
   instance-wise loss with a weight (0.1 and t_dcl = 5 in the reference code).

Not a method (no hooks, no entry point): ``simcse`` and ``simcse-plus-plus`` import it as
``benchbench_plugins._contrastive``. Like a plugin, it imports only ``benchbench``'s public API.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.nn.functional as F

from benchbench import ConfigError

BN_EPS = 1e-5  # torch.nn.BatchNorm1d's default, which the reference's ``cls.bn`` uses


@contextmanager
def dropout_off(module: torch.nn.Module):
    """Every submodule of ``module`` in eval mode for the duration, each one's own mode restored after.

    Whole-module eval, not only the ``nn.Dropout`` submodules the reference code switches off: in
    transformers >= 4.48 BERT's attention reads its OWN ``training`` flag for the attention-probability
    dropout (``dropout=0.0 if not self.training else self.dropout.p``), so switching the Dropout
    modules alone would leave attention dropout on. For a Transformer encoder eval mode changes
    dropout only."""
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        yield module
    finally:
        for m, was in modes:
            m.training = was


def off_dropout_infonce(z1: torch.Tensor, z2: torch.Tensor, z0: torch.Tensor, temperature: float) -> torch.Tensor:
    """In-batch InfoNCE whose positives are (z1_i, z2_i) and whose negatives are (z0_i, z0_j), j != i.

    ``z1``/``z2``: the two dropout views; ``z0``: the same sentences encoded with dropout off."""
    neg = F.cosine_similarity(z0.float()[:, None], z0.float()[None], dim=-1)
    pos = F.cosine_similarity(z1.float(), z2.float())  # row by row (the default dim 1 of 2-D inputs)
    logits = torch.diagonal_scatter(neg, pos) / temperature  # the positive takes the self-pair's place
    return F.cross_entropy(logits, torch.arange(len(z1), device=logits.device))


def dimension_contrastive_loss(z1: torch.Tensor, z2: torch.Tensor, temperature: float) -> torch.Tensor:
    """DCL: dimension k of view 1 against every dimension of view 2, the positive being dimension k.

    Each view is standardised per dimension with its own batch statistics (biased variance, eps 1e-5:
    ``BatchNorm1d(affine=False)`` in training mode) before the cross-correlation."""
    n = z1.shape[0]
    if n < 2:
        raise ConfigError("dimension-wise contrast (dcl_weight > 0) needs batches of at least 2 sentences.")
    a = F.batch_norm(z1.float(), None, None, training=True, eps=BN_EPS)
    b = F.batch_norm(z2.float(), None, None, training=True, eps=BN_EPS)
    corr = a.T @ b / n / temperature
    return F.cross_entropy(corr, torch.arange(corr.shape[0], device=corr.device))


def check_ingredients(owner: str, off_dropout: bool, dcl_weight: float, dcl_temperature: float) -> None:
    """Refuse option values the two ingredients cannot take, naming the option."""
    if not isinstance(off_dropout, bool):
        raise ConfigError(f"{owner}: option 'off_dropout_negatives' must be true or false (got {off_dropout!r}).")
    if dcl_weight < 0:
        raise ConfigError(f"{owner}: option 'dcl_weight' must be >= 0 (got {dcl_weight}); 0 = no DCL term.")
    if dcl_temperature <= 0:
        raise ConfigError(f"{owner}: option 'dcl_temperature' must be > 0 (got {dcl_temperature}).")


__all__ = ["check_ingredients", "dimension_contrastive_loss", "dropout_off", "off_dropout_infonce"]
