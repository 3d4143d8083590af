"""Every setting that changes a vector changes the embedding-cache key.

The cache files vectors under ``cache_key(encoder)`` (the encoder's fingerprint, plus its
``encode_variant``); a setting missing from it hands one encoder's cached vectors to another. Losing
``max_seq_length`` from the fingerprint passed the whole suite. Here each setting is changed at a
value where the vectors differ (checked without a cache), and then the key must differ AND vectors
read through a cache the base encoder filled must be the changed encoder's own. The enumeration is
held to ``TransformerEncoder``'s constructor: a new parameter fails the test until it is classified.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

from benchbench.encode.cache import EmbeddingCache, cache_key
from benchbench.encode.encoding import embed
from benchbench.encode.models import TransformerEncoder, tiny_bert

TEXTS = [
    "A long sentence about cats and dogs " * 6,  # 40+ tokens: cut at 8 and at 32 differently
    "Short Text With Capitals",
    "another one about the weather in Paris",
]


def _base(**kw) -> TransformerEncoder:
    return tiny_bert(16, 1, 2, 32, **{"pooling": "mean", "max_seq_length": 32, "seed": 0, **kw})


def _nudged() -> TransformerEncoder:
    enc = _base()
    with torch.no_grad():
        enc.model.encoder.layer[0].output.dense.weight.mul_(2.0)  # in place: the fingerprint must notice
    return enc


def _cased() -> TransformerEncoder:
    from transformers import BertTokenizerFast

    from benchbench.encode.models import BUNDLED_VOCAB

    enc = _base()
    enc.tokenizer = BertTokenizerFast(vocab=str(BUNDLED_VOCAB), do_lower_case=False)
    return enc


def _backend(backend: str, dtype: str):
    from benchbench.encode import backends

    if backends.runtime_available(backend):
        pytest.skip(f"{backend} runtime not installed")
    return backends.evaluation_encoder(_base(), backend, dtype, "cpu")[0]


def _prompt(template: str = 'This sentence of "[X]" means [MASK].', denoise: bool = False):
    from benchbench_plugins.promptbert import PromptEncoder

    return PromptEncoder(_base(), template, denoise)


def _mlp(seed: int = 0):
    from benchbench_plugins.simcse import MLPEncoder

    torch.manual_seed(seed)
    return MLPEncoder(_base(), torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Tanh()))


# setting -> (the encoder it is compared with, the encoder with the setting changed)
SETTINGS = {
    "max_seq_length": (_base, lambda: _base(max_seq_length=8)),
    "pooling cls": (_base, lambda: _base(pooling="cls")),
    "pooling max": (_base, lambda: _base(pooling="max")),
    "weights (another init)": (_base, lambda: _base(seed=1)),
    "weights (edited in place)": (_base, _nudged),
    "tokenizer (lowercasing)": (_base, _cased),
    "dtype (torch bf16)": (_base, lambda: _backend("torch", "bf16")),
    "backend (onnx)": (_base, lambda: _backend("onnx", "fp32")),
    "template (PromptBERT)": (_prompt, lambda: _prompt('This sentence : "[X]" means [MASK].')),
    "template denoising (PromptBERT)": (_prompt, lambda: _prompt(denoise=True)),
    "prompt vs plain pooling": (_base, _prompt),
    "head (SimCSE MLP)": (_base, _mlp),
    "head weights (SimCSE MLP)": (_mlp, lambda: _mlp(seed=1)),
}
# TransformerEncoder's constructor parameters: each changes vectors (and is in SETTINGS) or does not
CHANGES_VECTORS = {"model": "weights", "tokenizer": "tokenizer", "pooling": "pooling", "max_seq_length": "max_seq"}
NO_VECTOR_CHANGE = {
    "normalize": "applied by embed() after the cache (test_normalisation_is_applied_after_the_cache)",
    "name": "a label",
    "batch_size": "speed only",
}


def test_the_enumeration_covers_every_constructor_parameter():
    params = set(inspect.signature(TransformerEncoder.__init__).parameters) - {"self"}
    assert params == set(CHANGES_VECTORS) | set(NO_VECTOR_CHANGE), "classify the new parameter here"
    for covered in CHANGES_VECTORS.values():
        assert any(s.startswith(covered) for s in SETTINGS), covered


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_a_setting_that_changes_vectors_changes_the_cache_key(setting, tmp_path):
    make_base, make_changed = SETTINGS[setting]
    base, changed = make_base(), make_changed()
    plain = embed(changed, TEXTS, cache=None, progress=False)
    # bit for bit: a cache must never hand out vectors another runtime or dtype would not have made
    assert not np.array_equal(embed(base, TEXTS, cache=None, progress=False), plain), (
        f"{setting}: the fixture does not change the vectors"
    )
    assert cache_key(changed) != cache_key(base)
    cache = EmbeddingCache(tmp_path / "cache")
    embed(base, TEXTS, cache=cache, progress=False)  # the base encoder fills the cache first
    np.testing.assert_allclose(embed(changed, TEXTS, cache=cache, progress=False), plain, rtol=0, atol=0)


def test_normalisation_is_applied_after_the_cache(tmp_path):
    """``normalize`` is not in the key (the cached vectors are the raw ones), so it must be applied
    on the way out: a normalising encoder reading a cache a plain one filled gets unit vectors."""
    plain, unit = _base(), _base(normalize=True)
    assert cache_key(plain) == cache_key(unit)
    cache = EmbeddingCache(tmp_path / "cache")
    raw = embed(plain, TEXTS, cache=cache, progress=False)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0)
    got = embed(unit, TEXTS, cache=cache, progress=False)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(got, raw / np.linalg.norm(raw, axis=1, keepdims=True), rtol=1e-6)


def test_the_default_key_is_the_fingerprint():
    """Torch fp32 adds nothing to the key: every cache folder written before backends existed is
    still found."""
    enc = _base()
    assert cache_key(enc) == enc.fingerprint


def test_an_encoder_changed_after_a_cached_embed_gets_a_new_key(tmp_path):
    """What a training loop does: the same encoder object is embedded (its fingerprint memoised), then
    its weights are edited in place, or its transformer is replaced; the next embed must not read the
    old vectors."""
    enc, cache = _base(), EmbeddingCache(tmp_path / "cache")
    keys = [cache_key(enc)]
    embed(enc, TEXTS, cache=cache, progress=False)
    enc.model = _base(seed=1).model  # another module object, its tensors at the same version counts
    keys.append(cache_key(enc))
    np.testing.assert_array_equal(embed(enc, TEXTS, cache=cache, progress=False), embed(enc, TEXTS, progress=False))
    with torch.no_grad():
        enc.model.encoder.layer[0].output.dense.weight.mul_(2.0)
    keys.append(cache_key(enc))
    np.testing.assert_array_equal(embed(enc, TEXTS, cache=cache, progress=False), embed(enc, TEXTS, progress=False))
    assert len(set(keys)) == 3
