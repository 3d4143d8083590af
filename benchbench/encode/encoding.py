"""Turning texts into vectors, fast and once.

The plugin's encoder only maps a batch of texts to vectors. Everything that makes encoding cheap
lives here, once, for every method: de-duplication, length-sorted batching (little padding),
restoring input order, a progress bar, and reading and filling the on-disk embedding cache
(``cache.py``: keyed by the encoder's fingerprint and a hash of each text, checksummed), so a second
evaluation of the same encoder encodes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from benchbench.core.errors import PluginError
from benchbench.encode.cache import EmbeddingCache, cache_key, text_key

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

    def encode(self, texts: list[str]) -> np.ndarray:
        """A float32 array of shape (len(texts), d): one finite row per text, in input order."""
        ...


@runtime_checkable
class PairScorer(Protocol):
    """A cross-encoder (or any pair scorer): ``score_pairs(a, b)`` returns one score per pair
    ``(a[i], b[i])``, higher = more similar. Pairwise tasks use it instead of cosine of vectors when
    the encoder has it (Trans-Encoder's cross-encoder, BM25); the record says which scored."""

    fingerprint: str

    def score_pairs(self, a: list[str], b: list[str]) -> np.ndarray:
        """One finite score per pair ``(a[i], b[i])``, shape (len(a),), higher for more similar pairs."""
        ...


@runtime_checkable
class Searcher(Protocol):
    """A retriever that needs no vectors: ``search(queries, corpus, k)`` returns ``(scores, indices)``
    of shape (n_queries, k') with each row's best ``k' <= k`` corpus positions, best first (BM25)."""

    fingerprint: str

    def search(self, queries: list[str], corpus: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(scores, indices)``, each of shape (len(queries), k'), k' <= k: each query's best corpus
        positions, best first."""
        ...


FLUSH_EVERY = 20000  # texts: an interrupted encoding of a large corpus keeps what it finished


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
        """The cosine of each pair's vectors, in float64; a sentence in both lists is encoded once."""
        v = self.embed(list(a) + list(b))  # one call: shared sentences are encoded once
        return cosine_rows(v[: len(a)], v[len(a) :])

    def score_pairs(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """The cross-encoder's scores when the encoder has one, else ``cosine_pairs``. A cross-encoder
        score of the wrong shape, or one not finite, is an error naming the plugin and the pair."""
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
