"""bench/int8_search_probe.py's two-stage search is exact: every row it returns is in the float64 top k,
its scores are faiss's float32 inner products, and equal vectors tie. It is a probe, not the
evaluator's search, so this test guards the measurement that ``leaderboards/speed/cqadupstack_vs_useb.md``
reports: a faster search that missed rows would not be a result."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
import int8_search_probe as probe

from benchbench.evaluate.adapters.ranking import search_topk


def true_topk_ok(q, c, idx, k):
    true = q.astype(np.float64) @ c.T.astype(np.float64)
    kth = np.sort(true, axis=1)[:, -k]
    picked = np.take_along_axis(true, idx, axis=1)
    return bool((picked >= kth[:, None] - 1e-6).all())


def unit_rows(rng, n, d=384):
    x = rng.normal(size=(n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("block", [3000, 5000, 12000])
def test_two_stage_returns_the_float64_top_k_with_faiss_scores(block):
    """Near-ties everywhere: queries close to corpus rows, 12,000 rows, so the gaps between
    neighbouring scores (~1e-4) are far below the int8 error (~1e-2). Dropping the bound, or taking
    the candidates from the int8 order alone, misses rows here."""
    rng = np.random.default_rng(block)
    c = unit_rows(rng, 12000)
    src, dst = rng.integers(0, 12000, size=(2, 600))
    c[dst] = c[src]  # duplicate rows: they must tie exactly
    q = c[rng.integers(0, 12000, size=60)] + 0.3 * unit_rows(rng, 60)
    blocks = [c[s : s + block] for s in range(0, len(c), block)]
    pairs: list[int] = []
    got_s, got_i = probe.two_stage_topk(q, blocks, 100, pairs=pairs)
    want_s, want_i = search_topk(q, blocks, 100)
    assert got_i.shape == (60, 100) and (got_i >= 0).all()
    assert true_topk_ok(q, c, got_i, 100)
    np.testing.assert_allclose(got_s, want_s, rtol=0, atol=1e-6)
    assert (got_i == want_i).mean() > 0.99
    assert (np.diff(got_s, axis=1) <= 0).all()
    # the second stage saw far fewer pairs than the whole product (else it is no two-stage search)
    assert 100 * 60 <= pairs[-1] < 0.2 * 60 * 12000
    for s_row, i_row in zip(got_s, got_i, strict=True):
        by_vec = {}
        for r, s in zip(i_row.tolist(), s_row.tolist(), strict=True):
            by_vec.setdefault(c[r].tobytes(), set()).add(s)
        assert all(len(v) == 1 for v in by_vec.values()), "copies of one vector scored differently"


def test_small_blocks_unnormalised_vectors_and_k_above_the_corpus():
    rng = np.random.default_rng(3)
    c = rng.normal(size=(150, 40)).astype(np.float32) * rng.uniform(0.1, 10, size=(150, 1)).astype(np.float32)
    q = rng.normal(size=(25, 40)).astype(np.float32) * 3
    got_s, got_i = probe.two_stage_topk(q, [c[:70], c[70:71], c[71:]], 30)
    assert true_topk_ok(q, c, got_i, 30)
    s2, i2 = probe.two_stage_topk(q, [c[:50]], 100)  # k above the corpus: every row, best first
    assert i2.shape == (25, 50) and all(sorted(r) == list(range(50)) for r in i2.tolist())


def test_a_non_finite_block_is_rescored_in_full_as_faiss_would_score_it():
    rng = np.random.default_rng(5)
    c = unit_rows(rng, 900, 32)
    q = unit_rows(rng, 30, 32)
    bad = c.copy()
    bad[457, 3] = np.nan
    pairs: list[int] = []
    got_s, got_i = probe.two_stage_topk(q, [c[:450], bad[450:]], 10, pairs=pairs)
    assert pairs[-1] >= 30 * 450  # the second block: every pair
    good_s, good_i = probe.two_stage_topk(q, [c[:450]], 10)
    assert true_topk_ok(q, c[:450], good_i, 10)


def adversarial(n_a=200, n_b=50, m=10.0):
    """Vectors whose int8 rounding errors all point against the query, as far as Cauchy-Schwarz allows.

    Dimension 0 holds 1.0 in one row, so every block's int8 step is a = 1/127. Over the 15 dimensions
    the query weighs, an A row sits 0.51 of a step above m (its int8 score overshoots by 7.65 a) and a
    B row 0.49 above (undershoots by 7.35 a). A B row also has one step in dimension 16. So every B
    row truly beats every A row by 0.7 a, yet scores 14 a below it in int8. The query is exactly
    representable, so all the error is the documents'."""
    a = 1 / 127
    d = 17
    anchor = np.zeros((1, d), np.float32)
    anchor[0, 0] = 1.0
    rows_a = np.zeros((n_a, d), np.float32)
    rows_a[:, 1:16] = (m + 0.51) * a
    rows_b = np.zeros((n_b, d), np.float32)
    rows_b[:, 1:16] = (m + 0.49) * a
    rows_b[:, 16] = a
    q = np.zeros((3, d), np.float32)
    q[:, 1:] = 1.0
    return q, anchor, rows_a, rows_b


@pytest.mark.parametrize("layout", ["one block", "A rows first: the heap's floor"])
def test_rows_that_int8_ranks_last_but_truly_rank_first_are_found(layout):
    """k = 60 of 50 B rows and 200 A rows: the true top 60 holds all 50 B rows, the int8 top 60 none.
    In one block the floor comes from the int8 k-th score; with the A rows in an earlier block it comes
    from the heap's exact scores, and only the candidate's own bound keeps the B rows."""
    q, anchor, rows_a, rows_b = adversarial()
    c = np.concatenate([anchor, rows_a, rows_b])
    true = q.astype(np.float64) @ c.T.astype(np.float64)
    assert (true[0, 201:].min() > true[0, 1:201].max()) and len(c) == 251
    blocks = [c] if layout == "one block" else [c[:201], c[201:]]
    got_s, got_i = probe.two_stage_topk(q, blocks, 60)
    assert true_topk_ok(q, c, got_i, 60)
    assert set(range(201, 251)) <= set(got_i[0].tolist())


def test_exact_ties_rank_as_the_evaluators_search_ranks_them():
    """Small-integer vectors score exactly in any kernel, so many rows tie: the scores must equal the
    evaluator's faiss search bit for bit, and within a tie the later row comes first (its heap order);
    only which rows of a tie group cut at k stay may differ."""
    from test_cqadupstack_search import assert_same_ranking

    rng = np.random.default_rng(11)
    corpus = rng.integers(-2, 3, size=(6000, 16)).astype(np.float32)
    corpus[rng.integers(0, 6000, size=1200)] = corpus[rng.integers(0, 6000, size=1200)]
    queries = rng.integers(-2, 3, size=(40, 16)).astype(np.float32)
    blocks = [corpus[s : s + 2500] for s in range(0, 6000, 2500)]
    got = probe.two_stage_topk(queries, blocks, 100)
    assert_same_ranking(got, search_topk(queries, blocks, 100), corpus, queries)
