"""SciDocs: trec_eval MAP per sub-task over each query's candidates (None titles dropped from the
ranking but kept in the qrels), sub-tasks averaged; allenai and USEB layouts agree."""

import numpy as np
import pytest
from helpers import FIXTURES, TablePairScorer, fixture_adapter

from benchbench.encode.encoding import Embedder

FIX = FIXTURES / "useb"


def make(registry, root, **params):
    return fixture_adapter(registry, "scidocs", root, **params)


PairScorer = TablePairScorer


P = {
    1: "attention is all you need",
    2: "neural machine translation by jointly learning to align",
    3: "deep residual learning",
    4: "bert pre-training of deep bidirectional transformers",
    5: "sequence to sequence learning",
    7: "imagenet classification with deep convolutional networks",
    8: "glove global vectors",
    9: "word2vec efficient estimation",
    10: "layer normalization",
    11: "dropout a simple way",
}


def table():
    q1, q7 = P[1], P[7]
    return {
        (q1, P[2]): 0.3,
        (q1, P[3]): 0.9,
        (q1, P[4]): 0.5,
        (q1, P[5]): 0.5,
        (q7, P[8]): 0.8,
        (q7, P[9]): 0.1,
        (q7, P[10]): 0.2,
        (q7, P[11]): 0.7,
    }


@pytest.mark.parametrize("root, layout", [(FIX / "native", "allenai"), (FIX / "useb", "useb")])
def test_hand_computed_map(registry, root, layout):
    ad = make(registry, root)
    assert ad.layout == layout
    r = ad.evaluate(Embedder(PairScorer(table())), "test")
    # p1: p6 (relevant) has no title -> not ranked, but counted: 3 relevant. Scores p3 .9, p4 .5, p5 .5, p2 .3;
    # the p4/p5 tie goes to the larger id first (trec_eval): p3(0) p5(0) p4(1) p2(1) -> AP = (1/3 + 2/4) / 3
    ap1 = (1 / 3 + 2 / 4) / 3
    # p7: p8 .8 (1), p11 .7 (1), p10 .2, p9 .1 -> AP = 1
    # p6 is a query without a title: skipped (USEB)
    expected = 100 * (ap1 + 1) / 2
    for t in ("cite", "cocite", "coread", "coview"):
        assert r.subsets[t]["map"] == pytest.approx(expected)
        assert r.subsets[t]["n_queries"] == 2 and r.subsets[t]["n_skipped"] == 1
    assert r.main_metric == "map" and r.main_score == pytest.approx(expected)
    dcg1 = 1 / np.log2(4) + 1 / np.log2(5)
    idcg1 = 1 + 1 / np.log2(3) + 1 / np.log2(4)
    assert r.scores["ndcg"] == pytest.approx(100 * (dcg1 / idcg1 + 1) / 2)


def test_dev_split_reads_val(registry):
    r = make(registry, FIX / "native").evaluate(Embedder(PairScorer({(P[8], P[9]): 1.0})), "dev")
    assert r.main_score == pytest.approx(100.0) and r.subsets["cite"]["n_queries"] == 1


def test_layouts_agree_on_vectors(registry, tiny_encoder, tmp_cache):
    a = make(registry, FIX / "native").evaluate(Embedder(tiny_encoder), "test")
    b = make(registry, FIX / "useb").evaluate(Embedder(tiny_encoder), "test")
    assert a.scores == pytest.approx(b.scores) and a.details["similarity"] == "cosine"


def test_missing_files_name_the_allenai_layout(registry, tmp_path):
    ad = make(registry, tmp_path)
    missing = ad.missing_files("dev")
    assert "scidocs/paper_metadata_view_cite_read.json" in missing and "scidocs/coview/val.qrel" in missing
    assert "scidocs/coview/test.qrel" not in missing


def test_training_sentences_hold_out_queries_and_positives(registry):
    sents = make(registry, FIX / "native").own_sentences()
    # queries p1 p7 p6 p8 and positives p2 p4 p6 p8 p11 p1 p9 are held out
    assert set(sents) == {P[3], P[5], P[10]}
