"""Base-model cards: what each base model was trained on, so a (model, task) cell says whether it is
zero-shot (MTEB's ``ModelMeta.training_datasets``, made for training).

A card is a TOML file in ``benchbench/resources/model_cards/``: the model's name and aliases, its
revision or fingerprint where known, its parameter count, the card it was read from, and two lists
of datasets, each naming the *sources* it drew its text from (ids of ``SOURCES``):

* ``[[training]]``: sentence-level training data (pairs, triplets, labels). A task whose spec names
  one of these sources (``sources = [...]`` in ``tasks/*.toml``) was seen in training: the cell is
  not zero-shot;
* ``[[pretraining]]``: general language-model text (Wikipedia, BookCorpus, Gigaword). Recorded, never
  counted: as in MTEB, a model is not called non-zero-shot for having read Wikipedia.

``text_corpus`` (optional) names a benchbench corpus holding the very text the model trained on, for
a model benchbench built itself (tiny-mlm-nli): its overlap with a test set is then measured from
text (``benchbench.report.contamination``), not only matched by source name.

A card's source covers a task's source when they are equal or the task's is more specific (card
``stackexchange`` covers task ``stackexchange:askubuntu.com``), never the other way round.

An encoder benchbench trains inherits its base model's card plus what the run trained it on: a
general or ordered corpus (``CORPUS_SOURCES``), a task's ``train.path`` file, or a setup's supervised
stages. The task's own unlabelled text (the benchmark's unsupervised in-domain protocol) does not
count; training on its pairs is flagged ``transductive`` in the record instead. Anything whose
sources are not known (a local folder with an unknown name, a ``--corpus`` file) makes the cell's
zero-shot status unknown (``None``), never silently zero-shot.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchbench.core.errors import ConfigError

CARDS_DIR = Path(__file__).parent.parent / "resources" / "model_cards"

# every source id a card or a task spec may name: id -> what it is
SOURCES: dict[str, str] = {
    # sentence-level training data of the sentence-transformers 1B-pair models
    "reddit": "Reddit comments",
    "semantic-scholar": "Semantic Scholar papers and their citation graph (S2ORC, SPECTER triplets, SciDocs)",
    "wikianswers": "WikiAnswers duplicate questions",
    "paq": "PAQ generated question-answer pairs",
    "stackexchange": "Stack Exchange sites (questions, answers, duplicate marks); stackexchange:<site> for one site",
    "msmarco": "MS MARCO passage ranking (Bing queries)",
    "gooaq": "GooAQ (Google autocomplete questions and answers)",
    "amazon-qa": "Amazon product questions and answers",
    "yahoo-answers": "Yahoo Answers",
    "codesearchnet": "CodeSearchNet (code and docstrings)",
    "coco-captions": "MS COCO image captions",
    "searchqa": "SearchQA (Jeopardy! questions and search snippets)",
    "eli5": "ELI5 (Reddit explain-like-I'm-five)",
    "flickr30k": "Flickr30k image captions",
    "snli": "SNLI (premises are Flickr30k captions)",
    "multinli": "MultiNLI",
    "xnli": "XNLI English dev/test (new sentences written as MultiNLI's)",
    "sentence-compression": "Google sentence compression (news)",
    "wikihow": "WikiHow",
    "altlex": "AltLex (Wikipedia / Simple Wikipedia causal pairs)",
    "quora": "Quora question pairs",
    "simple-wikipedia": "Simple English Wikipedia aligned to Wikipedia",
    "natural-questions": "Natural Questions",
    "squad": "SQuAD (Wikipedia questions and paragraphs)",
    "triviaqa": "TriviaQA",
    # language-model pre-training text (never counted)
    "wikipedia": "English Wikipedia",
    "bookcorpus": "BookCorpus",
    "gigaword": "English Gigaword (newswire)",
    "openwebtext": "OpenWebText",
    "cc-news": "CC-News",
    "stories": "Stories (CommonCrawl subset)",
    "project-gutenberg": "Project Gutenberg books (project-gutenberg:jane-austen: Jane Austen's novels)",
    "fineweb-edu": "FineWeb-Edu (educational web pages filtered from CommonCrawl)",
    "dclm": "DCLM baseline (filtered CommonCrawl web text)",
    "the-stack": "The Stack / Stack-Edu (source code)",
    "finemath": "FineMath (mathematical web pages)",
    "smoltalk": "SmolTalk / smol-smoltalk (instruction-tuning conversations, synthetic and public sets)",
    "ultrafeedback": "UltraFeedback (preference pairs over model answers)",
    # evaluation data that no card names (today): tasks name them so a new card can match them
    "semeval-sts": "SemEval STS 2012-2016 pairs (STS-B is selected from them and from STS 2017)",
    "stsb": "STS Benchmark",
    "sick": "SICK (SemEval-2014 Task 1)",
    "flickr8k": "Flickr 8K image descriptions (Rashtchian et al. 2010; Hodosh et al. 2013)",
    "msr-video": "MSR Video Paraphrase descriptions",
    "pascal-sentences": "PASCAL VOC-2008 image descriptions (Rashtchian et al. 2010; STS 2014 images)",
    "msr-paraphrase": "Microsoft Research Paraphrase Corpus (news)",
    "europarl": "Europarl machine-translation pairs",
    "ontonotes-wordnet": "OntoNotes / FrameNet / WordNet sense glosses",
    "emm-headlines": "news headlines of the Europe Media Monitor",
    "deft": "DEFT discussion forums and news (LDC)",
    "wmt": "WMT machine-translation quality estimation / news commentary",
    "student-answers": "student answers paired with reference answers",
    "plagiarism": "Corpus of Plagiarised Short Answers",
    "twitter": "Twitter",
    "rotten-tomatoes": "Rotten Tomatoes movie-review snippets",
    "imdb": "IMDb plot summaries",
    "customer-reviews": "product reviews (Hu & Liu 2004)",
    "mpqa": "MPQA opinion corpus (news)",
    "trec": "TREC question classification (Li & Roth 2002)",
    "argument-facets": "online debate arguments (AFS, Misra et al. 2016)",
    "yelp": "Yelp reviews",
}

UNKNOWN = "unknown"

# training corpora benchbench itself provides (``train.corpora``'s Corpus.name) -> their sources
CORPUS_SOURCES: dict[str, list[str]] = {
    "nli:snli-devtest+xnli-en-devtest": ["snli", "xnli"],
    "janeausten": ["project-gutenberg:jane-austen"],
}
# a task's ``train = { source = "file", path = ... }`` file -> its sources
TRAIN_FILE_SOURCES: dict[str, list[str]] = {
    "corpora/wiki/wiki_sentences.txt": ["wikipedia"],
}
# the supervised stages of ``--setup`` pipelines (benchbench.train.setups) -> (dataset, sources);
# ``in-domain`` trains on the evaluated task's own labelled train pairs and is handled apart
STAGE_DATA: dict[str, list[tuple[str, list[str]]]] = {
    "general": [
        ("SNLI dev/test entailment pairs", ["snli"]),
        ("XNLI-en dev/test entailment pairs", ["xnli"]),
        ("SICK train entailment pairs", ["sick"]),
        ("STS-B train (selected from SemEval STS 2012-2016)", ["stsb", "semeval-sts"]),
    ],
}
_SETUP_SOURCE = "benchbench/train/setups.py (the setup's supervised stage)"


@dataclass(frozen=True)
class CardDataset:
    name: str
    sources: tuple[str, ...]
    source: str  # where the card documents it
    tuples: int | None = None


@dataclass(frozen=True)
class ModelCard:
    name: str
    aliases: tuple[str, ...]
    card: str  # the model card / page the lists come from
    file: str  # the card file's name
    hub_id: str = ""
    revision: str = ""
    fingerprint: str = ""
    parameters: int = 0
    base_model: str = ""
    saw_nothing: bool = False
    text_corpus: str = ""  # a benchbench corpus holding the very text it trained on (measured overlap)
    training: tuple[CardDataset, ...] = ()
    pretraining: tuple[CardDataset, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)


_CARD_KEYS = {
    "name",
    "aliases",
    "hub_id",
    "revision",
    "fingerprint",
    "parameters",
    "base_model",
    "card",
    "saw_nothing",
    "text_corpus",
    "notes",
    "training",
    "pretraining",
}


def check_source_id(sid: Any, where: str) -> None:
    """A source id must be a known one (``SOURCES``), optionally narrowed as ``id:detail``."""
    if not isinstance(sid, str) or sid.split(":", 1)[0] not in SOURCES:
        raise ConfigError(
            f"{where}: source {sid!r} is not a known source id (benchbench.encode.cards.SOURCES); "
            f"use one of {sorted(SOURCES)} (optionally narrowed as 'id:detail')."
        )


def _datasets(raw: Any, path: Path, key: str, card_url: str) -> tuple[CardDataset, ...]:
    if not isinstance(raw, list):
        raise ConfigError(f"Model card {path}: [[{key}]] must be an array of tables.")
    out = []
    for i, d in enumerate(raw):
        where = f"Model card {path}, {key} #{i + 1}"
        if not isinstance(d, dict) or not isinstance(d.get("name"), str) or not d["name"]:
            raise ConfigError(f"{where}: needs a name.")
        extra = set(d) - {"name", "sources", "source", "tuples"}
        if extra:
            raise ConfigError(f"{where}: unknown keys {sorted(extra)}.")
        sources = d.get("sources")
        if not isinstance(sources, list) or not sources:
            raise ConfigError(f"{where}: sources must be a non-empty list of source ids.")
        for s in sources:
            check_source_id(s, where)
        tuples = d.get("tuples")
        if tuples is not None and (isinstance(tuples, bool) or not isinstance(tuples, int) or tuples < 0):
            raise ConfigError(f"{where}: tuples must be a count (got {tuples!r}).")
        out.append(CardDataset(d["name"], tuple(sources), str(d.get("source") or card_url), tuples))
    return tuple(out)


def load_card(path: Path) -> ModelCard:
    """One card file, checked: unknown keys and unknown source ids are errors naming the file."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"Model card {path}: cannot be read ({e}).") from e
    extra = set(raw) - _CARD_KEYS
    if extra:
        raise ConfigError(f"Model card {path}: unknown keys {sorted(extra)}.")
    for req in ("name", "card"):
        if not isinstance(raw.get(req), str) or not raw[req]:
            raise ConfigError(f"Model card {path}: missing {req!r}.")
    if not isinstance(raw.get("text_corpus", ""), str):
        raise ConfigError(f"Model card {path}: text_corpus must be a corpus name (a string).")
    params = raw.get("parameters", 0)
    if isinstance(params, bool) or not isinstance(params, int) or params < 0:
        raise ConfigError(f"Model card {path}: parameters must be a count (got {params!r}).")
    card = ModelCard(
        name=raw["name"],
        aliases=tuple(raw.get("aliases", [])),
        card=raw["card"],
        file=path.name,
        hub_id=raw.get("hub_id", ""),
        revision=raw.get("revision", ""),
        fingerprint=raw.get("fingerprint", ""),
        parameters=params,
        base_model=raw.get("base_model", ""),
        saw_nothing=bool(raw.get("saw_nothing", False)),
        text_corpus=raw.get("text_corpus", ""),
        training=_datasets(raw.get("training", []), path, "training", raw["card"]),
        pretraining=_datasets(raw.get("pretraining", []), path, "pretraining", raw["card"]),
        notes=tuple(raw.get("notes", [])),
    )
    if card.saw_nothing and (card.training or card.pretraining):
        raise ConfigError(f"Model card {path}: saw_nothing = true but it lists datasets.")
    return card


@functools.cache
def all_cards() -> dict[str, ModelCard]:
    """Every packaged card by each of its lower-cased names and aliases."""
    out: dict[str, ModelCard] = {}
    for f in sorted(CARDS_DIR.glob("*.toml")):
        card = load_card(f)
        for alias in (card.name, *card.aliases):
            key = alias.lower()
            if key in out and out[key] is not card:
                raise ConfigError(f"Model card {f}: name {alias!r} is also claimed by {out[key].file}.")
            out[key] = card
    return out


_TINY = re.compile(r"^tiny-bert(:\d+:\d+:\d+:\d+)?$")
TINY_DECODER = re.compile(r"^tiny-(llama|qwen2)(:\d+:\d+:\d+:\d+)?$")


def _lookup(name: str) -> ModelCard | None:
    cards = all_cards()
    key = name.lower()
    if _TINY.match(key):
        key = "tiny-bert"
    if TINY_DECODER.match(key):
        key = "tiny-decoder"
    return cards.get(key) or cards.get(key.removeprefix("sentence-transformers/"))


def card_for(model_label: str) -> tuple[ModelCard | None, str]:
    """(card, how it was found) for a record's ``model`` label: ``"name"`` (a model benchbench resolves
    by name), ``"folder name"`` (a local folder, ``<folder>@<hash>``, whose folder is named as a known
    model: the weights are not checked to be that model's) or ``(None, "unknown")``."""
    card = _lookup(model_label)
    if card is not None:
        return card, "name"
    folder, at, digest = model_label.rpartition("@")
    if at and folder and re.fullmatch(r"[0-9a-f]{12}", digest):
        card = _lookup(folder)
        if card is not None:
            return card, "folder name"
    return None, UNKNOWN


def _covers(card_source: str, task_source: str) -> bool:
    return task_source == card_source or task_source.startswith(card_source + ":")


def _overlaps(
    datasets: Iterable[tuple[str, Sequence[str], str]], task_sources: Sequence[str], via: str
) -> list[dict[str, str]]:
    out = []
    for name, sources, where in datasets:
        hit = [t for t in task_sources if any(_covers(s, t) for s in sources)]
        if hit:
            out.append({"dataset": name, "source": where, "overlap": ", ".join(hit), "via": via})
    return out


def corpus_sources(corpus: dict[str, Any] | None, task_train: dict[str, Any] | None) -> list[str] | None:
    """The sources of what a run trained on (the record's ``train.corpus``): ``[]`` for the task's own
    unlabelled text or no training, the known sources of a benchbench corpus or task train file, and
    None when unknown (a ``--corpus`` file, an unlisted corpus)."""
    if not corpus:
        return []
    kind, name = corpus.get("kind"), str(corpus.get("name", ""))
    if kind in ("task", "pairs"):
        train = task_train or {}
        if train.get("source", "self") == "self":
            return []  # the task's own text: the unsupervised in-domain protocol (pairs: ``transductive``)
        return TRAIN_FILE_SOURCES.get(str(train.get("path", "")))
    return CORPUS_SOURCES.get(name)


def zero_shot(
    model_label: str,
    task: str,
    task_sources: Sequence[str],
    *,
    corpus: dict[str, Any] | None = None,
    task_train: dict[str, Any] | None = None,
    stages: Sequence[str] = (),
    also_models: Sequence[str] = (),
) -> dict[str, Any]:
    """The record's zero-shot fields for one (base model, task) cell:

    * ``model_card``: the card's name, or ``"unknown"``; ``model_card_match``: ``"name"`` or
      ``"folder name"`` (absent when unknown);
    * ``contamination``: ``[{dataset, source, overlap, via}]``: each training dataset whose sources
      cover one of the task's (``overlap``: the task's sources it covers), ``via`` ``"base model"``,
      ``"training corpus"`` or ``"setup"``;
    * ``zero_shot``: False when ``contamination`` is not empty, None when the base model's card or the
      training corpus's sources are unknown (``zero_shot_unknown`` says which), else True.

    ``also_models``: further base models the method trained from (Trans-Encoder's mutual ensemble).
    """
    card, match = card_for(model_label)
    found: list[dict[str, str]] = []
    unknown: list[str] = []
    if card is None:
        unknown.append(f"no card for base model {model_label!r}")
    else:
        found += _overlaps(((d.name, d.sources, d.source) for d in card.training), task_sources, "base model")
    for other in dict.fromkeys(m for m in also_models if m != model_label):
        other_card, _ = card_for(other)
        if other_card is None:
            unknown.append(f"no card for base model {other!r}")
        elif other_card is not card:
            datasets = ((d.name, d.sources, d.source) for d in other_card.training)
            found += _overlaps(datasets, task_sources, f"base model {other_card.name}")
    if corpus:
        srcs = corpus_sources(corpus, task_train)
        if srcs is None:
            unknown.append(f"the sources of training corpus {_corpus_label(corpus)!r} are not known")
        else:
            where = f"benchbench training corpus {_corpus_label(corpus)}"
            found += _overlaps([(_corpus_label(corpus), srcs, where)], task_sources, "training corpus")
    for stage in stages:
        if stage == "in-domain":
            found.append(
                {
                    "dataset": f"{task} labelled train pairs",
                    "source": _SETUP_SOURCE,
                    "overlap": f"the task {task!r} itself",
                    "via": "setup",
                }
            )
        else:
            found += _overlaps(((n, s, _SETUP_SOURCE) for n, s in STAGE_DATA.get(stage, [])), task_sources, "setup")
    out: dict[str, Any] = {
        "model_card": card.name if card else UNKNOWN,
        "contamination": found,
        "zero_shot": False if found else (None if unknown else True),
    }
    if card is not None:
        out["model_card_match"] = match
    if out["zero_shot"] is None:
        out["zero_shot_unknown"] = "; ".join(unknown)
    return out


def _corpus_label(corpus: dict[str, Any]) -> str:
    """The corpus's name, never a machine path (a ``--corpus`` file is named by its file name)."""
    name = str(corpus.get("name", "?"))
    if name.startswith("file:"):
        return "file:" + Path(name[5:]).name
    return name
