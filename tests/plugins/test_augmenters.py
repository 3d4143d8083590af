"""BSL's augmenters: Apertium round trip, synonym ratio, MLM substitution, NLI views, the view cache."""

from __future__ import annotations

import multiprocessing as mp

import numpy as np
import pytest
from benchbench_plugins import augmenters as A

from benchbench import ConfigError, ViewCache

SENTS = [
    "A man is playing a guitar on stage.",
    "Two women are embracing while holding packages.",
    "The children are running in the park.",
]


def _bt_missing(pivot: str) -> str | None:
    return A.BackTranslate.available("eng", pivot)


@pytest.mark.parametrize("pivot", ["spa", "cat"])
def test_apertium_round_trip(tmp_path, pivot):
    why = _bt_missing(pivot)
    if why:
        pytest.skip(f"Apertium eng<->{pivot} not installed ({why}); .ci/run installs it")
    bt = A.BackTranslate(
        A.BackTranslateConfig(pivots=(pivot,), batch_lines=3 if pivot == "spa" else 100),
        cache=ViewCache(tmp_path / "v.sqlite"),
    )
    # numbered sentences (in two batches for spa): each output line must come from its own input (the line separator held)
    texts = SENTS + [f"The house number {n} is red." for n in (17, 42, 93)]
    out = bt.apply(texts, 0)
    assert len(out) == len(texts)
    assert out[0] != texts[0] and "guitar" in out[0]  # a real round trip, not a copy
    for n, o in zip((17, 42, 93), out[3:]):
        assert str(n) in o and "red" in o.lower()
    assert bt.cache.misses == len(texts)


def test_a_chunk_whose_line_breaks_do_not_survive_is_halved_until_they_do(tmp_path, monkeypatch):
    """A sentence Apertium splits in two lines breaks the chunk's line count: the chunk is bisected, the
    sentence ends up alone (its whole output is its view) and every other sentence keeps its own line, in
    a logarithmic number of calls (one call per sentence took ~20 minutes for 2,000)."""
    calls = []

    def fake_run(self, mode, text):
        calls.append(mode)
        lines = text.rstrip("\n").split("\n")
        out = [ln.upper() if mode.startswith("eng") else ln + "!" for ln in lines]
        if mode.startswith("eng"):  # the sentence Apertium splits in two lines, on the way out
            out = [ln.replace("SPLIT", "SPLIT\n") for ln in out]
        return "\n".join(out) + "\n"

    monkeypatch.setattr(A.BackTranslate, "_run", fake_run)
    monkeypatch.setattr(A.BackTranslate, "available", staticmethod(lambda *a: None))
    texts = [f"s{i}" for i in range(64)]
    texts[37] = "a SPLIT here"
    bt = A.BackTranslate(A.BackTranslateConfig(batch_lines=64), cache=ViewCache(tmp_path / "v.sqlite"))
    out = bt.apply(texts, 0)
    assert out[:37] == [f"S{i}!" for i in range(37)] and out[38:] == [f"S{i}!" for i in range(38, 64)]
    assert out[37] == "A SPLIT!\n HERE!"  # alone: its whole output, stripped, as the one-by-one rule gave
    assert len(calls) <= 2 * (1 + 2 * 7)  # the full chunk, then two halves per level down to one sentence


def test_backtranslate_names_the_package_when_apertium_is_absent(monkeypatch, tmp_path):
    monkeypatch.setattr(A.shutil, "which", lambda name: None)
    bt = A.BackTranslate(cache=ViewCache(tmp_path / "v.sqlite"))
    with pytest.raises(ConfigError, match="apt-get install apertium apertium-eng-spa"):
        bt.apply(["hello"], 0)


class FakeWordNet:
    def synonyms(self, word):
        return [] if word.lower() in ("the", "a", "is") else [word.lower() + "x"]


def test_synonym_ratio_and_determinism(tmp_path):
    syn = A.Synonym(A.SynonymConfig(ratio=0.3), cache=ViewCache(tmp_path / "v.sqlite"), wordnet=FakeWordNet())
    text = "one two three four five six seven eight nine ten"
    out = syn.apply([text], 0)[0]
    changed = [a != b for a, b in zip(text.split(), out.split())]
    assert len(out.split()) == 10 and sum(changed) == 3  # round(0.3 * 10)
    assert syn.transform([text], 0) == [out] and syn.transform([text], 1) != [out]  # variant = another seed
    # words without a synonym are never replaced, and the count is capped by those that have one
    out2 = syn.transform(["the cat is a dog the"], 0)[0].split()
    assert out2[0] == "the" and out2[2] == "is" and out2[3] == "a"
    assert sum(w.endswith("x") for w in out2) == 2  # round(0.3 * 6) = 2


def test_synonym_with_debian_wordnet():
    try:
        wn = A.WordNet()
    except ConfigError as e:
        pytest.skip(f"WordNet 3.0 (Debian wordnet-base) not installed: {e}")
    assert "domestic_dog" not in wn.synonyms("dog") and "canis" not in wn.synonyms("dog")
    assert "car" in wn.synonyms("automobile") and "automobile" in wn.synonyms("car")


def test_cache_second_call_transforms_nothing_and_persists(tmp_path):
    calls = []

    class Upper(A.CachedAugmenter):
        name = "upper"
        cfg = A.SynonymConfig()

        def transform(self, texts, variant):
            calls.append(list(texts))
            return [t.upper() + str(variant) for t in texts]

    path = tmp_path / "v.sqlite"
    aug = Upper(cache=ViewCache(path))
    assert aug.views(SENTS, None, two_view=False) == (SENTS, [s.upper() + "0" for s in SENTS])
    assert aug.views(SENTS + SENTS[:1], None, two_view=True)[1] == [s.upper() + "1" for s in SENTS + SENTS[:1]]
    n = len(calls)
    assert aug.views(SENTS, None, two_view=True)[0] == [s.upper() + "0" for s in SENTS]
    assert len(calls) == n  # second call: nothing transformed
    fresh = Upper(cache=ViewCache(path))  # another process/run reads the same file
    fresh.apply(SENTS, 1)
    assert len(calls) == n and fresh.cache.misses == 0 and fresh.cache.hits == 3
    # the config is part of the key: another ratio means another view
    other = Upper(cache=ViewCache(path))
    other.cfg = A.SynonymConfig(ratio=0.5)
    other.apply(SENTS[:1], 0)
    assert len(calls) == n + 1


def test_cache_keeps_finished_chunks_when_a_run_is_interrupted(tmp_path):
    texts = [f"sentence {i}" for i in range(7)]
    calls: list[list[str]] = []

    def flaky(todo):
        calls.append(list(todo))
        if len(calls) == 3:
            raise KeyboardInterrupt  # the run is stopped in its third chunk
        return [t.upper() for t in todo]

    cache = ViewCache(tmp_path / "v.sqlite")
    with pytest.raises(KeyboardInterrupt):
        cache.map("up", {}, texts, flaky, chunk=3)
    assert calls == [texts[:3], texts[3:6], texts[6:]]
    again = ViewCache(tmp_path / "v.sqlite")  # the next run: only the unfinished chunk is transformed
    calls.clear()
    assert again.map("up", {}, texts, lambda todo: calls.append(list(todo)) or [t.upper() for t in todo]) == [
        t.upper() for t in texts
    ]
    assert calls == [texts[6:]] and again.hits == 6 and again.misses == 1


def _writer(path, k):
    c = ViewCache(path)
    for i in range(20):
        c.put("w", {}, {f"t{i}": f"v{i}"})


def test_cache_concurrent_writers(tmp_path):
    path = tmp_path / "v.sqlite"
    ViewCache(path)
    ps = [mp.get_context("spawn").Process(target=_writer, args=(path, k)) for k in range(3)]
    for p in ps:
        p.start()
    for p in ps:
        p.join(60)
    assert all(p.exitcode == 0 for p in ps)
    assert ViewCache(path).count("w") == 20


def test_mlm_substitutes_with_the_models_head(tmp_path):
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    from benchbench.encode.models import BUNDLED_VOCAB

    tok = BertTokenizerFast(vocab=str(BUNDLED_VOCAB), do_lower_case=True)
    torch.manual_seed(0)
    model = BertForMaskedLM(
        BertConfig(
            vocab_size=tok.vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
        )
    )
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    mlm = A.MLMSubstitute(A.MLMConfig(model=str(tmp_path / "m"), ratio=0.3), cache=ViewCache(tmp_path / "v.sqlite"))
    text = "one two three four five six seven eight nine ten"
    out = mlm.apply([text], 0)[0].split()
    assert len(out) == 10 and sum(a != b for a, b in zip(text.split(), out)) == 3
    assert mlm.apply([text], 0)[0].split() == out and mlm.cache.misses == 1


def test_mlm_refuses_a_model_without_mlm_head(tmp_path):
    mlm = A.MLMSubstitute(A.MLMConfig(model="tiny-bert"), cache=ViewCache(tmp_path / "v.sqlite"))
    with pytest.raises(ConfigError, match="no usable MLM head"):
        mlm.apply(["a sentence"], 0)


def test_nli_entail_views_and_coverage():
    aug = A.NLIEntail(pairs=[("p1", "h1"), ("p1", "h2"), ("p2", "h3")])
    assert aug.covers(["p1", "x", "p2"]) == ["p1", "p2"]
    x1, x2 = aug.views(["p1", "p2"], np.random.default_rng(0))
    assert x1 == ["p1", "p2"] and x2[0] in ("h1", "h2") and x2[1] == "h3"
    seen = {aug(["p1"], np.random.default_rng(s))[0] for s in range(20)}
    assert seen == {"h1", "h2"}  # a hypothesis is drawn per use
    assert A.NLIEntail.uses_labels
