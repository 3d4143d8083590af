"""A weights fingerprint no in-place write can bypass (issue 50).

``TransformerEncoder.fingerprint`` names the embedding-cache folder an encoder's vectors are filed
under. It was memoised on the sum of the tensors' version counters, and every write below leaves
those counters as they were: a trained encoder was then served its start's cached vectors (STS-B
36.90 stored for a plugin that trained with ``benchbench.adamw``; 5.9-8.9 with ``--no-cache``). The
fingerprint is now computed from the bytes at every call; each write path is drilled here, through
the fingerprint and through a cache the start filled, and the digests of unchanged weights are held
to the ones stored records and cache folders already carry.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch
from helpers import FIXTURES, local_plugin_workdir

import benchbench
from benchbench.encode.cache import EmbeddingCache
from benchbench.encode.encoding import embed
from benchbench.encode.models import hash_weights, tiny_bert

TEXTS = ["a man plays a guitar", "the cat sleeps on the mat", "stocks fell sharply today"]


def _enc(seed: int = 0):
    return tiny_bert(16, 1, 2, 32, pooling="mean", max_seq_length=32, seed=seed)


def _weight(enc) -> torch.nn.Parameter:
    return enc.model.encoder.layer[0].output.dense.weight


def _fused_adamw(enc) -> None:
    opt = benchbench.adamw(enc.parameters(), lr=0.05)
    assert opt.defaults.get("fused"), "benchbench.adamw is expected to use the fused kernel"
    enc.train()
    out = enc(**enc.tokenize(TEXTS))["sentence_embedding"]
    out.pow(2).sum().backward()
    opt.step()
    enc.eval()


def _data_copy(enc) -> None:
    w = _weight(enc)
    w.data.copy_(w.data * 2.0)


def _assign_load(enc) -> None:
    # another init's tensors, built by the same ops: their version counters sum to the same total
    enc.model.load_state_dict(_enc(seed=1).model.state_dict(), assign=True)


def _numpy_view(enc) -> None:
    arr = _weight(enc).detach().numpy()
    arr[:] = arr * 2.0


def _storage_copy(enc) -> None:
    w = _weight(enc)
    w.untyped_storage().copy_((w.detach() * 2.0).untyped_storage())


WRITES = {
    "fused AdamW (benchbench.adamw)": _fused_adamw,
    "p.data.copy_": _data_copy,
    "load_state_dict(assign=True)": _assign_load,
    "write through a numpy view": _numpy_view,
    "untyped_storage().copy_": _storage_copy,
}


@pytest.mark.parametrize("write", list(WRITES))
def test_an_in_place_write_changes_the_fingerprint(write):
    enc = _enc()
    before = enc.fingerprint
    versions = sum(p._version for p in enc.state_dict().values())
    WRITES[write](enc)
    assert sum(p._version for p in enc.state_dict().values()) == versions, "the drill bumped a counter"
    assert enc.fingerprint != before
    # content-keyed: a fresh encoder holding the same bytes has the same fingerprint
    same = _enc()
    same.model.load_state_dict(enc.model.state_dict())
    assert same.fingerprint == enc.fingerprint


@pytest.mark.parametrize("write", list(WRITES))
def test_a_cache_the_start_filled_does_not_serve_the_written_encoder(write, tmp_path):
    enc, cache = _enc(), EmbeddingCache(tmp_path / "cache")
    start = embed(enc, TEXTS, cache=cache, progress=False)  # the start's vectors, under its fingerprint
    WRITES[write](enc)
    fresh = embed(enc, TEXTS, cache=None, progress=False)
    assert not np.allclose(fresh, start)
    np.testing.assert_array_equal(embed(enc, TEXTS, cache=cache, progress=False), fresh)


def _reference_hash(state_dict) -> str:
    """The digest as every fingerprint so far computed it (``.numpy().tobytes()`` per tensor)."""
    h = hashlib.blake2b(digest_size=16)
    for key, t in sorted(state_dict.items()):
        h.update(key.encode())
        h.update(t.detach().to("cpu").contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def test_digests_of_unchanged_weights_are_the_stored_ones():
    """Stored records and cache folders name fingerprints: hashing through a memoryview must give the
    bytes ``.tobytes()`` gave, for every dtype and layout a state dict holds (bf16, non-contiguous,
    integer buffers). The pinned value was computed by the memoised implementation (before issue 50)."""
    sd = {
        "a": torch.arange(6, dtype=torch.float32).reshape(2, 3),
        "b": torch.arange(6, dtype=torch.bfloat16).reshape(2, 3).t(),  # non-contiguous
        "c": torch.arange(5, dtype=torch.int64),
    }
    got = hash_weights(hashlib.blake2b(digest_size=16), sd).hexdigest()
    assert got == _reference_hash(sd) == "b5925fe688a7ad90cbd26475a849010f"
    enc = _enc()
    for half in (False, True):
        model = enc.model.to(torch.bfloat16) if half else enc.model
        assert hash_weights(hashlib.blake2b(digest_size=16), model.state_dict()).hexdigest() == _reference_hash(
            model.state_dict()
        )


# ---- the drill through the public API: a plugin reads the fingerprint, then trains with adamw ----
PLUGIN = f"""
from dataclasses import dataclass
from pathlib import Path

import torch

import benchbench
from benchbench import Method, hookimpl


@dataclass
class Cfg:
    steps: int = 0


class ReadsThenTrains(Method):
    name = "reads-then-trains"
    Config = Cfg
    trains = True
    default_model = "tiny-bert:16:1:2:32"

    def train(self, corpus, ctx):
        enc = ctx.load_encoder(pooling="mean")
        enc.fingerprint  # e.g. logged, or named in a checkpoint: the old memo kept this value
        # trained in eval mode (no dropout): two runs train alike, so --no-cache can be compared
        opt = benchbench.adamw(enc.parameters(), lr=0.5)
        for _ in range(self.config.steps):
            out = enc(**enc.tokenize(list(corpus)[:8]))["sentence_embedding"]
            out[:, 0].sum().backward()
            opt.step()
            opt.zero_grad()
        return enc


@hookimpl
def benchbench_register_methods(register):
    register("reads-then-trains", ReadsThenTrains)


@hookimpl
def benchbench_register_tasks(register):
    register("mini", Path({str(FIXTURES / "sts_mini.toml")!r}))
"""


@pytest.fixture
def workdir(tmp_path, monkeypatch, tmp_cache):
    yield from local_plugin_workdir(tmp_path, monkeypatch, PLUGIN)


def test_a_plugin_that_reads_the_fingerprint_and_trains_with_adamw_gets_its_trained_score(workdir):
    """The start's vectors are in the cache (its step-0 run); the trained run must record its own
    fingerprint and the score ``--no-cache`` gives, not the start's."""
    from benchbench.cli.main import main
    from benchbench.store.results import ResultStore

    def record(out: str, *extra: str) -> dict:
        args = ["run", "--method", "reads-then-trains", "--tasks", "sts-mini", "--output", out, *extra]
        assert main(args) == 0
        (rec,) = [r for r in ResultStore(workdir / out).records()]
        return rec

    start = record("start", "--steps", "0")
    trained = record("trained", "--steps", "3")
    uncached = record("uncached", "--steps", "3", "--no-cache")
    assert trained["encoder_fingerprint"] != start["encoder_fingerprint"]
    assert trained["encoder_fingerprint"] == uncached["encoder_fingerprint"]
    assert trained["splits"]["test"]["main_score"] == uncached["splits"]["test"]["main_score"]


def test_a_qt_encoder_built_before_its_towers_train_fingerprints_the_trained_towers():
    """``QTEncoder`` memoised its fingerprint with nothing to forget it; its towers are the method's own
    modules, which a method may train after building the wrapper (or a caller may load weights into)."""
    from benchbench_plugins import qt

    tower = qt.RNNTower(qt.TowerSpec(kind="gru", hidden=6, emb_dim=4), qt.Vocab([f"w{i}" for i in range(30)]))
    enc = qt.QTEncoder([(tower, None)])
    before = enc.fingerprint
    with torch.no_grad():
        next(tower.parameters()).mul_(2.0)
    assert enc.fingerprint != before
