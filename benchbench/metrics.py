"""Named metrics. Thin wrappers over scipy/scikit-learn; the few ranking metrics scikit-learn does
not define the way the benchmarks do (MAP@k with USEB's denominator, MRR over a candidate list) are
written out here once, each a few lines, so every adapter shares one definition."""

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


def ap_of_ranking(relevant: Sequence[bool]) -> float:
    """AP of an already ranked list of relevance flags (0 when nothing is relevant)."""
    rel = np.asarray(relevant, dtype=bool)
    if not rel.any():
        return 0.0
    hits = np.cumsum(rel)
    return float((hits[rel] / (np.flatnonzero(rel) + 1)).mean())


def ap_at_k(ranked_ids: Sequence, relevant: set, k: int, denominator: str = "min") -> float:
    """AP over the top ``k`` of a ranking. ``denominator``: "min" divides by min(k, |relevant|)
    (USEB's / pytrec_eval-style MAP@k over retrieved lists), "hits" by the relevant found in the top k."""
    if not relevant:
        return 0.0
    score, hits = 0.0, 0
    for i, doc in enumerate(list(ranked_ids)[:k]):
        if doc in relevant:
            hits += 1
            score += hits / (i + 1)
    denom = min(k, len(relevant)) if denominator == "min" else max(hits, 1)
    return score / denom


def reciprocal_rank(relevant: Sequence[bool]) -> float:
    idx = np.flatnonzero(np.asarray(relevant, dtype=bool))
    return float(1.0 / (idx[0] + 1)) if len(idx) else 0.0


def precision_at_k(relevant: Sequence[bool], k: int) -> float:
    return float(np.asarray(relevant[:k], dtype=float).sum() / k)


def ndcg_at_k(ranked_ids: Sequence, relevance: dict, k: int) -> float:
    """nDCG@k with graded relevance and log2 discount (the BEIR/pytrec_eval definition)."""
    gains = np.array([relevance.get(d, 0) for d in list(ranked_ids)[:k]], dtype=np.float64)
    disc = 1.0 / np.log2(np.arange(2, len(gains) + 2))
    dcg = float((gains * disc).sum())
    ideal = np.sort(np.array(list(relevance.values()), dtype=np.float64))[::-1][:k]
    idcg = float((ideal * (1.0 / np.log2(np.arange(2, len(ideal) + 2)))).sum())
    return dcg / idcg if idcg > 0 else 0.0


def accuracy(y_true: Sequence, y_pred: Sequence) -> float:
    return float(skm.accuracy_score(y_true, y_pred))


def f1(y_true: Sequence, y_pred: Sequence) -> float:
    return float(skm.f1_score(y_true, y_pred))


def mse(x: Sequence[float], y: Sequence[float]) -> float:
    return float(skm.mean_squared_error(x, y))
