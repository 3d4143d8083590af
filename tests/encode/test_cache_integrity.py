"""The embedding cache never hands out a wrong vector.

A third of a shard overwritten with finite random values used to be read back as is: a wrong score was
stored, with no warning, even under ``--force``. Now every shard carries a checksum (verified on read,
vectors on first use); a damaged shard -- truncated, bytes flipped, or a file of another text set with the
same shape -- is named in a warning, deleted and its texts encoded again. Shards written before checksums
are still read, spot-checked by re-encoding a few texts. ``refresh=True`` (what ``run --force`` passes)
re-encodes everything. A full disk leaves no partial shard and says what to free. All through
``Embedder.embed``, the path a run takes, with a deterministic stand-in encoder."""

from __future__ import annotations

import errno
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from benchbench.encode import cache as embedding_cache
from benchbench.encode.cache import EmbeddingCache, text_key
from benchbench.encode.encoding import Embedder

FP = "integrity-fixture-v1"
DIM = 8
TEXTS = [f"sentence number {i}" for i in range(300)]
OTHER = [f"another text set {i}" for i in range(300)]  # a second text set: shards of the same shape


def _vec(text: str) -> np.ndarray:
    """The one true vector of ``text`` (a deterministic stand-in for a model)."""
    rs = np.random.RandomState(int.from_bytes(text_key(text)[:4], "little"))
    return rs.standard_normal(DIM).astype(np.float32)


def _truth(texts: list[str]) -> np.ndarray:
    return np.stack([_vec(t) for t in texts])


class HashEncoder:
    fingerprint = FP
    batch_size = 64

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.encoded += texts
        return _truth(texts)


def _embed(root: Path, texts: list[str], **cache_kw) -> tuple[np.ndarray, HashEncoder]:
    enc = HashEncoder()
    out = Embedder(enc, EmbeddingCache(root, **cache_kw), progress=False).embed(texts)
    return out, enc


def _one(root: Path, suffix: str) -> Path:
    (path,) = (root / FP).glob("*" + suffix)
    return path


def _warnings(caplog) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


def _assert_clean_reread(root: Path, texts: list[str], caplog) -> None:
    """After the repair: a fresh process reads every vector, warns about nothing, encodes nothing."""
    caplog.clear()
    out, enc = _embed(root, texts)
    np.testing.assert_array_equal(out, _truth(texts))
    assert enc.encoded == [] and _warnings(caplog) == ""


def test_a_third_of_a_shard_overwritten_is_caught_and_recomputed(tmp_path, caplog):
    """The issue's drill: finite random values over a third of *.vecs.npy were read back as vectors."""
    _embed(tmp_path, TEXTS)
    vf = _one(tmp_path, ".vecs.npy")
    v = np.load(vf, mmap_mode="r+")
    v[: len(v) // 3] = np.random.default_rng(0).standard_normal((len(v) // 3, DIM)).astype(np.float32)
    v.flush()
    del v
    with caplog.at_level(logging.WARNING):
        out, enc = _embed(tmp_path, TEXTS)
    np.testing.assert_array_equal(out, _truth(TEXTS))  # never a wrong vector
    assert sorted(enc.encoded) == sorted(TEXTS)  # the shard was dropped as a whole and recomputed
    warned = _warnings(caplog)
    assert str(vf) in warned and "checksum" in warned and "encoded again" in warned
    assert not vf.exists()  # deleted: the next run neither trusts it nor warns again
    _assert_clean_reread(tmp_path, TEXTS, caplog)


def _truncate(path: Path, other: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip(path: Path, other: Path) -> None:
    data = bytearray(path.read_bytes())
    for i in (20, len(data) // 2, len(data) - 1):  # in the header, the middle and the last byte
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def _swap(path: Path, other: Path) -> None:
    """Valid-looking wrong data: the same file of a shard of another text set, with the same shape."""
    shutil.copyfile(other, path)


def _delete(path: Path, other: Path) -> None:
    path.unlink()


DAMAGE = [
    (suffix, damage) for suffix in (".vecs.npy", ".keys.npy", ".sum.json") for damage in (_truncate, _flip, _swap)
] + [(".sum.json", _delete)]


@pytest.mark.parametrize(("suffix", "damage"), DAMAGE, ids=[f"{s[1:]}-{d.__name__[1:]}" for s, d in DAMAGE])
def test_damage_drill_detected_named_and_recomputed(tmp_path, caplog, suffix, damage):
    root, elsewhere = tmp_path / "cache", tmp_path / "other-cache"
    _embed(root, TEXTS)
    _embed(elsewhere, OTHER)  # the donor of valid-looking wrong files
    target = _one(root, suffix)
    assert _one(elsewhere, suffix).stat().st_size == target.stat().st_size or suffix == ".sum.json"
    damage(target, _one(elsewhere, suffix))
    both = TEXTS + OTHER  # swapped keys would serve TEXTS' vectors for OTHER's texts
    with caplog.at_level(logging.WARNING):
        out, enc = _embed(root, both)
    np.testing.assert_array_equal(out, _truth(both))
    assert sorted(enc.encoded) == sorted(both)
    warned = _warnings(caplog)
    assert target.name in warned, warned  # the warning names the damaged file
    assert "encoded again" in warned
    assert not list((root / FP).glob(target.name.split(".")[0] + ".*"))  # the damaged shard is gone
    _assert_clean_reread(root, both, caplog)


def test_vectors_are_hashed_once_a_process_and_only_for_shards_in_use(tmp_path, monkeypatch):
    """The cost of the checksum: a shard's vectors are read in full once per cache object, when first used."""
    cache = EmbeddingCache(tmp_path)
    enc = HashEncoder()
    Embedder(enc, cache, progress=False).embed(TEXTS)
    Embedder(enc, cache, progress=False).embed(OTHER)  # two shards
    hashed: list[str] = []
    real = embedding_cache._crc32_file
    monkeypatch.setattr(embedding_cache, "_crc32_file", lambda p: hashed.append(Path(p).name) or real(p))
    emb = Embedder(HashEncoder(), EmbeddingCache(tmp_path), progress=False)
    for _ in range(3):
        np.testing.assert_array_equal(emb.embed(TEXTS[:50]), _truth(TEXTS[:50]))
    assert len(hashed) == 1  # one shard, once
    assert emb.encoder.encoded == []


# ---- shards written before checksums --------------------------------------------------------------------
def _old_shard(root: Path, texts: list[str], vecs: np.ndarray, name: str = "4242-0123456789ab") -> Path:
    """A shard as the cache wrote it before checksums: keys + vectors, no .sum.json, name <pid>-<hex>."""
    d = root / FP
    d.mkdir(parents=True, exist_ok=True)
    np.save(d / f"{name}.vecs.npy", vecs.astype(np.float32))
    np.save(d / f"{name}.keys.npy", np.array([text_key(t) for t in texts], dtype="S16"))
    return d / f"{name}.vecs.npy"


def test_old_shards_stay_readable_after_a_spot_check(tmp_path, caplog):
    vf = _old_shard(tmp_path, TEXTS, _truth(TEXTS))
    before = {p.name: p.read_bytes() for p in (tmp_path / FP).iterdir()}
    with caplog.at_level(logging.WARNING):
        out, enc = _embed(tmp_path, TEXTS)
        again = Embedder(enc, EmbeddingCache(tmp_path), progress=False)
        again.embed(TEXTS[:10])
        again.embed(TEXTS[10:])  # one spot check per shard per process
    np.testing.assert_array_equal(out, _truth(TEXTS))
    # a spot check in each process (of the texts asked for: 10 in the second), nothing else
    assert len(enc.encoded) == embedding_cache.SPOT_CHECK + 10
    assert _warnings(caplog) == ""
    assert {p.name: p.read_bytes() for p in (tmp_path / FP).iterdir()} == before  # not invalidated, not rewritten
    assert vf.exists()
    # the plain API still reads them (trusted as before: it has no encoder to check with)
    found, vecs = EmbeddingCache(tmp_path).get(FP, [text_key(t) for t in TEXTS])
    assert found.all() and np.array_equal(vecs, _truth(TEXTS))


@pytest.mark.parametrize("damage", ["third", "other-set"])
def test_damaged_old_shard_is_caught_by_the_spot_check(tmp_path, caplog, damage):
    vecs = _truth(TEXTS)
    if damage == "third":
        vecs[: len(vecs) // 3] = np.random.default_rng(1).standard_normal((len(vecs) // 3, DIM))
    else:
        vecs = _truth(OTHER)  # a valid-looking shard of another text set under these keys
    vf = _old_shard(tmp_path, TEXTS, vecs)
    with caplog.at_level(logging.WARNING):
        out, _ = _embed(tmp_path, TEXTS)
    np.testing.assert_array_equal(out, _truth(TEXTS))
    warned = _warnings(caplog)
    assert str(vf) in warned and "re-encoding" in warned
    assert not vf.exists()
    _assert_clean_reread(tmp_path, TEXTS, caplog)


# ---- --force: refresh -----------------------------------------------------------------------------------
def test_refresh_reencodes_and_supersedes_what_was_cached(tmp_path, caplog):
    """What ``run --force`` passes: shards on disk are ignored (even well-formed ones holding vectors a
    buggy encoder wrote under the same fingerprint), all is encoded once, and the new vectors win later."""
    EmbeddingCache(tmp_path).put(FP, [text_key(t) for t in TEXTS], -_truth(TEXTS))  # wrong, checksum valid
    cache = EmbeddingCache(tmp_path, refresh=True)
    enc = HashEncoder()
    emb = Embedder(enc, cache, progress=False)
    np.testing.assert_array_equal(emb.embed(TEXTS), _truth(TEXTS))
    assert sorted(enc.encoded) == sorted(TEXTS)
    np.testing.assert_array_equal(emb.embed(TEXTS[:5]), _truth(TEXTS[:5]))  # within the run: what it wrote
    assert len(enc.encoded) == len(TEXTS)
    _assert_clean_reread(tmp_path, TEXTS, caplog)  # a later run reads the refreshed vectors


# ---- a full disk ----------------------------------------------------------------------------------------
def _no_files_under(root: Path) -> bool:
    return not [p for p in root.rglob("*") if p.is_file()]


def test_short_write_on_a_full_disk_is_named_and_leaves_nothing(tmp_path, monkeypatch, caplog):
    """numpy reports a full disk mid-shard as '979968 requested and 523232 written' (no errno): that
    message was all the user got. Now: the folder, the free space, what to delete, and no partial shard."""
    real_save = np.save

    def short_save(f, arr, *a, **kw):
        f.write(b"\x93NUMPY" + b"\0" * 100)  # half a shard on disk, then numpy's short-write error
        raise OSError("979968 requested and 523232 written")

    monkeypatch.setattr(embedding_cache.np, "save", short_save)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**9, 10**9 - 4096, 4096))
    with caplog.at_level(logging.WARNING):
        out, _ = _embed(tmp_path, TEXTS)
    monkeypatch.setattr(embedding_cache.np, "save", real_save)
    np.testing.assert_array_equal(out, _truth(TEXTS))  # the score is still computed
    warned = _warnings(caplog)
    assert "no space left" in warned and str(tmp_path / FP) in warned, warned
    assert "not written" in warned and "--no-cache" in warned and "Free space" in warned
    assert _no_files_under(tmp_path)


@pytest.mark.parametrize("fails_at", [1, 2, 3], ids=["vectors", "keys", "checksums"])
def test_full_disk_at_any_file_of_a_shard_leaves_no_partial_shard(tmp_path, monkeypatch, caplog, fails_at):
    """ENOSPC while flushing the vectors, keys or checksum file (delayed allocation reports it at fsync):
    every file of the shard goes, the warning says the cache was not written and what to free."""
    cache_root = tmp_path / "my-cache"
    _embed(cache_root, OTHER)  # an earlier shard: it must survive
    kept = sorted(p.name for p in (cache_root / FP).iterdir())
    calls = []
    real_fsync = embedding_cache.os.fsync

    def fsync(fd):
        calls.append(fd)
        if len(calls) == fails_at:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(embedding_cache.os, "fsync", fsync)
    with caplog.at_level(logging.WARNING):
        out, _ = _embed(cache_root, TEXTS)
    monkeypatch.setattr(embedding_cache.os, "fsync", real_fsync)
    np.testing.assert_array_equal(out, _truth(TEXTS))
    assert sorted(p.name for p in (cache_root / FP).iterdir()) == kept  # no partial shard, no temp file
    warned = _warnings(caplog)
    assert "no space left" in warned and "not written" in warned, warned
    assert f"the cache {cache_root} holds" in warned  # what to free: this cache, its size
    _assert_clean_reread(cache_root, OTHER, caplog)
