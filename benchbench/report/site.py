"""``benchbench leaderboard``: the generated leaderboards (Markdown, LaTeX, a static HTML site with plots)
built from stored result records alone, deterministically, plus the staleness check CI runs.

Why deterministic: CI rebuilds the leaderboard from the committed records and fails when the committed
files differ, so a stale leaderboard never lands. Nothing here reads the clock, the environment or the
file system order: rows and files are sorted, plots are matplotlib SVGs with a fixed hash salt and no
date (matplotlib because it is already the plotting library people know, renders at build time and needs
no JavaScript or CDN; the page works from ``file://``).

Generated files (the only ones the build writes or the check compares; other people's hand-written
tables under ``leaderboards/<topic>/`` are never touched): ``README.md``, ``latex/``, ``site/``
(except ``site/screenshot.png``, which depends on the browser's fonts and is refreshed by
``--screenshot``).
"""

from __future__ import annotations

import dataclasses
import filecmp
import hashlib
import io
import logging
import re
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchbench.core.errors import BenchbenchError
from benchbench.report import aggregate, studies
from benchbench.report.aggregate import Row, cell_text, method_defaults, seeds_text, table_notes, table_rows
from benchbench.report.aggregate import row_label as row_label  # re-exported: callers import it from here
from benchbench.report.escaping import escape_html, escape_md

log = logging.getLogger(__name__)

GENERATED = ("README.md", "latex", "site")
DAMAGED = "damaged record: "  # how ``check`` starts the message of a record a rebuild had to leave out
UNCHECKED = ("site/screenshot.png",)
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
REBUILD = "benchbench leaderboard --results leaderboards --out leaderboards --screenshot"


# ----------------------------------------------------------------------------------------------- records
# Records, rows, cells and averages come from the one aggregation (``benchbench.report.aggregate``);
# these names are kept for the callers that import them from here.
_field, _num = aggregate.field, aggregate.num


def load_records(root: str | Path, damaged: list[Any] | None = None) -> list[dict[str, Any]]:
    """Every record under ``root``, each identity once (``aggregate.load_records``); generated dirs,
    ``runs/`` and the quarantine skipped; damaged records named, never silently dropped."""
    return aggregate.load_records(root, damaged)


def build_rows(records: Iterable[dict[str, Any]]) -> list[Row]:
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


def study_sections(
    records: list[dict[str, Any]], results: str | Path, names: Iterable[str] | None = None
) -> list[StudySection]:
    """Each study (default: the built-in ones) from the records under ``results``: ``studies.collect``
    picks the records matching its exact conditions in any folder (each record once: ``records`` come
    from ``load_records``), ``studies.view`` makes its table. The model label comes from the records
    (``studies.records_model_label``), so a machine without the study's local model folder (CI) builds
    the same page. A study that cannot be read (an unknown method or task) is shown with its error."""
    from benchbench.core.methods import build_config
    from benchbench.core.registry import get_registry

    reg = get_registry()
    out = []
    for name in studies.available() if names is None else names:
        try:
            st = studies.load_study(name)
            tasks = reg.expand(list(st.tasks))
            label, others = studies.records_model_label(st, records)
            notes = [f"Left out: records of other weights in a folder named like the base model: {o}." for o in others]
            # a method the study's options do not fit cannot have a record: its row stays empty, named
            # with the reason, and the other methods are still shown (collect would refuse them all)
            broken = {}
            for m in st.methods:
                try:
                    build_config(reg.method(m), st.overrides(m))
                except BenchbenchError as e:
                    broken[m] = str(e).split(". ")[0]
            ok = dataclasses.replace(st, methods=tuple(m for m in st.methods if m not in broken))
            table = studies.collect(ok, records, results, tasks, model_label=label)
            for t in tasks:
                table[t] = {m: table[t].get(m) or studies.Cell({}, {}) for m in st.methods}
            notes += [
                f"{m}: no cell can match, the study's options do not fit it ({why})." for m, why in broken.items()
            ]
            out.append(StudySection(st.name, studies.view(st, table, model_label=label, extra_notes=notes)))
        except BenchbenchError as e:
            out.append(StudySection(Path(name).stem, None, str(e)))
    return out


def provenance_line(row: Row) -> str:
    """How a row's numbers were produced (no build time: the output must be reproducible)."""
    r0 = row.records[0]
    devices = sorted({str(r.get("device", "?")) for r in row.records})
    steps = sorted({str(_field(r, "train.steps")) for r in row.records if _field(r, "train.steps") is not None})
    v = r0.get("versions") or {}
    shas = sorted({str(r.get("git_sha"))[:10] for r in row.records})
    src = "imported from " + str(r0["imported_from"]) if r0.get("imported_from") else "benchbench run"
    return (
        f"{row.label} / {row.model} [config {r0.get('config_hash', '')}]: {src}; {seeds_text(row.seeds())}; "
        f"device {', '.join(devices)}; steps {', '.join(steps) or '-'}; torch {v.get('torch', '?')}, "
        f"transformers {v.get('transformers', '?')}; git {', '.join(shas)}; {len(row.records)} records"
    )


# ----------------------------------------------------------------------------------------------- Markdown
def render_markdown(
    tables: list[Table], rows: list[Row], topics: list[str], sections: list[StudySection] | None = None
) -> str:
    out = [
        "# Leaderboards",
        "",
        "GENERATED by `benchbench leaderboard` from the result records under `leaderboards/` (do not edit by "
        "hand; CI fails when this file, `latex/` or `site/` differ from a rebuild). Regenerate with:",
        "",
        "```",
        REBUILD,
        "```",
        "",
        "The studies come first: declared comparisons (one base model, one budget, >= 3 seeds; "
        "`benchbench/report/studies/*.toml`) with tie groups from paired tests; in a study, `≈` marks a trained "
        "cell the same test cannot separate from the study's start row (the base model itself, untrained). "
        "Every stored record follows, "
        "by suite. Scores are x100 on the test split, mean ± sample std over distinct seeds (± only with 2 or more "
        "seeds); a suite `avg` only over a row with every task of the suite (the footnote names what the "
        "others miss). `*` partial (fewer subsets than the task), `[T]` transductive, `[S]` selects its "
        "checkpoint on task labels, `!` did not learn (both from the records' training accounting, see "
        "`benchbench/report/aggregate.py`), `‡` not zero-shot (the base model saw the task's data or source), "
        "`†`/significance marks as stored in the records, `(imported: ...)` rows come from result files of other "
        "harnesses (e.g. MTEB). Browse `site/index.html` (the studies) and `site/all.html` (every record; both "
        "work from disk); LaTeX tables of the suites are in `latex/`.",
        "",
    ]
    if topics:
        out += [
            "Hand-written tables, records and bench logs by topic (not generated; each states its command, "
            "budget and device): " + ", ".join(f"`{t}`" for t in topics),
            "",
        ]
    if sections:
        out += ["## Studies", ""]
        for sec in sections:
            if sec.view is None:
                out += [f"### {escape_md(sec.name)}", "", f"Cannot be shown: {escape_md(sec.error)}", ""]
            else:
                out += [studies.view_markdown(sec.view)]
        out += ["## Every stored record, by suite", ""]
    for t in tables:
        out += [f"## {escape_md(t.name)}", ""]
        if not t.rows:
            out += ["_no records yet_", ""]
            continue
        out.append("| " + " | ".join(escape_md(h) for h in t.headers) + " |")
        out.append("|" + "|".join("---" if i < 2 else "---:" for i in range(len(t.headers))) + "|")
        for _, cells, _ in t.rows:
            out.append("| " + " | ".join(escape_md(c) for c in cells) + " |")
        out.append("")
        out += [escape_md(n) for n in t.notes]
        out += ["", "Provenance:", ""]
        out += [f"- {escape_md(provenance_line(row))}" for row, _, _ in t.rows]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


# ----------------------------------------------------------------------------------------------- LaTeX
_LATEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "±": r"$\pm$",
    "†": r"$^\dagger$",
}


def escape_latex(text: object) -> str:
    """LaTeX text: the ten special characters (and ``<``/``>``, ``±``, ``†``) as commands. Written here
    because ``benchbench.report.escaping`` covers HTML and Markdown only."""
    return "".join(_LATEX.get(c, c) for c in str(text))


def render_latex(t: Table) -> str:
    cols = "ll" + "r" * (len(t.headers) - 2)
    lines = [
        f"% GENERATED by benchbench leaderboard: {escape_latex(t.name)} (scores x100, test split)",
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        rf"\begin{{tabular}}{{{cols}}}",
        r"\toprule",
        " & ".join(escape_latex(h) for h in t.headers) + r" \\",
        r"\midrule",
    ]
    for _, cells, _ in t.rows:
        lines.append(" & ".join(escape_latex(c) for c in cells) + r" \\")
    lines += [
        r"\bottomrule",
        r"\end{tabular}",
        rf"\caption{{{escape_latex(t.name)}. " + escape_latex(" ".join(t.notes[:3])) + "}",
        r"\end{table}",
        "",
    ]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------- plots
def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams.update(
        {
            "svg.hashsalt": "benchbench",
            "svg.fonttype": "none",
            "font.family": "DejaVu Sans",
            "figure.figsize": (6.4, 4.0),
            "path.simplify": False,
        }
    )
    return plt


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "benchbench"}, bbox_inches=None)
    _plt().close(fig)
    return buf.getvalue()


def make_plots(tables: list[Table], rows: list[Row]) -> dict[str, tuple[str, str]]:
    """name -> (title, SVG text). Only plots that have data are made."""
    plt = _plt()
    plots: dict[str, tuple[str, str]] = {}
    for make in (_compute_plots, _curve_plots, _size_plots, _pos_plot, _spread_plot):
        make(plt, tables, rows, plots)
    return plots


def _compute_plots(plt: Any, tables: list[Table], rows: list[Row], plots: dict[str, tuple[str, str]]) -> None:
    """Quality vs training compute, per suite: x = mean training seconds (or FLOPs), y = suite average."""
    for field, xlabel in COST_FIELDS:
        for t in tables:
            pts = [  # rows with an average only (a complete row: aggregate.suite_average)
                (row.cost(field), vals[len(t.tasks) + 2], row.label)
                for row, _, vals in t.rows
                if row.cost(field) is not None and vals[len(t.tasks) + 2] is not None
            ]
            if not pts:
                continue
            fig, ax = plt.subplots()
            for x, y, lab in pts:
                ax.scatter([x], [y], label=lab[:40])
            ax.set_xscale("log")
            ax.set_xlabel(xlabel + " (log)")
            ax.set_ylabel(f"{t.name} avg (x100)")
            ax.set_title(f"{t.name}: quality vs training {xlabel}")
            ax.legend(fontsize=6, loc="best")
            plots[f"compute-{field.split('.')[1]}-{_slug(t.name)}"] = (f"{t.name}: quality vs {xlabel}", _svg(fig))


def _curve_plots(plt: Any, tables: list[Table], rows: list[Row], plots: dict[str, tuple[str, str]]) -> None:
    """Learning curves from ``train.monitor``, and the training loss curves."""
    curves: dict[str, list[tuple[str, list[tuple[float, float]]]]] = defaultdict(list)
    losses: list[tuple[str, list[tuple[float, float]]]] = []
    seen_loss: set[str] = set()
    for row in rows:
        for r in sorted(row.records, key=lambda r: (r["task"], r.get("seed", 0))):
            mon = _field(r, "train.monitor") or []
            series: dict[str, list[tuple[float, float]]] = defaultdict(list)
            for item in mon:
                if isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[1], dict):
                    for k, v in sorted(item[1].items()):
                        if _num(v) is not None and _num(item[0]) is not None:
                            series[k].append((float(item[0]), float(v)))
            for k, s in sorted(series.items()):
                curves[f"{r['task']} {k}"].append((f"{row.label} seed {r.get('seed')}", s))
            lc = _field(r, "train.loss_curve") or []
            key = f"{row.label}|{row.model}|{r.get('seed')}"
            if lc and key not in seen_loss and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in lc):
                seen_loss.add(key)
                losses.append((f"{row.label} seed {r.get('seed')}", [(float(a), float(b)) for a, b in lc]))
    for name, series_list in sorted(curves.items()):
        fig, ax = plt.subplots()
        for lab, s in series_list:
            ax.plot([p[0] for p in s], [p[1] for p in s], marker="o", label=lab[:40])
        ax.set_xlabel("training step")
        ax.set_ylabel(name)
        ax.set_title(f"learning curve: {name}")
        ax.legend(fontsize=6)
        plots[f"learning-{_slug(name)}"] = (f"learning curve: {name}", _svg(fig))
    if losses:
        fig, ax = plt.subplots()
        for lab, s in losses:
            ax.plot([p[0] for p in s], [p[1] for p in s], label=lab[:40])
        ax.set_xlabel("training step")
        ax.set_ylabel("training loss")
        ax.set_title("training loss curves")
        ax.legend(fontsize=6)
        plots["loss-curves"] = ("training loss curves", _svg(fig))


def _size_plots(plt: Any, tables: list[Table], rows: list[Row], plots: dict[str, tuple[str, str]]) -> None:
    """Corpus-size and labelled-size curves: one task, one method, varying size."""
    for field, title in (("train.corpus_sentences", "corpus size (sentences)"), ("train.labelled", "labelled size")):
        by: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
        for row in rows:
            for r in row.records:
                x, y = _num(_field(r, field)), _num((r["splits"].get(SPLIT) or {}).get("main_score"))
                if x is not None and y is not None:
                    by[(row.method, r["task"])].append((x, y))
        by = {k: sorted(set(v)) for k, v in by.items() if len({p[0] for p in v}) > 1}
        if by:
            fig, ax = plt.subplots()
            for (m, task), pts in sorted(by.items()):
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{m} {task}"[:40])
            ax.set_xscale("log")
            ax.set_xlabel(title)
            ax.set_ylabel("score (x100)")
            ax.set_title(f"score vs {title}")
            ax.legend(fontsize=6)
            plots[f"size-{_slug(title)}"] = (f"score vs {title}", _svg(fig))


def _pos_plot(plt: Any, tables: list[Table], rows: list[Row], plots: dict[str, tuple[str, str]]) -> None:
    """POS bars: records whose scores carry ``pos_*`` entries (e.g. an ablation by part of speech)."""
    pos = [
        (
            row.label,
            r["task"],
            {
                k[4:]: v
                for k, v in sorted((r["splits"].get(SPLIT) or {}).get("scores", {}).items())
                if k.startswith("pos_") and _num(v) is not None
            },
        )
        for row in rows
        for r in row.records
    ]
    pos = [p for p in pos if p[2]]
    if pos:
        fig, ax = plt.subplots()
        cats = sorted({c for _, _, d in pos for c in d})
        w = 0.8 / len(pos)
        for i, (lab, task, d) in enumerate(pos):
            ax.bar([j + i * w for j in range(len(cats))], [d.get(c, 0) for c in cats], w, label=f"{lab} {task}"[:40])
        ax.set_xticks(range(len(cats)), cats)
        ax.set_title("scores by part of speech")
        ax.legend(fontsize=6)
        plots["pos-bars"] = ("scores by part of speech", _svg(fig))


def _spread_plot(plt: Any, tables: list[Table], rows: list[Row], plots: dict[str, tuple[str, str]]) -> None:
    """Seed spread: every seed's score per (row, task) with more than one seed."""
    spread = [
        (f"{row.label} {t}", row.scores(t))
        for row in rows
        for t in sorted({r["task"] for r in row.records})
        if len(row.scores(t)) > 1
    ]
    if spread:
        fig, ax = plt.subplots(figsize=(6.4, max(2.0, 0.3 * len(spread) + 1)))
        for i, (_, vals) in enumerate(spread):
            ax.scatter(vals, [i] * len(vals))
        ax.set_yticks(range(len(spread)), [s[0][:40] for s in spread], fontsize=6)
        ax.set_xlabel("score (x100)")
        ax.set_title("seed spread")
        fig.tight_layout()
        plots["seed-spread"] = ("seed spread", _svg(fig))


# ----------------------------------------------------------------------------------------------- HTML
def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-") or "x"


def _page_name(name: str) -> str:
    """The file name of a method's or task's page: its slug when that is the name itself (every page
    published so far), else the slug + ``_`` + a short hash of the name (``_`` is never in a slug), so
    two names never share a page (``coll a`` and ``coll_a``, ``TSDAE`` and ``tsdae`` did)."""
    slug = _slug(name)
    return slug if slug == name else f"{slug}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"


SORT_JS = """// benchbench leaderboard: click a column header to sort (numbers numerically, blanks last)
document.addEventListener('DOMContentLoaded', function () {
  document.querySelectorAll('table.sortable').forEach(function (table) {
    table.querySelectorAll('th').forEach(function (th, col) {
      th.addEventListener('click', function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var asc = th.getAttribute('data-dir') !== 'asc';
        table.querySelectorAll('th').forEach(function (h) { h.removeAttribute('data-dir'); });
        th.setAttribute('data-dir', asc ? 'asc' : 'desc');
        rows.sort(function (a, b) {
          var x = a.cells[col].getAttribute('data-v'), y = b.cells[col].getAttribute('data-v');
          if (x === '' && y === '') return 0;
          if (x === '') return 1;
          if (y === '') return -1;
          var nx = parseFloat(x), ny = parseFloat(y);
          var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
          return asc ? c : -c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
});
"""
CSS = """body{font-family:sans-serif;margin:1.5em;max-width:1400px}table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #ccc;padding:2px 6px;font-size:13px}th{background:#eee;cursor:pointer}
td.num{text-align:right}th[data-dir=asc]::after{content:' \\25B2'}th[data-dir=desc]::after{content:' \\25BC'}
.notes,.prov{font-size:12px;color:#444}img.plot{max-width:640px;border:1px solid #ddd;margin:4px}
.nav{font-size:14px}.all{font-size:16px;padding:6px 10px;background:#eef3ff;border:1px solid #99b;display:inline-block}
.paper{color:#777;font-size:10px;display:block}code{font-size:12px}table.study-table td{font-size:12px}.status{font-weight:bold}.status.empty,.status.partial{color:#a45a00}
.study{border-top:2px solid #99b;margin-top:1.5em}td.label{white-space:nowrap}
"""


def _page(title: str, body: str, depth: int = 0) -> str:
    up = "../" * depth
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape_html(title)}</title>'
        f'<link rel="icon" href="data:,">'
        f'<link rel="stylesheet" href="{up}assets/style.css"><script src="{up}assets/sort.js"></script>'
        f'</head><body><p class="nav"><a href="{up}index.html">studies</a> · '
        f'<a href="{up}all.html">every stored record</a></p>\n{body}\n</body></html>\n'
    )


def _html_table(t: Table, depth: int, only: Row | None = None) -> str:
    up = "../" * depth
    head = "".join(f"<th>{escape_html(h)}</th>" for h in t.headers)
    body = []
    for row, cells, vals in t.rows:
        if only is not None and row is not only:
            continue
        tds = []
        for i, (c, v) in enumerate(zip(cells, vals, strict=True)):
            sort_v = escape_html(c if v is None else f"{v:.6f}") if c != "" else ""
            if i == 0:
                inner = f'<a href="{up}methods/{_page_name(row.method)}.html">{escape_html(c)}</a>'
            else:
                inner = escape_html(c)
            cls = ' class="num"' if i >= 2 else ""
            tds.append(f'<td data-v="{sort_v}"{cls}>{inner}</td>')
        body.append("<tr>" + "".join(tds) + "</tr>")
    return (
        f'<table class="sortable" id="t-{_slug(t.name)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def _code_spans(text: str) -> str:
    """``text`` escaped for HTML, its Markdown `code` spans (the commands to run) as ``<code>``."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escape_html(text))


def _study_html(v: studies.StudyView, pages: set[str]) -> str:
    """One study's section of the front page: the table ``studies.view`` made, cells rendered by
    ``studies.render_cell`` (the Markdown README uses the same), then its notes and missing cells."""
    st = v.study
    state = "empty" if v.stored == 0 else "partial" if v.stored < v.total else "complete"
    head = "<th>method</th>" + "".join(f"<th>{escape_html(t)}</th>" for t in v.tasks) + "<th>avg</th>"
    body = []
    for row in v.rows:
        name = escape_html(row.label)
        if row.method in pages:
            name = f'<a href="methods/{_page_name(row.method)}.html">{name}</a>'
        tds = [f'<td class="label" data-v="{escape_html(row.label)}">{name}</td>']
        for c in row.cells:
            sort_v = "" if c.sort is None else f"{c.sort:.6f}"
            tds.append(f'<td class="num" data-v="{sort_v}">{studies.render_cell(c, "html")}</td>')
        avg = "" if row.avg is None else f"{row.avg:.2f}"
        tds.append(f'<td class="num" data-v="{"" if row.avg is None else f"{row.avg:.6f}"}">{avg}</td>')
        body.append("<tr>" + "".join(tds) + "</tr>")
    parts = [
        f'<section class="study" id="study-{_slug(st.name)}"><h2>{escape_html(st.name)} (v{st.version})</h2>',
        f"<p>{escape_html(st.description)}</p>",
        f'<p class="status {state}">{_code_spans(v.status)}</p>',
        f'<p class="notes">{escape_html(v.conditions)}</p>',
        f'<table class="sortable study-table" id="t-study-{_slug(st.name)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>",
        '<ul class="notes">' + "".join(f"<li>{escape_html(n)}</li>" for n in v.notes) + "</ul>",
    ]
    if v.missing and v.stored:
        parts.append(
            '<details class="notes missing"><summary>missing cells</summary><ul>'
            + "".join(f"<li>{escape_html(x)}</li>" for x in v.missing)
            + "</ul></details>"
        )
    return "\n".join(parts) + "</section>"


def _studies_page(sections: list[StudySection], pages: set[str], n_tables: int) -> str:
    """The front page: the studies, and the way to every stored record (``all.html``)."""
    parts = [
        "<h1>benchbench: studies</h1>",
        "<p>Declared comparisons: each study fixes one base model, one training budget and &ge; 3 seeds for "
        "every method (<code>benchbench/report/studies/*.toml</code>); a column's tie group (bold, rank 1) is "
        "every method a paired test cannot separate from the column's best. Scores x100 on the test split.</p>",
        '<p class="all"><a href="all.html">Every stored record &rarr;</a> '
        f"{n_tables} suite tables (USEB, STS, SentEval, ...), plots, a page per method and task</p>",
        "<ul>"
        + "".join(
            f'<li><a href="#study-{_slug(sec.name)}">{escape_html(sec.name)}</a>'
            + (f": {sec.view.stored} of {sec.view.total} cells stored" if sec.view else ": cannot be shown")
            + "</li>"
            for sec in sections
        )
        + "</ul>",
    ]
    if not sections:
        parts.append('<p class="notes">no study files</p>')
    for sec in sections:
        if sec.view is None:
            parts.append(
                f'<section class="study" id="study-{_slug(sec.name)}"><h2>{escape_html(sec.name)}</h2>'
                f'<p class="status empty">Cannot be shown: {escape_html(sec.error)}</p></section>'
            )
        else:
            parts.append(_study_html(sec.view, pages))
    parts.append(
        '<p class="notes">Generated by <code>benchbench leaderboard</code> from stored records; '
        '<a href="all.html">every stored record</a>.</p>'
    )
    return _page("benchbench: studies", "\n".join(parts))


def render_site(
    tables: list[Table],
    rows: list[Row],
    plots: dict[str, tuple[str, str]],
    sections: list[StudySection] | None = None,
) -> dict[str, str]:
    """relative path -> file text of the static site: ``index.html`` the studies, ``all.html`` every
    stored record (suite tables, plots, links to a page per method and task)."""
    files = {"assets/sort.js": SORT_JS, "assets/style.css": CSS}
    for name, (_, svg) in plots.items():
        files[f"plots/{name}.svg"] = svg
    parts = [
        "<h1>Every stored record</h1>",
        '<p class="notes">The <a href="index.html">studies</a> are the controlled comparisons; this page is '
        "every record under the results folder, by suite. Scores x100 (test split), mean ± sample std over distinct "
        "seeds (± only with 2 or more seeds); avg only over complete rows; click a header to sort. * partial, "
        "[T] transductive, [S] selects checkpoints on task labels, ! did not learn, ‡ not zero-shot, (imported: ...) "
        "from other harnesses. Generated by "
        "<code>benchbench leaderboard</code> from stored records.</p>",
        "<h2>Suites</h2><ul>",
    ]
    parts += [f'<li><a href="#s-{_slug(t.name)}">{escape_html(t.name)}</a> ({len(t.rows)} rows)</li>' for t in tables]
    parts.append("</ul>")
    for t in tables:
        parts.append(f'<h2 id="s-{_slug(t.name)}">{escape_html(t.name)}</h2>')
        if not t.rows:
            parts.append('<p class="notes">no records yet</p>')
            continue
        parts.append(_html_table(t, 0))
        parts.append('<div class="notes">' + "<br>".join(escape_html(n) for n in t.notes) + "</div>")
        parts.append(
            '<details class="prov"><summary>provenance</summary><ul>'
            + "".join(f"<li>{escape_html(provenance_line(row))}</li>" for row, _, _ in t.rows)
            + "</ul></details>"
        )
        tl = [f'<a href="tasks/{_page_name(task)}.html">{escape_html(task)}</a>' for task in t.tasks]
        parts.append('<p class="notes">tasks: ' + ", ".join(tl) + "</p>")
    parts.append("<h2>Plots</h2>")
    parts += [
        f'<figure><img class="plot" src="plots/{n}.svg" alt="{escape_html(title)}">'
        f"<figcaption>{escape_html(title)}</figcaption></figure>"
        for n, (title, _) in plots.items()
    ]
    methods = sorted({row.method for row in rows})
    parts.append(
        "<h2>Methods</h2><ul>"
        + "".join(f'<li><a href="methods/{_page_name(m)}.html">{escape_html(m)}</a></li>' for m in methods)
        + "</ul>"
    )
    files["all.html"] = _page("benchbench: every stored record", "\n".join(parts))
    files["index.html"] = _studies_page(sections or [], set(methods), len(tables))
    # a page per method
    for m in methods:
        body = [f"<h1>method: {escape_html(m)}</h1>"]
        for t in tables:
            mine = [row for row, _, _ in t.rows if row.method == m]
            if mine:
                sub = Table(t.name, t.tasks, t.headers, [x for x in t.rows if x[0].method == m], t.notes)
                body += [f"<h2>{escape_html(t.name)}</h2>", _html_table(sub, 1)]
        body.append(
            "<h2>Provenance</h2><ul>"
            + "".join(f"<li>{escape_html(provenance_line(row))}</li>" for row in rows if row.method == m)
            + "</ul>"
        )
        files[f"methods/{_page_name(m)}.html"] = _page(f"method {m}", "\n".join(body), 1)
    for task in sorted({r["task"] for row in rows for r in row.records}):
        files[f"tasks/{_page_name(task)}.html"] = _task_page(task, rows)
    return files


def _task_page(task: str, rows: list[Row]) -> str:
    """A task's page: every row's per-seed scores and sub-scores."""
    trs = []
    for row in rows:
        for r in sorted(row.records, key=lambda r: r.get("seed", 0)):
            if r["task"] != task:
                continue
            res = r["splits"].get(SPLIT) or {}
            sc = ", ".join(f"{k}={v:.2f}" for k, v in sorted(res.get("scores", {}).items()) if _num(v) is not None)
            ms = _num(res.get("main_score"))
            trs.append(
                f'<tr><td data-v="{escape_html(row.label)}"><a href="../methods/{_page_name(row.method)}.html">'
                f'{escape_html(row.label)}</a></td><td data-v="{escape_html(row.model)}">{escape_html(row.model)}</td>'
                f'<td data-v="{r.get("seed", "")}">{escape_html(r.get("seed", ""))}</td>'
                f'<td class="num" data-v="{"" if ms is None else f"{ms:.6f}"}">'
                f"{'' if ms is None else f'{ms:.2f}'}{'*' if res.get('partial') else ''}</td>"
                f'<td data-v="">{escape_html(sc)}</td></tr>'
            )
    body = (
        f'<h1>task: {escape_html(task)}</h1><table class="sortable"><thead><tr><th>method</th><th>model</th>'
        f"<th>seed</th><th>main score</th><th>all scores</th></tr></thead><tbody>{''.join(trs)}</tbody></table>"
    )
    return _page(f"task {task}", body, 1)


# ----------------------------------------------------------------------------------------------- build
def build(
    results: str | Path,
    out: str | Path,
    damaged: list[Any] | None = None,
    study_names: Iterable[str] | None = None,
) -> list[Path]:
    """Write the generated leaderboard files into ``out`` (replacing only ``latex/`` and ``site/``
    contents it owns; the screenshot is kept). Returns the written paths. Damaged records are left
    out: named in warnings, or collected in ``damaged`` (see ``load_records``). ``study_names``: the
    studies of the front page (names or .toml paths; default: the built-in ones)."""
    out = Path(out)
    records = load_records(results, damaged)
    rows = build_rows(records)
    tables = suite_tables(rows)
    res = Path(results)  # the topic list comes from the records' folder (what CI's clean clone has)
    topics = (
        sorted(
            p.name + ("/" if p.is_dir() else "")
            for p in res.iterdir()
            if p.name not in GENERATED and not p.name.startswith(".")
        )
        if res.is_dir()
        else []
    )
    sections = study_sections(records, results, study_names)
    files: dict[str, str] = {"README.md": render_markdown(tables, rows, topics, sections)}
    for t in tables:
        if t.rows:
            files[f"latex/{_slug(t.name)}.tex"] = render_latex(t)
    for rel, text in render_site(tables, rows, make_plots(tables, rows), sections).items():
        files[f"site/{rel}"] = text
    keep = out / "site" / "screenshot.png"
    shot = keep.read_bytes() if keep.is_file() else None
    for d in ("latex", "site"):
        if (out / d).is_dir():
            shutil.rmtree(out / d)
    written = []
    for rel, text in sorted(files.items()):
        p = out / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8", newline="\n")
        written.append(p)
    if shot is not None:
        keep.write_bytes(shot)
    return written


def _generated_files(root: Path) -> set[str]:
    found = set()
    if (root / "README.md").is_file():
        found.add("README.md")
    for d in ("latex", "site"):
        if (root / d).is_dir():
            found |= {p.relative_to(root).as_posix() for p in (root / d).rglob("*") if p.is_file()}
    return found - set(UNCHECKED)


def check(results: str | Path, out: str | Path, study_names: Iterable[str] | None = None) -> list[str]:
    """The staleness check: rebuild into a temp dir and compare with ``out``'s generated files.
    Returns one message per damaged record (first: a rebuild leaves it out, so a table would lose a
    cell) and per stale file (empty: up to date)."""
    out = Path(out)
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "lb"
        fresh.mkdir()
        damaged: list[Any] = []
        build(results, fresh, damaged, study_names)
        want, have = _generated_files(fresh), _generated_files(out)
        problems = [f"{DAMAGED}{e}. Restore it (git restore, or rerun its key with `benchbench run`)" for e in damaged]
        for rel in sorted(want | have):
            if rel not in have:
                problems.append(f"{out / rel}: missing (the rebuild writes it)")
            elif rel not in want:
                problems.append(f"{out / rel}: not produced by a rebuild (stale file)")
            elif not filecmp.cmp(fresh / rel, out / rel, shallow=False):
                problems.append(f"{out / rel}: differs from a rebuild from the records")
        return problems


def screenshot(index: Path, png: Path, chromium: str | None = None) -> str | None:
    """Screenshot of the index with headless Chromium; returns why not when it cannot."""
    import subprocess

    exe = chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        return "no chromium on PATH (apt-get install chromium)"
    res = subprocess.run(
        [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--screenshot={png.resolve()}",
            "--window-size=1400,1800",
            index.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return None if png.is_file() else f"chromium failed: {res.stderr[-500:]}"
