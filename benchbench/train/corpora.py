"""Training corpora: what text a method trains on, named and hashed for the record.

A method declares its corpus kind with the class attribute ``Method.corpus``:

* ``"task"`` (default): the task's own unlabelled sentences (TSDAE, CT, SimCSE, MLM; USEB trains one
  model per dataset on that dataset's sentences);
* ``"ordered"``: ORDERED running text (Quick-Thoughts: contiguous sentences of books). Default: the
  Jane Austen novels of the data dir (``corpora/janeausten``), or a text file / folder named with
  ``--corpus``; streamed, never held whole in memory;
* ``"general"``: a general unlabelled corpus independent of the task (BSL: the sentences of NLI
  data, IS-BERT's setting), or a text file named with ``--corpus``;
* ``"pairs"``: the task's own unlabelled sentence PAIRS plus its sentences (Trans-Encoder; such
  results are transductive and flagged so everywhere).

The runner calls :func:`training_corpus` and hands ``corpus.sentences`` (a sequence: ``len`` and
integer indexing; for ordered corpora item ``i`` is the i-th sentence in reading order) to
``Method.train``; ``corpus.describe()`` goes into every record's ``train.corpus``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchbench.core.errors import ConfigError

CORPUS_KINDS = ("task", "ordered", "general", "pairs")


@dataclass
class Corpus:
    """A training corpus. ``sentences`` supports ``len()`` and indexing (a list, or a lazy,
    file-backed sequence for big ordered corpora); ``pairs`` is set for the ``pairs`` kind."""

    kind: str
    name: str  # e.g. "task:stsb", "janeausten", "nli:snli+xnli-en", "file:/path/books.txt"
    sentences: Sequence[str]
    sha256: str | None = None  # of the corpus content, when known
    pairs: list[tuple[str, str]] | None = None
    ordered: bool = False
    info: dict[str, Any] = field(default_factory=dict)  # provenance: files, counts, notes

    def describe(self) -> dict[str, Any]:
        """The record's ``train.corpus`` entry."""
        out = {
            "kind": self.kind,
            "name": self.name,
            "sha256": self.sha256,
            "sentences": len(self.sentences),
            "ordered": self.ordered,
            **self.info,
        }
        if self.pairs is not None:
            out["pairs"] = len(self.pairs)
        return out


def sha256_of_lines(lines: Sequence[str]) -> str:
    h = hashlib.sha256()
    for s in lines:
        h.update(s.encode("utf-8", "surrogatepass") + b"\n")
    return h.hexdigest()


# loaders for the non-task kinds: kind -> loader(data, path or None) -> Corpus. Filled by the modules
# that implement them (ordered text: benchbench/train/ordered.py; general: benchbench/train/nli.py), imported lazily.
_LOADERS: dict[str, Callable[[Any, str | None], Corpus]] = {}
_LOADER_MODULES = {"ordered": ".ordered", "general": ".nli"}


def register_corpus_loader(kind: str, loader: Callable[[Any, str | None], Corpus]) -> None:
    _LOADERS[kind] = loader


def _loader(kind: str) -> Callable[[Any, str | None], Corpus]:
    if kind not in _LOADERS and kind in _LOADER_MODULES:
        import importlib

        importlib.import_module(_LOADER_MODULES[kind], __package__)  # registers itself on import
    if kind not in _LOADERS:
        raise ConfigError(f"no loader for corpus kind {kind!r}.")
    return _LOADERS[kind]


def corpus_kind(method_cls: type) -> str:
    kind = getattr(method_cls, "corpus", "task")
    if getattr(method_cls, "transductive", False) and kind == "task":
        kind = "pairs"
    if kind not in CORPUS_KINDS:
        raise ConfigError(
            f"Method {getattr(method_cls, 'name', method_cls)!r} declares corpus kind {kind!r}; "
            f"expected one of {CORPUS_KINDS}."
        )
    return kind


def training_corpus(
    method_cls: type, adapter: Any, data: Any, corpus_path: str | None = None, from_task: bool = False
) -> Corpus:
    """The corpus ``method_cls`` trains on for ``adapter``'s task. ``corpus_path`` (``--corpus``)
    replaces the default of the ``ordered`` and ``general`` kinds; for ``task``/``pairs`` methods it
    is an error (they train on the task's own text by definition). ``from_task`` (``--train-task``):
    a ``general`` method (BSL: any unlabelled sentences) trains on ``adapter``'s sentences instead of
    its general corpus, so every method of a domain-adaptation study sees the same in-domain text."""
    kind = corpus_kind(method_cls)
    if from_task and kind == "ordered":
        raise ConfigError(
            f"--train-task: method {method_cls.name!r} trains on ordered documents (running text), which a "
            "task's unlabelled sentences are not; run it without --train-task."
        )
    if kind in ("task", "pairs") or (from_task and kind == "general"):
        if corpus_path:
            raise ConfigError(
                f"--corpus {corpus_path}: method {method_cls.name!r} trains on each task's own "
                f"{'pairs' if kind == 'pairs' else 'sentences'}; --corpus applies to methods that "
                f"train on ordered or general text."
            )
        sentences = adapter.train_sentences()
        pairs = adapter.train_pairs() if kind == "pairs" else None
        h = hashlib.sha256()  # one stream over the sentences, then the pairs (the runner's historic run-folder key)
        for s in sentences:
            h.update(s.encode("utf-8", "surrogatepass") + b"\n")
        for a, b in pairs or []:
            h.update(f"{a}\t{b}\n".encode("utf-8", "surrogatepass"))
        return Corpus(kind=kind, name=f"task:{adapter.name}", sentences=sentences, pairs=pairs, sha256=h.hexdigest())
    if corpus_path is not None and not Path(corpus_path).exists():
        raise ConfigError(f"--corpus {corpus_path}: no such file or folder.")
    return _loader(kind)(data, corpus_path)
