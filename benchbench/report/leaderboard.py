"""Tables from result records: rows = method/model, columns = tasks and suite averages (x100)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from statistics import mean, pstdev
from typing import Any

from tabulate import tabulate

from benchbench.report.escaping import escape_cells, escape_text, table_format


def main_score(record: dict[str, Any], split: str) -> tuple[float | None, bool]:
    res = record["splits"].get(split)
    if res is None:
        return None, False
    return res.get("main_score"), bool(res.get("partial"))


def summarise(
    records: Iterable[dict[str, Any]],
    tasks: list[str],
    suites: dict[str, list[str]] | None = None,
    split: str = "test",
    missing: dict[str, list[str]] | None = None,
    columns: list[str] | None = None,
) -> tuple[list[str], list[list[Any]], list[str]]:
    """Headers, rows and footnotes. Scores are averaged over seeds (with their std when >1 seed).
    A suite average over fewer than all its tasks is marked ``*`` and footnoted, never silent.
    ``columns``: dotted record fields (``train.seconds``, ``train.flops``) added as columns, the mean
    over the row's records (the training cost of a method, for claims like QT's)."""
    suites = suites or {}
    missing = missing or {}
    records = list(records)
    by_row: dict[tuple[str, str, str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    extra: dict[tuple[str, str, str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    partial_cells: set[tuple[tuple[str, str, str, str], str]] = set()
    task_notes: list[str] = []
    # only seeds of ONE configuration are averaged: a method run with two configs gives two rows,
    # labelled with the config hash the provenance lines spell out
    configs: dict[str, set[str]] = defaultdict(set)
    for r in records:
        configs[r["method"]].add(r.get("config_hash", ""))
    for r in records:
        label = r["method"] if len(configs[r["method"]]) == 1 else f"{r['method']} [{r.get('config_hash', '')}]"
        if r.get("scored_by") == "cross":
            label += " (cross-encoder)"
        if r.get("transductive"):  # trained on the evaluation task's own unlabelled pairs: never silent
            label += " [TRANSDUCTIVE]"
            task_notes.append(
                "[TRANSDUCTIVE]: trained on the evaluated tasks' own unlabelled pairs (test pairs "
                "included, labels never read), as Trans-Encoder; not comparable with inductive rows"
            )
        row = (label, r["model"], r.get("setup", "unsupervised"), r.get("config_hash", ""))
        score, partial = main_score(r, split)
        if score is None:
            continue
        by_row[row][r["task"]].append(score)
        for col in columns or []:
            val = _field(r, col)
            if isinstance(val, (int, float)) and not isinstance(val, bool):
                extra[row][col].append(float(val))
        if partial:
            partial_cells.add((row, r["task"]))
        task_notes.extend(
            f"{r['task']}: {n}" for n in r["splits"][split].get("notes", [])
        )  # e.g. which subsets are missing
    headers = ["method", "model"] + tasks + [f"{s} avg" for s in suites] + list(columns or [])
    rows, notes = [], []
    seeds_seen = max((len(v) for cols in by_row.values() for v in cols.values()), default=1)
    for row, cols in sorted(by_row.items()):
        line: list[Any] = [row[0], row[1]]
        for t in tasks:
            vals = cols.get(t)
            if not vals:
                line.append("n/a" if t in missing else "")
                continue
            cell = f"{mean(vals):.2f}" + (f"±{pstdev(vals):.2f}" if len(vals) > 1 else "")
            line.append(cell + ("*" if (row, t) in partial_cells else ""))
        line.extend(_suite_cell(s, members, row, cols, partial_cells, notes) for s, members in suites.items())
        line.extend(f"{mean(extra[row][c]):.4g}" if extra[row][c] else "" for c in columns or [])
        rows.append(line)
    notes.extend(task_notes)
    for t, files in missing.items():
        notes.append(f"n/a {t}: data files missing: {', '.join(files[:3])}{' ...' if len(files) > 3 else ''}")
    if seeds_seen > 1:
        notes.append("cells are mean±std over seeds")
    return headers, rows, notes


def _suite_cell(
    suite: str,
    members: list[str],
    row: tuple[str, ...],
    cols: dict[str, list[float]],
    partial_cells: set,
    notes: list[str],
) -> str:
    """A suite's average for one row; over fewer than all its tasks it is marked ``*`` and a note
    (appended to ``notes``) names what is missing or partial."""
    have = [mean(cols[t]) for t in members if cols.get(t)]
    incomplete = [t for t in members if not cols.get(t)] + [t for t in members if (row, t) in partial_cells]
    if not have:
        return ""
    if not incomplete:
        return f"{mean(have):.2f}"
    notes.append(
        f"* {suite} avg for {row[0]} is PARTIAL: over {len(have)} of {len(members)} tasks "
        f"(missing or partial: {', '.join(incomplete)})"
    )
    return f"{mean(have):.2f}*"


def _field(record: dict[str, Any], dotted: str) -> Any:
    cur: Any = record
    for part in dotted.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return cur


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
    training budget and time, package versions, code revision. Leaderboards print it under the table."""
    rows: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        rows[(r["method"], r["model"], r["config_hash"])].append(r)
    lines = []
    for (method, model, chash), recs in sorted(rows.items()):
        seeds = sorted({r["seed"] for r in recs})
        devices = sorted({r.get("device", "?") for r in recs})
        trains = [r["train"] for r in recs if r.get("train")]
        budget = ""
        if trains:
            steps = sorted({t.get("steps") for t in trains if t.get("steps") is not None})
            secs = [t.get("seconds", 0) for t in trains if not t.get("reused_from_task")]
            budget = f"; training: steps {steps or '?'}, {sum(secs) / max(len(secs), 1):.0f}s per trained encoder"
        v = recs[0].get("versions", {})
        lines.append(
            f"- {method} / {model} [config {chash}: {recs[0].get('config')}]: seeds {seeds}; device {', '.join(devices)}"
            f"{budget}; torch {v.get('torch', '?')}, transformers {v.get('transformers', '?')}; "
            f"git {str(recs[0].get('git_sha'))[:10]}; {recs[0].get('created_at', '')[:10]}"
        )
    return lines
