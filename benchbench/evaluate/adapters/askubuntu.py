"""USEB AskUbuntu: re-rank each query's 20 BM25 candidates (Lei et al. 2016).

Protocol (USEB, useb/evaluators/askubuntu.py), kept exactly:

* Titles only (``text_tokenized`` lines are ``id <TAB> title <TAB> body``; the title, stripped).
* ``dev.txt`` / ``test.txt`` lines: ``query id <TAB> similar ids <TAB> 20 candidate ids <TAB> 20 BM25
  scores``. Candidates are first put in BM25 order (score descending, stable), then re-ranked by
  cosine (descending, stable: ties keep the BM25 order).
* Queries with no similar question are SKIPPED (they are not counted as 0).
* Per query: AP = mean of precision@rank over the relevant candidates found in the 20 (USEB's
  ``ap_score``); RR; P@1; P@5. ``map`` (the main score), ``mrr``, ``p@1``, ``p@5`` are their means.
  (A query whose similar questions are all outside its candidates would crash USEB; here it scores 0.)

Layouts (the first complete one is used): ``taolei87`` (the original repo: ``text_tokenized.txt.gz``,
``dev.txt``, ``test.txt`` in ``params.dir``) and ``useb`` (USEB's ``data-eval/askubuntu`` with an
uncompressed ``text_tokenized.txt``).

Training sentences (``own_sentences``): USEB's ``data-train/askubuntu/unsupervised/train.txt`` when
present; otherwise every title of the corpus except those of the dev and test queries and of their
similar (gold) questions, so no gold pair of the evaluation is ever trained on.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from benchbench.core.errors import DataError
from benchbench.encode.encoding import Embedder
from benchbench.evaluate import metrics
from benchbench.evaluate.adapters.base import TaskAdapter, TaskResult
from benchbench.evaluate.adapters.ranking import pair_scores, pick_layout, stable_rank
from benchbench.evaluate.item_scores import query_items
from benchbench.store.data import parse_score, read_lines


@dataclasses.dataclass
class Query:
    qid: str
    similar: list[str]
    bm25_rank: list[str]  # the candidates in BM25 order


def read_eval(path) -> list[Query]:
    out = []
    for n, line in enumerate(read_lines(path), 1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != 4:
            raise DataError(
                f"{path}:{n}: expected 4 TAB fields (qid, similar ids, candidate ids, BM25 scores), got {len(cols)}."
            )
        cands = cols[2].split()
        try:
            bm25 = [parse_score(x) for x in cols[3].split()]
        except ValueError as e:
            raise DataError(f"{path}:{n}: a BM25 score is not a number ({e}).") from e
        if len(cands) != len(bm25):
            raise DataError(f"{path}:{n}: {len(cands)} candidates but {len(bm25)} BM25 scores.")
        out.append(Query(cols[0].strip(), cols[1].split(), stable_rank(cands, bm25)))
    return out


def read_titles(path) -> dict[str, str]:
    """id -> title, from text_tokenized(.txt|.txt.gz)."""
    titles = {}
    for n, line in enumerate(read_lines(path), 1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) < 2:
            raise DataError(f"{path}:{n}: expected 'id<TAB>title<TAB>body', got {line[:80]!r}")
        titles[cols[0].strip()] = cols[1].strip()
    return titles


def rerank_metrics(similar: list[str], ranked: list[str]) -> dict[str, float]:
    rel = [c in set(similar) for c in ranked]
    hits = np.flatnonzero(rel)
    ap = float(np.mean(np.cumsum(rel)[hits] / (hits + 1))) if len(hits) else 0.0
    return {
        "map": ap,
        "mrr": metrics.reciprocal_rank(rel),
        "p@1": metrics.precision_at_k(rel, 1),
        "p@5": float(np.sum(rel[:5]) / len(rel[:5])) if rel else 0.0,
    }


class AskUbuntuAdapter(TaskAdapter):
    kind = "askubuntu"

    def __init__(self, spec, data):
        super().__init__(spec, data)
        self.layout = pick_layout(self, self._layouts(), default="taolei87")

    def _layouts(self) -> dict[str, list[str]]:
        u = self.param("useb_dir", "useb/data-eval/askubuntu")
        t = self.param("dir", "useb/askubuntu")
        return {
            "useb": [f"{u}/text_tokenized.txt", f"{u}/dev.txt", f"{u}/test.txt"],
            "taolei87": [f"{t}/text_tokenized.txt.gz", f"{t}/dev.txt", f"{t}/test.txt"],
        }

    def _file(self, what: str) -> str:
        text, dev, test = self._layouts()[self.layout]
        return {"text": text, "dev": dev, "test": test}[what]

    def files_for(self, split: str) -> list[str]:
        return [self._file("text"), self._file(split)]

    def titles(self) -> dict[str, str]:
        if not hasattr(self, "_titles"):
            self._titles = read_titles(self.file(self._file("text")))
        return self._titles

    def load(self, split: str) -> list[Query]:
        self.check_split(split)
        return read_eval(self.file(self._file(split)))

    def evaluate(self, model: Embedder, split: str) -> TaskResult:
        queries = [q for q in self.load(split) if q.similar]  # USEB skips queries without a positive
        titles = self.titles()
        unknown = sorted({i for q in queries for i in [q.qid, *q.bm25_rank] if i not in titles})
        if unknown:
            raise DataError(f"{self._file('text')}: ids {unknown[:5]} used in {self._file(split)} have no text.")
        a = [titles[q.qid] for q in queries for _ in q.bm25_rank]
        b = [titles[c] for q in queries for c in q.bm25_rank]
        scores, how = pair_scores(model, a, b, desc=self.name)
        per_query, pos = [], 0
        for q in queries:
            s = scores[pos : pos + len(q.bm25_rank)]
            pos += len(q.bm25_rank)
            per_query.append(rerank_metrics(q.similar, stable_rank(q.bm25_rank, s)))
        result = {m: 100 * float(np.mean([r[m] for r in per_query])) for m in ("map", "mrr", "p@1", "p@5")}
        return TaskResult(
            main_metric=self.spec.main_metric,
            scores=result,
            details={
                "layout": self.layout,
                "queries": len(queries),
                "similarity": how,
                "skipped_without_positive": sum(1 for q in self.load(split) if not q.similar),
                "text": "titles only",
                "ties": "BM25 order",
            },
            items=query_items(
                {self.name: ([q.qid for q in queries], [100 * r[self.spec.main_metric] for r in per_query])},
                self.spec.main_metric,
            ),
        )

    def own_sentences(self) -> list[str]:
        useb_train = self.param("useb_train", "useb/data-train/askubuntu/unsupervised/train.txt")
        if self.data.exists(useb_train):
            lines = read_lines(self.file(useb_train))
            return list(dict.fromkeys(ln.strip() for ln in lines if ln.strip()))
        held = {
            i
            for split in ("dev", "test")
            if split in self.spec.splits
            for q in self.load(split)
            for i in [q.qid, *q.similar]
        }
        return list(dict.fromkeys(t for i, t in self.titles().items() if i not in held and t))
