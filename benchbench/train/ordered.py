"""Ordered corpora: running text in reading order, streamed from disk (Quick-Thoughts, skip-thought).

A method with ``corpus = "ordered"`` gets a :class:`~benchbench.train.corpora.Corpus` whose ``sentences``
is a :class:`LineSequence`: item ``i`` is the i-th sentence in reading order, read from disk on
demand. Only a byte-offset index (8 bytes a sentence, a numpy memmap) is held, so a 45M-sentence
BookCorpus costs ~360 MB of *mapped* index and no text in memory.

Sources:

* default: the Jane Austen novels of the data dir (``corpora/janeausten/*.txt``, Project Gutenberg
  running text), in file-name order;
* ``--corpus FILE``: one text file; ``--corpus DIR``: its ``*.txt`` files in name order.

A source file is taken as ONE SENTENCE PER LINE (BookCorpus/UMBC as distributed) when most of its
first non-empty lines end like sentences or are short; otherwise as RUNNING TEXT (paragraphs separated
by blank lines, lines wrapped), which is sentence-split with pysbd (a rule-based splitter that needs no
model download) paragraph by paragraph, streaming, into a one-sentence-per-line file in the user
cache. Either way the sentences file gets a byte-offset index cached next to it in the user cache,
keyed by the source's size, mtime and sha256 (the sha256 is also the corpus identity in records).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchbench.core.errors import ConfigError, DataError
from benchbench.store.files import atomic_write_json, atomic_writer, sha256_file
from benchbench.train.corpora import Corpus, register_corpus_loader

JANEAUSTEN = "corpora/janeausten"
SPLITTER = "pysbd-0.3"  # part of the cache key: a different splitter makes a different corpus
_CHUNK = 1 << 20


def _cache_root(data: Any) -> Path:
    root = getattr(data, "cache_dir", None)
    if root is None:
        from benchbench.store.data import default_data_cache

        root = default_data_cache()
    return Path(root) / "ordered"


def build_line_index(path: Path, out: Path) -> Path:
    """Write the byte offsets of every line start of ``path`` (plus the end offset) to ``out`` as
    int64, streaming in 1 MiB blocks (numpy finds the newlines; no line is ever decoded here)."""
    size = path.stat().st_size
    with open(path, "rb") as f, atomic_writer(out) as w:
        np.zeros(1, dtype=np.int64).tofile(w)  # first line starts at 0
        pos = 0
        for block in iter(lambda: f.read(_CHUNK), b""):
            nl = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10).astype(np.int64) + pos + 1
            nl[nl < size].tofile(w)  # a newline ending the file starts no line
            pos += len(block)
        np.array([size], dtype=np.int64).tofile(w)
    return out


class LineSequence(Sequence[str]):
    """The lines of a text file as a read-only sequence: ``len`` from the index, ``[i]`` seeks and
    reads one line. Holds the index (a memmap) and a file handle, never the text."""

    def __init__(self, path: Path, index_path: Path):
        self.path = Path(path)
        self.index_path = Path(index_path)
        self.offsets = np.memmap(self.index_path, dtype=np.int64, mode="r")
        self._fh = None

    def __len__(self) -> int:
        return max(0, len(self.offsets) - 1)

    def _read(self, i: int) -> str:
        if self._fh is None:
            self._fh = open(self.path, "rb")
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        self._fh.seek(a)
        return self._fh.read(b - a).decode("utf-8", "replace").rstrip("\r\n")

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self._read(j) for j in range(*i.indices(len(self)))]
        n = len(self)
        i = int(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"sentence {i} out of range (corpus {self.path} has {n})")
        return self._read(i)

    def __iter__(self) -> Iterator[str]:
        with open(self.path, "rb") as f:
            for line in f:
                yield line.decode("utf-8", "replace").rstrip("\r\n")

    def __getstate__(self) -> dict:  # picklable (DataLoader workers): paths only, reopened lazily
        return {"path": self.path, "index_path": self.index_path}

    def __setstate__(self, st: dict) -> None:
        self.__init__(st["path"], st["index_path"])


_FINAL = re.compile(r"""[.!?]["')\]’”]*$""")


def is_sentence_per_line(path: Path, probe: int = 2000) -> bool:
    """Heuristic: BookCorpus/UMBC-style files have one sentence a line (most lines end like a
    sentence); wrapped running text (Gutenberg) has most lines ending mid-sentence."""
    lines = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if line:
                lines.append(line)
            if len(lines) >= probe:
                break
    if not lines:
        return True
    ends = sum(bool(_FINAL.search(s)) for s in lines)
    return ends / len(lines) >= 0.5


def _paragraphs(path: Path) -> Iterator[str]:
    buf: list[str] = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            s = line.strip()
            if s:
                buf.append(s)
            elif buf:
                yield " ".join(buf)
                buf = []
    if buf:
        yield " ".join(buf)


def split_running_text(sources: list[Path], out: Path) -> Path:
    """Sentence-split running text paragraph by paragraph (pysbd) into ``out``, one sentence a line,
    streaming (memory: one paragraph). Underscore emphasis (Gutenberg ``_word_``) is dropped."""
    try:
        import pysbd
    except ImportError as e:
        raise ConfigError("ordered corpora of running text need pysbd (pip install pysbd).") from e
    seg = pysbd.Segmenter(language="en", clean=False)
    with atomic_writer(out, "w") as w:
        for src in sources:
            for para in _paragraphs(src):
                for s in seg.segment(para.replace("_", "")):
                    s = " ".join(s.split())
                    if s:
                        w.write(s + "\n")
    return out


def _sources(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix == ".txt")
        if not files:
            raise DataError(f"ordered corpus folder {path} holds no *.txt files.")
        return files
    return [path]


def open_ordered(sources: list[Path], name: str, cache: Path) -> Corpus:
    """The ordered corpus of ``sources`` (read in the given order), split and indexed once into
    ``cache`` and reused while the sources' size, mtime and content are unchanged."""
    cache.mkdir(parents=True, exist_ok=True)
    stamp = [(str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in sources]
    key = hashlib.sha256(json.dumps([stamp, SPLITTER]).encode()).hexdigest()[:20]
    meta_path = cache / f"{key}.json"
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text())
    else:
        h = hashlib.sha256()
        for p in sources:
            h.update(sha256_file(p).encode())
        per_line = len(sources) == 1 and is_sentence_per_line(sources[0])
        if per_line:
            text = sources[0]
        else:
            text = split_running_text(sources, cache / f"{key}.sentences.txt")
        meta = {
            "text": str(text),
            "sha256": h.hexdigest(),
            "format": "sentence-per-line" if per_line else f"running text, split by {SPLITTER}",
            "files": [str(p) for p in sources],
        }
        build_line_index(Path(text), cache / f"{key}.idx")
        atomic_write_json(meta_path, meta)
    seq = LineSequence(Path(meta["text"]), cache / f"{key}.idx")
    if not any(s.strip() for s in seq):  # stops at the first sentence: a full scan only for a blank corpus
        raise DataError(f"ordered corpus {', '.join(str(p) for p in sources)}: no non-empty lines (sentences).")
    info = {"format": meta["format"], "files": [Path(f).name for f in meta["files"]]}
    return Corpus(kind="ordered", name=name, sentences=seq, sha256=meta["sha256"], ordered=True, info=info)


def load_ordered(data: Any, path: str | None) -> Corpus:
    """Corpus loader for kind ``ordered`` (see corpora.py)."""
    if path is None:
        root = None
        if getattr(data, "data_dir", None) is not None and (Path(data.data_dir) / JANEAUSTEN).is_dir():
            root = Path(data.data_dir) / JANEAUSTEN
        elif data is not None and getattr(data, "locate", None) and data.locate(f"{JANEAUSTEN}/emma.txt"):
            root = data.locate(f"{JANEAUSTEN}/emma.txt").parent
        if root is None:
            raise DataError(
                f"the default ordered corpus {JANEAUSTEN}/ (the Jane Austen novels) is not in the data dir; "
                f"pass --data-dir, or name a text file/folder with --corpus."
            )
        return open_ordered(_sources(root), "janeausten", _cache_root(data))
    p = Path(path).expanduser()
    if not p.exists():
        raise ConfigError(f"--corpus {path}: no such file or folder.")
    return open_ordered(_sources(p), f"file:{p.resolve()}", _cache_root(data))


register_corpus_loader("ordered", load_ordered)
