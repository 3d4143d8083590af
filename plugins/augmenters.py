"""Text views for BSL (Zhang et al. 2021, Table 4 and section 4.4): back-translation, WordNet synonyms,
masked-LM substitution and NLI entailment, each its own augmenter.

Every augmenter here is a deterministic function of (its config, the text) and is cached on disk
(``benchbench.ViewCache``, keyed by augmenter, config and text), so a corpus is transformed once and
a second epoch or run costs only lookups. The augmenter contract is ``aug(texts, rng) -> views``;
these also offer ``views(texts, rng, two_view)``:

* single-view (x1 = x, x2 = T(x)), BSL section 4.4;
* two-view (x1 = T1(x), x2 = T2(x)): back-translation through two pivot languages; for synonym and
  mlm, two independently seeded substitutions.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchbench import ConfigError, ViewCache, hookimpl

_WORD = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)*|\S")


def _tokens(text: str) -> list[tuple[str, str]]:
    """(word, whitespace before it) pairs, so that substitutions keep the sentence's spacing."""
    out, pos = [], 0
    for m in _WORD.finditer(text):
        out.append((m.group(), text[pos : m.start()]))
        pos = m.end()
    return out


def _detok(toks: list[tuple[str, str]]) -> str:
    return "".join(sp + w for w, sp in toks)


def _text_seed(seed: int, variant: int, text: str) -> np.random.Generator:
    """A generator fixed by (seed, variant, text): the view of a sentence does not depend on which
    batch it came in, so it can be cached."""
    h = int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8], "little")
    return np.random.default_rng([seed, variant, h])


class CachedAugmenter:
    """Base: ``transform(texts, variant) -> views`` (deterministic), cached per (name, config, variant)."""

    name = ""

    def __init__(self, cache: ViewCache | None = None):
        self._cache = cache

    @property
    def cache(self) -> ViewCache:
        if self._cache is None:
            self._cache = ViewCache()
        return self._cache

    def config(self) -> dict[str, Any]:
        return asdict(self.cfg)

    def transform(self, texts: list[str], variant: int) -> list[str]:
        raise NotImplementedError

    def apply(self, texts: list[str], variant: int = 0) -> list[str]:
        return self.cache.map(
            self.name, {**self.config(), "variant": variant}, list(texts), lambda todo: self.transform(todo, variant)
        )

    def __call__(self, texts: list[str], rng: np.random.Generator | None = None) -> list[str]:
        return self.apply(texts, 0)

    def views(
        self, texts: list[str], rng: np.random.Generator | None = None, two_view: bool = False
    ) -> tuple[list[str], list[str]]:
        texts = list(texts)
        if two_view:
            return self.apply(texts, 0), self.apply(texts, 1)
        return texts, self.apply(texts, 0)

    def prepare(self, ctx: Any) -> None:
        """Hook for what needs the training context (data store, base model); default: nothing."""


# --- back-translation through Apertium -------------------------------------------------------------


@dataclass
class BackTranslateConfig:
    pivots: tuple[str, ...] = ("spa", "cat")  # en->es->en, en->ca->en (Apertium's language codes)
    source: str = "eng"
    batch_lines: int = 2000  # sentences per apertium call


APT_PACKAGES = {"spa": "apertium-eng-spa", "cat": "apertium-eng-cat"}


class BackTranslate(CachedAugmenter):
    """Round trip through a pivot language with Apertium (rule-based MT, offline), run as a subprocess.

    The paper used neural en->de->en and en->fr->en; Apertium here has eng<->spa and eng<->cat.
    Sentences go one a line in a batch; Apertium's text mode keeps line breaks, and the output's line
    count is checked against the input's (a mismatch falls back to one call per sentence). Variant i
    uses ``pivots[i]``. A user with a neural MT system can register it as another augmenter."""

    name = "backtranslate"

    def __init__(self, cfg: BackTranslateConfig | None = None, cache: ViewCache | None = None):
        super().__init__(cache)
        self.cfg = cfg or BackTranslateConfig()

    @staticmethod
    def available(source: str = "eng", pivot: str = "spa") -> str | None:
        """None when ``apertium`` can translate source<->pivot, else what to install."""
        pkg = APT_PACKAGES.get(pivot, f"apertium-{source}-{pivot}")
        if shutil.which("apertium") is None:
            return f"the `apertium` program is not installed: apt-get install apertium {pkg}"
        try:
            modes = subprocess.run(["apertium", "-l"], capture_output=True, text=True, timeout=60).stdout.split()
        except (OSError, subprocess.SubprocessError) as e:
            return f"`apertium -l` failed ({e}): reinstall with apt-get install apertium {pkg}"
        missing = [m for m in (f"{source}-{pivot}", f"{pivot}-{source}") if m not in modes]
        if missing:
            return f"Apertium has no language pair {', '.join(missing)}: apt-get install {pkg}"
        return None

    def _run(self, mode: str, text: str) -> str:
        try:
            p = subprocess.run(
                ["apertium", "-u", "-f", "txt", mode], input=text, capture_output=True, text=True, timeout=3600
            )
        except FileNotFoundError as e:
            raise ConfigError(
                f"augmenter 'backtranslate': {self.available(self.cfg.source, mode.split('-')[1])}"
            ) from e
        if p.returncode != 0:
            raise RuntimeError(f"augmenter 'backtranslate': `apertium {mode}` failed: {p.stderr.strip()[:500]}")
        return p.stdout

    def round_trip(self, texts: list[str], pivot: str) -> list[str]:
        """``texts`` translated source->pivot->source, one Apertium call per direction per batch."""
        why = self.available(self.cfg.source, pivot)
        if why:
            raise ConfigError(f"augmenter 'backtranslate' (pivot {pivot!r}): {why}")
        out: list[str] = []
        for i in range(0, len(texts), max(1, self.cfg.batch_lines)):
            chunk = [" ".join(t.split()) or "." for t in texts[i : i + self.cfg.batch_lines]]  # one line each
            out += self._lines(chunk, pivot)
        return out

    def _lines(self, chunk: list[str], pivot: str) -> list[str]:
        """One round trip per line of ``chunk``. When the line breaks do not survive (a sentence Apertium
        splits or joins), the chunk is halved until they do: the offending sentence ends up alone (its
        whole output is its view), and the rest keep batch speed (one call per sentence for a chunk of
        2,000 took ~20 minutes)."""
        src = self.cfg.source
        back = self._run(f"{pivot}-{src}", self._run(f"{src}-{pivot}", "\n".join(chunk) + "\n"))
        if len(chunk) == 1:
            return [back.strip()]
        lines = back.rstrip("\n").split("\n")
        if len(lines) == len(chunk):
            return [ln.strip() for ln in lines]
        mid = len(chunk) // 2
        return self._lines(chunk[:mid], pivot) + self._lines(chunk[mid:], pivot)

    def transform(self, texts: list[str], variant: int) -> list[str]:
        if variant >= len(self.cfg.pivots):
            raise ConfigError(
                f"augmenter 'backtranslate': view {variant + 1} needs pivot #{variant + 1}; "
                f"configured pivots: {self.cfg.pivots}."
            )
        return self.round_trip(texts, self.cfg.pivots[variant])

    def config(self) -> dict[str, Any]:  # batch size changes speed only, never a view
        return {"pivots": list(self.cfg.pivots), "source": self.cfg.source, "engine": "apertium"}


# --- WordNet synonyms ----------------------------------------------------------------------------

WORDNET_DIRS = ("/usr/share/wordnet",)  # Debian package `wordnet-base` (WordNet 3.0)
_POS_FILES = ("noun", "verb", "adj", "adv")


class WordNet:
    """Synonyms from the WordNet 3.0 database files (Debian `wordnet-base`, read offline).

    Read by hand (index.<pos> -> synset offsets -> data.<pos> lemma lists), because NLTK 3.10's
    WordNet reader refuses the Debian layout (it wants a ``lexnames`` file and rejects paths outside
    its data roots) and ``wn`` needs a data download."""

    def __init__(self, root: str | None = None):
        root = (
            root or os.environ.get("WNHOME") or next((d for d in WORDNET_DIRS if Path(d, "index.noun").is_file()), None)
        )
        if root is None or not Path(root, "index.noun").is_file():
            raise ConfigError(
                "augmenter 'synonym': WordNet 3.0 database not found (looked in "
                f"{root or WORDNET_DIRS}): apt-get install wordnet-base, or set WNHOME to its folder."
            )
        self.root = Path(root)
        self._index: dict[str, list[tuple[str, int]]] = {}
        for pos in _POS_FILES:
            with open(self.root / f"index.{pos}", encoding="utf-8") as f:
                for line in f:
                    if line.startswith(" "):  # licence header
                        continue
                    parts = line.split()
                    n_syn, n_ptr = int(parts[2]), int(parts[3])
                    offsets = parts[6 + n_ptr : 6 + n_ptr + n_syn]
                    self._index.setdefault(parts[0], []).extend((pos, int(o)) for o in offsets)
        self._files = {pos: open(self.root / f"data.{pos}", "rb") for pos in _POS_FILES}
        self._syn_cache: dict[str, list[str]] = {}

    def synonyms(self, word: str) -> list[str]:
        """Other lemmas of ``word``'s synsets (single words only, lower-cased), in WordNet order."""
        key = word.lower()
        if key in self._syn_cache:
            return self._syn_cache[key]
        out: dict[str, None] = {}
        for pos, off in self._index.get(key, []):
            f = self._files[pos]
            f.seek(off)
            parts = f.readline().decode("utf-8").split()
            for j in range(int(parts[3], 16)):
                lemma = re.sub(r"\(.*\)$", "", parts[4 + 2 * j]).lower()
                if lemma != key and "_" not in lemma:
                    out.setdefault(lemma, None)
        self._syn_cache[key] = list(out)
        return self._syn_cache[key]


@dataclass
class SynonymConfig:
    ratio: float = 0.3  # share of the sentence's words replaced (those that have a synonym)
    seed: int = 0


class Synonym(CachedAugmenter):
    """Replace ``ratio`` of a sentence's words by a random WordNet synonym (EDA-style). The number
    replaced is round(ratio * number of words), drawn among the words that have a synonym (fewer when
    fewer have one). Case of the first letter is kept."""

    name = "synonym"

    def __init__(
        self, cfg: SynonymConfig | None = None, cache: ViewCache | None = None, wordnet: WordNet | None = None
    ):
        super().__init__(cache)
        self.cfg = cfg or SynonymConfig()
        if not 0.0 <= self.cfg.ratio <= 1.0:
            raise ConfigError(f"augmenter 'synonym': ratio must be within [0, 1] (got {self.cfg.ratio}).")
        self._wn = wordnet

    @property
    def wordnet(self) -> WordNet:
        if self._wn is None:
            self._wn = WordNet()
        return self._wn

    def one(self, text: str, variant: int) -> str:
        rng = _text_seed(self.cfg.seed, variant, text)
        toks = _tokens(text)
        words = [i for i, (w, _) in enumerate(toks) if w[0].isalpha()]
        k = int(round(self.cfg.ratio * len(words)))
        cands = [i for i in words if self.wordnet.synonyms(toks[i][0])]
        for i in rng.permutation(cands)[:k] if k else []:
            w, sp = toks[i]
            syns = self.wordnet.synonyms(w)
            s = syns[int(rng.integers(len(syns)))]
            toks[i] = (s.capitalize() if w[0].isupper() else s, sp)
        return _detok(toks)

    def transform(self, texts: list[str], variant: int) -> list[str]:
        return [self.one(t, variant) for t in texts]


# --- masked-LM substitution --------------------------------------------------------------------------


@dataclass
class MLMConfig:
    model: str | None = None  # a model with an MLM head; None: the run's --model
    ratio: float = 0.15  # share of words masked and replaced by the LM's top prediction (not the original)
    seed: int = 0
    batch_size: int = 64


class MLMSubstitute(CachedAugmenter):
    """Mask ``ratio`` of the words (whole words: every word-piece of a chosen word becomes one [MASK])
    and put the masked LM's most probable other word in its place. The model must have a pretrained
    MLM head (a checkpoint without one, e.g. all-MiniLM-L6-v2, is an error, not a random head)."""

    name = "mlm"

    def __init__(self, cfg: MLMConfig | None = None, cache: ViewCache | None = None):
        super().__init__(cache)
        self.cfg = cfg or MLMConfig()
        self._model = self._tok = None
        self._run_model: str | None = None  # the run's --model, used when cfg.model is None

    @property
    def model_name(self) -> str | None:
        return self.cfg.model or self._run_model

    def prepare(self, ctx: Any) -> None:
        if self.cfg.model is None and ctx.model != self._run_model:
            self._run_model, self._model = ctx.model, None

    def _load(self):
        if self._model is None:
            from transformers import AutoTokenizer

            from benchbench import checkpoint_source, load_pretrained_head

            if self.model_name is None:
                raise ConfigError("augmenter 'mlm': no model; set MLMConfig.model or train with --model <MLM model>.")
            model, note = load_pretrained_head(self.model_name, "AutoModelForMaskedLM")
            if model is None:
                raise ConfigError(
                    f"augmenter 'mlm': model {self.model_name!r} has no usable MLM head ({note}); "
                    f"use a model with a masked-LM head (BERT/RoBERTa checkpoints)."
                )
            self._model, self._tok = (
                model.eval(),
                AutoTokenizer.from_pretrained(checkpoint_source(self.model_name), trust_remote_code=False),
            )
        return self._model, self._tok

    def config(self) -> dict[str, Any]:
        return {"model": self.model_name, "ratio": self.cfg.ratio, "seed": self.cfg.seed}

    def transform(self, texts: list[str], variant: int) -> list[str]:
        import torch

        model, tok = self._load()
        out = []
        for b in range(0, len(texts), self.cfg.batch_size):
            chunk = texts[b : b + self.cfg.batch_size]
            masked, picks = [], []
            for t in chunk:
                toks = _tokens(t)
                words = [i for i, (w, _) in enumerate(toks) if w[0].isalpha()]
                k = max(1, int(round(self.cfg.ratio * len(words)))) if words else 0
                chosen = sorted(_text_seed(self.cfg.seed, variant, t).permutation(words)[:k].tolist()) if k else []
                picks.append((toks, chosen))
                masked.append(_detok([(tok.mask_token if i in chosen else w, sp) for i, (w, sp) in enumerate(toks)]))
            enc = tok(masked, padding=True, truncation=True, max_length=128, return_tensors="pt")
            with torch.no_grad():
                logits = model(**enc).logits
            for r, (toks, chosen) in enumerate(picks):
                pos = (enc["input_ids"][r] == tok.mask_token_id).nonzero().flatten().tolist()
                for i, p in zip(chosen, pos):  # truncated masks keep their word
                    orig = toks[i][0].lower()
                    best = None
                    for cand in logits[r, p].topk(10).indices.tolist():
                        w = tok.convert_ids_to_tokens(cand)
                        if w.isalpha() and w.lower() != orig and w not in tok.all_special_tokens:
                            best = w
                            break
                    if best is not None:
                        toks[i] = (best, toks[i][1])
                out.append(_detok(toks))
        return out


# --- NLI entailment pairs ------------------------------------------------------------------------------


@dataclass
class NLIEntailConfig:
    source: str = "snli-devtest+xnli-en-devtest"


class NLIEntail:
    """Views from NLI entailment pairs: x1 = premise, x2 = a hypothesis it entails (BSL Table 4).

    Uses the NLI LABELS, only to select the entailment pairs (``benchbench.entailment_pairs``):
    results with this augmenter are not label-free. The training corpus is restricted to premises
    that have an entailed hypothesis (:meth:`covers`); several hypotheses: one is drawn per use."""

    name = "nli-entail"
    uses_labels = True

    def __init__(self, pairs: list[tuple[str, str]] | None = None):
        self.cfg = NLIEntailConfig()
        self._map: dict[str, list[str]] | None = None
        if pairs is not None:
            self._set(pairs)

    def _set(self, pairs: list[tuple[str, str]]) -> None:
        m: dict[str, list[str]] = {}
        for a, b in pairs:
            m.setdefault(a, []).append(b)
        self._map = m

    def prepare(self, ctx: Any) -> None:
        if self._map is None:
            from benchbench import entailment_pairs

            if ctx.data is None:
                raise ConfigError("augmenter 'nli-entail': no data store to read the NLI files from (--data-dir).")
            self._set(entailment_pairs(ctx.data))

    def covers(self, texts: list[str]) -> list[str]:
        if self._map is None:
            raise ConfigError("augmenter 'nli-entail': not prepared (call prepare(ctx) first).")
        return [t for t in texts if t in self._map]

    def __call__(self, texts: list[str], rng: np.random.Generator | None = None) -> list[str]:
        if self._map is None:
            raise ConfigError("augmenter 'nli-entail': not prepared (call prepare(ctx) first).")
        rng = rng if rng is not None else np.random.default_rng(0)
        out = []
        for t in texts:
            hyps = self._map.get(t)
            out.append(hyps[int(rng.integers(len(hyps)))] if hyps else t)
        return out

    def views(
        self, texts: list[str], rng: np.random.Generator | None = None, two_view: bool = False
    ) -> tuple[list[str], list[str]]:
        return list(texts), self(list(texts), rng)  # the pair IS the two views


@hookimpl
def benchbench_register_augmenters(register):
    register("backtranslate", BackTranslate())
    register("synonym", Synonym())
    register("mlm", MLMSubstitute())
    register("nli-entail", NLIEntail())
