"""The embedding cache under concurrent writers: several processes writing (and reading) the same
encoder fingerprint with overlapping texts at once lose nothing, tear nothing and leave no temp
file: each shard has a unique name (pid + random) and lands by atomic rename, keys file last."""

from __future__ import annotations

import logging
import multiprocessing as mp

import numpy as np

from benchbench.encode.cache import EmbeddingCache, text_key
from benchbench.encode.encoding import embed

FP = "shared-fingerprint-v1"
N_PROC = 4


def _vec(text: str) -> np.ndarray:
    """The vector every writer computes for ``text`` (so any shard's copy must equal it)."""
    rs = np.random.RandomState(int.from_bytes(text_key(text)[:4], "little"))
    return rs.standard_normal(8).astype(np.float32)


class _Enc:
    fingerprint = FP
    batch_size = 7

    def encode(self, texts):
        return np.stack([_vec(t) for t in texts])


def _writer(root: str, worker: int, barrier) -> None:
    cache = EmbeddingCache(root)
    barrier.wait()  # all start together
    for rnd in range(6):
        # overlapping texts: every worker writes texts 0..59 in another order, plus its own
        texts = [f"shared {i}" for i in range(rnd * 10, rnd * 10 + 60)][:: (1 if worker % 2 else -1)]
        texts += [f"own {worker} {rnd} {i}" for i in range(5)]
        cache.put(FP, [text_key(t) for t in texts], np.stack([_vec(t) for t in texts]))
        # and read through embed() with a fresh cache object while the others write
        out = embed(_Enc(), texts[:20], cache=EmbeddingCache(root))
        assert np.array_equal(out, np.stack([_vec(t) for t in texts[:20]]))


def test_concurrent_writers_same_fingerprint(tmp_path, caplog):
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(N_PROC)
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w, barrier)) for w in range(N_PROC)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * N_PROC
    with caplog.at_level(logging.WARNING):
        cache = EmbeddingCache(tmp_path)
        texts = [f"shared {i}" for i in range(110)] + [
            f"own {w} {r} {i}" for w in range(N_PROC) for r in range(6) for i in range(5)
        ]
        found, vecs = cache.get(FP, [text_key(t) for t in texts])
    assert found.all()  # nothing lost
    assert np.array_equal(vecs, np.stack([_vec(t) for t in texts]))  # nothing torn or mixed up
    assert not [r for r in caplog.records if "unreadable shard" in r.getMessage()]
    leftovers = [p.name for p in (tmp_path / FP).iterdir() if p.name.endswith(".tmp")]
    assert not leftovers
    shards = sorted(p.name for p in (tmp_path / FP).glob("*.keys.npy"))
    assert len(shards) == len(set(shards)) >= N_PROC * 6  # one unique shard per put, none overwritten
