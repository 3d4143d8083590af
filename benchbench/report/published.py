"""Papers' numbers as context: each paper's row for a study's methods, under the paper's own conditions
(base model and budget named), in a table of its own; never a study cell, a tie group or a delta."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

from benchbench.report.escaping import escape_html


@dataclass(frozen=True)
class PublishedRow:
    """A paper's row for one of the study's methods: context under its own conditions, never a cell."""

    ref: str  # the paper table's file (``tsdae-table2``: benchbench/report/reproductions/<ref>.toml)
    paper: str
    label: str  # the row's name in the paper
    method: str
    base_model: str
    budget: str  # the paper's setting: data, steps/epochs, batch, lr, selection
    values: dict[str, float]


def published_context(methods: Sequence[str], tasks: Sequence[str]) -> list[PublishedRow]:
    """The numbers papers report for the study's methods on its tasks, from the versioned paper tables
    (``benchbench/report/reproductions/<ref>.toml``): a table's first row of a method is the method
    itself (later rows are its variants), averages left out (a paper's average is over its own tasks)."""
    folder = resources.files("benchbench.report") / "reproductions"
    out = []
    for f in sorted((p for p in folder.iterdir() if p.name.endswith(".toml")), key=lambda p: p.name):
        name, spec = f.name[: -len(".toml")], tomllib.loads(f.read_text(encoding="utf-8"))
        taken: set[str] = set()
        for row in spec.get("rows") or []:
            m = str(row.get("method", ""))
            if m not in methods or m in taken:
                continue
            taken.add(m)
            vals = {t: float(v) for t, v in (row.get("published") or {}).items() if t in tasks}
            if vals:
                out.append(
                    PublishedRow(
                        name,
                        f"{spec.get('paper', name)}, {spec.get('table', '')}",
                        str(row.get("label", m)),
                        m,
                        str(spec.get("model") or "not stated"),
                        str(spec.get("setting") or "not stated"),
                        vals,
                    )
                )
    return out


PUBLISHED_NOTE = (
    "Published context: the numbers papers report for these methods, under THEIR conditions (base model and "
    "budget named per row; usually BERT-base, far larger budgets, often checkpoint selection on labels). They "
    "are not comparable with the study's cells: no tie group, no average, no difference is computed across "
    "conditions. Each row's table: benchbench/report/reproductions/<ref>.toml."
)


def published_rows(tasks: Sequence[str], published: Sequence[PublishedRow]) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the published-context table, plain text (the caller escapes)."""
    tasks = [t for t in tasks if any(t in p.values for p in published)]
    head = ["paper row", "method", "base model", "budget", *tasks]
    body = [
        [
            f"{p.label} ({p.ref}: {p.paper})",
            p.method,
            p.base_model,
            p.budget,
            *(f"{p.values[t]:.2f}" if t in p.values else "" for t in tasks),
        ]
        for p in published
    ]
    return head, body


def published_html(tasks: Sequence[str], published: Sequence[PublishedRow]) -> str:
    """The published-context table as HTML (the site's front page shows it under the study's table)."""
    if not published:
        return ""
    head, body = published_rows(tasks, published)
    th = "".join(f"<th>{escape_html(h)}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f"<td>{escape_html(x)}</td>" for x in r) + "</tr>" for r in body)
    return (
        f'<details class="published"><summary>published context</summary><p class="notes">{escape_html(PUBLISHED_NOTE)}'
        f"</p><table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table></details>"
    )
