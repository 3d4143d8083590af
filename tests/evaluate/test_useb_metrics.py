"""The ranking conventions USEB's numbers depend on, on hand-computed cases and against the
reference definitions (scikit-learn's AP for CQADupStack's MAP@100)."""

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from benchbench.evaluate.adapters.askubuntu import rerank_metrics
from benchbench.evaluate.adapters.ranking import (
    search_topk,
    stable_rank,
    topk_average_precision,
    trec_average_precision,
    trec_ndcg,
    trec_order,
)


def test_stable_rank_keeps_input_order_on_ties():
    assert stable_rank(["a", "b", "c", "d"], [0.5, 0.9, 0.5, 0.1]) == ["b", "a", "c", "d"]
    assert stable_rank(["c", "a"], [1.0, 1.0]) == ["c", "a"]


def test_topk_ap_hand_computed():
    # relevant at ranks 2 and 4 -> (1/2 + 2/4) / 2 ; the denominator is the hits retrieved (USEB), not |relevant|
    ap = topk_average_precision(
        np.array([[0, 1, 0, 1], [0, 0, 0, 0]]), np.array([[0.9, 0.8, 0.7, 0.6], [0.9, 0.8, 0.7, 0.6]])
    )
    assert ap == pytest.approx([0.5, 0.0])


def test_topk_ap_tied_scores_form_one_threshold():
    # the hit ties with a miss at ranks 2-3: scikit-learn's precision there is 1/3, not 1/2
    ap = topk_average_precision(np.array([[0, 1, 0]]), np.array([[0.9, 0.5, 0.5]]))
    assert ap[0] == pytest.approx(1 / 3)
    assert ap[0] == pytest.approx(average_precision_score([0, 1, 0], [0.9, 0.5, 0.5]))


def test_topk_ap_equals_sklearn_on_random_rows_with_ties():
    rng = np.random.default_rng(0)
    scores = np.sort(rng.integers(0, 12, size=(200, 30)).astype(np.float32), axis=1)[:, ::-1]  # many ties
    hits = rng.random((200, 30)) < 0.15
    ours = topk_average_precision(hits, scores)
    ref = [average_precision_score(h, s) if h.any() else 0.0 for h, s in zip(hits.astype(int), scores)]
    np.testing.assert_allclose(ours, ref, atol=1e-12)


def test_rerank_metrics_hand_computed():
    r = rerank_metrics(["b", "d"], ["a", "b", "c", "d", "e"])
    assert r == pytest.approx({"map": (1 / 2 + 2 / 4) / 2, "mrr": 0.5, "p@1": 0.0, "p@5": 0.4})
    assert rerank_metrics(["x"], ["x", "y"])["p@5"] == 0.5  # USEB: hits / len(ranking[:5])


def test_trec_order_breaks_ties_by_descending_doc_id():
    assert [["d1", "d2", "d3", "d4"][i] for i in trec_order(["d1", "d2", "d3", "d4"], [0.3, 0.9, 0.5, 0.5])] == [
        "d2",
        "d4",
        "d3",
        "d1",
    ]


def test_trec_map_and_ndcg_hand_computed():
    # ranked relevances [0, 0, 1, 1]; 3 relevant judged (one never retrieved)
    assert trec_average_precision([0, 0, 1, 1], 3) == pytest.approx((1 / 3 + 2 / 4) / 3)
    dcg = 1 / np.log2(4) + 1 / np.log2(5)
    idcg = 1 + 1 / np.log2(3) + 1 / np.log2(4)
    assert trec_ndcg([0, 0, 1, 1], [1, 0, 1, 0, 1]) == pytest.approx(dcg / idcg)
    assert trec_average_precision([0, 0], 0) == 0.0


def test_search_topk_streams_blocks_and_matches_brute_force():
    rng = np.random.default_rng(1)
    q = rng.normal(size=(7, 8)).astype(np.float32)
    c = rng.normal(size=(50, 8)).astype(np.float32)
    scores, idx = search_topk(q, (c[s : s + 9] for s in range(0, 50, 9)), 5)
    full = q @ c.T
    ref = np.argsort(-full, axis=1)[:, :5]
    np.testing.assert_array_equal(idx, ref)
    np.testing.assert_allclose(scores, np.take_along_axis(full, ref, 1), rtol=1e-5)
    s2, i2 = search_topk(q, [c[:3]], 5)  # k larger than the corpus: k' = corpus size
    assert i2.shape == (7, 3)
