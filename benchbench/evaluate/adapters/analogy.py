"""Sentence analogy retrieval (Guu et al. 2018's Yelp tuples; Quick-Thoughts Appendix A, Table 6).

A tuple (s1, s2, s3, s4) holds s1 : s2 :: s3 : s4 (the pairs differ by the same word relation, e.g.
"is" -> "was"). Each tuple gives 4 questions, each answered by retrieving, from the pool of ALL tuple
sentences plus optional distractors, the sentence nearest (cosine) to a query vector made of the other
three, A : B :: C : ? -> v(C) + v(B) - v(A), the three query sentences excluded from the answers:

    s4 ?= v(s3) + v(s2) - v(s1)      s3 ?= v(s4) + v(s1) - v(s2)
    s2 ?= v(s1) + v(s4) - v(s3)      s1 ?= v(s2) + v(s3) - v(s4)

Score: accuracy@1 x100 over all questions, and per category.

Files (not public offline; put them under ``<data dir>/analogy/``): ``tuples.tsv``: one tuple a line,
``s1<TAB>s2<TAB>s3<TAB>s4[<TAB>category]``; optional ``pool.txt``: distractor sentences, one a line
(the paper adds 1M Yelp sentences).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from benchbench.core.errors import DataError
from benchbench.encode.encoding import Embedder
from benchbench.evaluate.adapters.base import TaskAdapter, TaskResult
from benchbench.store.data import read_lines


def read_tuples(path: Path) -> list[tuple[str, str, str, str, str]]:
    out = []
    for i, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        cols = [" ".join(c.split()) for c in line.split("\t")]
        if len(cols) not in (4, 5) or not all(cols[:4]):
            raise DataError(
                f"{path}:{i}: expected 4 tab-separated sentences and an optional category, got {len(cols)} columns."
            )
        out.append((*cols[:4], cols[4] if len(cols) == 5 else "all"))
    if not out:
        raise DataError(f"{path}: no analogy tuples.")
    return out


def questions(t: tuple[str, str, str, str, str]) -> list[tuple[str, str, str, str]]:
    """(A, B, C, D) with A : B :: C : D, D the answer; four per tuple."""
    s1, s2, s3, s4, _ = t
    return [(s1, s2, s3, s4), (s2, s1, s4, s3), (s3, s4, s1, s2), (s4, s3, s2, s1)]


def analogy_accuracy(
    vec: dict[str, np.ndarray], pool: list[str], tuples, exclude_query: bool = True
) -> dict[str, float]:
    """Accuracy@1 (x100) per category and overall; retrieval by cosine with faiss (exact inner product
    on normalised vectors), skipping the query's own three sentences."""
    import faiss

    mat = np.stack([vec[s] for s in pool]).astype(np.float32)
    mat /= np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-12)
    index = faiss.IndexFlatIP(mat.shape[1])
    index.add(mat)
    qs = [(q, t[4]) for t in tuples for q in questions(t)]
    unit = {s: mat[i] for i, s in enumerate(pool)}
    query = np.stack([unit[c] + unit[b] - unit[a] for (a, b, c, _), _ in qs]).astype(np.float32)
    _, top = index.search(query, 4)
    hits: dict[str, list[int]] = defaultdict(list)
    for ((a, b, c, d), cat), row in zip(qs, top):
        cands = [pool[j] for j in row if j >= 0 and not (exclude_query and pool[j] in (a, b, c))]
        ok = int(bool(cands) and cands[0] == d)
        hits[cat].append(ok)
        hits["__all__"].append(ok)
    return {k: 100.0 * float(np.mean(v)) for k, v in hits.items()}


class AnalogyAdapter(TaskAdapter):
    """params: ``dir`` (folder with tuples.tsv and an optional pool.txt), ``pool`` (bool, default true)."""

    kind = "sentence-analogy"

    def files_for(self, split: str) -> list[str]:
        return [f"{self.param('dir', 'analogy')}/tuples.tsv"]

    def load(self) -> tuple[list, list[str]]:
        d = self.param("dir", "analogy")
        tuples = read_tuples(self.file(f"{d}/tuples.tsv"))
        extra = self.data.locate(f"{d}/pool.txt") if self.param("pool", True) else None
        pool = list(dict.fromkeys([s for t in tuples for s in t[:4]]))
        if extra is not None:
            seen = set(pool)
            for line in read_lines(extra):
                s = " ".join(line.split())
                if s and s not in seen:
                    seen.add(s)
                    pool.append(s)
        return tuples, pool

    def evaluate(self, model: Embedder, split: str) -> TaskResult:
        self.check_split(split)
        tuples, pool = self.load()
        vecs = model.embed(pool, desc=f"{self.name} pool")
        acc = analogy_accuracy(dict(zip(pool, vecs)), pool, tuples)
        subsets = {k: {"acc": v} for k, v in acc.items() if k != "__all__"}
        return TaskResult(
            main_metric=self.spec.main_metric,
            scores={"acc": acc["__all__"]},
            subsets=subsets,
            details={
                "tuples": len(tuples),
                "questions": 4 * len(tuples),
                "pool": len(pool),
                "query": "v(C) + v(B) - v(A), cosine, query sentences excluded",
            },
        )

    def own_sentences(self) -> list[str]:
        return self.load()[1]
