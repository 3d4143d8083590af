"""Semantic textual similarity: Spearman (and Pearson) between cosine similarity and gold scores.

Aggregation over subsets (STS12-16) is reported under BOTH conventions, named:
  ``*_mean``  SentEval: the unweighted mean of per-subset correlations ("wmean" weights by pairs);
  ``*_all``   SimCSE: one correlation over all subsets' pairs concatenated.
"""

from __future__ import annotations

import numpy as np

from benchbench.core.errors import DataError
from benchbench.encode.encoding import Embedder, cosine_rows
from benchbench.evaluate import metrics
from benchbench.evaluate.adapters.base import TaskAdapter, TaskResult
from benchbench.evaluate.item_scores import pair_items
from benchbench.store.data import PARSE_ERRORS, bad_line, parse_score, read_lines

_EXPECTED = {
    "senteval-sts": "sentence1 TAB sentence2 (and a numeric gold score per line in the .gs file)",
    "sts17": "sentence1 TAB sentence2 TAB score",
    "stsb": "7 TAB fields (or 9 with 2 source columns) with a numeric score in field 5",
    "sick": "pair_ID TAB sentence_A TAB sentence_B TAB score TAB entailment_judgment",
}
# TAB fields a row may have, and how to say it: a row with more is as wrong as one with fewer (a
# sentence with a stray TAB would otherwise lose its tail silently). STSb: some rows carry 2 source
# columns after sentence2; SICK: entailment_judgment may be absent (it is not read).
_COLUMNS = {
    "pair": ((2,), "2 (sentence1, sentence2)"),
    "sts17": ((3,), "3 (sentence1, sentence2, score)"),
    "stsb": ((7, 9), "7 (genre, file, year, id, score, sentence1, sentence2), or 9 with 2 source columns"),
    "sick": ((4, 5), "5 (pair_ID, sentence_A, sentence_B, relatedness_score, entailment_judgment) or 4"),
}
# the gold scale of each format's published data (spec key ``score_range`` overrides): SemEval STS
# and STSb 0..5, SICK relatedness 1..5
DEFAULT_SCORE_RANGE = {"senteval-sts": (0.0, 5.0), "sts17": (0.0, 5.0), "stsb": (0.0, 5.0), "sick": (1.0, 5.0)}


def _ws(s: str) -> str:
    return " ".join(s.split())


class STSAdapter(TaskAdapter):
    """Formats (``params.format``): ``senteval-sts`` (STS.input/STS.gs per subset; pairs with an empty gold
    line dropped), ``stsb`` (STS Benchmark csv), ``sick`` (SICK txt), ``sts17`` (track input + gold, or
    extended files with the score inline). A row with more or fewer TAB fields than its format has, or
    a gold score outside ``score_range`` (spec key; default per format, ``DEFAULT_SCORE_RANGE``), is a
    ``DataError`` naming the file and line, never a silently different pair or score."""

    kind = "sts"

    # ---- reading ------------------------------------------------------------------------------
    def _files(self, split: str) -> dict[str, tuple[str, str | None]]:
        """subset -> (input file, gold file or None when the score is inline)."""
        fmt, d = self.param("format"), self.param("dir", "")
        if fmt == "senteval-sts":
            return {s: (f"{d}/STS.input.{s}.txt", f"{d}/STS.gs.{s}.txt") for s in self.param("subsets")}
        if fmt == "stsb":
            return {"stsb": (f"{d}/sts-{split}.csv", None)}
        if fmt == "sick":
            return {"sick": (f"{d}/{self.param('split_files')[split]}", None)}
        if fmt == "sts17":
            return {self.param("subset", self.name): (self.param("input"), self.param("gold"))}
        raise DataError(f"Task {self.name!r} (spec {self.spec.source}): unknown STS format {fmt!r}.")

    def files_for(self, split: str) -> list[str]:
        return [f for pair in self._files(split).values() for f in pair if f]

    def load(self, split: str) -> dict[str, tuple[list[str], list[str], np.ndarray]]:
        self.check_split(split)
        fmt = self.param("format")
        out = {}
        for subset, (inp, gold) in self._files(split).items():
            path = self.file(inp)
            lines = read_lines(path)
            a, b, y = [], [], []
            try:
                self._parse(fmt, gold, path, lines, a, b, y)
            except DataError:
                raise
            except PARSE_ERRORS as e:
                where, lineno = self._pos
                raise bad_line(where, lineno, e, _EXPECTED.get(fmt, "")) from e
            if not y:
                raise DataError(f"{path}: no scored pairs found.")
            out[subset] = (a, b, np.asarray(y, dtype=np.float64))
        return out

    def score_range(self) -> tuple[float, float]:
        """The interval every gold score must lie in: the spec's ``score_range``, else the format's."""
        return self.spec.score_range or DEFAULT_SCORE_RANGE.get(self.param("format"), (0.0, 5.0))

    def _score(self, text: str, path, lineno: int) -> float:
        """A gold score, finite and inside ``score_range``: a 50 where the scale ends at 5 would be
        ranked, not refused, and the correlation would quietly change."""
        self._pos = (path, lineno)
        v = parse_score(text)
        lo, hi = self.score_range()
        if not lo <= v <= hi:
            raise DataError(
                f"{path}:{lineno}: gold score {v:g} is outside the task's range [{lo:g}, {hi:g}] (score_range of "
                f"task {self.name!r}, spec {self.spec.source or '?'}). Is it the published file, unmodified?"
            )
        return v

    @staticmethod
    def _cols(line: str, shape: str, path, lineno: int) -> list[str]:
        """The TAB fields of a row, which must number as the format says (``_COLUMNS[shape]``)."""
        cols = line.split("\t")
        allowed, expected = _COLUMNS[shape]
        if len(cols) not in allowed:
            raise DataError(
                f"{path}:{lineno}: {len(cols)} TAB fields, expected {expected}: {line[:80]!r}. "
                f"Is it the published file, unmodified?"
            )
        return cols

    def _parse(self, fmt: str, gold: str | None, path, lines: list[str], a: list, b: list, y: list) -> None:
        """Parse one subset's lines into a, b, y; ``self._pos`` tracks (file, 1-based line) for errors."""
        self._pos = (path, None)
        if fmt == "senteval-sts" or (fmt == "sts17" and gold):
            gpath = self.file(gold)
            golds = read_lines(gpath)
            if len(golds) > len(lines):
                raise DataError(f"{gpath}: {len(golds)} gold lines but {path} has only {len(lines)} pairs.")
            # STS17 track6 (tr-en): 500 input lines, 250 gold: the gold covers the first 250.
            for i, g in enumerate(golds):
                if not g.strip():
                    continue  # SentEval drops pairs without a gold score
                score = self._score(g, gpath, i + 1)
                cols = self._cols(lines[i], "pair", path, i + 1)
                a.append(_ws(cols[0]) if fmt == "senteval-sts" else cols[0].strip())
                b.append(_ws(cols[1]) if fmt == "senteval-sts" else cols[1].strip())
                y.append(score)
        elif fmt == "sts17":  # extended: sent1 \t sent2 \t score
            for i, ln in enumerate(lines):
                if ln.strip():
                    c = self._cols(ln, "sts17", path, i + 1)
                    a.append(c[0].strip())
                    b.append(c[1].strip())
                    y.append(self._score(c[2], path, i + 1))
        elif fmt == "stsb":  # genre, file, year, id, score, s1, s2 [, 2 extra source columns]
            for i, ln in enumerate(lines):
                c = self._cols(ln, "stsb", path, i + 1)
                a.append(c[5].strip())
                b.append(c[6].strip())
                y.append(self._score(c[4], path, i + 1))
        elif fmt == "sick":  # header; pair_ID, sentence_A, sentence_B, relatedness_score, entailment_judgment
            for i, ln in enumerate(lines[1:], 2):
                if ln.strip():
                    c = self._cols(ln, "sick", path, i)
                    a.append(c[1].strip())
                    b.append(c[2].strip())
                    y.append(self._score(c[3], path, i))

    # ---- scoring ------------------------------------------------------------------------------
    def evaluate(self, model: Embedder, split: str) -> TaskResult:
        data = self.load(split)
        cross = model.has_cross_encoder  # a pair scorer needs no vectors (and may have none)
        vecs = None if cross else model.embed([s for a, b, _ in data.values() for s in a + b], desc=self.name)
        subsets, sys_all, gold_all = {}, [], []
        pos = 0
        for subset, (a, b, y) in data.items():
            n = len(a)
            if cross:
                pred = model.score_pairs(a, b)
            else:
                pred = cosine_rows(vecs[pos : pos + n], vecs[pos + n : pos + 2 * n])
            pos += 2 * n
            subsets[subset] = {
                "spearman": 100 * metrics.spearman(pred, y),
                "pearson": 100 * metrics.pearson(pred, y),
                "n": n,
            }
            sys_all.append(pred)
            gold_all.append(y)
        scores = {}
        if len(subsets) == 1:
            (only,) = subsets.values()
            scores = {"spearman": only["spearman"], "pearson": only["pearson"]}
        else:
            ns = np.array([s["n"] for s in subsets.values()], dtype=float)
            for m in ("spearman", "pearson"):
                vals = np.array([s[m] for s in subsets.values()])
                scores[f"{m}_mean"] = float(vals.mean())
                scores[f"{m}_wmean"] = float((vals * ns).sum() / ns.sum())
            scores["spearman_all"] = 100 * metrics.spearman(np.concatenate(sys_all), np.concatenate(gold_all))
            scores["pearson_all"] = 100 * metrics.pearson(np.concatenate(sys_all), np.concatenate(gold_all))
        conv = {
            "spearman_all": "SimCSE 'all' (pairs of all subsets concatenated)",
            "spearman_mean": "SentEval mean of per-subset Spearman",
        }.get(self.spec.main_metric, self.spec.main_metric)
        # per-pair predictions for the paired bootstrap (studies' tie groups, `significance`): the
        # main score recomputed from them is the main score (Spearman of one subset, the mean of the
        # subsets' Spearman, or Spearman over all subsets concatenated); Pearson mains have none
        agg = {"spearman": "mean", "spearman_mean": "mean", "spearman_all": "all"}.get(self.spec.main_metric)
        items = None
        if agg is not None:
            items = pair_items({k: (p, g) for k, p, g in zip(data, sys_all, gold_all)}, "spearman", agg)
        return TaskResult(
            main_metric=self.spec.main_metric,
            scores=scores,
            items=items,
            subsets=subsets if len(subsets) > 1 else {},
            details={
                "pairs": int(sum(s["n"] for s in subsets.values())),
                "aggregation": conv,
                "similarity": "cross-encoder" if model.has_cross_encoder else "cosine",
            },
        )

    def own_sentences(self) -> list[str]:
        split = self.spec.default_splits[0]
        return list(dict.fromkeys(s for a, b, _ in self.load(split).values() for s in a + b))

    def train_pairs(self) -> list[tuple[str, str]] | None:
        split = self.spec.default_splits[0]
        return [(x, z) for a, b, _ in self.load(split).values() for x, z in zip(a, b)]
