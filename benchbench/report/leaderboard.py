"""Tables from result records: rows = method/model, columns = tasks and suite averages (x100)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tabulate import tabulate

from benchbench.core.errors import DataError
from benchbench.report import stats
from benchbench.report.aggregate import Cell, TableRow, build_rows, cell_text, seeds_text, table_notes, table_rows
from benchbench.report.aggregate import main_score as main_score
from benchbench.report.escaping import escape_cells, escape_text, table_format


def summarise(
    records: Iterable[dict[str, Any]],
    tasks: list[str],
    suites: dict[str, list[str]] | None = None,
    split: str = "test",
    missing: dict[str, list[str]] | None = None,
    columns: list[str] | None = None,
    ties: int | None = None,
    root: str | Path | None = None,
    references: Sequence[tuple[str, str, str]] = (),
) -> tuple[list[str], list[list[Any]], list[str]]:
    """Headers, rows and footnotes of ``run``'s and ``table``'s table, from the one aggregation
    (``benchbench.report.aggregate``, as the leaderboards): each record once, mean ± sample std over
    distinct seeds, a suite average only over a complete row. ``missing``: tasks whose data files are
    absent (cells ``n/a``). ``columns``: dotted record fields (``train.seconds``, ``train.flops``) added as
    columns, the mean over the row's trained records (the training cost of a method, for claims like QT's).
    ``ties``: resamples of the studies' tie test (:func:`tie_columns`; the per-item files are found beside
    each record, or under ``root``): each column's rank-1 group is marked ``¹`` and the test that decided
    it is stated under the table. None: no test (``run``'s quick table). ``references``: (method, config
    hash, label) of ``run``'s reference rows (``benchbench.run.references``): those rows come first, in
    that order, under that label; every other row follows as before."""
    suites = suites or {}
    missing = missing or {}
    columns = list(columns or [])
    trs = _references_first(table_rows(build_rows(records), tasks, suites, split), references)
    headers = ["method", "model"] + tasks + [f"{s} avg" for s in suites] + columns
    cols = tie_columns(trs, tasks, split, ties, root) if ties else {}
    rows = []
    for tr in trs:
        line: list[Any] = [tr.row.display_label, tr.row.model]
        line += [
            cell_text(tr.cells[t]) + (RANK_MARK if t in cols and _name(tr) in cols[t].tied else "")
            if tr.cells[t]
            else ("n/a" if t in missing else "")
            for t in tasks
        ]
        line += ["" if tr.averages[s] is None else f"{tr.averages[s]:.2f}" for s in suites]
        costs = [tr.row.cost(c) for c in columns]
        line += [f"{c:.4g}" if c is not None else "" for c in costs]
        rows.append(line)
    notes = table_notes(trs, suites, split)
    if ties:
        notes += stats.tie_legend(cols, ties, TIE_SEED, RANK_MARK.strip())
    for t, files in missing.items():
        notes.append(f"n/a {t}: data files missing: {', '.join(files[:3])}{' ...' if len(files) > 3 else ''}")
    return headers, rows, notes


def _references_first(trs: list[TableRow], references: Sequence[tuple[str, str, str]]) -> list[TableRow]:
    """``trs`` with the rows ``references`` names moved to the front, in its order, relabelled."""
    first: dict[int, TableRow] = {}
    for method, chash, label in references:
        for tr in trs:
            if id(tr) not in first and tr.row.method == method and tr.row.key[3] == chash:
                tr.row.label = label
                first[id(tr)] = tr
    return list(first.values()) + [tr for tr in trs if id(tr) not in first]


RANK_MARK = " ¹"  # the column's rank-1 group (stats.column_stats), as the studies mark it
TIE_SEED = 0  # the bootstrap seed of the tie test (the studies' too)


def _name(tr: TableRow) -> str:
    return f"{tr.row.display_label} / {tr.row.model}"


def tie_columns(
    trs: list[TableRow],
    tasks: list[str],
    split: str,
    n_resamples: int,
    root: str | Path | None,
    cache: Path | None = None,
) -> dict[str, stats.Column]:
    """task -> its column's statistics over the table's rows, by the studies' test
    (``stats.column_stats``: seeds x items where every seed of every row has verified per-item scores,
    seeds alone otherwise, none with one seed and no items; the column says which and why). A column
    is read from ``cache`` (default :func:`tie_cache`) when the same records were tested before."""
    cache = tie_cache() if cache is None else cache
    out = {}
    for t in tasks:
        cells, recs = {}, {}
        for tr in trs:
            cell = tr.cells.get(t)
            if cell is not None:
                recs[_name(tr)] = tr.row.task_records(t, split)
                cells[_name(tr)] = _with_items(cell, recs[_name(tr)], split, root)
        out[t] = _cached_column(t, cells, recs, split, n_resamples, cache)
    return out


def tie_cache() -> Path:
    """Where table columns' statistics are kept (beside the data cache; never among the records)."""
    from benchbench.core.paths import default_data_cache

    return default_data_cache().parent / "table-stats"


def _cached_column(
    task: str, cells: dict[str, Cell], recs: dict[str, list[dict[str, Any]]], split: str, n: int, cache: Path
) -> stats.Column:
    """``stats.column_stats`` of the column, or its cached result: keyed by every record's checksum
    (its scores without one), which seeds have items, the damaged files, the settings and the bytes of
    ``stats.py`` itself (a change of the library recomputes). JSON only; an unreadable entry is recomputed."""
    import hashlib
    import json

    from benchbench.store.files import atomic_write_json

    parts: list[Any] = [hashlib.sha256(Path(stats.__file__).read_bytes()).hexdigest(), task, split, n, TIE_SEED]
    for name in sorted(cells):
        c = cells[name]
        parts.append([name, sorted(map(str, c.items)), c.damaged])
        parts += [
            [r.get("seed"), r.get("checksum"), r.get("items_sha256"), c.scores.get(r.get("seed"))] for r in recs[name]
        ]
    path = cache / f"{hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()}.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return stats.Column(
            **{k: v for k, v in doc.items() if k not in ("tied", "start")},
            tied=set(doc["tied"]),
            start={m: stats.StartTest(**v) for m, v in doc["start"].items()},
        )
    except (OSError, ValueError, TypeError, KeyError):
        pass
    col = stats.column_stats(task, cells, n_resamples=n, seed=TIE_SEED)
    doc = {**dataclasses.asdict(col), "tied": sorted(col.tied)}
    try:
        atomic_write_json(path, doc, root=cache)
    except OSError:
        pass  # a read-only cache costs time, never a result
    return col


def _with_items(cell: Cell, records: list[dict[str, Any]], split: str, root: str | Path | None) -> Cell:
    """``cell`` with each seed's verified per-item scores; a file that fails verification is named in
    ``damaged`` (the column then says it fell back to seeds alone, and why)."""
    from benchbench.store.results import record_items

    cell = dataclasses.replace(cell, items={}, damaged=[])
    for r in records:
        if not (r.get("items") or {}).get(split):
            continue
        try:
            cell.items[r.get("seed")] = record_items(r, store_root(r, root), split)
        except DataError as e:
            cell.damaged.append(str(e).splitlines()[0])
    return cell


def store_root(record: dict[str, Any], root: str | Path | None) -> Path:
    """The store a record loaded by ``aggregate.load_records`` belongs to: its path (``_path``, as it is or
    under ``root``) less its key's path (own or legacy); ``root`` when the record names no such path."""
    from benchbench.store.results import key_of

    path = Path(str(record.get("_path") or ""))
    if record.get("_path") and not record.get("imported_from"):
        key = key_of(record)
        for own in (key.relpath().parts, key.legacy_relpath().parts):
            if path.parts[-len(own) :] == own:
                store = Path(*path.parts[: -len(own)]) if len(path.parts) > len(own) else Path(".")
                return store if (store / Path(*own)).is_file() or root is None else Path(root) / store
    return Path(root or ".")


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
    training budget and time, package versions, every code version among its records (``+dirty.<hash>``:
    run from uncommitted changes, ``store.results.code_version``)."""
    from benchbench.store.results import code_version

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
            f"transformers {v.get('transformers', '?')}; git {', '.join(sorted({code_version(r) for r in recs}))}; "
            f"{str(recs[0].get('created_at', ''))[:10]}"
        )
    return lines
