"""Text overlap between a test set and a training corpus: verbatim sentences and long word n-grams.

Why measured and not only declared: a card that names ``snli`` and a task that names ``flickr8k``
never meet by name, yet 32 scored STS15 ``images`` sentences occur verbatim in SNLI dev/test. The
contamination flags (``benchbench.report.contamination``) read the counts computed here.

Normalisation (``words``), chosen so that two tokenisations of one sentence meet: Unicode NFKC,
lower case; the Moses split of an English clitic is undone (``does n't`` -> ``doesn't``, ``dog 's`` ->
``dog's``: SentEval's STS files are Moses-tokenised, SNLI's are not); apostrophes are dropped; a word
is a maximal run of letters or digits, so every other character (punctuation, hyphens, quotes)
separates words and is otherwise ignored (``curly-haired`` meets ``curly haired``). A sentence's key
is its words joined by one space.

* **verbatim**: a distinct test sentence of at least ``min_words`` words (default 9, as issue 36
  counted: shorter sentences such as "a man is playing a guitar ." are common to any caption text)
  whose key is a corpus sentence's key;
* **n-gram**: a distinct test sentence, not already verbatim, of at least ``n`` words that shares one
  word ``n``-gram with the corpus (default 8, as PaLM's contamination study; GPT-3's 13 would look
  only at sentences of 13+ words, a minority of the caption subsets, whose median is ~10 words).

Keys and n-grams are stored as 64-bit BLAKE2b digests in sorted numpy arrays (a collision among a
million entries has probability ~1e-7), so a corpus's index is built once, cached on disk under its
content sha256 (``cached_index``), and read back without unpickling anything.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchbench.core.errors import DataError
from benchbench.store.files import atomic_writer

NORM_VERSION = 1  # bump when ``words`` changes: cached indices of another version are rebuilt
MIN_WORDS = 9
NGRAM = 8

_CLITIC = re.compile(r"\s+(n't|'s|'re|'ve|'ll|'d|'m)(?![^\W_])", re.IGNORECASE)
_APOSTROPHES = str.maketrans("", "", "'\u2019`")
_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """The normalised words of ``text`` (see the module docstring)."""
    s = unicodedata.normalize("NFKC", text).lower()
    s = _CLITIC.sub(r"\1", s.replace("\u2019", "'")).translate(_APOSTROPHES)
    return _WORD.findall(s)


def key(text: str) -> str:
    return " ".join(words(text))


def _h64(s: str) -> int:
    return int.from_bytes(hashlib.blake2b(s.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def _ngrams(ws: Sequence[str], n: int) -> Iterable[str]:
    return (" ".join(ws[i : i + n]) for i in range(len(ws) - n + 1))


def _sorted_u64(values: Iterable[int]) -> np.ndarray:
    return np.unique(np.fromiter(values, dtype=np.uint64))


def _contains(table: np.ndarray, values: Sequence[int]) -> np.ndarray:
    if not len(values) or not len(table):
        return np.zeros(len(values), dtype=bool)
    v = np.asarray(values, dtype=np.uint64)
    pos = np.searchsorted(table, v).clip(max=len(table) - 1)
    return table[pos] == v


@dataclass(frozen=True)
class OverlapIndex:
    """A corpus's sentence keys and word n-grams, hashed (see the module docstring)."""

    sentences: np.ndarray  # sorted unique uint64 digests of sentence keys
    ngrams: np.ndarray  # sorted unique uint64 digests of word n-grams
    n: int
    size: int  # the corpus's sentences (lines), before de-duplication

    @classmethod
    def build(cls, corpus: Iterable[str], n: int = NGRAM) -> OverlapIndex:
        keys: list[int] = []
        grams: set[int] = set()
        size = 0
        for text in corpus:
            size += 1
            ws = words(text)
            if not ws:
                continue
            keys.append(_h64(" ".join(ws)))
            grams.update(_h64(g) for g in _ngrams(ws, n))
        return cls(_sorted_u64(keys), _sorted_u64(grams), n, size)

    def save(self, path: Path, meta: dict) -> None:
        """Atomically (a reader sees the old file or the new one); numpy arrays only, no pickle."""
        meta = {**meta, "n": self.n, "size": self.size, "norm_version": NORM_VERSION}
        with atomic_writer(path, "wb") as f:
            np.savez(f, sentences=self.sentences, ngrams=self.ngrams, meta=np.array(json.dumps(meta)))

    @classmethod
    def load(cls, path: Path) -> tuple[OverlapIndex, dict]:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            return cls(z["sentences"], z["ngrams"], int(meta["n"]), int(meta["size"])), meta


def cached_index(
    sha256: str, corpus: Callable[[], Iterable[str]], cache_dir: Path | None, n: int = NGRAM
) -> OverlapIndex:
    """The index of the corpus whose content hash is ``sha256``, from ``cache_dir`` when an index of this
    normalisation and ``n`` is stored there, else built from ``corpus()`` and stored (``cache_dir``
    None: built, not stored). A stored file that cannot be read or names another corpus is rebuilt."""
    if not re.fullmatch(r"[0-9a-f]{64}", sha256 or ""):
        raise DataError(f"corpus sha256 {sha256!r} is not a hex sha256: an overlap index is cached under it.")
    path = cache_dir / f"{sha256}.v{NORM_VERSION}.n{n}.npz" if cache_dir is not None else None
    if path is not None and path.is_file():
        try:
            index, meta = OverlapIndex.load(path)
            if meta.get("sha256") == sha256 and meta.get("norm_version") == NORM_VERSION and index.n == n:
                return index
        except (OSError, ValueError, KeyError):
            pass  # damaged or foreign: rebuilt below
    index = OverlapIndex.build(corpus(), n)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        index.save(path, {"sha256": sha256})
    return index


@dataclass(frozen=True)
class Overlap:
    """What of one test set a corpus contains: distinct test sentences (their first spelling)."""

    verbatim: tuple[str, ...]
    ngram: tuple[str, ...]  # sharing an n-gram, not verbatim
    eligible_verbatim: int  # distinct test sentences of >= min_words words
    eligible_ngram: int  # distinct test sentences of >= n words
    min_words: int
    n: int


def measure(test_sentences: Iterable[str], index: OverlapIndex, min_words: int = MIN_WORDS) -> Overlap:
    """Count the test sentences ``index``'s corpus holds verbatim or shares a word n-gram with."""
    distinct: dict[str, str] = {}
    for s in test_sentences:
        k = key(s)
        if k:
            distinct.setdefault(k, s)
    long_keys = [k for k in distinct if len(k.split(" ")) >= min_words]
    hit = _contains(index.sentences, [_h64(k) for k in long_keys])
    verbatim = {k for k, h in zip(long_keys, hit) if h}
    owners, grams = [], []  # every n-gram of every eligible sentence, looked up at once
    span_keys = [k for k in distinct if len(k.split(" ")) >= index.n]
    for i, k in enumerate(span_keys):
        for g in _ngrams(k.split(" "), index.n):
            owners.append(i)
            grams.append(_h64(g))
    found = set(np.asarray(owners, dtype=np.int64)[_contains(index.ngrams, grams)].tolist())
    ngram = [distinct[k] for i, k in enumerate(span_keys) if i in found and k not in verbatim]
    eligible_ngram = len(span_keys)
    return Overlap(
        verbatim=tuple(distinct[k] for k in long_keys if k in verbatim),
        ngram=tuple(ngram),
        eligible_verbatim=len(long_keys),
        eligible_ngram=eligible_ngram,
        min_words=min_words,
        n=index.n,
    )
