"""The on-disk embedding cache: vectors keyed by the encoder's fingerprint (``cache_key``) and a hash
of each text (``text_key``), in append-only shards, so a second evaluation of the same encoder
encodes nothing. The cache never lies: every shard carries a checksum, and a damaged one is
recomputed, never read; a shard written before checksums is spot-checked against a re-encoding.
A full disk costs the cache, never the scores. ``encoding.py`` (the ``Embedder``) reads and fills it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import logging
import mmap
import os
import shutil
import time
import uuid
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import BinaryIO, Literal

import numpy as np

from benchbench.store.files import atomic_write_json, atomic_writer, safe_mkdirs

log = logging.getLogger(__name__)


def disk_error_message(e: OSError, path: str | Path, what: str) -> str:
    """A write failure in words a user can act on: the path, and for a full disk, what to free."""
    if e.errno == errno.ENOSPC:
        return (
            f"no space left on the device holding {path} while writing {what}. Free space there (e.g. delete "
            f"old embedding caches under {default_cache_dir()}, or stale run folders), or point the output/"
            f"cache elsewhere (--output, BENCHBENCH_CACHE)."
        )
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{path} is not writable ({e.strerror}) while writing {what}; choose a writable folder."
    return f"writing {what} to {path} failed: {e}"


def cache_key(encoder: object) -> str | None:
    """The embedding-cache folder of ``encoder``: its fingerprint, plus its ``encode_variant`` when it
    has one (an evaluation backend or number format other than torch fp32: ``onnx``, ``torch-bf16``,
    ..., set by ``benchbench.encode.backends``), so vectors from different runtimes never share a folder."""
    fp = getattr(encoder, "fingerprint", None)
    variant = getattr(encoder, "encode_variant", None)
    return f"{fp}-{variant}" if fp and variant else fp


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


VECS, KEYS, SUMS = ".vecs.npy", ".keys.npy", ".sum.json"
CHECKSUMMED = "c1-"  # name prefix of shards written with a checksum file: for them a missing one is damage
SPOT_CHECK = 16  # texts of an old shard (no checksum) re-encoded to vouch for it, once a process
SPOT_TOLERANCE = 0.05  # relative L2 distance allowed between a re-encoded and a stored vector (GPU/AMP noise)


class _Damaged(Exception):
    """A shard file that is present but wrong: the shard is dropped and deleted, never used."""

    def __init__(self, path: Path, why: str):
        super().__init__(f"{path} {why}")
        self.path, self.why = path, why


def _crc32(data: object) -> str:
    return f"crc32:{zlib.crc32(data):08x}"  # type: ignore[arg-type]


def _crc32_file(path: Path) -> str:
    """CRC-32 of a whole file through a memory map (no copy). CRC-32 guards against damage (disk, copies,
    truncation, stray writes), not against an adversary; it is the cheapest such check in the standard
    library: on 61 MB of vectors (40k x 384), 12-55 ms, against 90 ms for sha256 and 170 ms for blake2b."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return _crc32(b"")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return _crc32(m)


class _CrcWriter:
    """A file that keeps the CRC-32 of what goes through it, so a shard's checksum costs no re-read.
    ``np.save`` writes to it with plain ``write`` calls, whose failures carry an errno (ENOSPC); its
    fast path for real files (``tofile``) reports a full disk as '979968 requested and 523232 written'."""

    def __init__(self, f: BinaryIO):
        self.f, self.crc = f, 0

    def write(self, data: bytes) -> int:
        n = self.f.write(data)
        self.crc = zlib.crc32(data, self.crc)
        return n

    @property
    def checksum(self) -> str:
        return f"crc32:{self.crc:08x}"


@dataclass
class _Shard:
    """One shard as read. ``state``: "verified" (checksum matched, or written by this process),
    "unchecked" (has a checksum; its vectors are hashed on first use), "old" (written before
    checksums: spot-checked on first use when the caller can re-encode), "spot-checked", "dropped"."""

    stem: Path  # <dir>/<name>: the files are stem + KEYS, VECS, SUMS
    keys: list[bytes]
    vecs: np.ndarray
    state: str
    vecs_sum: str | None = None

    def file(self, suffix: str) -> Path:
        return self.stem.with_name(self.stem.name + suffix)


def _new_shard_name() -> str:
    """Unique per writer (time + pid + random), and sorting after older shards: when two shards hold
    one text, the newer wins (a --force rewrite supersedes what it replaced; old names start with a digit)."""
    return f"{CHECKSUMMED}{time.time_ns():016x}-{os.getpid()}-{uuid.uuid4().hex[:12]}"


def _save_npy(f: BinaryIO, arr: np.ndarray) -> str:
    """Write ``arr`` as .npy into ``f``; its checksum."""
    w = _CrcWriter(f)
    np.save(w, arr)  # type: ignore[arg-type]
    return w.checksum


def _as_disk_full(e: OSError, folder: Path, needed: int) -> OSError:
    """A short write without an errno (numpy's '... requested and ... written') is a full disk when
    the folder's device has less free space than the shard needed: say so, so the message says what to do."""
    if e.errno is not None:
        return e
    with contextlib.suppress(OSError):
        if shutil.disk_usage(folder).free < needed:
            return OSError(errno.ENOSPC, f"No space left on device ({e})", str(folder))
    return e


def _load_npy(path: Path, src: object, mmap_mode: Literal["r"] | None = None) -> np.ndarray:
    """``np.load``; a file that is not a valid .npy is damage (an OSError is not: it may pass)."""
    try:
        return np.load(src, mmap_mode=mmap_mode)  # type: ignore[arg-type]
    except OSError:
        raise
    except Exception as e:
        raise _Damaged(path, f"is not a valid .npy file ({type(e).__name__}: {e})") from e


def _read_sums(stem: Path) -> dict | None:
    """The shard's checksum file, or None for a shard written before checksums existed."""
    path = stem.with_name(stem.name + SUMS)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if stem.name.startswith(CHECKSUMMED):
            raise _Damaged(path, f"is missing (shards named {CHECKSUMMED}* are written with one)") from None
        return None
    try:
        meta = json.loads(data)
        if not (isinstance(meta, dict) and meta.get("format") == 1):
            raise ValueError(f"format {meta.get('format') if isinstance(meta, dict) else meta!r}")
        for field in ("keys", "vecs"):
            if not str(meta[field]).startswith("crc32:"):
                raise ValueError(f"{field} checksum {meta[field]!r}")
        meta["shape"] = (int(meta["rows"]), int(meta["dim"]))
    except (ValueError, KeyError, TypeError) as e:
        raise _Damaged(path, f"is not a valid checksum file ({e})") from e
    return meta


def _read_shard(stem: Path) -> _Shard:
    """A shard whose keys match their checksum and whose files agree on shape; its vectors are only
    memory-mapped here (hashed on first use: a run that needs one task's texts hashes that task's shards)."""
    kf, vf = stem.with_name(stem.name + KEYS), stem.with_name(stem.name + VECS)
    meta = _read_sums(stem)
    data = kf.read_bytes()
    if meta is not None and _crc32(data) != meta["keys"]:
        raise _Damaged(kf, f"does not match the checksum recorded in {stem.name + SUMS} (one of the two is damaged)")
    keys = _load_npy(kf, io.BytesIO(data))
    vecs = _load_npy(vf, vf, mmap_mode="r")
    if keys.ndim != 1 or keys.dtype != np.dtype("S16"):
        raise _Damaged(kf, f"holds {keys.dtype} {keys.shape}, not 16-byte text keys")
    if vecs.ndim != 2 or vecs.dtype != np.float32 or len(vecs) != len(keys):
        raise _Damaged(vf, f"holds {vecs.dtype} {vecs.shape} for {len(keys)} keys")
    if meta is not None and vecs.shape != meta["shape"]:
        raise _Damaged(vf, f"has shape {vecs.shape}; its checksum file records {meta['shape']}")
    # raw 16-byte records: numpy's S16 strips trailing NUL bytes on the way out (1 key in 256)
    return _Shard(
        stem,
        keys.view("V16").tolist(),
        vecs,
        "old" if meta is None else "unchecked",
        None if meta is None else meta["vecs"],
    )


def _delete_shard(stem: Path) -> str:
    """Remove a damaged shard, keys file first (the shard vanishes for readers at once); says how it went."""
    try:
        for suffix in (KEYS, VECS, SUMS):
            with contextlib.suppress(FileNotFoundError):
                stem.with_name(stem.name + suffix).unlink()
    except OSError as e:
        return f"could not be deleted ({e.strerror}): delete {stem}.* by hand"
    return "is deleted"


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def _folder_size(root: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


class EmbeddingCache:
    """Append-only shards of (keys, vectors) per encoder fingerprint, each with a checksum.

    Layout: ``<root>/<fingerprint>/<shard>.vecs.npy`` + ``.sum.json`` (CRC-32 of both .npy files, and the
    shape) + ``.keys.npy``, written in that order, each to a temp file and renamed, so a shard whose keys file
    exists is complete; a killed writer leaves only ignorable temp files. On read, a keys file is checked
    against its checksum at once, a vectors file on first use (once a process); a shard that fails (damage:
    truncation, flipped bytes, another shard's file) is named in a warning, deleted and its texts encoded
    again -- never used. Shards written before checksums (no ``.sum.json``, name not ``c1-*``) are still read:
    ``get(..., recompute=...)`` spot-checks each by re-encoding up to ``SPOT_CHECK`` of its texts.
    ``refresh=True`` (``run --force``) ignores every shard already on disk: all is encoded again and written
    as new shards, which win over the old ones from then on.
    (No library offers an append-only, crash-safe npy key/value store with this little overhead; sqlite
    would cost a row insert per text.)"""

    def __init__(self, root: str | Path, refresh: bool = False):
        self.root = Path(root)
        self.refresh = refresh
        self._index: dict[str, dict[bytes, int]] = {}
        self._shards: dict[str, list[_Shard]] = {}
        self.writable = True  # set false by embed() after a failed write (full/read-only disk)

    def _dir(self, fingerprint: str) -> Path:
        if not fingerprint or any(c in fingerprint for c in "/\\") or fingerprint.startswith("."):
            raise ValueError(f"invalid encoder fingerprint {fingerprint!r}")
        return self.root / fingerprint

    def _load(self, fingerprint: str) -> dict[bytes, int]:
        if fingerprint in self._index:
            return self._index[fingerprint]
        d = self._dir(fingerprint)
        keys_files = sorted(d.glob("*" + KEYS)) if d.is_dir() else []  # sorted: newer shards last, they win
        if self.refresh and keys_files:
            log.info(
                "embedding cache: refresh: ignoring the %d shards in %s; every text is encoded again",
                len(keys_files),
                d,
            )
            keys_files = []
        shards = [s for s in map(self._open_shard, keys_files) if s is not None]
        old = sum(s.state == "old" for s in shards)
        if old:
            log.info(
                "embedding cache: %d shards in %s predate checksums; each is spot-checked by re-encoding up to %d of "
                "its texts (delete the folder to rebuild it with checksums)",
                old,
                d,
                SPOT_CHECK,
            )
        self._shards[fingerprint] = shards
        self._index[fingerprint] = self._build_index(shards)
        return self._index[fingerprint]

    @staticmethod
    def _build_index(shards: list[_Shard]) -> dict[bytes, int]:
        """key -> shard id << 32 | row: one int a key, so a lookup of 40k texts stays in C (np.fromiter)."""
        index: dict[bytes, int] = {}
        for sid, shard in enumerate(shards):
            if shard.state != "dropped":
                index.update(zip(shard.keys, range(sid << 32, (sid << 32) + len(shard.keys))))
        return index

    def _open_shard(self, keys_file: Path) -> _Shard | None:
        stem = keys_file.with_name(keys_file.name[: -len(KEYS)])
        try:
            return _read_shard(stem)
        except _Damaged as e:
            self._warn_dropped(stem, e.path, e.why)
        except OSError as e:
            log.warning("embedding cache: cannot read shard %s (%s); skipped this time", stem, e)
        return None

    @staticmethod
    def _warn_dropped(stem: Path, path: Path, why: str) -> None:
        deleted = _delete_shard(stem)
        log.warning(
            "embedding cache: %s %s; shard %s %s and its texts are encoded again, never read from it",
            path,
            why,
            stem.name,
            deleted,
        )

    def _drop(self, fingerprint: str, sid: int, path: Path, why: str) -> None:
        shard = self._shards[fingerprint][sid]
        shard.state = "dropped"
        self._warn_dropped(shard.stem, path, why)
        index = self._index[fingerprint]
        index.clear()  # the same dict: a caller holding it sees the shard gone
        index.update(self._build_index(self._shards[fingerprint]))

    def _verify(self, fingerprint: str, sid: int) -> bool:
        """Hash a checksummed shard's vectors file on its first use in this process."""
        shard = self._shards[fingerprint][sid]
        vf = shard.file(VECS)
        try:
            got = _crc32_file(vf)
        except OSError as e:
            got = f"unreadable ({e.strerror})"
        if got == shard.vecs_sum:
            shard.state = "verified"
            return True
        why = f"does not match the checksum recorded in {shard.stem.name + SUMS} ({got}, recorded {shard.vecs_sum})"
        self._drop(fingerprint, sid, vf, why)
        return False

    def _spot_check(
        self,
        fingerprint: str,
        sid: int,
        positions: np.ndarray,
        rows: np.ndarray,
        recompute: Callable[[list[int]], np.ndarray],
    ) -> bool:
        """Vouch for a shard without a checksum: re-encode up to SPOT_CHECK of the texts asked for, evenly
        spread over the shard's rows (a damaged stretch of 1/SPOT_CHECK of them or more is always caught)."""
        shard = self._shards[fingerprint][sid]
        by_row = np.argsort(rows, kind="stable")
        take = by_row[np.unique(np.linspace(0, len(rows) - 1, min(SPOT_CHECK, len(rows))).round().astype(np.int64))]
        fresh = np.asarray(recompute(positions[take].tolist()), dtype=np.float32)
        stored = np.asarray(shard.vecs[rows[take]], dtype=np.float32)
        if fresh.shape == stored.shape:
            dist = np.linalg.norm(fresh - stored, axis=1)
            bad = ~(dist <= SPOT_TOLERANCE * np.maximum(np.linalg.norm(fresh, axis=1), 1e-6))  # NaN is bad
            if not bad.any():
                shard.state = "spot-checked"
                return True
            why = f"(no checksum, written before checksums) differs from a re-encoding for {int(bad.sum())} of the {len(take)} texts checked"
        else:
            why = f"(no checksum) has vectors of shape {stored.shape[1:]}, the encoder gives {fresh.shape[1:]}"
        self._drop(fingerprint, sid, shard.file(VECS), why)
        return False

    def _vouch(
        self,
        fingerprint: str,
        positions: np.ndarray,
        sids: np.ndarray,
        rows: np.ndarray,
        recompute: Callable[[list[int]], np.ndarray] | None,
    ) -> bool:
        """Check every shard these hits come from that is not yet trusted; False if one was dropped."""
        ok = True
        for sid in np.unique(sids).tolist():
            state = self._shards[fingerprint][sid].state
            if state == "unchecked":
                ok &= self._verify(fingerprint, sid)
            elif state == "old" and recompute is not None:
                mine = sids == sid
                ok &= self._spot_check(fingerprint, sid, positions[mine], rows[mine], recompute)
        return ok

    def get(
        self,
        fingerprint: str,
        keys: Sequence[bytes],
        recompute: Callable[[list[int]], np.ndarray] | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Return (found mask, vectors for the found keys in order), from verified shards only.
        ``recompute(positions)`` gives fresh vectors for ``keys[positions]``: with it, shards written before
        checksums are spot-checked before use (without it, they are trusted as they were)."""
        index = self._load(fingerprint)
        while True:
            codes = np.fromiter(map(index.get, keys, repeat(-1)), dtype=np.int64, count=len(keys))
            found = codes >= 0
            if not found.any():
                return found, None
            positions = np.flatnonzero(found)
            sids, rows = codes[positions] >> 32, codes[positions] & 0xFFFFFFFF
            if self._vouch(fingerprint, positions, sids, rows, recompute):
                break  # else a shard was dropped: look the keys up again (another shard may hold them)
        shards = self._shards[fingerprint]
        out = np.empty((len(positions), shards[int(sids[0])].vecs.shape[1]), dtype=np.float32)
        for sid in np.unique(sids).tolist():
            mine = np.flatnonzero(sids == sid)
            mine = mine[np.argsort(rows[mine], kind="stable")]  # sorted reads from the memory map
            out[mine] = shards[sid].vecs[rows[mine]]
        return found, out

    def put(self, fingerprint: str, keys: Sequence[bytes], vecs: np.ndarray) -> None:
        """Write one shard. A failure (full disk) leaves no file of it behind and raises OSError."""
        if len(keys) == 0:
            return
        index = self._load(fingerprint)
        d = safe_mkdirs(self._dir(fingerprint), self.root)  # never through a linked folder under the cache
        stem = d / _new_shard_name()
        karr = np.array(list(keys), dtype="S16")
        varr = np.ascontiguousarray(vecs, dtype=np.float32)
        created: list[Path] = []
        try:
            self._write_shard(stem, karr, varr, created, self.root)
        except BaseException as e:
            for f in created:  # a full disk must not stay full of our partial shard
                with contextlib.suppress(OSError):
                    f.unlink()
            if isinstance(e, OSError):
                full = _as_disk_full(e, d, varr.nbytes + karr.nbytes)
                if full is not e:
                    raise full from e
            raise
        sid = len(self._shards[fingerprint])
        self._shards[fingerprint].append(_Shard(stem, list(keys), varr, "verified"))
        index.update(zip(keys, range(sid << 32, (sid << 32) + len(keys))))

    @staticmethod
    def _write_shard(stem: Path, karr: np.ndarray, varr: np.ndarray, created: list[Path], root: Path) -> None:
        """Vectors, checksums, keys, each written atomically and never through a symlink: the keys
        file lands last, so a shard with keys has its checksum. ``created``: what was published, for
        the caller to remove if a later file fails."""
        path = {suffix: stem.with_name(stem.name + suffix) for suffix in (VECS, KEYS, SUMS)}
        with atomic_writer(path[VECS], root=root) as f:
            vsum = _save_npy(f, varr)
        created.append(path[VECS])
        with atomic_writer(path[KEYS], root=root) as f:
            ksum = _save_npy(f, karr)
            meta = {"format": 1, "rows": int(varr.shape[0]), "dim": int(varr.shape[1]), "keys": ksum, "vecs": vsum}
            atomic_write_json(path[SUMS], meta, root=root)  # renamed before the keys file
            created.append(path[SUMS])
        created.append(path[KEYS])

    def count(self, fingerprint: str) -> int:
        return len(self._load(fingerprint))

    def not_written_message(self, fingerprint: str, e: OSError) -> str:
        """Why a shard was not written, and for a full disk what to free: this cache's own size and folder."""
        folder = self._dir(fingerprint)
        if e.errno != errno.ENOSPC:
            return f"{disk_error_message(e, folder, 'embedding-cache shards')}; the cache was not written"
        free = ""
        with contextlib.suppress(OSError):
            free = f", {_human(shutil.disk_usage(self.root).free)} free"
        return (
            f"no space left on the device holding {folder}{free}: the embedding cache was not written (no "
            f"partial shard is left), the scores are computed all the same. Free space there: the cache "
            f"{self.root} holds {_human(_folder_size(self.root))}; delete it, or the folders of encoders you no "
            f"longer evaluate (each is rebuilt on demand), or stale run folders; or set BENCHBENCH_CACHE to a "
            f"bigger disk, or run with --no-cache"
        )


def default_cache_dir() -> Path:
    base = os.environ.get("BENCHBENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "benchbench"
    )
    return Path(base) / "embeddings"
