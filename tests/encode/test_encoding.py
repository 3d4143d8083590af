"""The encoding pipeline: de-duplication, order, batching, the on-disk cache."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import CosineFixtureEncoder

from benchbench.encode.cache import EmbeddingCache
from benchbench.encode.encoding import embed


def test_dedup_order_and_batches(tmp_path):
    enc = CosineFixtureEncoder()
    texts = ["a0", "b3", "a0", "b0", "b3", "a1"]
    out = embed(enc, texts)
    assert enc.n_encoded == 4  # each distinct text once
    assert all(len(c) <= enc.batch_size for c in enc.calls)
    np.testing.assert_allclose(out[0], out[2])
    np.testing.assert_allclose(out[1], [0.9, (1 - 0.81) ** 0.5], rtol=1e-6)
    np.testing.assert_allclose(out[3], [0.1, (1 - 0.01) ** 0.5], rtol=1e-6)


def test_length_sorted_batches():
    class Rec(CosineFixtureEncoder):
        fingerprint = "rec"
        batch_size = 3

    enc = Rec()
    embed(enc, ["x" * n for n in (5, 1, 9, 3, 7, 2)])
    assert [len(t) for t in enc.calls[0]] == [9, 7, 5] and [len(t) for t in enc.calls[1]] == [3, 2, 1]


def test_unsorted_encoder_keeps_input_order_and_owns_nothing_shared():
    """length_sorted=False (a lookup table): batches in input order; one fresh batch is returned as
    is, and a view into the encoder's own storage is copied, never normalised in place."""

    class Table:
        fingerprint = "table"
        length_sorted = False
        normalize = True

        def __init__(self, batch_size):
            self.batch_size, self.calls = batch_size, []
            self.store = np.array([[3.0, 4.0], [0.0, 2.0], [1.0, 0.0]], dtype=np.float32)

        def encode(self, texts):
            self.calls.append(list(texts))
            rows = [int(t[1:]) for t in texts]
            return (
                self.store[rows[0] : rows[-1] + 1] if rows == list(range(rows[0], rows[-1] + 1)) else self.store[rows]
            )

    texts = ["t2", "t0", "t1", "t0", "t2"]
    enc = Table(batch_size=2)
    out = embed(enc, texts)
    assert enc.calls == [["t2", "t0"], ["t1"]]  # distinct texts, first-seen order
    np.testing.assert_allclose(out, [[1, 0], [0.6, 0.8], [0, 1], [0.6, 0.8], [1, 0]], rtol=1e-6)
    enc = Table(batch_size=10)
    out = embed(enc, ["t0", "t1", "t2"])  # one batch, and the encoder hands back a view of its storage
    np.testing.assert_allclose(out, [[0.6, 0.8], [0, 1], [1, 0]], rtol=1e-6)
    np.testing.assert_array_equal(enc.store, [[3, 4], [0, 2], [1, 0]])  # untouched by the normalisation


def test_embed_rejects_non_strings_and_accepts_str_subclasses():
    enc = CosineFixtureEncoder()
    with pytest.raises(TypeError, match="item 1 is int"):
        embed(enc, ["a0", 3])
    np.testing.assert_allclose(embed(enc, [np.str_("a0")]), embed(enc, ["a0"]))


def test_second_run_encodes_nothing(tmp_path):
    cache = EmbeddingCache(tmp_path)
    enc = CosineFixtureEncoder()
    first = embed(enc, ["a0", "b1", "b2"], cache=cache)
    n = enc.n_encoded
    again = embed(enc, ["b2", "a0", "b1"], cache=EmbeddingCache(tmp_path))  # a fresh process reads the shards
    assert enc.n_encoded == n
    np.testing.assert_array_equal(again, first[[2, 0, 1]])
    embed(enc, ["a0", "b4"], cache=cache)
    assert enc.calls[-1] == ["b4"]  # only the new text


def test_fingerprint_separates_encoders(tmp_path):
    cache = EmbeddingCache(tmp_path)
    a, b = CosineFixtureEncoder(), CosineFixtureEncoder()
    b.fingerprint = "other"
    embed(a, ["a0"], cache=cache)
    embed(b, ["a0"], cache=cache)
    assert b.n_encoded == 1


def test_corrupt_shard_is_ignored_not_trusted(tmp_path):
    enc = CosineFixtureEncoder()
    embed(enc, ["a0", "b1"], cache=EmbeddingCache(tmp_path))
    (vecs,) = list(tmp_path.rglob("*.vecs.npy"))
    vecs.write_bytes(b"garbage")
    out = embed(enc, ["a0", "b1"], cache=EmbeddingCache(tmp_path))
    assert enc.n_encoded == 4  # re-encoded rather than read from the broken shard
    np.testing.assert_allclose(out[1], [0.2, (1 - 0.04) ** 0.5], rtol=1e-6)
    assert not list(tmp_path.rglob("*.tmp"))


def test_bad_encoder_output_is_reported():
    class Bad(CosineFixtureEncoder):
        def encode(self, texts):
            return np.zeros((len(texts) + 1, 2), dtype=np.float32)

    with pytest.raises(ValueError, match=r"Bad.encode returned shape \(3, 2\) for 2 texts"):
        embed(Bad(), ["a0", "a1"])


def test_normalize_after_cache(tmp_path):
    enc = CosineFixtureEncoder()
    out = embed(enc, ["zzz"], normalize=True)
    assert np.linalg.norm(out[0]) == pytest.approx(1.0)


def test_transformer_fingerprint_tracks_weights(tiny_encoder):
    enc = tiny_encoder.clone()
    fp = enc.fingerprint
    assert enc.fingerprint == fp
    import torch

    with torch.no_grad():
        enc.model.embeddings.word_embeddings.weight[5, 0] += 1.0
    assert enc.fingerprint != fp


def test_a_write_the_version_counters_miss_changes_the_fingerprint_at_once(tiny_encoder):
    """On a GPU the optimizer's fused update writes the weights without bumping their version counters
    (as ``.data`` writes do here). The fingerprint once memoised on those counters and relied on the
    loop's hand-back move to forget it; an H100 run stored TSDAE's, MLM's, PromptBERT's and DenoSent's
    step-0 scores as their trained ones. It is now computed from the bytes: no move is needed
    (every write path: tests/encode/test_fingerprint_writes.py)."""
    enc = tiny_encoder.clone()
    fp = enc.fingerprint
    enc.model.embeddings.word_embeddings.weight.data[5, 0] += 1.0  # an update the counters do not see
    assert enc.fingerprint != fp


def test_keys_ending_in_nul_bytes_hit_the_cache(tmp_path):
    """Regression: numpy 'S16' drops trailing NUL bytes, so 1 text in 256 never hit the cache."""
    from benchbench.encode.cache import text_key

    texts = [f"a{i}" for i in range(2000)]
    nul = [t for t in texts if text_key(t).endswith(b"\0")]
    assert nul  # the fixture really contains such keys
    enc = CosineFixtureEncoder()
    enc.encode = lambda batch, _e=enc: (
        np.ones((len(batch), 2), dtype=np.float32) if _e.calls.append(list(batch)) is None else None
    )
    embed(enc, texts, cache=EmbeddingCache(tmp_path))
    n = enc.n_encoded
    embed(enc, texts, cache=EmbeddingCache(tmp_path))  # fresh index read from disk
    embed(enc, nul, cache=EmbeddingCache(tmp_path))
    assert enc.n_encoded == n


def test_long_encodings_are_saved_as_they_go(tmp_path, monkeypatch):
    """An encoding killed half-way keeps the vectors it finished (flushed in shards)."""
    import benchbench.encode.encoding as encoding

    monkeypatch.setattr(encoding, "FLUSH_EVERY", 4)
    enc = CosineFixtureEncoder()  # batch size 2
    texts = [f"a{i}" for i in range(10)]
    orig = enc.encode

    def dies_late(batch):
        if len(enc.calls) == 4:
            raise KeyboardInterrupt
        return orig(batch)

    enc.encode = dies_late
    with pytest.raises(KeyboardInterrupt):
        embed(enc, texts, cache=EmbeddingCache(tmp_path))
    assert EmbeddingCache(tmp_path).count(enc.fingerprint) == 8  # 4 batches of 2 finished: flushed at 4 and 8 texts
