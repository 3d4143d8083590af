"""The offline NLI data: BSL's general corpus (unlabelled, de-duplicated) and the entailment pairs."""

from __future__ import annotations

import pytest

from benchbench.core.errors import ConfigError
from benchbench.store.data import DataStore
from benchbench.train import corpora
from benchbench.train.nli import CORPUS_NAME, entailment_pairs, load_general_corpus, nli_triples


def test_general_corpus_is_the_unlabelled_nli_sentences(real_data):
    data = DataStore(real_data)
    c = load_general_corpus(data)
    assert c.kind == "general" and c.name == CORPUS_NAME and len(c.sha256) == 64
    assert len(c.sentences) == len(set(c.sentences)) == 35740  # SNLI dev/test + XNLI-en dev/test, de-duplicated
    assert not {"entailment", "neutral", "contradiction"} & set(c.sentences)
    rows = nli_triples(data)
    assert len(rows) == 9842 + 9824 + 2490 + 5010
    both = {s for a, b, _, _ in rows for s in (a, b)}
    assert set(c.sentences) == both - {""}
    assert c.describe()["sentences"] == 35740


def test_entailment_pairs_use_labels_only_to_select(real_data):
    data = DataStore(real_data)
    pairs = entailment_pairs(data)
    labels: dict = {}
    for a, b, lab, _ in nli_triples(data):
        labels.setdefault((a, b), set()).add(lab)
    assert pairs and all("entailment" in labels[p] for p in pairs)
    assert len(pairs) == len(set(pairs)) == sum("entailment" in v for v in labels.values())
    assert ("And he said, Mama, I'm home.", "He told his mom he had gotten home.") in pairs
    assert ("And he said, Mama, I'm home.", "He didn't say a word.") not in pairs


def test_general_loader_registered_and_file_corpus(tmp_path):
    f = tmp_path / "c.txt"
    f.write_text("first line\n\n  second line  \n")

    class M:
        name, corpus = "m", "general"

    c = corpora.training_corpus(M, None, DataStore(tmp_path), str(f))
    assert c.sentences == ["first line", "second line"] and c.name.startswith("file:")
    empty = tmp_path / "e.txt"
    empty.write_text("\n")
    with pytest.raises(Exception, match="no non-empty lines"):
        corpora.training_corpus(M, None, DataStore(tmp_path), str(empty))
    with pytest.raises(ConfigError):
        corpora.training_corpus(M, None, DataStore(tmp_path), str(tmp_path / "missing.txt"))
