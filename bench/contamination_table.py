"""The contamination flags (benchbench.report.contamination) of the committed studies' cells, as a
markdown table, plus the reproduction of issue 36's counts.

    python bench/contamination_table.py --out /tmp/h6_flags.md

For each study (leaderboards/studies/<name>/), its base model and its tasks (TwitterPara, STS-B,
SICK-R, STS12-16 per subset), the test set is compared with every corpus the encoder saw whose text
is at hand: the start's own training text (a card's ``text_corpus``) and each distinct training corpus
its records name (``train.corpus``; the evaluated task's own pairs, Trans-Encoder's, excepted: they
are the test set). Declared flags come from the card, the corpus sources and the relations file.

Issue 36 counted 51 STS15 images sentences; the table counts 32. The "Issue 36's counts" section
computes both: the issue's rule (reconstructed: the one of those tried that gives its 51 / 4 / 4)
matches lower-cased whitespace tokens with a final full stop dropped, counts words as tokens holding
a letter or digit, and reads every line of the input file (STS15 images: 1,500 lines, 750 of them
pairs without a gold score, never evaluated); the table counts the scored pairs only, with the
normalisation of benchbench.evaluate.analysis.overlap (punctuation ignored: one more match).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STUDIES = ("plain-start", "post-training-minilm")
TASKS = ("twitterpara", "stsb", "sickr", "sts12", "sts13", "sts14", "sts15", "sts16")


def study_corpora(study: str) -> tuple[str, dict[str, dict]]:
    """The study's model label and, per task, its distinct training corpora (by sha256) with the methods
    that trained on each."""
    model, per_task = "", defaultdict(dict)
    for f in sorted((REPO / "leaderboards" / "studies" / study).rglob("*.json")):
        r = json.loads(f.read_text())
        if r.get("task") not in TASKS:
            continue
        model = model or str(r.get("model"))
        corpus = (r.get("train") or {}).get("corpus")
        if corpus:
            entry = per_task[r["task"]].setdefault(corpus["sha256"], {"corpus": corpus, "methods": set()})
            entry["methods"].add(r["method"])
    return model, per_task


def _cell(flags, corpus_name: str, sub) -> str:
    got = {f.kind: f for f in flags if f.subset == sub and f.source.startswith(corpus_name + ",")}
    v, n = got.get("verbatim"), got.get("ngram")
    return f"{v.count if v else 0} / {n.count if n else 0}"


def model_table(study: str, data, cache: Path) -> list[str]:
    from benchbench.report import contamination as C

    model, per_task = study_corpora(study)
    lines = [f"## {study}: {model}", ""]
    starts = C.start_corpora(model, data)
    head = "| task | subset | >= 9 words / >= 8 words | start's own text: verbatim / 8-gram | training corpora: verbatim / 8-gram | declared |"
    lines += [head, "|---|---|---|---|---|---|"]
    notes: list[str] = []
    for task in TASKS:
        entries = sorted(per_task.get(task, {}).values(), key=lambda e: e["corpus"]["name"])
        refs = [C.corpus_ref(e["corpus"], data=data) for e in entries]
        flags = C.flags_for(model, task, refs, data=data, cache_dir=cache)
        tests = C.task_test_sets(task, data)
        for sub in tests:
            from benchbench.evaluate.analysis.overlap import words

            keys = {" ".join(words(s)) for s in tests[sub]}
            elig = f"{sum(len(k.split()) >= 9 for k in keys)} / {sum(len(k.split()) >= 8 for k in keys)}"
            start = _cell(flags, starts[0].name, sub) if starts else "text not at hand"
            trained = []
            for e, ref in zip(entries, refs):
                methods = ", ".join(sorted(e["methods"]))
                if ref.kind == "pairs" and ref.name == f"task:{task}":
                    trained.append(f"own test pairs [{methods}]: transductive, not measured")
                elif ref.load is None:
                    trained.append(f"{ref.name} [{methods}]: text not at hand")
                else:
                    label = f"{ref.name} ({', '.join(ref.sources)})" if ref.sources else ref.name
                    trained.append(f"{label} [{methods}]: {_cell(flags, ref.name, sub)}")
            declared = sorted({f.what.split(" [")[0] for f in flags if f.subset == sub and f.kind == "declared"})
            lines.append(
                f"| {task} | {sub or '-'} | {elig} | {start} | {'<br>'.join(trained)} | {'<br>'.join(declared) or '-'} |"
            )
            notes += [f"- {task}: {f.text()}" for f in flags if f.subset == sub]
    return lines + [
        "",
        "<details><summary>every flag, as the study view prints it</summary>",
        "",
        *notes,
        "",
        "</details>",
        "",
    ]


def issue_counts(data) -> list[str]:
    """Issue 36's 51 / 4 / 4 recomputed both ways, and how many of the STS15 hits the 1,000 MLM steps drew."""
    from benchbench.evaluate.analysis.overlap import OverlapIndex, measure, words
    from benchbench.report import contamination as C
    from benchbench.train.nli import nli_sentences

    nli = nli_sentences(data)

    def issue_key(s: str) -> str:  # lower case, a final full stop dropped, whitespace-split tokens
        return " ".join(s.lower().strip().rstrip(".").split())

    raw = {issue_key(s) for s in nli}
    index = OverlapIndex.build(nli)
    lines = [
        "## Issue 36's counts",
        "",
        "| test set | issue's rule, all input lines | issue's rule, scored pairs | benchbench's normalisation, scored pairs |",
        "|---|---|---|---|",
    ]

    def issue_rule(sents) -> int:
        return len(
            {s for s in sents if sum(any(c.isalnum() for c in w) for w in s.split()) >= 9 and issue_key(s) in raw}
        )

    inp = Path(data.fetch("sts/STS15/STS.input.images.txt")).read_text(encoding="utf-8").splitlines()
    all_lines = {x for ln in inp for x in ln.split("\t")}
    for task, sub, everything in (("sts15", "images", all_lines), ("stsb", None, None), ("sickr", None, None)):
        scored = C.task_test_sets(task, data)[sub]
        ov = measure(scored, index)
        lines.append(
            f"| {task}{'/' + sub if sub else ''} test | {issue_rule(everything) if everything else issue_rule(scored)} "
            f"| {issue_rule(scored)} | {len(ov.verbatim)} of {ov.eligible_verbatim} |"
        )
    hits = {" ".join(words(s)) for s in measure(C.task_test_sets("sts15", data)["images"], index).verbatim}
    rng, drawn = random.Random(0), set()  # bench/pretrain_tiny_mlm.py's draw: seed 0, 1,000 steps of 64
    for _ in range(1000):
        drawn.update(" ".join(words(s)) for s in rng.sample(nli, 64))
    lines += [
        "",
        f"Of the {len(hits)} scored STS15 images sentences in the MLM corpus, {len(hits & drawn)} were drawn in "
        f"tiny-mlm-nli's 1,000 MLM steps (bench/pretrain_tiny_mlm.py's sampler replayed: random.Random(0), "
        f"64 sentences a step; {len(drawn)} of the corpus's {len({' '.join(words(s)) for s in nli})} distinct "
        "sentences were drawn at least once). The flags count the corpus, which the card declares.",
        "",
    ]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="-", help="markdown file to write (default: stdout)")
    ap.add_argument("--data-dir", default=os.environ.get("BENCHBENCH_DATA") or str(REPO.parent / "shared" / "data"))
    ap.add_argument("--cache-dir", default=None, help="where corpus overlap indices are cached (default: benchbench's)")
    args = ap.parse_args()
    os.environ["BENCHBENCH_DATA"] = args.data_dir
    from benchbench.report.contamination import default_cache_dir
    from benchbench.store.data import DataStore

    t0 = time.perf_counter()
    data = DataStore(args.data_dir)
    cache = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
    out = [
        "# Contamination flags of the committed studies (bench/contamination_table.py)",
        "",
        "Counts are distinct test sentences (scored pairs of the test split): verbatim = of >= 9 words, "
        "equal after normalisation (NFKC, lower case, Moses clitics rejoined, punctuation ignored); 8-gram = "
        "of >= 8 words, sharing an 8-word span, not verbatim. `a / b`: verbatim / 8-gram.",
        "",
    ]
    for study in STUDIES:
        out += model_table(study, data, cache)
    out += issue_counts(data)
    out.append(f"_{time.perf_counter() - t0:.0f} s; data {args.data_dir}_")
    text = "\n".join(out) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text)
        print(f"wrote {args.out} ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
