"""The LLM readouts (plugins/echo.py, token_prepending.py): behaviours a mutation run found unpinned. Echo's
smallest piece length and its 0/1 attention mask; token prepending reading a negative layer other than the
last, and its placeholder vector kept out of the state dict."""

from __future__ import annotations

import benchbench_plugins.echo as echo
import benchbench_plugins.token_prepending as tp
import pytest
import torch
from test_llm_readouts import _tp

from benchbench import ConfigError, tiny_decoder


def test_echo_piece_max_length_1_is_the_smallest_accepted():
    base = tiny_decoder("llama")
    enc = echo.EchoEncoder(base.model, base.tokenizer, piece_max_length=1)
    feats = enc.tokenize(["red cat sits"])
    pooled = feats["input_ids"][0][feats["embed_mask"][0].bool()].tolist()
    assert pooled == [base.tokenizer.convert_tokens_to_ids("red"), base.tokenizer.eos_token_id]
    with pytest.raises(ConfigError, match=r"'piece_max_length' must be >= 1 \(got 0\)"):
        echo.EchoEncoder(base.model, base.tokenizer, piece_max_length=0)


def test_echo_attention_mask_is_1_on_each_real_token_and_0_on_padding():
    """Right padding, as the reference's parser: a Hugging Face 0/1 mask, which the encoder's output returns."""
    base = tiny_decoder("qwen2")
    enc = echo.EchoEncoder(base.model, base.tokenizer)
    texts = ["a man plays a guitar on the stage", "dog"]
    feats = enc.tokenize(texts)
    n = enc.lengths(texts)
    assert n[0] > n[1]
    want = (torch.arange(feats["input_ids"].shape[1])[None, :] < torch.tensor(n)[:, None]).long()
    assert torch.equal(feats["attention_mask"], want)
    with torch.no_grad():
        assert torch.equal(enc(**feats)["attention_mask"], want)


def test_token_prepending_reads_a_negative_layer_other_than_the_last():
    """``layer=-2`` is the hidden state before the last (index n - 2), not the final norm's output."""
    base = tiny_decoder("llama", layers=3)  # 4 hidden states
    texts = ["a small red cat sits", "dog"]

    def at(layer):
        return tp.TokenPrependingEncoder(
            base.model, base.tokenizer, pooling="last", template=tp.TEMPLATE, padding_side="left", layer=layer
        ).encode(texts)

    assert abs(at(-2) - at(2)).max() == 0
    assert abs(at(-2) - at(-1)).max() > 1e-4


def test_the_placeholder_vector_is_not_in_the_state_dict():
    """``pst_vector`` is drawn from ``pst_seed``, not a weight: the readout's state dict is its decoder's, so
    a decoder checkpoint loads into it (strictly) and the placeholder vector stays the seeded one."""
    base = tiny_decoder("llama")
    enc = _tp(base)
    assert "pst_vector" not in enc.state_dict()
    assert enc.state_dict().keys() == base.state_dict().keys()
    drawn = enc.pst_vector.clone()
    enc.load_state_dict(base.state_dict())
    assert torch.equal(enc.pst_vector, drawn)
