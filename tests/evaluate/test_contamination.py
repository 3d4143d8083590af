"""Contamination from text: measured verbatim / n-gram overlap and declared source relations."""

from __future__ import annotations

import time

import pytest
from helpers import FIXTURES

from benchbench.core.errors import DataError
from benchbench.evaluate.analysis import overlap
from benchbench.evaluate.analysis.overlap import OverlapIndex, cached_index, measure, words
from benchbench.report import contamination as C

PLANTED = "a little white curly haired dog runs across the pavement with a stick in its mouth ."
SHORT = "a man is playing a guitar ."
SPAN = "a boy rides a red bicycle down a steep and narrow hill in the rain"


@pytest.fixture
def mini(tmp_path, monkeypatch):
    """The contam-mini fixture task (tests/fixtures/contamination.toml) in a fresh registry."""
    monkeypatch.setenv("BENCHBENCH_DATA", str(FIXTURES))
    monkeypatch.setenv("BENCHBENCH_TASK_PATH", str(FIXTURES / "contamination.toml"))
    monkeypatch.setenv("BENCHBENCH_CACHE", str(tmp_path / "cache"))
    from benchbench.core import registry
    from benchbench.store.data import DataStore

    monkeypatch.setattr(registry, "_REGISTRY", None)
    C._TEST_SETS.clear()
    yield DataStore(FIXTURES), tmp_path / "overlap"
    C._TEST_SETS.clear()
    registry.reset_registry()


def _train_ref(data):
    """The fixture task's training corpus as a record names it (``train.corpus``), sha256 included."""
    from benchbench.core.registry import get_registry
    from benchbench.train.corpora import Corpus, training_corpus

    class M:  # a method of the "task" corpus kind
        name, corpus = "m", "task"

    from benchbench.core.registry import make_adapter

    c: Corpus = training_corpus(M, make_adapter(get_registry(), "contam-mini", data), data)
    return C.corpus_ref(c.describe(), data=data)


def test_normalisation_meets_other_tokenisations():
    assert words("He does n't know the dog 's name") == words("He doesn't know the dog's name.")
    assert words("curly-haired , dog") == words("Curly haired dog")
    assert words("a b") != words("ab")


def test_planted_verbatim_sentence_raises_the_flag_with_its_count(mini):
    data, cache = mini
    flags = C.flags_for("tiny-bert", "contam-mini", [_train_ref(data)], data=data, cache_dir=cache)
    verbatim = [f for f in flags if f.kind == "verbatim"]
    assert len(verbatim) == 1
    f = verbatim[0]
    # 4 distinct images sentences have >= 9 words; the planted one (other case, hyphen, full stop) is found
    assert (f.subset, f.count, f.denominator) == ("images", 1, 4)
    assert f.examples == (PLANTED,)
    assert "images: 1 of 4 test sentences of >= 9 words occur verbatim (task:contam-mini" in f.text()


def test_a_sentence_under_the_threshold_does_not_count(mini):
    data, cache = mini
    flags = C.flags_for("tiny-bert", "contam-mini", [_train_ref(data)], data=data, cache_dir=cache)
    assert not any(SHORT in f.examples for f in flags)  # 6 words: verbatim in train.txt, yet no flag
    index = OverlapIndex.build([SHORT, "one two three four five six seven eight nine"])
    assert measure([SHORT], index, min_words=6).verbatim == (SHORT,)  # the threshold, not the match, kept it out
    assert measure(["One two three four five six seven eight nine!"], index).verbatim  # exactly 9 words counts
    assert not measure([SHORT], index).verbatim


def test_an_ngram_overlap_is_found_and_not_called_verbatim(mini):
    data, cache = mini
    flags = C.flags_for("tiny-bert", "contam-mini", [_train_ref(data)], data=data, cache_dir=cache)
    ngram = [f for f in flags if f.kind == "ngram"]
    assert [(f.subset, f.count, f.denominator, f.examples) for f in ngram] == [("images", 1, 4, (SPAN,))]
    assert "share a 8-word span" in ngram[0].text()
    # seven shared words are not an 8-gram
    index = OverlapIndex.build(["x a boy rides a red bicycle down y"])
    assert not measure([SPAN], index).ngram
    assert measure([SPAN], OverlapIndex.build(["x a boy rides a red bicycle down a y"])).ngram == (SPAN,)


def test_flags_are_per_subset(mini):
    data, cache = mini
    flags = C.flags_for("tiny-bert", "contam-mini", [_train_ref(data)], data=data, cache_dir=cache)
    assert {f.subset for f in flags} == {"images"}  # "news" shares nothing with train.txt
    assert set(C.task_test_sets("contam-mini", data)) == {"images", "news"}


def test_the_tasks_own_pairs_are_not_measured(mini):
    data, cache = mini
    ref = C.CorpusRef("task:contam-mini", C.TRAINING, "pairs", None, (), lambda: ([PLANTED], "0" * 64))
    assert C.flags_for("tiny-bert", "contam-mini", [ref], data=data, cache_dir=cache) == []


def test_index_is_cached_by_sha256_and_a_wrong_text_is_refused(tmp_path):
    sha = "a" * 64
    built = cached_index(sha, lambda: [PLANTED], tmp_path)
    stored = list(tmp_path.glob(f"{sha}.v{overlap.NORM_VERSION}.n8.npz"))
    assert len(stored) == 1

    def never():
        raise AssertionError("the corpus was read again")

    again = cached_index(sha, never, tmp_path)
    assert (again.sentences == built.sentences).all() and again.size == 1
    stored[0].write_bytes(b"damaged")
    assert cached_index(sha, lambda: [PLANTED], tmp_path).size == 1  # rebuilt, not an error
    ref = C.CorpusRef("c", C.TRAINING, "general", "b" * 64, (), lambda: ([PLANTED], "c" * 64))
    with pytest.raises(DataError, match="not the text that was trained on"):
        C.measured_flags({None: [PLANTED]}, [ref], cache_dir=tmp_path)


def test_declared_relation_flags_sts15_images_for_a_card_naming_snli():
    subsets = ["answers-forums", "answers-students", "belief", "headlines", "images"]
    flags = C.declared_flags("tiny-mlm-nli", C.subset_sources("sts15", subsets))
    assert {f.subset for f in flags} == {"images"}  # the card names snli; only images is Flickr 8K text
    assert "trained on snli, tested on flickr8k: SNLI premises are Flickr30k captions" in flags[0].text()
    assert C.shared_text("snli", "flickr8k", C.Relations({}, {})) is None  # by name alone they never meet
    # STS14 images are PASCAL VOC-2008 descriptions (its readme), not Flickr: no declared flag
    sts14 = C.declared_flags("all-MiniLM-L6-v2", {"images": C.subset_sources("sts14", ["images"])["images"]})
    assert sts14 == []
    sick = C.declared_flags("all-MiniLM-L6-v2", {None: ("sick",)})
    assert any("trained on flickr30k, tested on sick" in f.what for f in sick)


def test_relations_file_names_real_subsets_and_evidence(registry):
    rel = C.load_relations()
    for task, table in rel.subsets.items():
        declared = set(registry.task(task).params["subsets"]) if task != "twitterpara" else {"turl", "pit"}
        assert set(table) == declared, task


def test_real_data_sts15_images_in_the_starts_mlm_text(real_data, tmp_path):
    """The flagged count, on the scored pairs (see bench/contamination_table.py for the 51)."""
    from benchbench.store.data import DataStore

    t0 = time.perf_counter()
    flags = C.flags_for("tiny-mlm-nli@e7d4e08212c3", "sts15", data=DataStore(real_data), cache_dir=tmp_path)
    got = {(f.subset, f.kind): (f.count, f.denominator) for f in flags if f.kind != "declared"}
    assert got == {("images", "verbatim"): (32, 898), ("images", "ngram"): (21, 1047)}
    assert time.perf_counter() - t0 < 30


def test_the_start_text_comes_from_the_card(tmp_path):
    from benchbench.core.errors import ConfigError
    from benchbench.encode.cards import load_card

    assert [c.name for c in C.start_corpora("tiny-mlm-nli@e7d4e08212c3", None)] == ["nli:snli-devtest+xnli-en-devtest"]
    assert C.start_corpora("all-MiniLM-L6-v2", None) == []  # its 1B pairs are not at hand: declared flags only
    assert C.corpus_ref(None, data=None) is None  # no training (the start row)
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\ncard = "y"\ntext_corpus = 3\n')
    with pytest.raises(ConfigError, match="text_corpus must be a corpus name"):
        load_card(bad)


def test_study_view_callable_reads_the_records(mini, monkeypatch):
    from benchbench.store.data import DataStore

    data, cache = mini
    ref = _train_ref(data)
    corpus = {"kind": ref.kind, "name": ref.name, "sha256": ref.sha256}
    records = [
        {"method": "m", "task": "contam-mini", "model": "tiny-bert", "seed": s, "train": {"corpus": corpus}}
        for s in (1, 2, 3)
    ] + [{"method": "start", "task": "contam-mini", "model": "tiny-bert", "seed": 1}]
    flags = C.overlap_flags(records, data=data, cache_dir=cache)
    texts = flags("m", "contam-mini")
    assert len([t for t in texts if "occur verbatim" in t]) == 1  # three seeds, one corpus: one flag
    assert flags("start", "contam-mini") == []  # untrained, and tiny-bert's card has no text
    # the site passes no store: one default store (BENCHBENCH_DATA) serves the corpora's adapters too
    seen = []
    real_ref = C.corpus_ref
    monkeypatch.setattr(C, "corpus_ref", lambda c, *, data, registry=None: seen.append(data) or real_ref(c, data=data))
    assert C.overlap_flags(records, cache_dir=cache)("m", "contam-mini") == texts
    assert seen and all(isinstance(d, DataStore) for d in seen)
    twice = C.flags_for("tiny-bert", "contam-mini", [ref, ref], data=data, cache_dir=cache)
    assert [f.count for f in twice if f.kind == "verbatim"] == [1]  # one text is measured once


def test_the_measured_overlap_memo_follows_min_words_and_n_one_at_a_time(monkeypatch):
    """Issue 50: the per-process memo of measured overlaps (``contamination._MEASURED``) was only ever hit
    with the default thresholds. A second call with another minimum sentence length, or another n-gram
    length, must measure again; the same test text (another list, another subset name) must not."""
    corpus = [PLANTED, SHORT, "yesterday a boy rides a red car to school"]  # shares 4 words of SPAN in a row
    sha = C._sha_of(corpus)
    ref = C.CorpusRef("c", C.TRAINING, "general", sha, (), lambda: (corpus, sha))
    monkeypatch.setattr(C, "_MEASURED", {})
    monkeypatch.setattr(C, "_INDICES", {})
    calls = []
    real = C.measure
    monkeypatch.setattr(C, "measure", lambda s, index, min_words: calls.append(min_words) or real(s, index, min_words))

    def verbatim(**kw):
        flags = C.measured_flags({"s": [PLANTED, SHORT]}, [ref], cache_dir=None, **kw)
        return [(f.count, f.denominator) for f in flags if f.kind == "verbatim"]

    assert verbatim(min_words=9) == [(1, 1)]  # SHORT (6 words) is under the threshold
    assert verbatim(min_words=6) == [(2, 2)]  # the same text, a lower threshold: measured again
    assert verbatim(min_words=9) == [(1, 1)] and len(calls) == 2  # back to 9: the memo, not a stale 6
    spans = C.measured_flags({"s": [SPAN]}, [ref], cache_dir=None, n=4)
    assert [f.kind for f in spans] == ["ngram"] and len(calls) == 3
    assert C.measured_flags({"s": [SPAN]}, [ref], cache_dir=None, n=8) == []  # no 8 words in a row shared
    assert len(calls) == 4
    # what does not change the overlap does not miss the memo: the same sentences under another name
    C.measured_flags({"other": [PLANTED, SHORT]}, [ref], cache_dir=None, min_words=6)
    assert len(calls) == 4
