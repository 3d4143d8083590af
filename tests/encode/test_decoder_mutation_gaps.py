"""Decoder starts (benchbench/encode/decoder.py): behaviours a mutation run found unpinned. Names recognised
without loading anything, the layer range at both ends, a causal model turned bidirectional by the encoder,
plain and older saved folders, the default max length, the exact cut of a long text, the tokenizer choice
of a folder, errors that name the model, and a saved tiny decoder's tied LM head."""

from __future__ import annotations

import json

import pytest
import torch
from test_decoder import TEXTS, _fake_gguf, _states

from benchbench import ConfigError
from benchbench.encode import decoder as dec
from benchbench.encode.decoder import DecoderEncoder, load_decoder, tiny_decoder


def test_packaged_and_gguf_names_are_decoders_without_a_look_at_the_cache(monkeypatch):
    """The packaged name (any case) and any ``.gguf`` path are decoders by name alone: no file, no cache."""

    def no_cache(name):
        raise AssertionError(f"the hub cache was consulted for {name!r}")

    monkeypatch.setattr(dec, "_cached_snapshot", no_cache)
    for name in ("smollm2-135m-instruct", "SmolLM2-135M-Instruct", "x/y.gguf", "models/Tiny.Q4_1.GGUF"):
        assert dec.is_decoder_name(name), name


def test_a_folder_is_a_decoder_by_its_causal_lm_architecture_alone(tmp_path):
    """``architectures`` all ``*ForCausalLM`` is enough, whatever the model type (falcon is not in the list)."""
    d = tmp_path / "falcon"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["FalconForCausalLM"], "model_type": "falcon"}))
    assert dec.is_decoder_name(str(d))


def test_a_hub_id_is_read_from_its_cached_snapshot(tmp_path, monkeypatch):
    """``org/name`` in the Hugging Face cache: its snapshot's config.json decides."""
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    for repo, cfg in (
        ("models--org--causal", {"architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox"}),
        ("models--org--encoder", {"architectures": ["BertModel"], "model_type": "bert"}),
    ):
        snap = cache / repo / "snapshots" / ("a" * 40)
        snap.mkdir(parents=True)
        (cache / repo / "refs").mkdir()
        (cache / repo / "refs" / "main").write_text("a" * 40)
        (snap / "config.json").write_text(json.dumps(cfg))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    assert dec.is_decoder_name("org/causal")
    assert not dec.is_decoder_name("org/encoder")
    assert not dec.is_decoder_name("org/not-cached")


def test_the_layer_range_at_both_ends():
    """``layer`` indexes the n hidden states from -n to n - 1: -n is state 0 (the embeddings), n and -n-1
    are refused."""
    first = tiny_decoder("qwen2", layer=-3)  # 2 layers: 3 hidden states
    assert abs(first.encode(TEXTS) - tiny_decoder("qwen2", layer=0).encode(TEXTS)).max() == 0
    for layer in (3, -4):
        with pytest.raises(ConfigError, match=rf"layer {layer} is outside the model's 3 hidden states"):
            tiny_decoder("qwen2", layer=layer)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_a_bidirectional_encoder_over_a_causal_model_makes_it_bidirectional(arch):
    model, tok = load_decoder(f"tiny-{arch}")  # loaded causal
    enc = DecoderEncoder(model, tok, attention="bidirectional")
    assert enc.attention == "bidirectional" and dec.is_bidirectional(model)
    a, b = torch.tensor([[5, 6, 7, 8, 9]]), torch.tensor([[5, 6, 7, 8, 10]])
    assert float((_states(model, a)[0, 0] - _states(model, b)[0, 0]).abs().max()) > 1e-4


DEFAULTS = {"pooling": "mean", "template": None, "layer": -1, "attention": "causal", "padding_side": "right"}


def test_a_plain_hugging_face_folder_loads_with_the_default_readout(tmp_path):
    """A folder of weights and tokenizer without benchbench_decoder.json: the defaults, and the same vectors."""
    model, tok = load_decoder("tiny-llama")
    model.save_pretrained(tmp_path / "plain")
    tok.save_pretrained(tmp_path / "plain")
    enc = DecoderEncoder.load(str(tmp_path / "plain"))
    assert enc.readout() == {"kind": "decoder", **DEFAULTS, "max_seq_length": 512, "normalize": False}
    assert abs(enc.encode(TEXTS) - tiny_decoder("llama").encode(TEXTS)).max() == 0


def test_a_saved_readout_without_normalize_loads_unnormalised(tmp_path):
    """A benchbench_decoder.json without ``normalize`` (an older save) reads False; a saved True is kept."""
    tiny_decoder("llama", normalize=True).save(tmp_path / "saved")
    assert DecoderEncoder.load(str(tmp_path / "saved")).normalize is True
    f = tmp_path / "saved" / dec.DECODER_FILE
    saved = json.loads(f.read_text())
    del saved["normalize"]
    f.write_text(json.dumps(saved))
    assert DecoderEncoder.load(str(tmp_path / "saved")).normalize is False


def test_the_default_max_length_is_512_however_the_encoder_is_built():
    """``tiny_decoder`` / the constructor and ``DecoderEncoder.load`` (``--model tiny-llama``) cut at 512
    tokens and build the same encoder: the same readout and fingerprint."""
    built, loaded = tiny_decoder("llama"), DecoderEncoder.load("tiny-llama")
    assert built.max_seq_length == loaded.max_seq_length == 512
    assert built.readout() == loaded.readout() and built.fingerprint == loaded.fingerprint


def test_a_long_text_is_cut_to_exactly_the_words_that_fit():
    """The cut is counted on the text's own tokens (no special token): the prepared text keeps the longest
    run of words that fits, and the row holds one beginning-of-sequence token."""
    enc = tiny_decoder("llama", pooling="last", template="read : {text} means in one word", max_seq_length=16)
    room = 16 - len(enc.tokenizer(enc.prepare(""))["input_ids"])
    assert enc._fit([" ".join(["word"] * 40)]) == [enc.prepare(" ".join(["word"] * room))]
    ids = enc.tokenize([" ".join(["word"] * 40)])["input_ids"][0].tolist()
    assert len(ids) == 16 and ids.count(enc.tokenizer.bos_token_id) == 1


def test_a_folder_names_the_generic_tokenizer_backend_to_be_read_through_it(tmp_path):
    """``_tokenizer``: only a folder naming the generic backend AND holding tokenizer.json is read by
    ``PreTrainedTokenizerFast``; any other class, or no tokenizer.json, is left to AutoTokenizer (None)."""
    _, tok = load_decoder("tiny-qwen2")
    tok.save_pretrained(tmp_path)
    cfg_file = tmp_path / "tokenizer_config.json"
    cfg = json.loads(cfg_file.read_text())
    for cls in ("TokenizersBackend", "PreTrainedTokenizerFast"):
        cfg_file.write_text(json.dumps({**cfg, "tokenizer_class": cls}))
        got = dec._tokenizer(str(tmp_path))
        assert got is not None and got("a dog runs")["input_ids"] == tok("a dog runs")["input_ids"], cls
    cfg_file.write_text(json.dumps({**cfg, "tokenizer_class": "Qwen2Tokenizer"}))
    assert dec._tokenizer(str(tmp_path)) is None
    cfg_file.write_text(json.dumps({**cfg, "tokenizer_class": "TokenizersBackend"}))
    (tmp_path / "tokenizer.json").unlink()
    assert dec._tokenizer(str(tmp_path)) is None


def test_a_gguf_error_names_the_model_asked_for(monkeypatch, tmp_cache, tmp_path):
    """The packaged name in the error when its file is not the pinned one; the file itself when no name is given."""
    f = _fake_gguf(tmp_path)
    monkeypatch.setattr(dec, "packaged_gguf_file", lambda key: f)
    with pytest.raises(ConfigError, match=r"^Model 'smollm2-135m-instruct': "):
        dec.resolve_decoder("smollm2-135m-instruct")
    with pytest.raises(ConfigError) as e:
        dec.gguf_folder(f, pinned="00" * 32)
    assert str(e.value).startswith(f"Model {str(f)!r}: ")


def test_a_saved_tiny_decoder_loads_with_its_lm_head_tied_to_the_embeddings(tmp_path):
    """Tiny decoders tie their word embeddings (as small Llama / Qwen2 models do): a saved one loaded with an
    LM head (LLM2Vec's MNTP) gets the embeddings as its head, not a random one."""
    model, tok = load_decoder("tiny-qwen2")
    assert model.config.tie_word_embeddings is True
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    lm, _ = load_decoder(str(tmp_path), lm_head=True)
    assert torch.equal(lm.lm_head.weight, model.embed_tokens.weight)


def test_a_text_glued_to_its_template_keeps_the_longest_cut_that_fits():
    """A template with no space at the seam ('a{text}b') merges tokens across it, so the first guess of
    how much text fits can be too small: the cut then steps up while one more token still fits."""
    enc = tiny_decoder("llama", template="a{text}b", max_seq_length=3)
    (got,) = enc._fit(["on the cat"])
    assert got == "aonb"
    assert len(enc.tokenizer(got)["input_ids"]) <= 3
    longer = enc.prepare("on the")
    assert len(enc.tokenizer(longer)["input_ids"]) > 3  # one more word would not fit


def test_a_template_longer_than_the_limit_drops_the_whole_text():
    """When even the template alone is over ``max_seq_length``, no word of the text fits: the cut keeps none
    (never one token, never all but the last)."""
    enc = tiny_decoder("llama", template="a b c d e f {text} g", max_seq_length=4)
    assert len(enc.tokenizer(enc.prepare(""))["input_ids"]) > 4
    assert enc._fit(["on the cat sat"]) == [enc.prepare("")]
