"""Per-item scores built by the adapters, and the maths on them: a task's main score recomputed
from its items (optionally on bootstrap-resampled indices) and the check that two runs' items pair.
The file format and its storage are ``benchbench.store.items``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from benchbench.core.errors import ConfigError, DataError
from benchbench.store.items import ITEMS_FORMAT


def _paraphrase_ap(pred: np.ndarray, gold: np.ndarray) -> float:
    from benchbench.evaluate import metrics

    return 100 * metrics.paraphrase_ap(gold, pred)


def _roc_auc(pred: np.ndarray, gold: np.ndarray) -> float:
    from benchbench.evaluate import metrics

    return 100 * metrics.roc_auc(gold, pred)


def _average_precision(pred: np.ndarray, gold: np.ndarray) -> float:
    from benchbench.evaluate import metrics

    return 100 * metrics.average_precision(gold, pred)


def _spearman(pred: np.ndarray, gold: np.ndarray) -> float:
    from benchbench.evaluate import metrics

    return 100 * metrics.spearman(pred, gold)


PAIR_METRICS: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "paraphrase_ap": _paraphrase_ap,  # TwitterPara: label 3 dropped, > 3 is a paraphrase
    "roc_auc": _roc_auc,
    "average_precision": _average_precision,
    "spearman": _spearman,
}


def _compact(values: Any) -> list[float]:
    """7 significant digits (float32 precision, which the vectors had): a third of the bytes of a full
    repr, and no change to any ranking the metrics see beyond float32 ties."""
    return [float(f"{v:.7g}") for v in np.asarray(values, dtype=float).ravel()]


def pair_items(subsets: dict[str, tuple[Any, Any]], metric: str, aggregate: str = "mean") -> dict[str, Any]:
    """Per-pair predictions and gold labels of each subset."""
    if metric not in PAIR_METRICS:
        raise ConfigError(f"pair_items: unknown metric {metric!r}; known: {sorted(PAIR_METRICS)}.")
    return {
        "format": ITEMS_FORMAT,
        "unit": "pair",
        "metric": metric,
        "aggregate": aggregate,
        "subsets": {name: {"pred": _compact(p), "gold": _compact(g)} for name, (p, g) in subsets.items()},
    }


def query_items(subsets: dict[str, tuple[list[Any], Any]], metric: str, aggregate: str = "mean") -> dict[str, Any]:
    """Per-query values (x100) of each subset, with the query ids that pair them across runs."""
    return {
        "format": ITEMS_FORMAT,
        "unit": "query",
        "metric": metric,
        "aggregate": aggregate,
        "subsets": {name: {"ids": [str(i) for i in ids], "values": _compact(v)} for name, (ids, v) in subsets.items()},
    }


def aggregate_score(items: dict[str, Any], index: dict[str, np.ndarray] | None = None) -> float:
    """The task's main score recomputed from its items (optionally on resampled indices per subset)."""
    if items["aggregate"] == "all" and items["unit"] == "pair":
        # SimCSE's "all" (STS12-16): the metric once over every subset's pairs concatenated
        preds, golds = [], []
        for name, sub in items["subsets"].items():
            pred, gold = np.asarray(sub["pred"]), np.asarray(sub["gold"])
            if index is not None:
                pred, gold = pred[index[name]], gold[index[name]]
            preds.append(pred)
            golds.append(gold)
        return PAIR_METRICS[items["metric"]](np.concatenate(preds), np.concatenate(golds))
    per = []
    for name, sub in items["subsets"].items():
        if items["unit"] == "pair":
            pred, gold = np.asarray(sub["pred"]), np.asarray(sub["gold"])
            if index is not None:
                pred, gold = pred[index[name]], gold[index[name]]
            per.append(PAIR_METRICS[items["metric"]](pred, gold))
        else:
            v = np.asarray(sub["values"])
            per.append(float((v if index is None else v[index[name]]).mean()))
    if items["aggregate"] != "mean":
        raise DataError(f"per-item scores: unknown aggregate {items['aggregate']!r}.")
    return float(np.mean(per))


def check_paired(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Two item sets pair up only when they score the same items in the same order."""
    if (a["unit"], a["metric"], a["aggregate"]) != (b["unit"], b["metric"], b["aggregate"]):
        raise ConfigError(
            f"per-item scores do not pair: {a['unit']}/{a['metric']} vs {b['unit']}/{b['metric']} "
            "(different tasks or task versions?)."
        )
    if list(a["subsets"]) != list(b["subsets"]):
        raise ConfigError(f"per-item scores do not pair: subsets {list(a['subsets'])} vs {list(b['subsets'])}.")
    for name in a["subsets"]:
        sa, sb = a["subsets"][name], b["subsets"][name]
        same = sa["gold"] == sb["gold"] if a["unit"] == "pair" else sa["ids"] == sb["ids"]
        if not same:
            raise ConfigError(
                f"per-item scores do not pair on subset {name!r}: the items (gold labels / query ids) differ."
            )
