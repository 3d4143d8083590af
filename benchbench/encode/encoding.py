"""Turning texts into vectors, fast and once.

The plugin's encoder only maps a batch of texts to vectors. Everything that makes encoding cheap
lives here, once, for every method: de-duplication, length-sorted batching (little padding),
restoring input order, a progress bar, and an on-disk embedding cache keyed by the encoder's
fingerprint and a hash of each text, so a second evaluation of the same encoder encodes nothing.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from benchbench.core.errors import PluginError

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


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class EmbeddingCache:
    """Append-only shards of (keys, vectors) per encoder fingerprint.

    Layout: ``<root>/<fingerprint>/<shard>.keys.npy`` + ``<shard>.vecs.npy``. A shard is written
    vectors first, keys last, each to a temp file and renamed, so a shard whose keys file exists is
    complete; a killed writer leaves only ignorable temp files. Unreadable shards are skipped
    with a warning, never trusted. (No library offers an append-only, crash-safe npy key/value
    store with this little overhead; sqlite would cost a row insert per text.)"""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self._index: dict[str, dict[bytes, tuple[int, int]]] = {}
        self._shards: dict[str, list[np.ndarray]] = {}
        self.writable = True  # set false by embed() after a failed write (full/read-only disk)

    def _dir(self, fingerprint: str) -> Path:
        if not fingerprint or any(c in fingerprint for c in "/\\") or fingerprint.startswith("."):
            raise ValueError(f"invalid encoder fingerprint {fingerprint!r}")
        return self.root / fingerprint

    def _load(self, fingerprint: str) -> dict[bytes, tuple[int, int]]:
        if fingerprint in self._index:
            return self._index[fingerprint]
        index: dict[bytes, tuple[int, int]] = {}
        shards: list[np.ndarray] = []
        d = self._dir(fingerprint)
        if d.is_dir():
            for kf in sorted(d.glob("*.keys.npy")):
                vf = kf.with_name(kf.name[: -len(".keys.npy")] + ".vecs.npy")
                try:
                    keys = np.load(kf)
                    vecs = np.load(vf, mmap_mode="r")
                    if keys.ndim != 1 or vecs.ndim != 2 or len(keys) != len(vecs):
                        raise ValueError(f"shape mismatch {keys.shape} vs {vecs.shape}")
                except Exception as e:
                    log.warning("embedding cache: ignoring unreadable shard %s (%s)", kf, e)
                    continue
                sid = len(shards)
                shards.append(vecs)
                # numpy's S16 strips trailing NUL bytes on the way out: pad them back
                for row, k in enumerate(keys.tolist()):
                    index[k.ljust(16, b"\0")] = (sid, row)
        self._index[fingerprint] = index
        self._shards[fingerprint] = shards
        return index

    def get(self, fingerprint: str, keys: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray | None]:
        """Return (found mask, vectors for the found keys in order)."""
        index = self._load(fingerprint)
        hits = [index.get(k) for k in keys]
        found = np.array([h is not None for h in hits], dtype=bool)
        if not found.any():
            return found, None
        shards = self._shards[fingerprint]
        rows = [h for h in hits if h is not None]
        out = np.empty((len(rows), shards[rows[0][0]].shape[1]), dtype=np.float32)
        by_shard: dict[int, list[tuple[int, int]]] = {}
        for i, (sid, row) in enumerate(rows):
            by_shard.setdefault(sid, []).append((i, row))
        for sid, pairs in by_shard.items():
            idx = np.array([p[0] for p in pairs])
            src = np.array([p[1] for p in pairs])
            order = np.argsort(src)  # sorted reads from the memory map
            out[idx[order]] = shards[sid][src[order]]
        return found, out

    def put(self, fingerprint: str, keys: Sequence[bytes], vecs: np.ndarray) -> None:
        if len(keys) == 0:
            return
        index = self._load(fingerprint)
        d = self._dir(fingerprint)
        d.mkdir(parents=True, exist_ok=True)
        # a unique name per writer (pid + random): concurrent writers of one fingerprint never share a file
        shard = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        karr = np.array(list(keys), dtype="S16")
        varr = np.ascontiguousarray(vecs, dtype=np.float32)
        written: list[Path] = []
        try:
            for suffix, arr in ((".vecs.npy", varr), (".keys.npy", karr)):
                tmp = d / f".{shard}{suffix}.tmp"
                written.append(tmp)
                with open(tmp, "wb") as f:
                    np.save(f, arr)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, d / f"{shard}{suffix}")  # atomic: readers see a whole file or none
                written[-1] = d / f"{shard}{suffix}"
        except BaseException:
            for f in written:  # a full disk must not stay full of our partial shard
                with contextlib.suppress(OSError):
                    f.unlink()
            raise
        sid = len(self._shards[fingerprint])
        self._shards[fingerprint].append(varr)
        for row, k in enumerate(keys):
            index[k] = (sid, row)

    def count(self, fingerprint: str) -> int:
        return len(self._load(fingerprint))


FLUSH_EVERY = 20000  # texts: an interrupted encoding of a large corpus keeps what it finished


def default_cache_dir() -> Path:
    base = os.environ.get("BENCHBENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "benchbench"
    )
    return Path(base) / "embeddings"


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
    ``owner`` names the method/plugin the encoder belongs to, for errors about its output. A cache
    write that fails (full or read-only disk) is a warning: the run goes on uncached."""
    from tqdm.auto import tqdm

    texts = list(texts)
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    # de-duplicate with C-level iteration only (dict.fromkeys, map): a Python loop over a 400K-title
    # corpus costs more than looking its vectors up in the cache
    if not set(map(type, texts)) <= {str}:
        bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
        if bad is not None:
            raise TypeError(f"embed() expects strings; item {bad} is {type(texts[bad]).__name__}")
        texts = list(map(str, texts))  # str subclasses (numpy.str_): plain strings, as the cache keys them
    uniq = list(dict.fromkeys(texts))
    inverse: np.ndarray | None = None  # None: every text is distinct, output row i is uniq[i]
    if len(uniq) < len(texts):
        index = dict(zip(uniq, range(len(uniq))))
        inverse = np.fromiter(map(index.__getitem__, texts), dtype=np.int64, count=len(texts))
    fp = getattr(encoder, "fingerprint", None)
    keys = [text_key(t) for t in uniq] if cache is not None and fp else []  # hashes only serve the cache
    vectors: np.ndarray | None = None
    todo = np.arange(len(uniq))
    if cache is not None and fp:
        found, cached = cache.get(fp, keys)
        if cached is not None:
            vectors = np.empty((len(uniq), cached.shape[1]), dtype=np.float32)
            vectors[found] = cached
        todo = np.flatnonzero(~found)
    if len(todo):
        bs = batch_size or getattr(encoder, "batch_size", None) or 64
        # longest first: similar lengths share a batch (little padding), and an OOM shows at once.
        # Token counts when the encoder can give them (exact padding), else characters.
        todo_texts = uniq if len(todo) == len(uniq) else [uniq[i] for i in todo.tolist()]
        if getattr(encoder, "length_sorted", True):
            lengths_fn = getattr(encoder, "lengths", None)
            lengths = lengths_fn(todo_texts) if callable(lengths_fn) else [len(t) for t in todo_texts]
            order = todo[np.argsort(-np.asarray(lengths), kind="stable")]
        else:
            order = todo
        in_order = len(order) == len(uniq) and bool((np.diff(order) > 0).all())  # order is 0..n-1
        order_list = (
            None if in_order else order.tolist()
        )  # list indexing with Python ints: numpy scalars are slow list indices
        show = progress if progress is not None else len(order) > 2000
        flushed = 0  # rows of `order` already in the cache: long encodings are saved as they go
        with tqdm(total=len(order), desc=desc, unit="sent", disable=not show, leave=False) as bar:
            for s in range(0, len(order), bs):
                batch = uniq[s : s + bs] if order_list is None else [uniq[i] for i in order_list[s : s + bs]]
                try:
                    raw = encoder.encode(batch)
                except PluginError:
                    raise
                except Exception as e:
                    raise PluginError(
                        f"{_describe_owner(encoder, owner)}: encode() raised {type(e).__name__}: {e} "
                        f"(first text of the batch: {_clip(batch[0])})"
                    ) from e
                out = check_encoder_output(raw, batch, encoder, owner, None if vectors is None else vectors.shape[1])
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
                    rows = order[flushed:done]
                    try:
                        cache.put(fp, [keys[i] for i in rows.tolist()], vectors[rows])
                    except OSError as e:  # the cache is an optimisation: never the reason a run fails
                        log.warning(
                            "embedding cache: %s; going on without writing to the cache",
                            disk_error_message(e, cache.root, "embedding-cache shards"),
                        )
                        cache.writable = False
                        cache = None
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
