"""Turning texts into vectors, fast and once.

The plugin's encoder only maps a batch of texts to vectors. Everything that makes encoding cheap
lives here, once, for every method: de-duplication, length-sorted batching (little padding),
restoring input order, a progress bar, and an on-disk embedding cache keyed by the encoder's
fingerprint and a hash of each text, so a second evaluation of the same encoder encodes nothing.
The cache never lies: every shard carries a checksum, and a damaged one is recomputed, never read.
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
from typing import BinaryIO, Literal, Protocol, runtime_checkable

import numpy as np

from benchbench.core.errors import PluginError
from benchbench.store.files import atomic_write_json, atomic_writer

log = logging.getLogger(__name__)


class EncoderOutputError(PluginError, ValueError):
    """An encoder returned vectors that are not a finite float (n, d) array. It names the method
    (plugin) whose encoder it is, never the task being evaluated, and the first text at fault."""


def _describe_owner(encoder: object, owner: str | None) -> str:
    return owner or f"encoder {type(encoder).__module__}.{type(encoder).__qualname__}"


def _clip(text: str, n: int = 80) -> str:
    return repr(text if len(text) <= n else text[:n] + "...")


def check_encoder_output(
    out: object, batch: list[str], encoder: object, owner: str | None = None, dim: int | None = None
) -> np.ndarray:
    """The encoder's output as float32 (n, d), or an ``EncoderOutputError``. Checked right after
    ``encode`` so that NaN/Inf or a wrong shape is never cached, stored or scored (a NaN score
    would otherwise end up as invalid JSON in the record)."""
    who = f"{_describe_owner(encoder, owner)}: {type(encoder).__name__}.encode"
    try:
        arr = np.asarray(out)
    except Exception as e:
        raise EncoderOutputError(
            f"{who} returned {type(out).__name__}, not an array ({e}); first text of the batch: {_clip(batch[0])}"
        ) from e
    if arr.dtype.kind not in "fiub":
        raise EncoderOutputError(
            f"{who} returned dtype {arr.dtype}; expected a real float array "
            f"(float32). First text of the batch: {_clip(batch[0])}"
        )
    if arr.ndim != 2 or arr.shape[0] != len(batch) or arr.shape[1] == 0:
        raise EncoderOutputError(
            f"{who} returned shape {arr.shape} for {len(batch)} texts; expected "
            f"({len(batch)}, d). First text of the batch: {_clip(batch[0])}"
        )
    if dim is not None and arr.shape[1] != dim:
        raise EncoderOutputError(
            f"{who} changed dimension ({arr.shape[1]} vs {dim}) between batches; "
            f"its fingerprint is not unique to its weights. First text: {_clip(batch[0])}"
        )
    arr = np.asarray(arr, dtype=np.float32)
    finite = np.isfinite(arr).all(axis=1)
    if not finite.all():
        i = int(np.flatnonzero(~finite)[0])
        raise EncoderOutputError(
            f"{who} returned a non-finite vector (NaN or Inf) for text {_clip(batch[i])} "
            f"({int((~finite).sum())} of {len(batch)} in the batch); nothing was cached or stored. "
            f"Fix the method (e.g. a diverged training run, lower the learning rate)."
        )
    return arr


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


@runtime_checkable
class Encoder(Protocol):
    """What a method returns. ``encode`` gets one batch (already de-duplicated and length-sorted)
    and returns float32 (n, d), one row per input, in order. ``fingerprint`` identifies the weights
    and everything else that changes the vectors; two encoders with equal fingerprints must give
    equal vectors. Optional attributes: ``batch_size`` (int), ``normalize`` (bool: L2-normalise
    after the cache), ``score_pairs(a, b)`` (a cross-encoder's pair scores), ``lengths(texts)``
    (token counts, for padding-free length sorting), ``length_sorted`` (bool, default true: set it
    false for an encoder whose cost does not depend on how texts are batched, such as a table
    lookup or word-vector average; batches then keep the input order and need no reordering)."""

    fingerprint: str

    def encode(self, texts: list[str]) -> np.ndarray: ...


@runtime_checkable
class PairScorer(Protocol):
    """A cross-encoder (or any pair scorer): ``score_pairs(a, b)`` returns one score per pair
    ``(a[i], b[i])``, higher = more similar. Pairwise tasks use it instead of cosine of vectors when
    the encoder has it (Trans-Encoder's cross-encoder, BM25); the record says which scored."""

    fingerprint: str

    def score_pairs(self, a: list[str], b: list[str]) -> np.ndarray: ...


@runtime_checkable
class Searcher(Protocol):
    """A retriever that needs no vectors: ``search(queries, corpus, k)`` returns ``(scores, indices)``
    of shape (n_queries, k') with each row's best ``k' <= k`` corpus positions, best first (BM25)."""

    fingerprint: str

    def search(self, queries: list[str], corpus: list[str], k: int) -> tuple[np.ndarray, np.ndarray]: ...


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
        d = self._dir(fingerprint)
        d.mkdir(parents=True, exist_ok=True)
        stem = d / _new_shard_name()
        karr = np.array(list(keys), dtype="S16")
        varr = np.ascontiguousarray(vecs, dtype=np.float32)
        created: list[Path] = []
        try:
            self._write_shard(stem, karr, varr, created)
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
    def _write_shard(stem: Path, karr: np.ndarray, varr: np.ndarray, created: list[Path]) -> None:
        """Vectors, checksums, keys, each written atomically and never through a symlink: the keys
        file lands last, so a shard with keys has its checksum. ``created``: what was published, for
        the caller to remove if a later file fails."""
        path = {suffix: stem.with_name(stem.name + suffix) for suffix in (VECS, KEYS, SUMS)}
        with atomic_writer(path[VECS]) as f:
            vsum = _save_npy(f, varr)
        created.append(path[VECS])
        with atomic_writer(path[KEYS]) as f:
            ksum = _save_npy(f, karr)
            meta = {"format": 1, "rows": int(varr.shape[0]), "dim": int(varr.shape[1]), "keys": ksum, "vecs": vsum}
            atomic_write_json(path[SUMS], meta)  # renamed before the keys file
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


FLUSH_EVERY = 20000  # texts: an interrupted encoding of a large corpus keeps what it finished


def default_cache_dir() -> Path:
    base = os.environ.get("BENCHBENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "benchbench"
    )
    return Path(base) / "embeddings"


def _encode(batch: list[str], encoder: Encoder, owner: str | None, dim: int | None = None) -> np.ndarray:
    """One batch through the plugin's encoder, its failure or bad output blamed on the plugin."""
    try:
        raw = encoder.encode(batch)
    except PluginError:
        raise
    except Exception as e:
        raise PluginError(
            f"{_describe_owner(encoder, owner)}: encode() raised {type(e).__name__}: {e} "
            f"(first text of the batch: {_clip(batch[0])})"
        ) from e
    return check_encoder_output(raw, batch, encoder, owner, dim)


def _distinct(texts: list[str]) -> tuple[list[str], np.ndarray | None]:
    """The distinct texts in first-seen order and, when some repeat, each input's row among them
    (None: every text is distinct). C-level iteration only (dict.fromkeys, map): a Python loop over a
    400K-title corpus costs more than looking its vectors up in the cache."""
    if not set(map(type, texts)) <= {str}:
        bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
        if bad is not None:
            raise TypeError(f"embed() expects strings; item {bad} is {type(texts[bad]).__name__}")
        texts = list(map(str, texts))  # str subclasses (numpy.str_): plain strings, as the cache keys them
    uniq = list(dict.fromkeys(texts))
    if len(uniq) == len(texts):
        return uniq, None
    index = dict(zip(uniq, range(len(uniq))))
    return uniq, np.fromiter(map(index.__getitem__, texts), dtype=np.int64, count=len(texts))


def _longest_first(encoder: Encoder, uniq: list[str], todo: np.ndarray) -> np.ndarray:
    """``todo`` longest first: similar lengths share a batch (little padding), and an OOM shows at once.
    Token counts when the encoder can give them (exact padding), else characters."""
    if not getattr(encoder, "length_sorted", True):
        return todo
    todo_texts = uniq if len(todo) == len(uniq) else [uniq[i] for i in todo.tolist()]
    lengths_fn = getattr(encoder, "lengths", None)
    lengths = lengths_fn(todo_texts) if callable(lengths_fn) else [len(t) for t in todo_texts]
    return todo[np.argsort(-np.asarray(lengths), kind="stable")]


def _flush(cache: EmbeddingCache, fp: str, keys: list, vectors: np.ndarray) -> EmbeddingCache | None:
    """Store finished rows; a cache write that fails is a warning and the run goes on uncached (the
    cache is an optimisation, never the reason a run fails)."""
    try:
        cache.put(fp, keys, vectors)
    except OSError as e:
        log.warning("embedding cache: %s; going on without writing to it", cache.not_written_message(fp, e))
        cache.writable = False
        return None
    return cache


def embed(
    encoder: Encoder,
    texts: Sequence[str],
    *,
    cache: EmbeddingCache | None = None,
    batch_size: int | None = None,
    progress: bool | None = None,
    normalize: bool | None = None,
    desc: str = "encoding",
    owner: str | None = None,
) -> np.ndarray:
    """Vectors for ``texts`` in input order, encoding each distinct text at most once (ever, with a cache).
    ``owner`` names the method/plugin the encoder belongs to, for errors about its output. Cached
    vectors come from verified shards only (old shards without a checksum are spot-checked with this
    encoder). A cache write that fails (full or read-only disk) is a warning: the run goes on uncached."""
    from tqdm.auto import tqdm

    texts = list(texts)
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    uniq, inverse = _distinct(texts)
    fp = cache_key(encoder)
    keys = [text_key(t) for t in uniq] if cache is not None and fp else []  # hashes only serve the cache
    vectors: np.ndarray | None = None
    todo = np.arange(len(uniq))
    if cache is not None and fp:
        found, cached = cache.get(fp, keys, lambda idx: _encode([uniq[i] for i in idx], encoder, owner))
        if cached is not None:
            vectors = np.empty((len(uniq), cached.shape[1]), dtype=np.float32)
            vectors[found] = cached
        todo = np.flatnonzero(~found)
    if len(todo):
        bs = batch_size or getattr(encoder, "batch_size", None) or 64
        # longest first: similar lengths share a batch (little padding), and an OOM shows at once.
        # Token counts when the encoder can give them (exact padding), else characters.
        order = _longest_first(encoder, uniq, todo)
        in_order = len(order) == len(uniq) and bool((np.diff(order) > 0).all())  # order is 0..n-1
        order_list = (
            None if in_order else order.tolist()
        )  # list indexing with Python ints: numpy scalars are slow list indices
        show = progress if progress is not None else len(order) > 2000
        flushed = 0  # rows of `order` already in the cache: long encodings are saved as they go
        with tqdm(total=len(order), desc=desc, unit="sent", disable=not show, leave=False) as bar:
            for s in range(0, len(order), bs):
                batch = uniq[s : s + bs] if order_list is None else [uniq[i] for i in order_list[s : s + bs]]
                out = _encode(batch, encoder, owner, None if vectors is None else vectors.shape[1])
                if (
                    vectors is None
                    and len(batch) == len(uniq)
                    and in_order
                    and out.flags.owndata
                    and out.flags.writeable
                ):
                    vectors = out  # one batch in input order (a lookup): the encoder's fresh array is the result
                elif vectors is None:
                    vectors = np.empty((len(uniq), out.shape[1]), dtype=np.float32)
                elif vectors.shape[1] != out.shape[1]:
                    raise ValueError(
                        f"encoder dimension changed ({out.shape[1]} vs {vectors.shape[1]}); "
                        f"fingerprint {fp!r} is not unique to the weights"
                    )
                if vectors is not out:  # straight into place: no concatenated copy of the whole corpus
                    if order_list is None:
                        vectors[s : s + len(batch)] = out
                    else:
                        vectors[order[s : s + bs]] = out
                bar.update(len(batch))
                done = s + len(batch)
                if cache is not None and not cache.writable:
                    cache = None  # an earlier write failed (warned once): read from it, never write again
                if cache is not None and fp and (done - flushed >= FLUSH_EVERY or done == len(order)):
                    cache = _flush(
                        cache, fp, [keys[i] for i in order[flushed:done].tolist()], vectors[order[flushed:done]]
                    )
                    flushed = done
    assert vectors is not None
    out = vectors if inverse is None else vectors[inverse]
    if normalize if normalize is not None else getattr(encoder, "normalize", False):
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return out


class Embedder:
    """What an adapter evaluates: ``embed(texts)`` through the harness pipeline, and pair scores
    (cosine of the vectors, or the method's own cross-encoder when it has one)."""

    def __init__(
        self,
        encoder: Encoder,
        cache: EmbeddingCache | None = None,
        batch_size: int | None = None,
        progress: bool | None = None,
        owner: str | None = None,
    ):
        self.encoder = encoder
        self.owner = owner  # "method X (plugin P)": named in errors about the encoder's output
        self.cache = cache
        self.batch_size = batch_size
        self.progress = progress

    @property
    def fingerprint(self) -> str:
        return self.encoder.fingerprint

    @property
    def has_cross_encoder(self) -> bool:
        return callable(getattr(self.encoder, "score_pairs", None))

    def embed(self, texts: Sequence[str], desc: str = "encoding") -> np.ndarray:
        """(n, d) float32 vectors in input order, in a new array the caller owns (it may be modified
        in place: the adapters normalise corpus blocks that way)."""
        return embed(
            self.encoder,
            texts,
            cache=self.cache,
            batch_size=self.batch_size,
            progress=self.progress,
            desc=desc,
            owner=self.owner,
        )

    def cosine_pairs(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        v = self.embed(list(a) + list(b))  # one call: shared sentences are encoded once
        return cosine_rows(v[: len(a)], v[len(a) :])

    def score_pairs(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        if self.has_cross_encoder:
            scores = np.asarray(self.encoder.score_pairs(list(a), list(b)), dtype=np.float64)  # type: ignore[attr-defined]
            if scores.shape != (len(a),) or not np.isfinite(scores).all():
                bad = next((i for i, v in enumerate(np.ravel(scores)) if not np.isfinite(v)), 0)
                raise EncoderOutputError(
                    f"{_describe_owner(self.encoder, self.owner)}: score_pairs() returned shape "
                    f"{scores.shape} for {len(a)} pairs or a non-finite score (first pair at "
                    f"fault: {_clip(list(a)[bad] if len(a) else '')})."
                )
            return scores
        return self.cosine_pairs(a, b)


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity, in float64 so that rank metrics do not depend on summation order."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    num = (a * b).sum(1)
    den = np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
    return num / den
