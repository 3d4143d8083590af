"""The leaderboard's content, before any format: the stored records, their rows (``aggregate``), one
table per suite, the studies of the front page and each row's provenance line. The renderers
(``markdown``, ``latex``, ``plots``, ``html``) only format what this module computes, so the README, the
LaTeX tables and the site can never disagree on a number."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchbench.core.errors import BenchbenchError
from benchbench.report import aggregate, contamination, study_provenance
from benchbench.report import study_view as studies
from benchbench.report.aggregate import Row, cell_text, method_defaults, seeds_text, table_notes, table_rows
from benchbench.run import study as study_spec
from benchbench.store.files import slug

SPLIT = "test"

# display name -> registry suite (tasks from the registry when it has the suite), fallback task list
SUITES: list[tuple[str, str, list[str]]] = [
    ("USEB", "useb", ["askubuntu", "cqadupstack", "twitterpara", "scidocs"]),
    ("STS", "sts", ["sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr"]),
    (
        "STS17",
        "sts17",
        [
            "sts17-ar-ar",
            "sts17-ar-en",
            "sts17-es-es",
            "sts17-es-en",
            "sts17-es-en-wmt",
            "sts17-en-en",
            "sts17-tr-en",
            "sts17-de-en",
            "sts17-fr-en",
        ],
    ),
    ("SentEval", "senteval", ["mr", "cr", "subj", "mpqa", "sst2", "trec", "mrpc", "sicke"]),
    (
        "SentEval (prototype setting)",
        "senteval-proto",
        ["mr-proto", "cr-proto", "subj-proto", "mpqa-proto", "sst2-proto", "trec-proto", "mrpc-proto", "sicke-proto"],
    ),
    ("pairs", "pairs", ["qnli", "mrpc-pairs", "qqp"]),
    ("AFS", "", ["afs"]),
    ("COCO", "", ["coco-retrieval"]),
]
COST_FIELDS = (("train.seconds", "train s"), ("train.flops", "train FLOPs"))


def anchor(s: str) -> str:
    """A fixed name (a suite's, a plot title) as lowercase words joined by ``-``: element ids (``#t-sts``)
    and, through ``store.files.slug``, the file names of suite tables and suite plots (``latex/sts.tex``).
    Lossy, so never used for a name from records (a method's or task's page: ``slug`` alone)."""
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-") or "x"


def load_records(root: str | Path, damaged: list[Any] | None = None) -> list[dict[str, Any]]:
    """Every record under ``root``, each identity once (``aggregate.load_records``); generated dirs,
    ``runs/`` and the quarantine skipped; damaged records named, never silently dropped."""
    return aggregate.load_records(root, damaged)


def build_rows(records: Iterable[dict[str, Any]]) -> list[Row]:
    """The rows of every table; ``method_defaults`` looked up at call time (tests replace it)."""
    return aggregate.build_rows(records, defaults=lambda m: method_defaults(m))


def suites_with_tasks() -> list[tuple[str, list[str]]]:
    try:
        from benchbench.core.registry import get_registry

        reg = get_registry().suites
    except Exception:
        reg = {}
    return [(name, list(reg[s].tasks) if s in reg else fallback) for name, s, fallback in SUITES]


@dataclasses.dataclass
class Table:
    name: str
    tasks: list[str]
    headers: list[str]
    rows: list[tuple[Row, list[str], list[float | None]]]  # row, display cells, sort values
    notes: list[str]


def suite_tables(rows: list[Row]) -> list[Table]:
    """One table per suite (columns: the suite's tasks that have a record, ``avg``, training cost);
    the cells, the average (complete rows only) and the footnotes from ``aggregate``."""
    tables = []
    covered: set[str] = set()
    suites = suites_with_tasks()
    all_tasks = sorted({r["task"] for row in rows for r in row.records})
    for _, members in suites:
        covered |= set(members)
    extra = [t for t in all_tasks if t not in covered]
    if extra:
        suites = [*suites, ("other tasks", extra)]
    for name, tasks in suites:
        present = [t for t in tasks if any(row.scores(t) for row in rows)]
        if not present:
            tables.append(Table(name, tasks, [], [], ["no records yet"]))
            continue
        trs = table_rows(rows, present, {name: tasks}, SPLIT)
        cost_cols = [(f, h) for f, h in COST_FIELDS if any(tr.row.cost(f) is not None for tr in trs)]
        headers = ["method", "model"] + present + ["avg"] + [h for _, h in cost_cols]
        out = []
        for tr in trs:
            avg = tr.averages[name]
            costs = [tr.row.cost(f) for f, _ in cost_cols]
            out.append(
                (
                    tr.row,
                    [tr.row.display_label, tr.row.model]
                    + [cell_text(tr.cells[t]) for t in present]
                    + ["" if avg is None else f"{avg:.2f}"]
                    + [f"{c:.4g}" if c is not None else "" for c in costs],
                    [None, None, *(None if tr.cells[t] is None else tr.cells[t].mean for t in present), avg, *costs],
                )
            )
        tables.append(Table(name, present, headers, out, table_notes(trs, {name: tasks}, SPLIT)))
    return tables


@dataclasses.dataclass
class StudySection:
    """One study on the front page: its table (``studies.StudyView``), or why it cannot be shown."""

    name: str
    view: studies.StudyView | None
    error: str = ""


def stats_cache(results: str | Path) -> Path | bool:
    """Where a leaderboard keeps its studies' column statistics: beside the study records they were
    computed from (``<results>/studies/.stats-cache``, committed with them), so a rebuild or ``--check`` on
    another machine recomputes only the columns whose records changed (entries are keyed by the records'
    checksums). A results folder without ``studies/`` uses the user cache: the build never creates a
    folder among the records (the README lists what is there)."""
    from benchbench.store.results import STATS_CACHE

    studies_dir = Path(results) / "studies"
    return studies_dir / STATS_CACHE if studies_dir.is_dir() else True


def _own_records(name: str, results: str | Path) -> list[dict[str, Any]]:
    """The records a study's `study run` wrote (``<results>/studies/<name>``), read from that folder alone
    (the whole tree's dedupe may have kept another folder's copy of one of them), their ``_path`` made
    relative to ``results``: the same key measured elsewhere (another device, another commit) must not
    fill its cells. [] when the folder holds none (the study's records are then read from anywhere)."""
    folder = Path(results) / "studies" / name
    if not folder.is_dir():
        return []
    own = aggregate.load_records(folder)
    for r in own:
        r["_path"] = f"studies/{name}/{r['_path']}"
    return own


# The front page's order of the built-in studies: the seed papers' questions first (issue 47's core studies),
# then the LLM era's (the decoder study); any other study follows, by name.
FRONT_PAGE_FIRST = ("domain-adaptation-minilm", "generic-text-minilm", "decoder-readouts-smollm2")


def front_page_order(names: Iterable[str]) -> list[str]:
    rank = {n: i for i, n in enumerate(FRONT_PAGE_FIRST)}
    return sorted(names, key=lambda n: (rank.get(n, len(rank)), n))


def study_sections(
    records: list[dict[str, Any]], results: str | Path, names: Iterable[str] | None = None
) -> list[StudySection]:
    """Each study (default: the built-in ones) from the records under ``results``: ``studies.collect``
    picks the records matching its exact conditions in any folder (each record once: ``records`` come
    from ``load_records``), ``studies.view`` makes its table. The model label comes from the records
    (``study_provenance.records_model_label``), so a machine without the study's local model folder (CI) builds
    the same page. A study that cannot be read (an unknown method or task) is shown with its error."""
    from benchbench.core.methods import build_config
    from benchbench.core.registry import get_registry

    reg = get_registry()
    out = []
    for name in front_page_order(study_spec.available()) if names is None else names:
        try:
            st = study_spec.load_study(name)
            tasks = reg.expand(list(st.tasks))
            label, others = study_provenance.records_model_label(st, records)
            notes = [f"Left out: records of other weights in a folder named like the base model: {o}." for o in others]
            # a method the study's options do not fit cannot have a record: its row stays empty, named
            # with the reason, and the other methods are still shown (collect would refuse them all)
            broken = {}
            for row in st.rows():
                try:
                    build_config(reg.method(row.method), st.row_overrides(row))
                except BenchbenchError as e:
                    broken[row.method] = str(e).split(". ")[0]
            ok = dataclasses.replace(st, methods=tuple(m for m in st.methods if m not in broken))
            table = studies.collect(ok, _own_records(st.name, results) or records, results, tasks, model_label=label)
            for t in tasks:
                table[t] = {row.name: table[t].get(row.name) or aggregate.Cell({}) for row in st.rows()}
            notes += [
                f"{m}: no cell can match, the study's options do not fit it ({why})." for m, why in broken.items()
            ]
            cell_records = [r for t in tasks for c in table[t].values() for r in c.records.values()]
            view = studies.view(
                st,
                table,
                model_label=label,
                extra_notes=notes,
                cache=stats_cache(results),
                overlap_flags=contamination.overlap_flags(cell_records),
            )
            out.append(StudySection(st.name, view))
        except BenchbenchError as e:
            out.append(StudySection(Path(name).stem, None, str(e)))
    return out


def study_page(name: str) -> str:
    """The site page of an extended study's full table (the front page shows it collapsed)."""
    return f"study-{slug(anchor(name))}.html"


def provenance_line(row: Row) -> str:
    """How a row's numbers were produced (no build time: the output must be reproducible)."""
    r0 = row.records[0]
    devices = sorted({str(r.get("device", "?")) for r in row.records})
    steps = sorted(
        {str(aggregate.field(r, "train.steps")) for r in row.records if aggregate.field(r, "train.steps") is not None}
    )
    v = r0.get("versions") or {}
    shas = sorted({str(r.get("git_sha"))[:10] for r in row.records})
    src = "imported from " + str(r0["imported_from"]) if r0.get("imported_from") else "benchbench run"
    return (
        f"{row.label} / {row.model} [config {r0.get('config_hash', '')}]: {src}; {seeds_text(row.seeds())}; "
        f"device {', '.join(devices)}; steps {', '.join(steps) or '-'}; torch {v.get('torch', '?')}, "
        f"transformers {v.get('transformers', '?')}; git {', '.join(shas)}; {len(row.records)} records"
    )
