"""Pair classification AUC: hand-computed on a QQP-format fixture, the cross-encoder path, the
split slices Trans-Encoder uses on QNLI, and the formats' error messages."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import FIXTURES

from benchbench.core.errors import ConfigError, DataError
from benchbench.core.tasks import TaskSpec
from benchbench.encode.cache import EmbeddingCache
from benchbench.encode.encoding import Embedder
from benchbench.evaluate.adapters.pairs import PairClassificationAdapter, read_pairs
from benchbench.store.data import DataStore

# cosine of each QQP fixture pair (labels 1, 0, 1, 0)
COS = {0: 0.9, 1: 0.1, 2: 0.2, 3: 0.3}


class LookupEncoder:
    """Question 1 of pair i -> e1; question 2 -> a unit vector at cosine COS[i] from e1."""

    fingerprint = "qqp-lookup-v1"

    def __init__(self):
        a, b, _ = read_pairs(FIXTURES / "qqp/dev.tsv", "glue-qqp")
        self.table = {}
        for i, (x, z) in enumerate(zip(a, b)):
            self.table[x] = [1.0, 0.0]
            self.table[z] = [COS[i], (1 - COS[i] ** 2) ** 0.5]

    def encode(self, texts):
        return np.asarray([self.table[t] for t in texts], dtype=np.float32)


class PerfectCrossEncoder(LookupEncoder):
    fingerprint = "qqp-cross-v1"

    def score_pairs(self, a, b):
        return np.array([1.0 if "love" in x or "python" in x else 0.0 for x in a])


def _adapter(fmt="glue-qqp", splits=None) -> PairClassificationAdapter:
    spec = TaskSpec(
        name="qqp",
        kind="pair-auc",
        main_metric="auc",
        splits=["test"],
        params={"format": fmt, "splits": splits or {"test": {"file": "qqp/dev.tsv"}}},
    )
    return PairClassificationAdapter(spec, DataStore(FIXTURES, allow_download=False))


def test_auc_hand_computed_on_qqp_fixture(tmp_path):
    res = _adapter().evaluate(Embedder(LookupEncoder(), EmbeddingCache(tmp_path)), "test")
    # positives score 0.9 and 0.2, negatives 0.1 and 0.3: 3 of the 4 (pos, neg) pairs are ordered right
    assert res.scores["auc"] == pytest.approx(75.0)
    assert res.main_score == pytest.approx(75.0)
    assert res.details == {"pairs": 4, "positives": 2, "scorer": "bi-encoder cosine"}


def test_cross_encoder_scores_are_used_when_present():
    res = _adapter().evaluate(Embedder(PerfectCrossEncoder()), "test")
    assert res.scores["auc"] == pytest.approx(100.0) and res.details["scorer"] == "cross-encoder"


def test_quoted_text_is_read_verbatim_and_slices_apply():
    a, b, y = read_pairs(FIXTURES / "qqp/dev.tsv", "glue-qqp")
    assert a[2] == 'What is "love" ?' and y.tolist() == [1, 0, 1, 0]
    ad = _adapter(splits={"test": {"file": "qqp/dev.tsv", "start": 1, "stop": 3}})
    a, _, y = ad.load("test")
    assert len(a) == 2 and y.tolist() == [0, 1]
    assert ad.train_pairs()[0] == ("How do I cook rice ?", "Why is the sky blue ?")


def test_errors_name_the_problem(tmp_path):
    bad = tmp_path / "qqp"
    bad.mkdir()
    (bad / "dev.tsv").write_text("id\tquestion1\tquestion2\tis_duplicate\n0\ta\tb\tmaybe\n")
    spec = TaskSpec(
        name="qqp",
        kind="pair-auc",
        main_metric="auc",
        params={"format": "glue-qqp", "splits": {"test": {"file": "qqp/dev.tsv"}}},
    )
    with pytest.raises(DataError, match=r"dev.tsv:2: unknown label 'maybe'"):
        PairClassificationAdapter(spec, DataStore(tmp_path)).load("test")
    with pytest.raises(DataError, match="lacks columns"):
        read_pairs(FIXTURES / "qqp/dev.tsv", "glue-qnli")
    with pytest.raises(ConfigError, match="no 'dev' entry"):
        _adapter().files_for("dev")
    one_label = _adapter(splits={"test": {"file": "qqp/dev.tsv", "start": 1, "stop": 2}})
    with pytest.raises(DataError, match="needs both labels"):
        one_label.evaluate(Embedder(LookupEncoder()), "test")


def test_real_qnli_and_mrpc_splits(real_data, registry):
    from benchbench.core.registry import make_adapter

    data = DataStore(real_data, allow_download=False)
    qnli = make_adapter(registry, "qnli", data)
    _, _, test = qnli.load("test")
    _, _, dev = qnli.load("dev")
    assert (len(dev), len(test)) == (1000, 4463)  # Trans-Encoder: first 1k of the official dev as dev
    assert dev.sum() + test.sum() == 2702  # 'entailment' rows of the official dev set
    mrpc = make_adapter(registry, "mrpc-pairs", data)
    _, _, y = mrpc.load("test")
    assert len(y) == 1725 and y.sum() == 1147
