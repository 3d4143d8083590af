"""PromptBERT (plugins/promptbert.py): the mechanisms that define it, each with a test that fails when
it breaks: the [MASK] position per sentence after truncation (the template's end survives), template
denoising with the shifted position ids and each view's own template, two different templates, the
temperature, the saved encoder reloading WITH its prompt; then the conformance kit. Loss and encoding
equality with the official code's own functions: bench/fidelity_promptbert.py."""

from __future__ import annotations

import copy
import json

import benchbench_plugins.promptbert as pb
import pytest
import torch
import torch.nn.functional as F

from benchbench import ConfigError, TrainContext, build_config, load_encoder
from benchbench.testing import check_method

MODEL = "tiny-bert:32:2:2:64"
CORPUS = [f"sentence {i} says that the cat number {i} sits near the door ." for i in range(12)]
LONG = " ".join(["long"] * 600)
LITERAL = "this one writes a literal [MASK] token inside the sentence ."


def _built(tmp_path, monkeypatch, **overrides) -> pb.PromptBERTObjective:
    """The objective ``PromptBERT.train`` builds (the path a run takes), caught at ``fit``."""
    caught = {}

    def catch(method, objective, *a, **k):
        caught["obj"] = objective
        return objective

    monkeypatch.setattr(pb, "fit", catch)
    cfg = build_config(pb.PromptBERT, {"steps": 2, "batch_size": 4, **overrides})
    ctx = TrainContext(model=MODEL, seed=1, output_dir=tmp_path, progress=False, device="cpu")
    pb.PromptBERT(cfg).train(CORPUS, ctx)
    obj = caught["obj"]
    obj.eval()  # no dropout: every comparison below is exact
    return obj


@pytest.fixture
def obj(tmp_path, monkeypatch) -> pb.PromptBERTObjective:
    return _built(tmp_path, monkeypatch)


def test_protocol_constants_are_the_papers():
    """run.sh unsup-bert (the paper's unsupervised BERT setting): batch 256, lr 1e-5, one epoch, max
    length 32, temperature 0.05, the two BERT templates, denoising in training only, MLP in training
    only; get_delta's 50 template-alone rows."""
    c = pb.PromptBERTConfig()
    assert (c.batch_size, c.lr, c.epochs, c.max_seq_length, c.temperature) == (256, 1e-5, 1.0, 32, 0.05)
    assert c.template == 'This sentence of "[X]" means [MASK].'
    assert c.template2 == 'This sentence : "[X]" means [MASK].'
    assert (c.denoise, c.denoise_eval, c.mlp) == (True, False, True)
    assert pb.DELTA_ROWS == 50


def test_templates_tokenize_as_the_reference(obj):
    tok = obj.encoder.tokenizer
    t1, t2 = obj.templates
    words = lambda ids: tok.convert_ids_to_tokens(list(ids))  # noqa: E731
    assert words(t1.wrap([])) == ["[CLS]", "this", "sentence", "of", '"', '"', "means", "[MASK]", ".", "[SEP]"]
    assert words(t2.wrap([])) == ["[CLS]", "this", "sentence", ":", '"', '"', "means", "[MASK]", ".", "[SEP]"]


def test_the_two_templates_differ(obj, tmp_path, monkeypatch):
    t1, t2 = obj.templates
    assert t1.text != t2.text and t1.prefix != t2.prefix
    batch = obj.collate(["a cat sits .", "a dog runs ."], None)
    ids = batch["input_ids"]
    # rows interleave as the official batch: sentence i under template 1 at 2i, template 2 at 2i+1
    for i in range(2):
        assert ids[2 * i, 1 : 1 + len(t1.prefix)].tolist() == list(t1.prefix)
        assert ids[2 * i + 1, 1 : 1 + len(t2.prefix)].tolist() == list(t2.prefix)
    with pytest.raises(ConfigError, match="must differ"):
        _built(tmp_path, monkeypatch, template2=pb.PromptBERTConfig.template)


def _rows_end_with_template(ids, mask, t: pb.Template, mask_id: int) -> None:
    end = int(mask.sum())
    assert ids[end - len(t.suffix) - 1 : end].tolist() == [*t.suffix, t.sep]
    assert mask_id in t.suffix


def test_mask_position_per_sentence_after_truncation_in_encoding(obj):
    """The encoder cuts the SENTENCE so that the prompt fits its max length: a 600-word sentence keeps
    the template's end and its [MASK]; the [MASK] read is the template's, even when the sentence holds
    a literal "[MASK]"; the vector is the hidden state there."""
    enc = obj.encoder
    texts = ["a", "a short sentence .", LONG, LITERAL]
    b = enc.tokenize(texts)
    t, mask_id = enc.template, enc.tokenizer.mask_token_id
    assert b["input_ids"].shape[1] <= enc.max_seq_length
    for i in range(len(texts)):
        ids, pos = b["input_ids"][i], int(b["mask_pos"][i])
        assert ids[pos] == mask_id
        _rows_end_with_template(ids, b["attention_mask"][i], t, mask_id)
        assert pos == int(b["attention_mask"][i].sum()) - 1 - len(t.suffix) + t.suffix.index(mask_id)
    assert int(b["attention_mask"][2].sum()) == enc.max_seq_length  # the long one: cut to fit, not dropped
    lit = b["input_ids"][3].tolist()
    assert lit.count(mask_id) == 2 and lit.index(mask_id) < int(b["mask_pos"][3])  # the template's [MASK] is read
    with torch.no_grad():
        hidden = enc.model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).last_hidden_state
    want = hidden[torch.arange(len(texts)), b["mask_pos"]]
    assert torch.allclose(torch.from_numpy(enc.encode(texts)), want, atol=1e-6)


def test_mask_position_after_truncation_in_training(obj):
    """Training cuts the sentence to 32 tokens (the reference's ``[:max_seq_length]``) and adds the
    templates around it."""
    b = obj.collate([LONG, "short ."], None)
    assert b["n_sentence"].tolist() == [32, 2]
    mask_id = obj.encoder.tokenizer.mask_token_id
    for row, t in zip(range(4), [*obj.templates, *obj.templates], strict=True):
        ids, pos = b["input_ids"][row], int(b["mask_pos"][row])
        assert ids[pos] == mask_id
        _rows_end_with_template(ids, b["attention_mask"][row], t, mask_id)
    assert int(b["attention_mask"][0].sum()) == 32 + obj.templates[0].overhead


def _forward_at_positions(model, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """A BERT forward at chosen positions built WITHOUT ``position_ids``: a copy whose position table is
    zero gets the wanted position vectors through ``inputs_embeds``, so the embedding sum (word + position
    + type) is the same and attention is the plain full mask, whatever transformers does with jumps in
    ``position_ids`` (5.x reads one as a packed-sequence boundary when no mask is given)."""
    ref = copy.deepcopy(model)
    table = model.embeddings.position_embeddings.weight
    with torch.no_grad():
        ref.embeddings.position_embeddings.weight.zero_()
        embeds = model.embeddings.word_embeddings(ids) + table[pos]
        return ref(inputs_embeds=embeds, attention_mask=torch.ones_like(ids)).last_hidden_state


def test_template_bias_keeps_the_sentence_positions(obj):
    """The template alone, its suffix shifted by the sentence length n (the official get_delta): equal to
    a hand-built forward at those positions (one that never passes ``position_ids``), and different from
    the unshifted template."""
    model, t = obj.encoder.model, obj.templates[1]
    n = torch.tensor([0, 3, 7, 3])
    with torch.no_grad():
        got = t.bias(model, n)
        for i, k in enumerate(n.tolist()):
            ids = torch.tensor([t.wrap([])])
            pos = torch.arange(ids.shape[1])
            pos[1 + len(t.prefix) :] += k
            h = _forward_at_positions(model, ids, pos[None])[0, t.mask_index(0)]
            assert torch.allclose(got[i], h, atol=1e-5)
        unshifted = model(input_ids=torch.tensor([t.wrap([])])).last_hidden_state[0, t.mask_index(0)]
    assert torch.allclose(got[0], unshifted, atol=1e-5)
    assert not torch.allclose(got[1], unshifted, atol=1e-3)  # the shift matters


def test_denoising_subtracts_each_views_own_template_bias(obj):
    sents = ["a cat sits near the door .", "two dogs run .", LONG]
    b = obj.collate(sents, None)
    b.pop("n_tokens")
    model, (t1, t2), n = obj.encoder.model, obj.templates, b["n_sentence"]
    with torch.no_grad():
        h1, h2 = obj.views(**b)
        tokens = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).last_hidden_state
        raw = tokens[torch.arange(len(tokens)), b["mask_pos"]].view(len(sents), 2, -1)
        d1, d2 = t1.bias(model, n), t2.bias(model, n)
    assert torch.allclose(h1, raw[:, 0] - d1, atol=1e-5)
    assert torch.allclose(h2, raw[:, 1] - d2, atol=1e-5)
    assert not torch.allclose(d1, d2, atol=1e-3)  # a view denoised with the other template's bias would show
    obj.denoise = False
    with torch.no_grad():
        p1, _ = obj.views(**b)
    assert torch.allclose(p1, raw[:, 0], atol=1e-5)


def test_loss_is_infonce_at_temperature_0_05_after_the_mlp(obj):
    b = obj.collate(["a cat sits .", "two dogs run .", "the sun is hot .", "rain falls ."], None)
    b.pop("n_tokens")
    with torch.no_grad():
        loss = obj(**b)
        h1, h2 = obj.views(**b)
        z1, z2 = obj.mlp(h1), obj.mlp(h2)
        sim = F.cosine_similarity(z1[:, None], z2[None], dim=-1)
    assert obj.temperature == 0.05
    assert torch.allclose(loss, F.cross_entropy(sim / 0.05, torch.arange(4)), atol=1e-5)
    assert not torch.allclose(loss, F.cross_entropy(sim / 0.1, torch.arange(4)), atol=1e-3)
    assert isinstance(obj.mlp[0], torch.nn.Linear) and isinstance(obj.mlp[1], torch.nn.Tanh)


def test_encoding_adds_the_evaluation_period_only():
    """evaluation.py appends "." to a sentence not ending in . ? " '; training does not (train.py)."""
    cases = {
        "a cat": "a cat.",
        "a cat.": "a cat.",
        "why?": "why?",
        'he said "hi"': 'he said "hi"',
        "'x'": "'x'",
        " ": "",
    }
    assert {s: pb.add_period(s) for s in cases} == cases


def test_run_saves_an_encoder_that_reloads_with_its_prompt(env, tmp_path):
    """``benchbench run`` (tiny BERT): the saved folder names the registered loader and loads back as
    the prompt encoder, whose vectors are the [MASK] hidden states of template 1 (no MLP, no delta)."""
    from benchbench.cli.main import main

    out = tmp_path / "results"
    args = f"run --method promptbert --model {MODEL} --tasks sts-mini --steps 2 --batch-size 4".split()
    rc = main([*args, "--output", str(out)])
    assert rc == 0
    (folder,) = [p.parent for p in out.rglob("encoder/.complete")]
    assert json.loads((folder / "benchbench_wrapper.json").read_text()) == {"loader": "promptbert-prompt"}
    enc = load_encoder(str(folder))
    assert isinstance(enc, pb.PromptEncoder)
    assert enc.template.text == pb.PromptBERTConfig.template and enc.denoise is False
    enc.eval()
    texts = ["a man plays a guitar", "dogs run ."]
    b = enc.tokenize(texts)
    with torch.no_grad():
        h = enc.model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).last_hidden_state
    assert torch.allclose(torch.from_numpy(enc.encode(texts)), h[torch.arange(2), b["mask_pos"]], atol=1e-6)
    words = enc.tokenizer.convert_ids_to_tokens(b["input_ids"][0, : int(b["attention_mask"][0].sum())].tolist())
    assert words[5:12] == ["a", "man", "plays", "a", "guitar", ".", '"']  # the evaluation period


def test_conformance_kit():
    report = check_method(pb.PromptBERT, overrides={"steps": 4, "batch_size": 4, "checkpoint_every": 2})
    assert "resume equality" in report["passed"] and "save/load round trip" in report["passed"]
