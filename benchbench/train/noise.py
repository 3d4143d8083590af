"""Word-level input noise for denoising objectives (TSDAE Appendix A, Table 5): delete, swap, mask,
replace, add, each touching a ``ratio`` of a sentence's words.

Sentences are split into words with a regex and rebuilt with their original spacing, so no NLTK
data download is needed (sentence-transformers' ``DenoisingAutoEncoderDataset`` relies on NLTK's
punkt tokenizer and Treebank detokenizer). All randomness comes from the ``rng`` argument, so the
caller (the training loop) decides how noise is drawn and replayed on resume.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from benchbench.core.errors import ConfigError

NOISE_KINDS = ("delete", "swap", "mask", "replace", "add")
"""The word-level noise kinds ``WordNoise`` accepts; any other kind is a ``ConfigError``."""
_WORD = re.compile(r"\w+(?:['’\-]\w+)*|[^\w\s]")


def words(text: str) -> list[tuple[str, bool]]:
    """(word, preceded_by_space) pairs; the flag lets ``join`` restore the original spacing."""
    out = []
    last = 0
    for m in _WORD.finditer(text):
        out.append((m.group(), m.start() > last or (m.start() > 0 and text[m.start() - 1].isspace())))
        last = m.end()
    return out


def join(toks: list[tuple[str, bool]]) -> str:
    return "".join((" " if sp and i else "") + w for i, (w, sp) in enumerate(toks))


@dataclass
class WordNoise:
    """A callable ``(texts, rng) -> noisy texts`` (the augmenter contract of benchbench_register_augmenters).

    * delete: each word is dropped with probability ``ratio`` (at least one word is kept);
    * swap: ``round(ratio * n)`` randomly chosen words (at least two) are shuffled among their positions;
    * mask: each word becomes ``mask_token`` with probability ``ratio``;
    * replace: each word becomes, with probability ``ratio``, a word drawn from the batch's other words;
    * add: after each word, with probability ``ratio``, a word drawn from the batch is inserted.

    Replacement and insertion words come from the batch itself, which follows the corpus' word
    distribution and needs no external vocabulary."""

    kind: str = "delete"
    ratio: float = 0.6
    mask_token: str = "[MASK]"

    def __post_init__(self):
        if self.kind not in NOISE_KINDS:
            raise ConfigError(f"noise {self.kind!r} is not one of {NOISE_KINDS}.")
        if not 0.0 <= self.ratio <= 1.0:
            raise ConfigError(f"noise ratio must be within [0, 1] (got {self.ratio}).")

    def __call__(self, texts: list[str], rng: np.random.Generator) -> list[str]:
        split = [words(t) for t in texts]
        pool = [w for ws in split for w, _ in ws if w.isalnum()] or ["the"]
        return [self._one(t, ws, rng, pool) for t, ws in zip(texts, split)]

    def _one(self, text: str, ws: list[tuple[str, bool]], rng: np.random.Generator, pool: list[str]) -> str:
        n = len(ws)
        if n == 0:
            return text
        if self.kind == "delete":
            keep = rng.random(n) > self.ratio
            if not keep.any():
                keep[rng.integers(n)] = True
            return join([w for w, k in zip(ws, keep) if k])
        if self.kind == "swap":
            k = min(n, max(2, int(round(self.ratio * n)))) if self.ratio > 0 else 0
            if k < 2:
                return join(ws)
            pos = np.sort(rng.choice(n, size=k, replace=False))
            moved = list(ws)
            for src, dst in zip(rng.permutation(pos), pos):
                moved[dst] = (ws[src][0], ws[dst][1])
            return join(moved)
        hit = rng.random(n) < self.ratio
        if self.kind == "mask":
            return join([(self.mask_token if h else w, sp) for (w, sp), h in zip(ws, hit)])
        if self.kind == "replace":
            return join([(pool[rng.integers(len(pool))] if h else w, sp) for (w, sp), h in zip(ws, hit)])
        out = []  # add
        for (w, sp), h in zip(ws, hit):
            out.append((w, sp))
            if h:
                out.append((pool[rng.integers(len(pool))], True))
        return join(out)


DEFAULT_RATIOS = {"delete": 0.6, "swap": 0.3, "mask": 0.3, "replace": 0.3, "add": 0.3}


def register_noise(register) -> None:
    """Register the five noise kinds as augmenters ``word-<kind>`` with the TSDAE paper's ratios
    (0.6 for deletion, Table 6; 0.3 for the others, Table 5)."""
    for kind in NOISE_KINDS:
        register(f"word-{kind}", WordNoise(kind, DEFAULT_RATIOS[kind]))
