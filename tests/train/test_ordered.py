"""Ordered corpora: sentence splitting, the streamed line index, the record's corpus identity."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from benchbench.store.data import DataStore
from benchbench.train import corpora
from benchbench.train.ordered import LineSequence, build_line_index, is_sentence_per_line, load_ordered


def _store(tmp_path, data_dir=None) -> DataStore:
    return DataStore(data_dir=data_dir, cache_dir=tmp_path / "cache", allow_download=False)


def test_line_index_reads_lines_on_demand_and_holds_no_text(tmp_path):
    lines = [f"sentence {i} " + "x" * (i % 17) for i in range(20_000)]
    f = tmp_path / "books.txt"
    f.write_text("\n".join(lines) + "\n")
    seq = LineSequence(f, build_line_index(f, tmp_path / "books.idx"))
    assert len(seq) == len(lines)
    for i in (0, 1, 9_999, 19_999, -1):
        assert seq[i] == lines[i]
    assert seq[5:8] == lines[5:8]
    with pytest.raises(IndexError):
        seq[20_000]
    assert isinstance(seq.offsets, np.memmap)  # O(index) memory, mapped from disk
    assert len(pickle.dumps(seq)) < 1_000  # no text inside: paths only
    assert vars(seq).keys() <= {"path", "index_path", "offsets", "_fh"}
    f.write_text("")  # the text is read on demand: changing the file changes what an index returns
    assert seq[3] == ""


def test_file_without_final_newline_and_blank_lines(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("one\n\nthree")
    seq = LineSequence(f, build_line_index(f, tmp_path / "a.idx"))
    assert list(seq) == ["one", "", "three"] and [seq[i] for i in range(3)] == ["one", "", "three"]


def test_running_text_is_sentence_split_and_sentence_per_line_kept(tmp_path):
    run = tmp_path / "novel.txt"
    run.write_text("It was a truth universally\nacknowledged. Mr. Bennet was\nsilent.\n\nShe _smiled_. Then left\n")
    assert not is_sentence_per_line(run)
    c = load_ordered(_store(tmp_path), str(run))
    assert list(c.sentences) == [
        "It was a truth universally acknowledged.",
        "Mr. Bennet was silent.",
        "She smiled.",
        "Then left",
    ]
    per_line = tmp_path / "bookcorpus.txt"
    per_line.write_text("the first sentence .\nthe second one .\n")
    assert is_sentence_per_line(per_line)
    c2 = load_ordered(_store(tmp_path), str(per_line))
    assert c2.sentences.path == per_line  # streamed from the user's file itself, not a copy
    assert list(c2.sentences) == ["the first sentence .", "the second one ."]


def test_corpus_identity_and_kind_for_the_record(tmp_path):
    d = tmp_path / "books"
    d.mkdir()
    (d / "b.txt").write_text("Second book.\n")
    (d / "a.txt").write_text("First book.\n")

    class Ordered:
        name, corpus = "m", "ordered"

    c = corpora.training_corpus(Ordered, None, _store(tmp_path), str(d))
    info = c.describe()
    assert info["kind"] == "ordered" and info["ordered"] and info["name"] == f"file:{d.resolve()}"
    assert info["files"] == ["a.txt", "b.txt"] and list(c.sentences) == ["First book.", "Second book."]
    sha = info["sha256"]
    (d / "b.txt").write_text("Changed.\n")
    c3 = corpora.training_corpus(Ordered, None, _store(tmp_path), str(d))
    assert c3.describe()["sha256"] != sha and list(c3.sentences)[1] == "Changed."


def test_default_is_jane_austen_from_the_data_dir(tmp_path):
    # a stand-in data dir (splitting the real novels costs ~15 s of CPU; the QT runs in leaderboards/qt/ use them)
    ja = tmp_path / "data" / "corpora" / "janeausten"
    ja.mkdir(parents=True)
    (ja / "emma.txt").write_text("EMMA\n\nEmma Woodhouse, handsome, clever,\nand rich. She was the youngest.\n")
    c = load_ordered(_store(tmp_path, tmp_path / "data"), None)
    assert c.name == "janeausten" and c.info["files"] == ["emma.txt"]
    assert list(c.sentences) == ["EMMA", "Emma Woodhouse, handsome, clever, and rich.", "She was the youngest."]


def test_missing_default_corpus_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.delenv("BENCHBENCH_DATA", raising=False)  # no data dir at all
    with pytest.raises(Exception, match="--corpus"):
        load_ordered(_store(tmp_path), None)
