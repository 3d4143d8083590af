"""CQADupStack's search (``ranking.search_topk``) with faiss's enlarged tiles gives what the search with
faiss's default tiles gave (the path before the tiles were enlarged): the same scores, the same rows in the same
order (equal scores: the later row first), on vectors with planted ties, several blocks and tiles;
a score does not depend on where its row sits; faiss's process-wide tile settings are restored."""

from __future__ import annotations

import faiss
import numpy as np
import pytest

import benchbench.evaluate.adapters.ranking as ranking
from benchbench.evaluate.adapters.ranking import search_topk


def old_search_topk(queries, blocks, k):
    """The search before the enlarged tiles, verbatim but for pinning faiss's default tiles (4096 x 1024)."""
    saved = (faiss.cvar.distance_compute_blas_query_bs, faiss.cvar.distance_compute_blas_database_bs)
    faiss.cvar.distance_compute_blas_query_bs, faiss.cvar.distance_compute_blas_database_bs = 4096, 1024
    try:
        q = np.ascontiguousarray(queries, dtype=np.float32)
        heap = faiss.ResultHeap(len(q), k, keep_max=True)
        offset = 0
        for block in blocks:
            block = np.ascontiguousarray(block, dtype=np.float32)
            d, i = faiss.knn(q, block, min(k, len(block)), metric=faiss.METRIC_INNER_PRODUCT)
            heap.add_result(d, i + offset)
            offset += len(block)
        heap.finalize()
        kk = min(k, offset)
        return heap.D[:, :kk].copy(), heap.I[:, :kk].copy()
    finally:
        faiss.cvar.distance_compute_blas_query_bs, faiss.cvar.distance_compute_blas_database_bs = saved


def blocks_of(corpus, size):
    return [corpus[s : s + size] for s in range(0, len(corpus), size)]


def assert_same_ranking(got, want, corpus, queries):
    """Scores equal bit for bit; rows equal in order, except which rows of a tie group cut at k stay
    (faiss's pick there follows its heap's history, in either path: any rows of that group); within
    a tie: the later row first."""
    (gs, gi), (ws, wi) = got, want
    np.testing.assert_array_equal(gs, ws)
    assert gi.shape == wi.shape and (gi >= 0).all()
    for r in range(len(gs)):
        full = corpus @ queries[r]  # exact: small integers
        last = gs[r, -1]
        whole = gs[r] != last  # score groups wholly inside the top k
        if (full == last).sum() == (gs[r] == last).sum():
            whole[:] = True  # the last group is whole too
        np.testing.assert_array_equal(gi[r][whole], wi[r][whole])
        group = set(np.flatnonzero(full == last).tolist())
        assert set(gi[r][~whole].tolist()) <= group and set(wi[r][~whole].tolist()) <= group
        for s in np.unique(gs[r]):
            assert (np.diff(gi[r][gs[r] == s]) < 0).all(), "equal scores: the later row first"


@pytest.mark.parametrize(
    "nq,n,k,block", [(64, 9000, 100, 4096), (25, 5000, 10, 1000), (7, 300, 100, 64), (30, 50, 100, 7)]
)
def test_enlarged_tiles_rank_as_the_default_tiles_did_with_planted_ties(nq, n, k, block):
    """Small-integer vectors: every score is exact, so many documents tie and both paths must agree
    to the bit. 9000 rows and 64 queries cross faiss's BLAS path (>= 20 queries) and several tiles of
    either size; 7 queries take faiss's non-BLAS path."""
    rng = np.random.default_rng(nq + n)
    corpus = rng.integers(-2, 3, size=(n, 16)).astype(np.float32)
    corpus[rng.integers(0, n, size=n // 5)] = corpus[rng.integers(0, n, size=n // 5)]  # duplicate rows
    queries = rng.integers(-2, 3, size=(nq, 16)).astype(np.float32)
    queries[: nq // 3] = corpus[rng.integers(0, n, size=nq // 3)]
    got = search_topk(queries, blocks_of(corpus, block), k)
    want = old_search_topk(queries, blocks_of(corpus, block), k)
    assert got[0].shape == (nq, min(k, n))
    assert_same_ranking(got, want, corpus, queries)
    brute = np.sort(queries @ corpus.T, axis=1)[:, ::-1][:, :k]
    np.testing.assert_array_equal(got[0], brute)  # exact top-k scores


def test_real_valued_vectors_same_rows_equal_vectors_tie_exactly():
    """Unit vectors of all-MiniLM-L6-v2's size with planted duplicate rows: the same rows as the default
    tiles, scores equal to a float rounding, and every copy of a duplicated vector scores the same to
    the bit wherever it sits (a score is a function of its two vectors alone)."""
    rng = np.random.default_rng(7)
    corpus = rng.normal(size=(12000, 384)).astype(np.float32)
    src, dst = rng.integers(0, 12000, size=(2, 800))
    corpus[dst] = corpus[src]
    corpus /= np.linalg.norm(corpus, axis=1, keepdims=True)
    queries = corpus[rng.integers(0, 12000, size=40)] + 0.05 * rng.normal(size=(40, 384)).astype(np.float32)
    got_s, got_i = search_topk(queries, blocks_of(corpus, 5000), 100)
    want_s, want_i = old_search_topk(queries, blocks_of(corpus, 5000), 100)
    np.testing.assert_allclose(got_s, want_s, rtol=0, atol=1e-6)
    assert (got_i == want_i).mean() > 0.999  # equal but for neighbours within a rounding of each other
    dup = {}
    for r in range(len(corpus)):
        dup.setdefault(corpus[r].tobytes(), []).append(r)
    for s_row, i_row in zip(got_s, got_i):
        where = dict(zip(i_row.tolist(), s_row.tolist()))
        for rows in dup.values():
            seen = [where[x] for x in rows if x in where]
            assert len(set(seen)) <= 1, "copies of one vector scored differently"


def test_faiss_tiles_are_set_during_the_search_and_restored_after(monkeypatch):
    seen = []
    real = faiss.knn

    def knn(*a, **k):
        seen.append((faiss.cvar.distance_compute_blas_query_bs, faiss.cvar.distance_compute_blas_database_bs))
        return real(*a, **k)

    monkeypatch.setattr(faiss, "knn", knn)
    before = (faiss.cvar.distance_compute_blas_query_bs, faiss.cvar.distance_compute_blas_database_bs)
    q, c = np.eye(3, dtype=np.float32), np.eye(3, dtype=np.float32)
    search_topk(q, [c, c], 2)
    assert seen == [ranking._FAISS_TILE] * 2 and before != ranking._FAISS_TILE
    assert (faiss.cvar.distance_compute_blas_query_bs, faiss.cvar.distance_compute_blas_database_bs) == before

    def failing_blocks():
        yield c
        raise RuntimeError("encoder failed")

    with pytest.raises(RuntimeError, match="encoder failed"):
        search_topk(q, failing_blocks(), 2)
    assert (faiss.cvar.distance_compute_blas_query_bs, faiss.cvar.distance_compute_blas_database_bs) == before
