"""AskUbuntu: USEB's re-ranking conventions, both published layouts, hand-computed MAP."""

import gzip

import pytest
from helpers import FIXTURES, TablePairScorer, fixture_adapter

from benchbench.core.errors import DataError
from benchbench.encode.encoding import Embedder

FIX = FIXTURES / "useb"


def make(registry, root, task="askubuntu"):
    return fixture_adapter(registry, task, root)


PairScorer = TablePairScorer


T = {
    "101": "how to install python 3 on ubuntu",
    "102": "installing python3 in ubuntu 14.04",
    "103": "wifi not working after upgrade",
    "105": "how do i install python",
    "110": "python version change",
    "112": "update manager freezes",
}


@pytest.mark.parametrize("layout, root", [("taolei87", FIX / "native"), ("useb", FIX / "useb")])
def test_dev_map_hand_computed_in_both_layouts(registry, layout, root):
    ad = make(registry, root)
    assert ad.layout == layout
    q = T["101"]
    # query 101: cosine ties 105/110 keep the BM25 order (105 first) -> ranking 103, 105, 110, 102, 112;
    # relevant {102, 105} at ranks 4 and 2 -> AP 1/2. Query 103: all scores tie -> BM25 order, where the
    # BM25 tie 107/111 keeps the file order -> 111 (relevant) at rank 2 -> AP 1/2.
    table = {(q, T["102"]): 0.2, (q, T["103"]): 0.9, (q, T["105"]): 0.5, (q, T["110"]): 0.5, (q, T["112"]): 0.1}
    r = ad.evaluate(Embedder(PairScorer(table)), "dev")
    assert r.main_metric == "map"
    assert r.scores == pytest.approx({"map": 50.0, "mrr": 50.0, "p@1": 0.0, "p@5": 30.0})
    assert r.details["queries"] == 2 and r.details["layout"] == layout


def test_queries_without_positive_are_skipped(registry):
    ad = make(registry, FIX / "native")
    r = ad.evaluate(Embedder(PairScorer({})), "test")
    # 3 queries in test.txt, one without a similar question: skipped, not counted as 0
    assert r.details["queries"] == 2 and r.details["skipped_without_positive"] == 1
    # all ties -> BM25 order: q104: 108 at rank 1 -> AP 1 ; q106: 112 at 1, 109 at 2 -> AP 1
    assert r.scores["map"] == pytest.approx(100.0)


def test_cosine_path_uses_titles(registry, tiny_encoder, tmp_cache):
    ad = make(registry, FIX / "native")
    seen = []

    class Spy:
        fingerprint = "spy"

        def encode(self, texts):
            seen.extend(texts)
            return tiny_encoder.encode(texts)

    r = ad.evaluate(Embedder(Spy()), "test")
    assert 0 <= r.scores["map"] <= 100 and r.details["similarity"] == "cosine"
    assert "sound stopped working" in seen and not any("tried everything" in s for s in seen)  # titles only


def test_missing_corpus_is_reported_per_layout(registry, tmp_path):
    (tmp_path / "useb" / "askubuntu").mkdir(parents=True)
    for f in ("dev.txt", "test.txt"):
        (tmp_path / "useb" / "askubuntu" / f).write_bytes((FIX / "native" / "useb" / "askubuntu" / f).read_bytes())
    ad = make(registry, tmp_path)
    assert ad.layout == "taolei87"
    assert ad.missing_files("test") == ["useb/askubuntu/text_tokenized.txt.gz"]
    with pytest.raises(DataError, match="text_tokenized.txt.gz"):
        ad.evaluate(Embedder(PairScorer({})), "test")


def test_own_sentences_exclude_eval_queries_and_gold(registry):
    ad = make(registry, FIX / "native")
    sents = ad.own_sentences()
    held = {"101", "102", "105", "103", "111", "104", "108", "106", "109", "112", "107"}  # queries + similar
    with gzip.open(FIX / "native" / "useb" / "askubuntu" / "text_tokenized.txt.gz", "rt") as f:
        titles = dict(line.split("\t")[:2] for line in f)
    assert set(sents) == {t for i, t in titles.items() if i not in held} == {"python version change"}


def test_malformed_eval_line_names_the_file(registry, tmp_path):
    d = tmp_path / "useb" / "askubuntu"
    d.mkdir(parents=True)
    (d / "text_tokenized.txt.gz").write_bytes(
        (FIX / "native" / "useb" / "askubuntu" / "text_tokenized.txt.gz").read_bytes()
    )
    (d / "dev.txt").write_text("101\t102\t102 103\n")
    (d / "test.txt").write_text("")
    with pytest.raises(DataError, match="dev.txt:1"):
        make(registry, tmp_path).evaluate(Embedder(PairScorer({})), "dev")
