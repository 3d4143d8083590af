"""The static HTML site: ``index.html`` (the studies), ``all.html`` (every stored record, the plots),
a page per method and per task. Every name is escaped (``report.escaping``); the page script and
style sheet are package data (``benchbench/resources/site/``), copied into ``site/assets/`` so the
site works from ``file://`` with no CDN."""

from __future__ import annotations

import re
from importlib import resources

from benchbench.report import study_view as studies
from benchbench.report.aggregate import Row, num
from benchbench.report.escaping import escape_html
from benchbench.report.published import published_html
from benchbench.report.site.markdown import EXTENDED, NO_CORE
from benchbench.report.site.plots import study_curve_plot, study_curve_plots, study_endpoint_plot, study_endpoint_plots
from benchbench.report.site.tables import SPLIT, StudySection, Table, anchor, provenance_line, study_page
from benchbench.store.files import slug


def _asset(name: str) -> str:
    return resources.files("benchbench.resources").joinpath("site").joinpath(name).read_text(encoding="utf-8")


def page_name(name: str) -> str:
    """The file name of a method's or task's page (``store.files.slug``: the name itself when plain,
    else a readable part and a hash, so two names never share a page)."""
    return slug(name)


def _page(title: str, body: str, depth: int = 0) -> str:
    up = "../" * depth
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape_html(title)}</title>'
        f'<link rel="icon" href="data:,">'
        f'<link rel="stylesheet" href="{up}assets/style.css"><script src="{up}assets/sort.js"></script>'
        f'</head><body><p class="nav"><a href="{up}index.html">studies</a> · '
        f'<a href="{up}all.html">every stored record</a>{_NAV_END}\n{body}\n</body></html>\n'
    )


_NAV_END = "</p>"  # the end of every page's navigation line, where ``with_docs_link`` adds the docs


def with_docs_link(files: dict[str, str], docs: str) -> dict[str, str]:
    """``files`` (site-relative path -> text) with a "docs" link at the end of each HTML page's navigation
    line. ``docs`` is the docs index relative to the site folder; each page reaches it from its own depth."""
    out = dict(files)
    nav_start = '<p class="nav">'
    for rel, text in files.items():
        at = text.find(nav_start)
        if not rel.endswith(".html") or at < 0:
            continue
        end = text.index(_NAV_END, at)
        link = f' · <a href="{escape_html("../" * rel.count("/") + docs)}">docs</a>'
        out[rel] = text[:end] + link + text[end:]
    return out


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
                inner = f'<a href="{up}methods/{page_name(row.method)}.html">{escape_html(c)}</a>'
            else:
                inner = escape_html(c)
            cls = ' class="num"' if i >= 2 else ""
            tds.append(f'<td data-v="{sort_v}"{cls}>{inner}</td>')
        body.append("<tr>" + "".join(tds) + "</tr>")
    return (
        f'<table class="sortable" id="t-{anchor(t.name)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def _code_spans(text: str) -> str:
    """``text`` escaped for HTML, its Markdown `code` spans (the commands to run) as ``<code>``."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escape_html(text))


def _records_page(study: str) -> str:
    return f"records-{slug(anchor(study))}.html"


def _cell_anchor(row: str, task: str) -> str:
    return f"c-{anchor(row)}-{anchor(task)}"


def _table_href(v: studies.StudyView) -> str:
    """Where a study's full table is: the front page for a core study, its own page for an extended one."""
    return study_page(v.study.name) if v.extended else f"index.html#study-{anchor(v.study.name)}"


def study_records_page(v: studies.StudyView) -> str:
    """Every cell of a study with the record file of each seed (paths relative to the results folder,
    linked from the site folder one level below it): what a reader opens to check a number."""
    parts = [
        f"<h1>{escape_html(v.study.name)} (v{v.study.version}): the records behind each cell</h1>",
        f'<p class="notes"><a href="{_table_href(v)}">back to the table</a>. Each record '
        "holds its config, code version (git_sha, git_dirty), package versions, device, training accounting "
        "(curves, loss) and per-item scores (its items file beside it).</p>",
    ]
    for row in v.rows:
        for task, c in zip(v.tasks, row.cells):
            if not c.records:
                continue
            links = ", ".join(
                f'<a href="../{escape_html(p)}">seed {escape_html(str(s))}</a>' if p else f"seed {escape_html(str(s))}"
                for s, p in c.records
            )
            parts.append(
                f'<p id="{_cell_anchor(row.method, task)}"><b>{escape_html(row.method)} / {escape_html(task)}</b>: '
                f"{escape_html(c.text)}; {links}</p>"
            )
    return _page(f"benchbench: {v.study.name} records", "\n".join(parts))


def _study_html(v: studies.StudyView, pages: set[str]) -> str:
    """One study's section of the front page: the table ``studies.view`` made, cells rendered by
    ``studies.render_cell`` (the Markdown README uses the same), then its notes and missing cells."""
    st = v.study
    state = "empty" if v.stored == 0 else "partial" if v.stored < v.total else "complete"
    head = (
        "<th>row</th><th>setting</th>"
        + "".join(f"<th>{escape_html(t)}</th>" for t in v.tasks)
        + "<th>avg</th><th>cost (time; energy)</th>"
    )
    body = []
    for row in v.rows:
        name = escape_html(row.label)
        if row.method in pages:
            name = f'<a href="methods/{page_name(row.method)}.html">{name}</a>'
        tds = [f'<td class="label" data-v="{escape_html(row.label)}">{name}</td>']
        tds.append(f'<td class="setting" data-v="{escape_html(row.setting)}">{escape_html(row.setting)}</td>')
        for task, c in zip(v.tasks, row.cells):
            sort_v = "" if c.sort is None else f"{c.sort:.6f}"
            tip = "; ".join(
                x
                for x in (
                    f"vs {c.reference}: {c.start}" if c.reference else "",
                    f"{c.learning}: {c.learning_reason}" if c.learning else "",
                )
                if x
            )
            title = f' title="{escape_html(tip)}"' if tip else ""
            text = studies.render_cell(c, "html")
            if c.records:  # the cell's records, one link per seed, on the study's records page
                text = f'<a href="{_records_page(st.name)}#{_cell_anchor(row.method, task)}">{text}</a>'
            tds.append(f'<td class="num" data-v="{sort_v}"{title}>{text}</td>')
        avg = "" if row.avg is None else f"{row.avg:.2f}"
        tds.append(f'<td class="num" data-v="{"" if row.avg is None else f"{row.avg:.6f}"}">{avg}</td>')
        tds.append(f'<td class="cost" data-v="{escape_html(row.cost)}">{escape_html(row.cost)}</td>')
        body.append("<tr>" + "".join(tds) + "</tr>")
    tier = " — extended" if v.extended else ""
    tier += " — exploratory" if st.exploratory else ""
    parts = [
        f'<section class="study" id="study-{anchor(st.name)}"><h2>{escape_html(st.name)} (v{st.version}){tier}</h2>',
        f"<p>{escape_html(st.description)}</p>",
        *(_core_head(v) if not v.extended else []),
        f'<p class="status {state}">{_code_spans(v.status)}</p>',
        f'<p class="notes">{escape_html(v.conditions)}</p>',
        f'<table class="sortable study-table" id="t-study-{anchor(st.name)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>",
        '<ul class="notes">' + "".join(f"<li>{escape_html(n)}</li>" for n in v.notes) + "</ul>",
        published_html(v.tasks, v.published),  # the papers' numbers, apart from the study's cells
    ]
    parts += [
        f'<figure><img class="plot" src="plots/{n}.svg" alt="{escape_html(title)}"><figcaption>'
        f"{escape_html(title)}</figcaption></figure>"
        for n, title in (study_curve_plot(st.name, c) for c in v.curves)
    ]
    if v.missing and v.stored:
        parts.append(
            '<details class="notes missing"><summary>missing cells</summary><ul>'
            + "".join(f"<li>{escape_html(x)}</li>" for x in v.missing)
            + "</ul></details>"
        )
    return "\n".join(parts) + "</section>"


def _core_head(v: studies.StudyView) -> list[str]:
    """A core study's pre-registration, its three-sentence summary and its primary-endpoint figure, above
    its table."""
    st = v.study
    out = [f"<p><b>Question:</b> {escape_html(st.question)}</p>"] if st.question else []
    if v.summary:
        out.append(f'<p class="summary"><b>Summary:</b> {escape_html(v.summary)}</p>')
    if st.primary and v.seed_scores.get(st.primary["task"], {}).get(st.start):
        name, title = study_endpoint_plot(st.name)
        out.append(
            f'<figure><img class="plot" src="plots/{name}.svg" alt="{escape_html(title)}"><figcaption>'
            f"{escape_html(title)}; the dashed line is the start's own training-free readout</figcaption></figure>"
        )
    return out


def _extended_html(v: studies.StudyView) -> str:
    """An extended study on the front page, collapsed (``studies.completion_lines``: counts, code versions,
    missing cells by method and task, the resume command); its full table on its own page."""
    st = v.study
    state = "empty" if v.stored == 0 else "partial" if v.stored < v.total else "complete"
    pre = " — extended" + (" — exploratory" if st.exploratory else "") + (" — preliminary" if st.preliminary else "")
    return (
        f'<section class="study extended" id="study-{anchor(st.name)}">'
        f"<h3>{escape_html(st.name)} (v{st.version}){escape_html(pre)}</h3>"
        f"<p>{escape_html(st.description)}</p>"
        f'<ul class="completion {state}">'
        + "".join(f"<li>{_code_spans(x)}</li>" for x in studies.completion_lines(v))
        + f'</ul><p class="full"><a href="{study_page(st.name)}">Full table, notes and missing cells &rarr;</a></p>'
        "</section>"
    )


def _study_section(sec: StudySection, pages: set[str]) -> str:
    if sec.view is None:
        return (
            f'<section class="study" id="study-{anchor(sec.name)}"><h2>{escape_html(sec.name)}</h2>'
            f'<p class="status empty">Cannot be shown: {escape_html(sec.error)}</p></section>'
        )
    return _study_html(sec.view, pages)


def _studies_page(sections: list[StudySection], pages: set[str], n_tables: int) -> str:
    """The front page: the studies, and the way to every stored record (``all.html``)."""
    core = [s for s in sections if s.view is None or not s.view.extended]
    extended = [s for s in sections if s.view is not None and s.view.extended]
    parts = [
        "<h1>benchbench: studies</h1>",
        "<p>Declared comparisons: each study fixes one base model, one training budget and its seeds for "
        "every method (<code>benchbench/run/studies/*.toml</code>; fewer than 5 seeds: preliminary). A column's "
        "tie group (bold, rank 1) is every method that a hierarchical bootstrap over seeds and items, Holm-"
        "corrected within the column, cannot separate from the column's best; &asymp; means an equivalence "
        "test (TOST) within the stated margin passed. Scores x100 on the test split.</p>",
        '<p class="all"><a href="all.html">Every stored record &rarr;</a> '
        f"{n_tables} suite tables (USEB, STS, SentEval, ...), plots, a page per method and task</p>",
        "<ul>"
        + "".join(
            f'<li><a href="#study-{anchor(sec.name)}">{escape_html(sec.name)}</a>'
            + (" (extended)" if sec.view and sec.view.extended else "")
            + (f": {sec.view.stored:,} of {sec.view.total:,} cells stored" if sec.view else ": cannot be shown")
            + "</li>"
            for sec in core + extended
        )
        + "</ul>",
    ]
    if not sections:
        parts.append('<p class="notes">no study files</p>')
    elif not core:
        parts.append(f'<p class="notes">{_code_spans(NO_CORE)}</p>')
    parts += [_study_section(sec, pages) for sec in core]
    if extended:
        parts.append(f'<h2 id="extended">Extended studies</h2><p class="notes">{_code_spans(EXTENDED)}</p>')
        parts += [_extended_html(sec.view) for sec in extended if sec.view]
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
    files = {"assets/sort.js": _asset("sort.js"), "assets/style.css": _asset("style.css")}
    for name, (_, svg) in plots.items():
        files[f"plots/{name}.svg"] = svg
    for name, (_, svg) in {**study_curve_plots(sections or []), **study_endpoint_plots(sections or [])}.items():
        files[f"plots/{name}.svg"] = svg
    for sec in sections or []:
        if sec.view is not None:
            files[_records_page(sec.view.study.name)] = study_records_page(sec.view)
            if sec.view.extended:  # collapsed on the front page: the full table on a page of its own
                files[study_page(sec.view.study.name)] = _page(
                    f"benchbench: {sec.view.study.name}", _study_html(sec.view, pages_of(rows))
                )
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
    parts += [f'<li><a href="#s-{anchor(t.name)}">{escape_html(t.name)}</a> ({len(t.rows)} rows)</li>' for t in tables]
    parts.append("</ul>")
    for t in tables:
        parts.append(f'<h2 id="s-{anchor(t.name)}">{escape_html(t.name)}</h2>')
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
        tl = [f'<a href="tasks/{page_name(task)}.html">{escape_html(task)}</a>' for task in t.tasks]
        parts.append('<p class="notes">tasks: ' + ", ".join(tl) + "</p>")
    parts.append("<h2>Plots</h2>")
    parts += [
        f'<figure><img class="plot" src="plots/{n}.svg" alt="{escape_html(title)}">'
        f"<figcaption>{escape_html(title)}</figcaption></figure>"
        for n, (title, _) in plots.items()
    ]
    methods = sorted(pages_of(rows))
    parts.append(
        "<h2>Methods</h2><ul>"
        + "".join(f'<li><a href="methods/{page_name(m)}.html">{escape_html(m)}</a></li>' for m in methods)
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
        files[f"methods/{page_name(m)}.html"] = _page(f"method {m}", "\n".join(body), 1)
    for task in sorted({r["task"] for row in rows for r in row.records}):
        files[f"tasks/{page_name(task)}.html"] = _task_page(task, rows)
    return files


def pages_of(rows: list[Row]) -> set[str]:
    """The methods that have a page of their own (a study's row links to it)."""
    return {row.method for row in rows}


def _task_page(task: str, rows: list[Row]) -> str:
    """A task's page: every row's per-seed scores and sub-scores."""
    trs = []
    for row in rows:
        for r in sorted(row.records, key=lambda r: r.get("seed", 0)):
            if r["task"] != task:
                continue
            res = r["splits"].get(SPLIT) or {}
            sc = ", ".join(f"{k}={v:.2f}" for k, v in sorted(res.get("scores", {}).items()) if num(v) is not None)
            ms = num(res.get("main_score"))
            trs.append(
                f'<tr><td data-v="{escape_html(row.label)}"><a href="../methods/{page_name(row.method)}.html">'
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
