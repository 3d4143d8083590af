"""The offline NLI data: BSL's general training corpus and the entailment pairs.

BSL (and IS-BERT before it) trains on the unlabelled sentences of NLI data. SNLI/MNLI train are not
on this machine, so the offline default is what is: SNLI dev+test (SentEval's ``s1/s2/labels``
layout, ``nli/snli``) and XNLI English dev+test (``nli/xnli_en``), premises and hypotheses,
de-duplicated in first-seen order: about 40K sentences (a smaller corpus than the paper's 1M).

Importing this module registers the ``general`` corpus loader (see ``corpora.py``). NLI labels are
NEVER part of the general corpus; :func:`entailment_pairs` reads them ONLY to choose which
(premise, hypothesis) pairs are entailments (BSL Table 4's "NLI entailment" views, and the
supervised stage of setups). Files are found through the DataStore, never by a fixed path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchbench.core.errors import DataError
from benchbench.store.data import read_lines
from benchbench.train.corpora import Corpus, register_corpus_loader, sha256_of_lines

SNLI_SPLITS = ("dev", "test")
XNLI_FILES = ("nli/xnli_en/dev-en.tsv", "nli/xnli_en/test-en.tsv")
CORPUS_NAME = "nli:snli-devtest+xnli-en-devtest"


def _fetch(data: Any, rel: str) -> Path:
    path = data.fetch(rel)
    if path is None:  # pragma: no cover - DataStore.fetch raises itself when missing
        raise DataError(f"{rel}: not found in the data dir; see the data README section 'nli'.")
    return path


def nli_triples(data: Any) -> list[tuple[str, str, str, str]]:
    """(premise, hypothesis, label, source file) of every row of SNLI dev/test and XNLI-en dev/test."""
    rows: list[tuple[str, str, str, str]] = []
    for split in SNLI_SPLITS:
        s1 = read_lines(_fetch(data, f"nli/snli/s1.{split}"))
        s2 = read_lines(_fetch(data, f"nli/snli/s2.{split}"))
        lab = read_lines(_fetch(data, f"nli/snli/labels.{split}"))
        if not len(s1) == len(s2) == len(lab):
            raise DataError(
                f"nli/snli/*.{split}: s1, s2 and labels have {len(s1)}, {len(s2)}, {len(lab)} lines; "
                f"they must be parallel. Is it SentEval's published SNLI?"
            )
        rows += [(a.strip(), b.strip(), c.strip(), f"snli/{split}") for a, b, c in zip(s1, s2, lab)]
    for rel in XNLI_FILES:
        for i, line in enumerate(read_lines(_fetch(data, rel)), 1):
            cols = line.split("\t")
            if len(cols) != 3:
                raise DataError(f"{rel}:{i}: expected premise<TAB>hypothesis<TAB>label, got {len(cols)} columns.")
            rows.append((cols[0].strip(), cols[1].strip(), cols[2].strip(), rel.split("/")[-1]))
    return rows


def nli_sentences(data: Any) -> list[str]:
    """The unlabelled, de-duplicated premises and hypotheses (labels dropped)."""
    seen: dict[str, None] = {}
    for a, b, _, _ in nli_triples(data):
        for s in (a, b):
            if s:
                seen.setdefault(s, None)
    return list(seen)


def entailment_pairs(data: Any) -> list[tuple[str, str]]:
    """(premise, hypothesis) pairs labelled ``entailment`` in SNLI dev/test and XNLI-en dev/test,
    de-duplicated, in file order.

    The labels are used ONLY to select the entailment pairs (BSL Table 4's NLI views; the supervised
    stage of a pipeline): a method that uses these pairs is no longer label-free, and its records
    must say so. ``data`` is a DataStore (files are found through it)."""
    seen: dict[tuple[str, str], None] = {}
    for a, b, label, _ in nli_triples(data):
        if label == "entailment" and a and b:
            seen.setdefault((a, b), None)
    return list(seen)


def _file_sentences(path: str) -> list[str]:
    p = Path(path)
    files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    out = [s.strip() for f in files for s in read_lines(f)]
    return [s for s in out if s]


def load_general_corpus(data: Any, path: str | None = None) -> Corpus:
    """The ``general`` corpus: the offline NLI sentences, or the non-empty lines of ``path``
    (``--corpus``: a text file, or a folder of them), one sentence a line."""
    if path is not None:
        sents = _file_sentences(path)
        if not sents:
            raise DataError(f"--corpus {path}: no non-empty lines; expected one sentence a line.")
        return Corpus(
            kind="general",
            name=f"file:{Path(path).resolve()}",
            sentences=sents,
            sha256=sha256_of_lines(sents),
            info={"source": str(Path(path).resolve())},
        )
    sents = nli_sentences(data)
    return Corpus(
        kind="general",
        name=CORPUS_NAME,
        sentences=sents,
        sha256=sha256_of_lines(sents),
        info={
            "files": [f"nli/snli/{w}.{s}" for s in SNLI_SPLITS for w in ("s1", "s2")] + list(XNLI_FILES),
            "note": "premises and hypotheses, de-duplicated; NLI labels not used",
        },
    )


register_corpus_loader("general", load_general_corpus)
