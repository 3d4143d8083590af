"""Argument Facet Similarity (Misra et al. 2016): ~6k sentential argument pairs on three debate
topics (death penalty, gun control, gay marriage), each rated 0 (different) .. 5 (same facet).

Unsupervised protocol of BSL (Zhang et al. 2021, Table 10) and IS-BERT (Zhang et al. 2020): the
cosine similarity of the two sentence vectors (or the method's cross-encoder score) is correlated
with the gold rating per topic; Pearson r and Spearman rho are averaged over the three topics.

Files: ``ArgPairs_DP.csv``, ``ArgPairs_GC.csv``, ``ArgPairs_GM.csv`` as distributed (CSV with a
header; the columns used are ``regression_label``, ``sentence_1``, ``sentence_2``).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np

from benchbench.core.errors import DataError
from benchbench.encode.encoding import Embedder
from benchbench.evaluate import metrics
from benchbench.evaluate.adapters.base import TaskAdapter, TaskResult
from benchbench.store.data import parse_score, read_text

TOPICS = {"DP": "death penalty", "GC": "gun control", "GM": "gay marriage"}
COLUMNS = ("regression_label", "sentence_1", "sentence_2")


def read_afs(
    path: Path, encoding: str | None = None, score_range: tuple[float, float] = (0.0, 5.0)
) -> tuple[list[str], list[str], np.ndarray]:
    """The pairs of one topic; a ``regression_label`` outside ``score_range`` (AFS rates 0..5) is a
    ``DataError`` naming the line, as is a row with more fields than the header names."""
    raw = path.read_bytes()
    if encoding:
        text = read_text(path, encoding)  # a byte the named encoding cannot decode: DataError with the line
    else:
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            text = raw.decode("cp1252", errors="replace")  # the corpus is distributed in a Windows code page
    reader = csv.DictReader(io.StringIO(text))
    rows, ends = [], []  # ends[k]: the file line row k ends on (a quoted field may span lines)
    try:
        for row in reader:  # csv.Error: a field over csv's size limit, a bad quote
            rows.append(row)
            ends.append(reader.line_num)
    except csv.Error as e:
        raise DataError(f"{path}:{reader.reader.line_num}: {e}") from e
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise DataError(
            f"{path}: CSV header {reader.fieldnames} lacks columns {missing} (expected the AFS ArgPairs layout)."
        )
    a, b, y = [], [], []
    lo, hi = score_range
    for i, row in zip(ends, rows):
        if None in row:  # csv.DictReader's key for the fields beyond the header's
            raise DataError(
                f"{path}:{i}: {len(reader.fieldnames or []) + len(row[None])} fields, the header names "
                f"{len(reader.fieldnames or [])}. Is it the published file, unmodified?"
            )
        try:
            y.append(parse_score(row["regression_label"]))
        except (TypeError, ValueError) as e:
            raise DataError(f"{path}:{i}: regression_label {row.get('regression_label')!r} is not a number.") from e
        if not lo <= y[-1] <= hi:
            raise DataError(f"{path}:{i}: regression_label {y[-1]:g} is outside the range [{lo:g}, {hi:g}].")
        a.append(" ".join((row["sentence_1"] or "").split()))
        b.append(" ".join((row["sentence_2"] or "").split()))
    if not y:
        raise DataError(f"{path}: no argument pairs.")
    return a, b, np.asarray(y, dtype=np.float64)


class AFSAdapter(TaskAdapter):
    """params: ``dir`` (folder of the three CSVs), ``topics`` (default DP, GC, GM), ``encoding`` (optional)."""

    kind = "afs"

    def _topics(self) -> list[str]:
        return list(self.param("topics", list(TOPICS)))

    def files_for(self, split: str) -> list[str]:
        return [f"{self.param('dir', 'afs')}/ArgPairs_{t}.csv" for t in self._topics()]

    def load(self) -> dict[str, tuple[list[str], list[str], np.ndarray]]:
        return {
            t: read_afs(self.file(f), self.param("encoding"), self.spec.score_range or (0.0, 5.0))
            for t, f in zip(self._topics(), self.files_for("test"))
        }

    def evaluate(self, model: Embedder, split: str) -> TaskResult:
        self.check_split(split)
        data = self.load()
        subsets = {}
        for topic, (a, b, y) in data.items():
            pred = model.score_pairs(a, b)
            subsets[topic] = {
                "pearson": 100 * metrics.pearson(pred, y),
                "spearman": 100 * metrics.spearman(pred, y),
                "n": len(y),
            }
        scores = {m: float(np.mean([s[m] for s in subsets.values()])) for m in ("pearson", "spearman")}
        return TaskResult(
            main_metric=self.spec.main_metric,
            scores=scores,
            subsets=subsets,
            details={
                "aggregation": "mean over topics",
                "topics": {t: TOPICS.get(t, t) for t in data},
                "scorer": "cross-encoder" if model.has_cross_encoder else "bi-encoder cosine",
            },
        )

    def own_sentences(self) -> list[str]:
        return list(dict.fromkeys(s for a, b, _ in self.load().values() for s in a + b))

    def train_pairs(self) -> list[tuple[str, str]] | None:
        return [(x, z) for a, b, _ in self.load().values() for x, z in zip(a, b)]
