"""Contamination flags for a (model, task[, subset]) cell: measured from text where both texts are at
hand, and declared from cards, task specs and the source relations.

Why not only by source name (``benchbench.encode.cards.zero_shot``): a card naming ``snli`` and a
task naming ``flickr8k`` never meet by name, yet SNLI's premises are Flickr30k captions, Flickr30k
extends Flickr 8K, and 32 scored STS15 ``images`` sentences occur verbatim in SNLI dev/test. So:

* **measured** (``verbatim``, ``ngram``): the test set's sentences against every corpus the encoder
  saw whose text benchbench holds: the start's own training text (a card's ``text_corpus``: the
  MLM corpus of tiny-mlm-nli) and each method's training corpus (a record's ``train.corpus``). The
  counting and the normalisation are ``benchbench.evaluate.analysis.overlap``'s; the hashed index
  of a corpus is cached on disk under its content sha256;
* **declared**: a training source (a card's ``[[training]]`` datasets, a corpus's known sources)
  that shares text with a test subset's sources through ``resources/source_relations.toml``
  (``snli -> flickr30k -> flickr8k <- sts15 images``), or names one of them outright.

A task with subsets (STS12-16, TwitterPara) gets flags per subset (its sources from the relations
file); a task of one subset (STS-B, SICK) gets ``subset = None``. The evaluated task's own pairs
(a transductive method's corpus, ``task:<task>`` of kind ``pairs``) are not measured: they hold the
test set by construction, and the row already carries the transductive mark.

The study view calls :func:`flags_for` per cell and prints :meth:`Flag.text` as a footnote.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchbench.core.errors import ConfigError, DataError
from benchbench.core.paths import default_data_cache
from benchbench.encode.cards import CORPUS_SOURCES, SOURCES, TRAIN_FILE_SOURCES, card_for
from benchbench.evaluate.analysis.overlap import MIN_WORDS, NGRAM, Overlap, OverlapIndex, cached_index, measure

log = logging.getLogger(__name__)

RELATIONS_FILE = Path(__file__).parent.parent / "resources" / "source_relations.toml"
KINDS = ("verbatim", "ngram", "declared")
START = "start"  # CorpusRef.via of the base model's own training text
TRAINING = "training corpus"


@dataclass(frozen=True)
class CorpusRef:
    """A corpus the encoder saw. ``load`` returns its sentences and content sha256 when its text is at
    hand (None: declared sources only); ``sha256`` (a record's ``train.corpus.sha256``) keys the
    cached index, so a cached corpus is not read again."""

    name: str
    via: str  # START or TRAINING
    kind: str = ""  # the record's corpus kind: task, pairs, general, ordered
    sha256: str | None = None
    sources: tuple[str, ...] = ()
    load: Callable[[], tuple[Sequence[str], str]] | None = None


@dataclass(frozen=True)
class Flag:
    """One reason a cell is not clean. ``count``/``denominator``: distinct test sentences found / looked
    at (measured flags; None for declared ones)."""

    subset: str | None
    kind: str  # "verbatim", "ngram" or "declared"
    count: int | None
    denominator: int | None
    what: str  # what overlapped
    source: str  # the corpus, or the card/relation evidence
    examples: tuple[str, ...] = ()

    def text(self) -> str:
        """One line for a table footnote."""
        where = f"{self.subset}: " if self.subset else ""
        if self.kind == "declared":
            return f"{where}declared: {self.what} ({self.source})"
        return f"{where}{self.count} of {self.denominator} test sentences {self.what} ({self.source})"


# ---- declared relations -----------------------------------------------------------------------


@dataclass(frozen=True)
class Relations:
    draws_from: Mapping[str, tuple[tuple[str, str], ...]]  # source -> ((drawn-from source, what), ...)
    subsets: Mapping[str, Mapping[str, tuple[str, ...]]]  # task -> subset -> sources


def _check_id(sid: Any, where: str) -> str:
    if not isinstance(sid, str) or sid.split(":", 1)[0] not in SOURCES:
        raise ConfigError(f"{where}: {sid!r} is not a source id of benchbench.encode.cards.SOURCES.")
    return sid


@functools.cache
def load_relations(path: Path = RELATIONS_FILE) -> Relations:
    """The relations file, checked: every id a known source, every relation with its evidence."""
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: cannot be read ({e}).") from e
    edges: dict[str, list[tuple[str, str]]] = {}
    for i, r in enumerate(raw.get("relation", []), 1):
        where = f"{path}, relation #{i}"
        if not isinstance(r, dict) or not r.get("evidence") or not r.get("what"):
            raise ConfigError(f"{where}: needs source, draws_from, what and evidence.")
        a, b = _check_id(r.get("source"), where), _check_id(r.get("draws_from"), where)
        edges.setdefault(a, []).append((b, str(r["what"])))
    subsets: dict[str, dict[str, tuple[str, ...]]] = {}
    for task, table in (raw.get("subsets") or {}).items():
        subsets[task] = {
            sub: tuple(_check_id(s, f"{path}, subsets.{task}.{sub}") for s in srcs) for sub, srcs in table.items()
        }
    return Relations({k: tuple(v) for k, v in edges.items()}, subsets)


def _covers(general: str, specific: str) -> bool:
    return specific == general or specific.startswith(general + ":")


def _reach(source: str, rel: Relations) -> dict[str, list[str]]:
    """Every source ``source`` draws text from (itself included), with the chain of ``what``s."""
    out: dict[str, list[str]] = {source: []}
    todo = [source]
    while todo:
        s = todo.pop()
        for t, what in rel.draws_from.get(s.split(":", 1)[0], ()) + rel.draws_from.get(s, ()):
            if t not in out:
                out[t] = out[s] + [what]
                todo.append(t)
    return out


def shared_text(train_source: str, test_source: str, rel: Relations | None = None) -> list[str] | None:
    """Why a model trained on ``train_source`` may have read ``test_source``'s sentences: the relation
    chain (``[]`` when the names meet outright: equal, or the test's more specific), else None."""
    rel = rel or load_relations()
    ra, rb = _reach(train_source, rel), _reach(test_source, rel)
    best: list[str] | None = None
    for a, why_a in ra.items():
        for b, why_b in rb.items():
            if _covers(a, b) or _covers(b, a):
                chain = why_a + why_b
                if best is None or len(chain) < len(best):
                    best = chain
    return best


def _training_sources(model: str, corpora: Sequence[CorpusRef]) -> list[tuple[str, tuple[str, ...], str]]:
    """(dataset, its sources, where documented) of everything the encoder trained on, by name."""
    card, _ = card_for(model)
    out = [(d.name, d.sources, f"model card {card.file}") for d in card.training] if card else []
    for c in corpora:
        if c.sources:
            out.append((c.name, c.sources, f"{c.via} {c.name}"))
    return out


def declared_flags(
    model: str, subset_sources: Mapping[str | None, Sequence[str]], corpora: Sequence[CorpusRef] = ()
) -> list[Flag]:
    """One flag per (subset, training source) that shares text with one of the subset's sources (the
    shortest relation chain, :func:`shared_text`); the datasets of one source are named together."""
    rel = load_relations()
    found: dict[tuple[str | None, str], dict[str, list[str]]] = {}  # (subset, how) -> where -> datasets
    for dataset, sources, where in _training_sources(model, corpora):
        for sub, test_sources in subset_sources.items():
            for a in sources:
                hits = [(chain, b) for b in test_sources if (chain := shared_text(a, b, rel)) is not None]
                if not hits:
                    continue
                chain, b = min(hits, key=lambda h: len(h[0]))
                how = f"trained on {a}, tested on {b}" + (f": {'; '.join(chain)}" if chain else "")
                found.setdefault((sub, how), {}).setdefault(where, []).append(dataset)
    out = []
    for (sub, how), by_where in found.items():
        datasets = dict.fromkeys(d for ds in by_where.values() for d in ds)
        out.append(Flag(sub, "declared", None, None, f"{how} [{', '.join(datasets)}]", "; ".join(by_where)))
    return out


# ---- measured overlap -------------------------------------------------------------------------


def default_cache_dir() -> Path:
    return default_data_cache().parent / "overlap"


_INDICES: dict[tuple[str, int, str], OverlapIndex] = {}  # (sha256, n, cache dir) -> index, per process
_MEASURED: dict[tuple, Overlap] = {}  # (test text sha256, corpus sha256, min_words, n) -> overlap, per process


def _index(corpus: CorpusRef, cache_dir: Path | None, n: int) -> tuple[str, OverlapIndex]:
    """(sha256, index) of the corpus; a corpus whose text at hand is not the one the record names
    (another sha256) is an error, never a silently different count."""
    if corpus.load is None:
        raise DataError(f"corpus {corpus.name!r}: its text is not at hand.")
    text: Sequence[str] | None = None
    sha = corpus.sha256
    if not sha:  # a corpus no record names (the start's text): its hash comes from its text
        text, sha = corpus.load()
    if (sha, n, str(cache_dir)) not in _INDICES:

        def read() -> Sequence[str]:
            sentences, got = corpus.load()  # type: ignore[misc]
            if got != sha:
                raise DataError(
                    f"corpus {corpus.name!r}: the record says sha256 {sha}, the text at hand has {got}: it is not "
                    "the text that was trained on (another data version?); its overlap is not measured."
                )
            return sentences

        _INDICES[(sha, n, str(cache_dir))] = cached_index(
            sha, (lambda: text) if text is not None else read, cache_dir, n
        )
    return sha, _INDICES[(sha, n, str(cache_dir))]


def _measured(sub: str | None, ov: Overlap, src: str) -> list[Flag]:
    out = []
    if ov.verbatim:
        what = f"of >= {ov.min_words} words occur verbatim"
        out.append(Flag(sub, "verbatim", len(ov.verbatim), ov.eligible_verbatim, what, src, ov.verbatim[:3]))
    if ov.ngram:
        what = f"of >= {ov.n} words share a {ov.n}-word span (not verbatim)"
        out.append(Flag(sub, "ngram", len(ov.ngram), ov.eligible_ngram, what, src, ov.ngram[:3]))
    return out


def measured_flags(
    test_sets: Mapping[str | None, Sequence[str]],
    corpora: Sequence[CorpusRef],
    *,
    task: str = "",
    cache_dir: Path | None = None,
    min_words: int = MIN_WORDS,
    n: int = NGRAM,
) -> list[Flag]:
    """Verbatim and n-gram flags of each subset's test sentences against each corpus whose text is at
    hand (the evaluated task's own pairs excepted: see the module docstring)."""
    seen: dict[str, tuple[OverlapIndex, list[CorpusRef]]] = {}  # one text under two names is measured once
    for corpus in corpora:
        if corpus.load is None or (corpus.kind == "pairs" and corpus.name == f"task:{task}"):
            continue
        sha, index = _index(corpus, cache_dir, n)
        seen.setdefault(sha, (index, []))[1].append(corpus)
    out: list[Flag] = []
    for sha, (index, refs) in seen.items():
        names = " = ".join(dict.fromkeys(c.name for c in refs))
        vias = " and ".join(dict.fromkeys("the start's own training text" if c.via == START else c.via for c in refs))
        for sub, sentences in test_sets.items():
            k = (_sha_of(sentences), sha, min_words, n)
            if k not in _MEASURED:
                _MEASURED[k] = measure(sentences, index, min_words)
            out += _measured(sub, _MEASURED[k], f"{names}, {vias}")
    return out


# ---- corpora and test sets from the data ------------------------------------------------------


def _sha_of(sentences: Iterable[str], pairs: Iterable[tuple[str, str]] = ()) -> str:
    """``benchbench.train.corpora``'s content hash: the sentences, one a line, then the pairs."""
    h = hashlib.sha256()
    for s in sentences:
        h.update(s.encode("utf-8", "surrogatepass") + b"\n")
    for a, b in pairs:
        h.update(f"{a}\t{b}\n".encode("utf-8", "surrogatepass"))
    return h.hexdigest()


_NAMED: dict[tuple[str, str], tuple[Sequence[str], str]] = {}


def _named_loader(name: str, data: Any) -> Callable[[], tuple[Sequence[str], str]] | None:
    from benchbench.train.nli import CORPUS_NAME, load_general_corpus
    from benchbench.train.ordered import load_ordered

    loaders = {CORPUS_NAME: load_general_corpus, "janeausten": load_ordered}
    if name not in loaders:
        return None

    def load() -> tuple[Sequence[str], str]:
        k = (str(getattr(data, "data_dir", "")), name)
        if k not in _NAMED:  # read once per process: every cell of a study asks for the start's text
            c = loaders[name](data, None)
            _NAMED[k] = (c.sentences, str(c.sha256))
        return _NAMED[k]

    return load


def _task_loader(task: str, kind: str, data: Any, registry: Any) -> Callable[[], tuple[Sequence[str], str]]:
    def load() -> tuple[Sequence[str], str]:
        from benchbench.core.registry import make_adapter

        adapter = make_adapter(registry, task, data)
        sentences = adapter.train_sentences()
        pairs = adapter.train_pairs() if kind == "pairs" else None
        return list(sentences) + [s for p in pairs or [] for s in p], _sha_of(sentences, pairs or [])

    return load


def _registry(registry: Any) -> Any:
    if registry is not None:
        return registry
    from benchbench.core.registry import get_registry

    return get_registry()


def corpus_ref(corpus: Mapping[str, Any] | None, *, data: Any, registry: Any = None) -> CorpusRef | None:
    """A record's ``train.corpus`` as a CorpusRef (None: no training). Its text is at hand for a
    task's corpus (``task:<name>``) and benchbench's named corpora; a ``--corpus`` file is not."""
    if not corpus:
        return None
    name, kind = str(corpus.get("name", "")), str(corpus.get("kind", ""))
    sources: tuple[str, ...] = tuple(CORPUS_SOURCES.get(name, ()))
    load = None
    if kind in ("task", "pairs") and name.startswith("task:"):
        registry = _registry(registry)
        train = getattr(registry.task(name[5:]), "train", None) or {}
        if train.get("source") == "file":  # a task whose unlabelled text is another file (STS: Wikipedia)
            sources = tuple(TRAIN_FILE_SOURCES.get(str(train.get("path", "")), ()))
        load = _task_loader(name[5:], kind, data, registry)
    elif kind in ("general", "ordered"):
        load = _named_loader(name, data)
    return CorpusRef(name, TRAINING, kind, corpus.get("sha256"), sources, load)


def start_corpora(model: str, data: Any) -> list[CorpusRef]:
    """The base model's own training text when its card names one (``text_corpus``)."""
    card, _ = card_for(model)
    if card is None or not card.text_corpus:
        return []
    load = _named_loader(card.text_corpus, data)
    if load is None:
        raise ConfigError(
            f"Model card {card.file}: text_corpus {card.text_corpus!r} is not a corpus benchbench builds."
        )
    return [CorpusRef(card.text_corpus, START, "general", None, (), load)]


_TEST_SETS: dict[tuple[str, str, str], dict[str | None, list[str]]] = {}


# task kinds whose test split is sentence pairs: their sentences are measured against the corpora
PAIR_KINDS = frozenset({"sts", "twitterpara", "pair-auc", "sick-relatedness", "afs", "hf-sts", "hf-pairs"})


def _is_pairs(loaded: Any) -> bool:
    """``{subset: (sentences a, sentences b, ...)}``: what a pair task's adapter loads."""
    if not isinstance(loaded, Mapping) or not loaded:
        return False
    return all(
        isinstance(v, (tuple, list)) and len(v) >= 2 and all(isinstance(side, (list, tuple)) for side in v[:2])
        for v in loaded.values()
    )


def task_test_sets(task: str, data: Any, registry: Any = None, split: str = "test") -> dict[str | None, list[str]]:
    """subset (None for a task of one) -> its distinct test sentences, read once per process."""
    k = (str(getattr(data, "data_dir", "")), task, split)
    if k not in _TEST_SETS:
        from benchbench.core.registry import make_adapter

        reg = _registry(registry)
        if getattr(reg.task(task), "kind", None) not in PAIR_KINDS:
            _TEST_SETS[k] = {None: []}  # not a pair task: see below
            return _TEST_SETS[k]
        loaded = make_adapter(reg, task, data).load(split)
        if not _is_pairs(loaded):
            # a retrieval, reranking or classification task: its test text is not sentence pairs; measured
            # overlap is not computed for it (declared relations still flag it)
            _TEST_SETS[k] = {None: []}
            return _TEST_SETS[k]
        subs = {sub: list(dict.fromkeys(s for side in v[:2] for s in side)) for sub, v in loaded.items()}
        _TEST_SETS[k] = {None: next(iter(subs.values()))} if len(subs) == 1 else dict(subs)
    return _TEST_SETS[k]


def subset_sources(task: str, subsets: Iterable[str | None], registry: Any = None) -> dict[str | None, tuple[str, ...]]:
    """Each subset's sources: the relations file's, else the task spec's ``sources``."""
    table = load_relations().subsets.get(task, {})
    spec = _registry(registry).task(task)
    spec_sources = tuple(getattr(spec, "sources", ()) or ())
    return {sub: table.get(sub, spec_sources) if sub else spec_sources for sub in subsets}


def flags_for(
    model: str,
    task: str,
    training_corpora: Sequence[CorpusRef] = (),
    *,
    data: Any = None,
    registry: Any = None,
    cache_dir: Path | None = None,
    include_start: bool = True,
    min_words: int = MIN_WORDS,
    n: int = NGRAM,
) -> list[Flag]:
    """Every flag of a (model, task) cell, per subset: measured against the start's own text (the
    card's ``text_corpus``, unless ``include_start`` is False) and each of ``training_corpora`` (from
    :func:`corpus_ref`), plus the declared ones. ``data``: a ``DataStore`` (default: one from
    ``BENCHBENCH_DATA``); ``cache_dir``: where corpus indices are kept (default ``default_cache_dir()``)."""
    if data is None:
        from benchbench.store.data import DataStore

        data = DataStore()
    corpora = [*(start_corpora(model, data) if include_start else []), *training_corpora]
    tests = task_test_sets(task, data, registry)
    cache = cache_dir if cache_dir is not None else default_cache_dir()
    out = measured_flags(tests, corpora, task=task, cache_dir=cache, min_words=min_words, n=n)
    out += declared_flags(model, subset_sources(task, tests, registry), corpora)
    order = {s: i for i, s in enumerate(tests)}
    return sorted(out, key=lambda f: (order.get(f.subset, -1), KINDS.index(f.kind)))


def overlap_flags(
    records: Iterable[Mapping[str, Any]], *, data: Any = None, registry: Any = None, cache_dir: Path | None = None
) -> Callable[..., list[str]]:
    """``(method, task) -> [Flag.text(), ...]`` over a study's records (the study view's
    ``overlap_flags``): each cell's base model (the records' ``model``) and the distinct training
    corpora of its records (``train.corpus``, one per sha256), computed on first use. The start's
    own-text flags are the same for every method of a column."""
    if data is None:  # one store for every cell: corpus_ref's adapters read through it
        from benchbench.store.data import DataStore

        data = DataStore()
    cells: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in records:
        cells.setdefault((str(r.get("method")), str(r.get("task"))), []).append(r)
    done: dict[tuple[str, str], list[str]] = {}

    def flags(method: str, task: str, model: str | None = None) -> list[str]:
        """``model``: only the records of that base model (a study's random-init row shares the start's
        method and another model)."""
        key = (method, task, model)
        if key not in done:
            rs = [r for r in cells.get((method, task), []) if model is None or str(r.get("model")) == model]
            models = sorted({str(r.get("model")) for r in rs})
            if len(models) > 1:
                raise DataError(f"study cell {method} / {task}: its records name {len(models)} base models {models}.")
            corpora = {}
            for r in rs:
                c = (r.get("train") or {}).get("corpus")
                if c:
                    corpora.setdefault(c.get("sha256") or c.get("name"), c)
            try:
                refs = [corpus_ref(c, data=data, registry=registry) for c in corpora.values()]
                found = (
                    flags_for(
                        models[0], task, [x for x in refs if x], data=data, registry=registry, cache_dir=cache_dir
                    )
                    if models
                    else []
                )
                done[key] = [f.text() for f in found]
            except DataError as e:  # a page is still built; the cell says what could not be measured, and why
                log.warning("contamination of %s / %s not measured: %s", method, task, e)
                done[key] = [f"contamination not measured from text: {type(e).__name__} reading its data"]
        return done[key]

    return flags
