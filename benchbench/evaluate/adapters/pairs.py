"""Binary sentence-pair classification scored by ROC AUC of the model's pair scores, as
Trans-Encoder (Liu et al. 2022, Sec. 4 and Table 2) evaluates QQP, QNLI and MRPC: no classifier is
trained; the ranking of pairs by similarity is compared with the 0/1 gold labels.

Pair scores: cosine of the bi-encoder's vectors, or the method's cross-encoder (``score_pairs``)
when it has one; the record says which.

Formats (``params.format``):
  ``glue-qnli``  GLUE QNLI tsv: index, question, sentence, label (entailment = 1). Trans-Encoder
                 uses the official dev set: its first 1,000 rows as dev, the other 4,463 as test.
  ``msrp``       MSR paraphrase corpus txt: Quality, #1 ID, #2 ID, #1 String, #2 String.
  ``glue-qqp``   GLUE QQP tsv: id, qid1, qid2, question1, question2, is_duplicate.
``params.splits`` maps a split to ``{file = ..., start = i, stop = j}`` (row slices after the header).
"""

from __future__ import annotations

import csv
import io

import numpy as np

from benchbench.core.errors import ConfigError, DataError
from benchbench.encode.encoding import Embedder
from benchbench.evaluate import metrics
from benchbench.evaluate.adapters.base import TaskAdapter, TaskResult
from benchbench.evaluate.item_scores import pair_items
from benchbench.store.data import read_text

FORMATS: dict[str, tuple[str, str, str, set[str]]] = {  # columns of sentence A, sentence B, label; positive labels
    "glue-qnli": ("question", "sentence", "label", {"entailment"}),
    "msrp": ("#1 String", "#2 String", "Quality", {"1"}),
    "glue-qqp": ("question1", "question2", "is_duplicate", {"1"}),
}
NEGATIVE = {"glue-qnli": {"not_entailment"}, "msrp": {"0"}, "glue-qqp": {"0"}}


def _ws(s: str) -> str:
    return " ".join(s.split())


def read_pairs(path, fmt: str) -> tuple[list[str], list[str], np.ndarray]:
    """Rows of a pair file in file order: (sentences A, sentences B, 0/1 labels)."""
    if fmt not in FORMATS:
        raise ConfigError(f"Unknown pair format {fmt!r}; known: {sorted(FORMATS)}")
    ca, cb, cl, pos = FORMATS[fmt]
    text = read_text(path, "utf-8-sig")
    # QUOTE_NONE: GLUE/MSRP files are TAB-separated with literal quote characters inside sentences
    reader = csv.reader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE)
    try:
        header = next(reader)
    except StopIteration:
        raise DataError(f"{path}: empty file") from None
    except csv.Error as e:
        raise DataError(f"{path}:1: {e}") from e
    missing = [c for c in (ca, cb, cl) if c not in header]
    if missing:
        raise DataError(f"{path}: header {header} lacks columns {missing} (format {fmt!r}).")
    ia, ib, il = header.index(ca), header.index(cb), header.index(cl)
    a, b, y = [], [], []
    try:
        rows = list(reader)
    except csv.Error as e:  # e.g. a field over csv's size limit
        raise DataError(f"{path}:{reader.line_num}: {e}") from e
    for lineno, row in enumerate(rows, start=2):
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        # more fields than the header names is as wrong as fewer: a stray TAB shifts what is read
        if len(row) <= max(ia, ib, il) or len(row) > len(header):
            raise DataError(f"{path}:{lineno}: {len(row)} fields, expected {len(header)} (format {fmt!r}).")
        lab = row[il].strip()
        if lab in pos:
            y.append(1)
        elif lab in NEGATIVE[fmt]:
            y.append(0)
        else:
            raise DataError(f"{path}:{lineno}: unknown label {lab!r} (format {fmt!r}).")
        a.append(_ws(row[ia]))
        b.append(_ws(row[ib]))
    return a, b, np.asarray(y, dtype=np.int64)


class PairClassificationAdapter(TaskAdapter):
    kind = "pair-auc"

    def _split_spec(self, split: str) -> dict:
        sp = self.param("splits", {}).get(split)
        if sp is None:
            raise ConfigError(f"Task {self.name!r} (spec {self.spec.source}): params.splits has no {split!r} entry.")
        if "file" not in sp:
            raise ConfigError(f"Task {self.name!r} (spec {self.spec.source}): params.splits.{split} needs 'file'.")
        return sp

    def files_for(self, split: str) -> list[str]:
        return [self._split_spec(split)["file"]]

    def load(self, split: str) -> tuple[list[str], list[str], np.ndarray]:
        self.check_split(split)
        sp = self._split_spec(split)
        a, b, y = read_pairs(self.file(sp["file"]), self.param("format"))
        sl = slice(sp.get("start"), sp.get("stop"))
        a, b, y = a[sl], b[sl], y[sl]
        if len(y) == 0:
            raise DataError(f"Task {self.name!r}: split {split!r} selects no rows of {sp['file']}.")
        return a, b, y

    def evaluate(self, model: Embedder, split: str) -> TaskResult:
        a, b, y = self.load(split)
        if len(set(y.tolist())) < 2:
            raise DataError(
                f"Task {self.name!r} split {split!r}: AUC needs both labels; all {len(y)} pairs are {int(y[0])}."
            )
        scores = model.score_pairs(a, b)
        result = {"auc": 100 * metrics.roc_auc(y, scores), "ap": 100 * metrics.average_precision(y, scores)}
        return TaskResult(
            main_metric=self.spec.main_metric,
            scores=result,
            details={
                "pairs": len(y),
                "positives": int(y.sum()),
                "scorer": "cross-encoder" if model.has_cross_encoder else "bi-encoder cosine",
            },
            items=pair_items(
                {self.name: (scores, y)}, {"auc": "roc_auc", "ap": "average_precision"}[self.spec.main_metric]
            ),
        )

    def _all_pairs(self) -> list[tuple[str, str]]:
        out = []
        for s in self.spec.splits:
            a, b, _ = self.load(s)
            out += list(zip(a, b))
        return out

    def own_sentences(self) -> list[str]:
        return list(dict.fromkeys(s for p in self._all_pairs() for s in p))

    def train_pairs(self) -> list[tuple[str, str]] | None:
        # Trans-Encoder trains on all of a task's pairs, labels withheld (transductive: leaderboards flag it)
        return list(dict.fromkeys(self._all_pairs()))
