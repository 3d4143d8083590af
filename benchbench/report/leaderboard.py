"""Tables from result records: rows = method/model, columns = tasks and suite averages (x100)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tabulate import tabulate

from benchbench.report.aggregate import build_rows, cell_text, seeds_text, table_notes, table_rows
from benchbench.report.aggregate import main_score as main_score
from benchbench.report.escaping import escape_cells, escape_text, table_format


def summarise(
    records: Iterable[dict[str, Any]],
    tasks: list[str],
    suites: dict[str, list[str]] | None = None,
    split: str = "test",
    missing: dict[str, list[str]] | None = None,
    columns: list[str] | None = None,
) -> tuple[list[str], list[list[Any]], list[str]]:
    """Headers, rows and footnotes of ``run``'s and ``table``'s table, from the one aggregation
    (``benchbench.report.aggregate``, as the leaderboards): each record once, mean ± sample std over
    distinct seeds, a suite average only over a complete row. ``missing``: tasks whose data files are
    absent (cells ``n/a``). ``columns``: dotted record fields (``train.seconds``, ``train.flops``) added as
    columns, the mean over the row's trained records (the training cost of a method, for claims like QT's)."""
    suites = suites or {}
    missing = missing or {}
    columns = list(columns or [])
    trs = table_rows(build_rows(records), tasks, suites, split)
    headers = ["method", "model"] + tasks + [f"{s} avg" for s in suites] + columns
    rows = []
    for tr in trs:
        line: list[Any] = [tr.row.display_label, tr.row.model]
        line += [cell_text(tr.cells[t]) if tr.cells[t] else ("n/a" if t in missing else "") for t in tasks]
        line += ["" if tr.averages[s] is None else f"{tr.averages[s]:.2f}" for s in suites]
        costs = [tr.row.cost(c) for c in columns]
        line += [f"{c:.4g}" if c is not None else "" for c in costs]
        rows.append(line)
    notes = table_notes(trs, suites, split)
    for t, files in missing.items():
        notes.append(f"n/a {t}: data files missing: {', '.join(files[:3])}{' ...' if len(files) > 3 else ''}")
    return headers, rows, notes


def render(headers: list[str], rows: list[list[Any]], notes: list[str], fmt: str = "github", title: str = "") -> str:
    """The table in ``fmt``; names come from records and plugins, so everything is escaped for the
    format (``benchbench.report.escaping``): HTML cells, title and footnotes; Markdown cells (a ``|``)."""
    table = tabulate(
        escape_cells(rows, fmt),
        headers=escape_cells([headers], fmt)[0],
        tablefmt=table_format(fmt),
        disable_numparse=True,
    )
    out = (f"{escape_text(title, fmt)}\n" if title else "") + table
    if notes:
        out += "\n" + "\n".join(escape_text(n, fmt) for n in dict.fromkeys(notes))
    return out


def provenance(records: Iterable[dict[str, Any]]) -> list[str]:
    """One line per table row saying how its numbers were produced: config, seeds, base model, device,
    training budget and time, package versions, code revision."""
    lines = []
    for row in build_rows(records):
        recs = row.records
        devices = sorted({str(r.get("device", "?")) for r in recs})
        trains = [r["train"] for r in recs if r.get("train")]
        budget = ""
        if trains:
            steps = sorted({t.get("steps") for t in trains if t.get("steps") is not None})
            secs = [t.get("seconds", 0) for t in trains if not t.get("reused_from_task")]
            budget = f"; training: steps {steps or '?'}, {sum(secs) / max(len(secs), 1):.0f}s per trained encoder"
        v = recs[0].get("versions", {})
        lines.append(
            f"- {row.label} / {row.model} [config {recs[0].get('config_hash', '')}: {recs[0].get('config')}]: "
            f"{seeds_text(row.seeds())}; device {', '.join(devices)}{budget}; torch {v.get('torch', '?')}, "
            f"transformers {v.get('transformers', '?')}; git {str(recs[0].get('git_sha'))[:10]}; "
            f"{str(recs[0].get('created_at', ''))[:10]}"
        )
    return lines
