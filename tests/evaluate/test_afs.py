"""Argument Facet Similarity: per-topic correlations averaged over topics, on a hand-made fixture
in the corpus's CSV layout (including a cp1252 byte), and clear errors."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import FIXTURES

from benchbench.core.errors import DataError
from benchbench.core.tasks import load_spec_file
from benchbench.encode.cache import EmbeddingCache
from benchbench.encode.encoding import Embedder
from benchbench.evaluate.adapters.afs import AFSAdapter, read_afs
from benchbench.store.data import DataStore

REPO = FIXTURES.parents[1]


class RankEncoder:
    """sentence_1 -> e1; sentence_2 of the k-th pair of a topic -> cosine COS[topic][k] with e1."""

    fingerprint = "afs-rank-v1"
    COS = {"DP": [0.9, 0.1, 0.5], "GC": [0.2, 0.8, 0.5], "GM": [0.9, 0.3, 0.6]}

    def __init__(self):
        self.table = {}
        for t, cos in self.COS.items():
            a, b, _ = read_afs(FIXTURES / f"afs/ArgPairs_{t}.csv")
            for x, z, c in zip(a, b, cos):
                self.table.setdefault(x, [1.0, 0.0])
                self.table[z] = [c, (1 - c * c) ** 0.5]

    def encode(self, texts):
        return np.asarray([self.table[t] for t in texts], dtype=np.float32)


def _adapter(root=FIXTURES) -> AFSAdapter:
    (spec,), _ = load_spec_file(REPO / "tasks" / "afs.toml")
    return AFSAdapter(spec, DataStore(root, allow_download=False))


def test_topic_mean_hand_computed(tmp_path):
    res = _adapter().evaluate(Embedder(RankEncoder(), EmbeddingCache(tmp_path)), "test")
    # gold per topic: DP 5, .5, 3 / GC 4, 1, 2.5 / GM 4.5, 0, 2 ; cosines ranked the same (DP, GM) or reversed (GC)
    assert res.subsets["DP"]["spearman"] == pytest.approx(100.0)
    assert res.subsets["GC"]["spearman"] == pytest.approx(-100.0)
    assert res.subsets["GM"]["spearman"] == pytest.approx(100.0)
    assert res.scores["spearman"] == pytest.approx(100 / 3)
    pearson_dp = np.corrcoef([0.9, 0.1, 0.5], [5.0, 0.5, 3.0])[0, 1] * 100
    assert res.subsets["DP"]["pearson"] == pytest.approx(pearson_dp)
    assert res.scores["pearson"] == pytest.approx(np.mean([s["pearson"] for s in res.subsets.values()]))
    assert res.main_metric == "spearman" and res.details["aggregation"] == "mean over topics"


def test_cp1252_file_is_decoded():
    a, b, y = read_afs(FIXTURES / "afs/ArgPairs_GC.csv")
    assert a[2].endswith("\u2019") and y.tolist() == [4.0, 1.0, 2.5]


def test_missing_corpus_and_bad_header_are_clear(tmp_path):
    with pytest.raises(DataError, match=r"afs/ArgPairs_DP\.csv.*nlds|afs/ArgPairs_DP\.csv"):
        _adapter(tmp_path).evaluate(Embedder(RankEncoder()), "test")
    (tmp_path / "x.csv").write_text("score,s1,s2\n1,a,b\n")
    with pytest.raises(DataError, match="lacks columns"):
        read_afs(tmp_path / "x.csv")
