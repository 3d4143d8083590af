"""Per-item scores of one evaluation, stored beside its record, for a paired bootstrap over the
items (pairs or queries) of one task.

A seed-level paired test (``benchbench.report.stats.paired_test``) says whether a method wins across
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
import zlib
from pathlib import Path
from typing import Any

from benchbench.core.errors import DataError
from benchbench.store.files import atomic_writer

ITEMS_FORMAT = 1


def items_filename(record_stem: str, split: str) -> str:
    """``<record file stem>.items.<split>.json.gz`` (not ``*.json``: a results folder's record scan skips it)."""
    return f"{record_stem}.items.{split}.json.gz"


def write_items(path: Path, items: dict[str, Any], *, root: Path | None = None) -> Path:
    """Atomic write (temp file + rename, never through a symlink; given ``root``, its folder made under
    ``root`` through folder descriptors), so a killed run never leaves half a file under the name."""
    # filename="": the gzip header would otherwise name the random temp file, and equal items would differ
    with (
        atomic_writer(path, root=path.parent if root is None else root) as raw,
        gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as f,
    ):
        f.write(json.dumps(items, sort_keys=True, allow_nan=False).encode())
    return path


def read_items(path: Path) -> dict[str, Any]:
    from benchbench.store.data import read_bytes

    try:  # inflated as a stream under the read limit: a crafted items file cannot inflate whole into memory
        items = json.loads(read_bytes(path))
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"{path}: not a readable per-item score file ({type(e).__name__}: {e}).") from e
    if not isinstance(items, dict) or items.get("format") != ITEMS_FORMAT or items.get("unit") not in ("pair", "query"):
        raise DataError(f"{path}: unknown per-item format (expected format {ITEMS_FORMAT}, unit pair|query).")
    return items
