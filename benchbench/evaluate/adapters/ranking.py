"""Ranking and retrieval machinery shared by the USEB adapters (AskUbuntu, CQADupStack, SciDocs).

Each helper reproduces one official convention exactly, because the same embeddings must give the
same number here as in the reference toolkit (bench/useb_fidelity.py checks it):

* ``stable_rank``: USEB sorts candidates with Python's stable ``sorted(..., reverse=True)``: equal
  scores keep their input order (for AskUbuntu: the BM25 order).
* ``topk_average_precision``: USEB's CQADupStack "MAP@100" is scikit-learn's
  ``average_precision_score`` over the top-100 (relevance flags, scores) of each query, 0 when the
  top 100 holds no relevant document. Its denominator is therefore the number of relevant documents
  *retrieved* in the top 100 (not min(100, |relevant|) as trec_eval's MAP@k), and tied scores form
  one threshold. It is vectorised over queries here because calling scikit-learn once per query is
  what makes the official evaluator slow.
* ``trec_order`` / ``trec_average_precision`` / ``trec_ndcg``: trec_eval's (pytrec_eval's) ``map``
  and ``ndcg`` as USEB's SciDocs evaluator calls them: documents sorted by score, ties broken by
  document id in *descending* string order; AP divided by all relevant documents of the qrels
  (judged relevance >= 1), retrieved or not; nDCG with graded gains and log2 discount over the whole
  ranking, the ideal ranking built from the qrels.
* ``search_topk``: exact inner-product top-k with faiss (``faiss.knn``, what ``IndexFlatIP`` runs) over
  corpus blocks, merged in a running heap (``faiss.ResultHeap``), so memory is bounded by one corpus
  block, faiss's score tile and the (queries x k) result. faiss's own tiles are enlarged for the
  search (``_FAISS_TILE``): see ``search_topk``.

Vectorless scorers (the optional protocol the USEB adapters recognise): a method whose encoder has
no vectors (BM25) or prefers its own scoring exposes either or both of

* ``score_pairs(a: list[str], b: list[str]) -> array (n,)``: one score per pair, higher = more
  similar. Used for re-ranking (AskUbuntu, SciDocs: every (query, candidate) pair of the split in
  ONE call, so corpus statistics such as IDF may be taken from the texts it is given) and pair
  scoring (TwitterPara). ``Embedder.has_cross_encoder`` is true for such an encoder.
* ``search(queries: list[str], corpus: list[str], k: int) -> (scores (nq, k'), indices (nq, k'))``,
  k' = min(k, len(corpus)), each row sorted best first. Used for retrieval (CQADupStack) instead of
  vectors; an encoder with ``score_pairs`` but no ``search`` is evaluated there with its vectors.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from benchbench.encode.encoding import Embedder


def stable_rank(ids: Sequence[Any], scores: Sequence[float]) -> list[Any]:
    """``ids`` sorted best first; equal scores keep their input order (as Python's stable sort)."""
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    return [ids[i] for i in order]


def topk_average_precision(hits: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Per row: scikit-learn's ``average_precision_score(hits[i], scores[i])`` when the row has a
    hit, else 0. ``scores`` must be sorted descending within each row (as a top-k search returns).

    scikit-learn's AP is sum over distinct thresholds t of (R(t) - R(t_prev)) * P(t), where P(t)
    counts every item scoring >= t. For a descending row, the thresholds end at the last position of
    each run of equal scores; P there is hits-so-far / items-so-far."""
    hits = np.asarray(hits, dtype=np.float64)
    scores = np.asarray(scores)
    if hits.ndim != 2 or hits.shape != scores.shape:
        raise ValueError(f"hits {hits.shape} and scores {scores.shape} must be equal 2-D shapes")
    nq, k = hits.shape
    if k == 0:
        return np.zeros(nq)
    cum = np.cumsum(hits, axis=1)
    ends = np.ones_like(hits, dtype=bool)
    ends[:, :-1] = scores[:, :-1] != scores[:, 1:]
    at_end = np.where(ends, cum, 0.0)
    prev = np.zeros_like(cum)
    prev[:, 1:] = np.maximum.accumulate(at_end, axis=1)[:, :-1]
    gained = np.where(ends, cum - prev, 0.0)
    precision = cum / np.arange(1, k + 1)
    total = cum[:, -1]
    with np.errstate(invalid="ignore", divide="ignore"):
        ap = (gained * precision).sum(1) / total
    return np.where(total > 0, ap, 0.0)


def dcg(gains: Sequence[float], k: int | None = None) -> float:
    g = np.asarray(gains, dtype=np.float64)[:k]
    return float((g / np.log2(np.arange(2, len(g) + 2))).sum())


def trec_order(doc_ids: Sequence[str], scores: Sequence[float]) -> list[int]:
    """Indices in trec_eval's ranking order: score descending, ties by doc id descending."""
    return sorted(range(len(doc_ids)), key=lambda i: (-float(scores[i]), _Desc(doc_ids[i])))


class _Desc:
    """A sort key that orders strings descending (trec_eval's tie-break), usable inside a tuple."""

    __slots__ = ("s",)

    def __init__(self, s: str):
        self.s = s

    def __lt__(self, other: _Desc) -> bool:
        return self.s > other.s

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.s == other.s


def trec_average_precision(ranked_rels: Sequence[int], num_relevant: int) -> float:
    """trec_eval ``map`` for one query: precision at each relevant retrieved document, summed, over
    ALL relevant documents in the qrels (``num_relevant``)."""
    if num_relevant <= 0:
        return 0.0
    rel = np.asarray(ranked_rels) >= 1
    if not rel.any():
        return 0.0
    cum = np.cumsum(rel)
    return float((cum[rel] / (np.flatnonzero(rel) + 1)).sum() / num_relevant)


def trec_ndcg(ranked_rels: Sequence[int], judged_rels: Iterable[int]) -> float:
    """trec_eval ``ndcg`` for one query: graded gains (negative judgements count 0), log2 discount,
    over the whole ranking; the ideal is every judged document sorted by gain."""
    gains = np.maximum(np.asarray(ranked_rels, dtype=np.float64), 0.0)
    ideal = np.sort(np.maximum(np.fromiter(judged_rels, dtype=np.float64), 0.0))[::-1]
    idcg = dcg(ideal[: len(ideal)])
    return dcg(gains) / idcg if idcg > 0 else 0.0


# faiss's BLAS tile for the search: queries x corpus rows per matrix product (32 MB of scores).
# faiss's default, 4096 x 1024, makes one product and one heap update, each an OpenMP parallel
# region ending in a barrier, per 1024 corpus rows; where the cores are shared (other processes
# running), each barrier waits for a descheduled thread, and the search took 1.7x the CPU time and
# up to 5x the wall time of 2048 x 4096 on the full CQADupStack (bench/useb_fidelity.py --vectors bow).
_FAISS_TILE = (2048, 4096)


def search_topk(queries: np.ndarray, corpus_blocks: Iterable[np.ndarray], k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k inner products of ``queries`` against a corpus given as successive blocks of rows.

    One exact faiss inner-product search per block (faiss tiles queries x block internally, in
    ``_FAISS_TILE`` tiles, set for the duration of the search and restored after: faiss keeps them in
    process-wide variables), results merged into a running top-k heap: the full queries x corpus
    score matrix never exists. A score is a function of the two vectors alone, wherever a row sits in
    a block (faiss's BLAS calls; numpy's and torch's matrix products round some scores differently
    by position, so equal vectors could stop tying). Returns (scores, corpus row indices), rows
    sorted best first, k' = min(k, corpus size) columns."""
    import faiss

    q = np.ascontiguousarray(queries, dtype=np.float32)
    nq = len(q)
    heap = faiss.ResultHeap(nq, k, keep_max=True)
    offset = 0
    saved = (faiss.cvar.distance_compute_blas_query_bs, faiss.cvar.distance_compute_blas_database_bs)
    faiss.cvar.distance_compute_blas_query_bs, faiss.cvar.distance_compute_blas_database_bs = _FAISS_TILE
    try:
        for block in corpus_blocks:
            block = np.ascontiguousarray(block, dtype=np.float32)
            if len(block) == 0:
                continue
            # faiss.knn is IndexFlatIP's search without copying the block into an index first
            d, i = faiss.knn(q, block, min(k, len(block)), metric=faiss.METRIC_INNER_PRODUCT)
            heap.add_result(d, i + offset)
            offset += len(block)
    finally:
        faiss.cvar.distance_compute_blas_query_bs, faiss.cvar.distance_compute_blas_database_bs = saved
    heap.finalize()
    kk = min(k, offset)
    return heap.D[:, :kk].copy(), heap.I[:, :kk].copy()


def normalized(x: np.ndarray, inplace: bool = False) -> np.ndarray:
    """Rows scaled to unit length (float32). ``inplace``: scale ``x`` itself (faiss's multi-threaded
    ``normalize_L2``) when it is already a writeable C-contiguous float32 array the caller owns (a
    fresh corpus block: on a VM, touching new pages costs more than the arithmetic)."""
    x = np.asarray(x, dtype=np.float32)
    if inplace and x.ndim == 2 and x.flags.writeable and x.flags.c_contiguous:
        import faiss

        faiss.normalize_L2(x)  # one multi-threaded pass; zero rows stay zero
        return x
    # einsum: the squared norms without np.linalg.norm's (n, d) temporary
    norms = np.maximum(np.sqrt(np.einsum("ij,ij->i", x, x))[:, None], 1e-12)
    return x / norms


def pair_scores(model: Embedder, a: Sequence[str], b: Sequence[str], desc: str) -> tuple[np.ndarray, str]:
    """Scores of aligned pairs: the method's own scorer when it has one, else cosine of vectors
    (one ``embed`` call, so shared texts are encoded once). Returns (scores, what was used)."""
    if model.has_cross_encoder:
        return np.asarray(model.score_pairs(list(a), list(b)), dtype=np.float64), "score_pairs"
    vecs = model.embed(list(a) + list(b), desc=desc)
    va = normalized(vecs[: len(a)])
    vb = normalized(vecs[len(a) :])
    return (va.astype(np.float64) * vb).sum(1), "cosine"


def pick_layout(adapter: Any, layouts: dict[str, list[str]], default: str | None = None) -> str:
    """The data layout an adapter reads: the first whose files all exist, else the first with any
    file present (its missing files are then what ``missing_files`` reports), else ``default``
    (the layout that can be downloaded file by file) or the first."""
    exists = adapter.data.exists
    for name, files in layouts.items():
        if files and all(exists(f) for f in files):
            return name
    for name, files in layouts.items():
        if any(exists(f) for f in files):
            return name
    return default or next(iter(layouts))
