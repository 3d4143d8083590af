"""Named metrics. Thin wrappers over scipy/scikit-learn, plus the few that scikit-learn does not
define the way the benchmarks do (MRR and precision@k over one ranked candidate list, TwitterPara's
AP with label 3 dropped), written out here once. USEB's MAP@k conventions, which need the ranking
itself, live with the search in ``evaluate/adapters/ranking.py``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats
from sklearn import metrics as skm


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    return float(stats.spearmanr(x, y).statistic)


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    return float(stats.pearsonr(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)).statistic)


def average_precision(labels: Sequence[int], scores: Sequence[float]) -> float:
    """AP of a ranking by ``scores`` against binary ``labels`` (scikit-learn's step-wise definition, as USEB's TwitterPara uses)."""
    return float(skm.average_precision_score(np.asarray(labels), np.asarray(scores)))


def roc_auc(labels: Sequence[int], scores: Sequence[float]) -> float:
    return float(skm.roc_auc_score(np.asarray(labels), np.asarray(scores)))


def reciprocal_rank(relevant: Sequence[bool]) -> float:
    idx = np.flatnonzero(np.asarray(relevant, dtype=bool))
    return float(1.0 / (idx[0] + 1)) if len(idx) else 0.0


def precision_at_k(relevant: Sequence[bool], k: int) -> float:
    return float(np.asarray(relevant[:k], dtype=float).sum() / k)


def accuracy(y_true: Sequence, y_pred: Sequence) -> float:
    return float(skm.accuracy_score(y_true, y_pred))


def f1(y_true: Sequence, y_pred: Sequence) -> float:
    return float(skm.f1_score(y_true, y_pred))


def mse(x: Sequence[float], y: Sequence[float]) -> float:
    return float(skm.mean_squared_error(x, y))


def paraphrase_ap(labels: np.ndarray, scores: np.ndarray) -> float:
    """USEB's AP: label 3 dropped, label > 3 is a paraphrase."""
    keep = labels != 3
    return average_precision((labels[keep] > 3).astype(int), scores[keep])
