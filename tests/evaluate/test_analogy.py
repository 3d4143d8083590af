"""Sentence analogy retrieval: the four questions of a tuple, the query v(C)+v(B)-v(A), exclusion of
the query sentences, per-category accuracy, on a hand-made fixture."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import FIXTURES

from benchbench.core.errors import DataError
from benchbench.core.tasks import load_spec_file
from benchbench.encode.encoding import Embedder
from benchbench.evaluate.adapters.analogy import AnalogyAdapter, analogy_accuracy, questions, read_tuples
from benchbench.store.data import DataStore

REPO = FIXTURES.parents[1]


class BagOfWords:
    """Word counts: for word-substitution tuples v(s4) = v(s3) + v(s2) - v(s1) exactly."""

    fingerprint = "analogy-bow-v1"

    def __init__(self, texts):
        words = sorted({w for t in texts for w in t.split()})
        self.index = {w: i for i, w in enumerate(words)}

    def encode(self, texts):
        out = np.zeros((len(texts), len(self.index)), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.split():
                out[i, self.index[w]] += 1
        return out


def _adapter(root=FIXTURES, pool=True) -> AnalogyAdapter:
    (spec,), _ = load_spec_file(REPO / "tasks" / "analogy.toml")
    spec.params["pool"] = pool
    return AnalogyAdapter(spec, DataStore(root, allow_download=False))


def test_four_questions_per_tuple_each_a_true_analogy():
    t = ("a", "b", "c", "d", "x")
    assert questions(t) == [("a", "b", "c", "d"), ("b", "a", "d", "c"), ("c", "d", "a", "b"), ("d", "c", "b", "a")]


def test_bag_of_words_solves_the_fixture_and_a_wrong_query_does_not():
    tuples, pool = _adapter().load()
    assert len(tuples) == 2 and len(pool) == 10  # 8 tuple sentences + 2 distractors
    bow = BagOfWords(pool)
    vec = dict(zip(pool, bow.encode(pool)))
    acc = analogy_accuracy(vec, pool, tuples)
    assert acc == {"VB_VBD": 100.0, "family": 100.0, "__all__": 100.0}
    flipped = [(b, a, c, d, cat) for a, b, c, d, cat in tuples]  # B:A::C:D is not an analogy
    assert analogy_accuracy(vec, pool, flipped)["__all__"] < 100.0


def test_query_sentences_are_excluded_from_the_answers():
    # v(C)+v(B)-v(A) with B == A points at C itself; only the exclusion makes D retrievable
    pool = ["p", "q", "r"]
    vec = {"p": np.array([1.0, 0.0]), "q": np.array([0.9, 0.1]), "r": np.array([0.0, 1.0])}
    tuples = [("p", "p", "q", "r", "c")]
    tuples = [("p", "p", "q", "r", "c")]
    assert questions(tuples[0])[0] == ("p", "p", "q", "r")
    with_excl = analogy_accuracy(vec, pool, tuples, exclude_query=True)["__all__"]
    assert with_excl > analogy_accuracy(vec, pool, tuples, exclude_query=False)["__all__"]


def test_adapter_end_to_end_with_an_embedder():
    a = _adapter()
    _, pool = a.load()
    r = a.evaluate(Embedder(BagOfWords(pool), cache=None, progress=False), "test")
    assert r.main_score == 100.0 and r.details["questions"] == 8 and r.details["pool"] == 10
    assert set(r.subsets) == {"VB_VBD", "family"}


def test_missing_data_and_bad_rows_are_named(tmp_path):
    with pytest.raises(DataError):
        _adapter(tmp_path).load()
    bad = tmp_path / "t.tsv"
    bad.write_text("only\ttwo\n")
    with pytest.raises(DataError, match="t.tsv:1"):
        read_tuples(bad)
