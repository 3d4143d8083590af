"""Per-item scores of one evaluation, stored beside its record, for a paired bootstrap over the
items (pairs or queries) of one task.

A seed-level paired test (``benchbench.stats.paired_test``) says whether a method wins across
training seeds; a paired bootstrap says whether one run's win on ONE task is larger than the
sampling noise of that task's test items (the TSDAE paper's second kind of significance). That
needs what an aggregate score throws away: the prediction for every pair, or the metric of every
query. Adapters that can, return them in ``TaskResult.items``; ``benchbench run --store-items``
writes them to ``<task>.items.<split>.json.gz`` next to the record (gzip'd JSON: never pickle), and
the record names the file under ``items``.

Two shapes, both ``{"unit", "metric", "aggregate", "subsets": {name: {...}}}``:

* ``unit = "pair"``: each subset holds ``pred`` (the similarity of every pair, in the task's order)
  and ``gold``; ``metric`` names a function of (pred, gold) in :data:`PAIR_METRICS`, x100 as stored;
* ``unit = "query"``: each subset holds ``values`` (the per-query metric, x100) and ``ids``;
  the subset's score is their mean.

``aggregate`` is how the task combines its subsets into the main score (``"mean"``: the macro mean,
e.g. TwitterPara's TURL and PIT-2015, CQADupStack's forums). The bootstrap resamples WITHIN each
subset (stratified) so every resample keeps the task's composition.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .errors import ConfigError, DataError

ITEMS_FORMAT = 1


def _paraphrase_ap(pred: np.ndarray, gold: np.ndarray) -> float:
    from .adapters.twitterpara import paraphrase_ap

    return 100 * paraphrase_ap(gold, pred)


def _roc_auc(pred: np.ndarray, gold: np.ndarray) -> float:
    from . import metrics

    return 100 * metrics.roc_auc(gold, pred)


def _average_precision(pred: np.ndarray, gold: np.ndarray) -> float:
    from . import metrics

    return 100 * metrics.average_precision(gold, pred)


def _spearman(pred: np.ndarray, gold: np.ndarray) -> float:
    from . import metrics

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


def items_filename(record_stem: str, split: str) -> str:
    """``<record file stem>.items.<split>.json.gz`` (not ``*.json``: a results folder's record scan skips it)."""
    return f"{record_stem}.items.{split}.json.gz"


def write_items(path: Path, items: dict[str, Any]) -> Path:
    """Atomic write (temp file + rename), so a killed run never leaves half a file under the name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
            f.write(json.dumps(items, sort_keys=True, allow_nan=False).encode())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def read_items(path: Path) -> dict[str, Any]:
    try:
        with gzip.open(path, "rb") as f:
            items = json.loads(f.read())
    except (OSError, EOFError, json.JSONDecodeError) as e:
        raise DataError(f"{path}: not a readable per-item score file ({type(e).__name__}: {e}).") from e
    if not isinstance(items, dict) or items.get("format") != ITEMS_FORMAT or items.get("unit") not in ("pair", "query"):
        raise DataError(f"{path}: unknown per-item format (expected format {ITEMS_FORMAT}, unit pair|query).")
    return items


def record_items(record: dict[str, Any], root: str | Path, split: str = "test") -> dict[str, Any]:
    """The per-item scores stored with ``record`` (a record from a ``ResultStore`` under ``root``)."""
    from .results import ResultStore, key_of

    name = (record.get("items") or {}).get(split)
    if not name:
        raise DataError(
            f"Record {record.get('method')}/{record.get('task')} seed {record.get('seed')} has no per-item "
            f"scores for split {split!r}: re-run it with `benchbench run --store-items --force`."
        )
    return read_items(ResultStore(root).path(key_of(record)).parent / name)


def aggregate_score(items: dict[str, Any], index: dict[str, np.ndarray] | None = None) -> float:
    """The task's main score recomputed from its items (optionally on resampled indices per subset)."""
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
