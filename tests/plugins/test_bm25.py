"""The bm25 method: its sparse scores equal rank-bm25's BM25Okapi, and it serves the USEB adapters
through score_pairs/search without vectors."""

import numpy as np
import pytest
from benchbench_plugins.bm25 import BM25, BM25Config, BM25Index, BM25Scorer, tokenize
from rank_bm25 import BM25Okapi

from benchbench.core.errors import PluginError

DOCS = [
    "How do I install Python 3 on Ubuntu?",
    "python python version",
    "wifi not working after the upgrade",
    "sound stopped working after upgrade",
    "install the nvidia driver",
    "",
    "grub rescue: boot fails",
]
QUERIES = ["install python", "upgrade broke my wifi", "python python", "nothing matches here", "boot"]


def test_scores_equal_rank_bm25():
    ref = BM25Okapi([tokenize(d) for d in DOCS])
    ours = BM25Index(DOCS, BM25Config()).scores(QUERIES)
    for q, row in zip(QUERIES, ours):
        np.testing.assert_allclose(row, ref.get_scores(tokenize(q)), rtol=1e-10, atol=1e-12)


def test_config_reaches_the_scores():
    ref = BM25Okapi([tokenize(d) for d in DOCS], k1=0.9, b=0.4)
    ours = BM25Index(DOCS, BM25Config(k1=0.9, b=0.4)).scores(["install python"])[0]
    np.testing.assert_allclose(ours, ref.get_scores(tokenize("install python")))


def test_search_returns_best_first_with_bounded_blocks():
    scorer = BM25Scorer(BM25Config(query_block=2))
    scores, idx = scorer.search(QUERIES, DOCS, 3)
    full = BM25Index(DOCS, BM25Config()).scores(QUERIES)
    assert idx.shape == (5, 3)
    for r in range(len(QUERIES)):
        assert np.all(np.diff(scores[r]) <= 0)
        np.testing.assert_allclose(scores[r], np.sort(full[r])[::-1][:3], rtol=1e-6)
    assert idx[1, 0] == 2 and idx[4, 0] == 6  # "upgrade broke my wifi" -> the wifi upgrade title; "boot" -> grub
    assert set(idx[0, :2]) == {0, 1}  # "install python": the two python titles


def test_score_pairs_uses_query_against_document():
    scorer = BM25Scorer(BM25Config())
    s = scorer.score_pairs(["install python", "install python"], ["python version", "sound stopped"])
    assert s[0] > 0 and s[1] == 0


def test_no_vectors_is_a_clear_error():
    with pytest.raises(PluginError, match="no sentence vectors"):
        BM25Scorer(BM25Config()).encode(["a"])


def test_registered_and_training_free(registry):
    assert registry.methods["bm25"] is BM25 and BM25.trains is False
    enc = BM25().train([], None)
    assert (
        enc.fingerprint.startswith("bm25-") and enc.fingerprint != BM25(BM25Config(k1=1.2)).train([], None).fingerprint
    )
