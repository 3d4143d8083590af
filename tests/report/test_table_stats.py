"""`benchbench table` marks each column's rank-1 group with the studies' test (``stats.column_stats``:
seeds x items, Holm), through the real path: records and per-item files in a store, the CLI reads them.

Before: the table printed no tie test at all (only TSDAE's dagger); a tie mark computed from the items
alone would separate a row whose seeds scatter, which the hierarchical test does not."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from benchbench.cli.main import main
from benchbench.evaluate.item_scores import aggregate_score, pair_items
from benchbench.report import stats
from benchbench.report.aggregate import Cell
from benchbench.store.results import ResultStore

N_ITEMS = 600
CREATED = "2026-11-27T10:00:00+0000"


def _record(method: str, seed: int, score: float, task: str = "stsb") -> dict:
    return {
        "schema_version": 2,
        "task_version": 1,
        "method": method,
        "model": "m",
        "setup": "unsupervised",
        "config": {},
        "config_hash": "h",
        "seed": seed,
        "task": task,
        "created_at": CREATED,
        "evaluated": {"test": {"created_at": CREATED}},
        "splits": {
            "test": {"main_metric": "spearman", "main_score": score, "partial": False, "notes": [], "scores": {}}
        },
    }


def _write(store: ResultStore, method: str, gold: np.ndarray, noises: list[float], rng, with_items: bool = True):
    """One row: seed s predicts gold plus noise of sd ``noises[s-1]``; its per-item file stored beside it."""
    out = {}
    for s, sd in enumerate(noises, start=1):
        items = pair_items({"all": (gold + rng.normal(0, sd, gold.size), gold)}, "spearman")
        score = aggregate_score(items)
        store.write(_record(method, s, score), items={"test": items} if with_items else None)
        out[s] = items
    return out


def _table(root, capsys, *extra: str) -> dict[str, str]:
    """method -> its stsb cell as `benchbench table` prints it; plus the footnotes under ``"notes"``."""
    assert main(["table", "--output", str(root), "--no-provenance", "--resamples", "4000", *extra]) == 0
    out = capsys.readouterr().out
    cells = {}
    for line in out.splitlines():
        parts = [p.strip() for p in line.strip("|").split("|")]
        if len(parts) == 3 and parts[1] == "m":
            cells[parts[0]] = parts[2]
    cells["notes"] = out
    return cells


@pytest.fixture(scope="module")
def gold():
    return np.random.default_rng(0).uniform(0, 5, N_ITEMS)


def test_the_tables_rank_mark_follows_the_hierarchical_test_not_the_items_alone(tmp_path, capsys, gold):
    """b's seeds scatter (noise sd 0.4 to 1.6) around a mean below a's steady seeds: the items-only test
    separates b from a, the seeds x items test does not, and the table marks b rank 1 with a. c, as far
    below a with steady seeds (further than b on average), is separated by the same test: no mark."""
    rng = np.random.default_rng(1)
    store = ResultStore(tmp_path / "results")
    a = _write(store, "a", gold, [0.7, 0.7, 0.7], rng)
    b = _write(store, "b", gold, [0.4, 1.6, 0.9], rng)
    _write(store, "c", gold, [1.3, 1.3, 1.3], rng)
    items_only = stats.paired_bootstrap_items([a[s] for s in (1, 2, 3)], [b[s] for s in (1, 2, 3)], 2000, 0)
    assert items_only.p_value < stats.TIE_P  # the items alone would separate b

    cells = _table(store.root, capsys)
    assert cells["a"].endswith(" ¹") and cells["b"].endswith(" ¹"), cells
    assert not cells["c"].endswith("¹"), cells
    notes = cells["notes"]
    assert "Test per column: hierarchical: stsb (" in notes and "Student t with k-1 degrees of freedom" in notes
    assert "Holm-adjusted p ≥ 0.05" in notes
    # the p-values printed are the ones that decided: b at or above alpha, c below it
    line = next(ln for ln in notes.splitlines() if ln.startswith("p against the column's best"))
    p = {m: float(line.split(f"{m} / m ")[1].split(",")[0].rstrip(".;")) for m in ("b", "c")}
    assert p["b"] >= stats.TIE_P > p["c"], line


def test_seeds_alone_decide_without_items_and_the_table_says_so(tmp_path, capsys, gold):
    """Without per-item files the column is tested on the seeds alone and the footnote names the rows
    that lack them; a damaged items file is named (never a silent switch of test)."""
    rng = np.random.default_rng(3)
    store = ResultStore(tmp_path / "results")
    _write(store, "a", gold, [0.7, 0.72, 0.71], rng)
    _write(store, "b", gold, [1.3, 1.32, 1.31], rng, with_items=False)
    cells = _table(store.root, capsys)
    assert "Test per column: seeds (no per-item scores stored for b / m): stsb (" in cells["notes"], cells["notes"]
    assert cells["a"].endswith(" ¹") and not cells["b"].endswith("¹"), cells

    _write(store, "b", gold, [1.3, 1.32, 1.31], rng)  # now with items; then one of a's is truncated
    victim = next(store.root.rglob("seed2/*.items.test.json.gz"))
    if "/a/" not in victim.as_posix():
        victim = next(p for p in store.root.rglob("*.items.test.json.gz") if "/a/" in p.as_posix())
    victim.write_bytes(gzip.compress(b"{")[:10])
    notes = _table(store.root, capsys)["notes"]
    assert "Test per column: seeds (damaged per-item scores: Per-item scores of a/stsb" in notes, notes


def test_one_seed_without_items_is_no_test_and_no_mark(tmp_path, capsys, gold):
    """One seed per row and no items: no test can separate the rows (the seeds-alone p would sit at the
    bootstrap's floor for any gap). No row gets the rank mark and the footnote says why."""
    rng = np.random.default_rng(4)
    store = ResultStore(tmp_path / "results")
    _write(store, "a", gold, [0.5], rng, with_items=False)
    _write(store, "b", gold, [1.5], rng, with_items=False)
    cells = _table(store.root, capsys)
    assert not any(cells[m].endswith("¹") for m in ("a", "b")), cells
    why = "- (no per-item scores stored; every row has one seed, so no test can separate the rows): stsb ("
    assert why in cells["notes"], cells["notes"]
    # with items, one seed each is the items test (seed spread unknown, said in the legend): b is separated
    _write(store, "a", gold, [0.5], rng)
    _write(store, "b", gold, [1.5], rng)
    cells = _table(store.root, capsys)
    assert cells["a"].endswith(" ¹") and not cells["b"].endswith("¹"), cells
    assert "hierarchical: stsb (" in cells["notes"] and "one seed: the items alone" in cells["notes"]


def test_resamples_zero_prints_no_test(tmp_path, capsys, gold):
    rng = np.random.default_rng(5)
    store = ResultStore(tmp_path / "results")
    _write(store, "a", gold, [0.5, 0.6], rng)
    cells = _table(store.root, capsys, "--resamples", "0")
    assert "¹" not in cells["notes"] and "Test per column" not in cells["notes"]


def test_the_tables_column_is_the_studys_column(gold):
    """The table and the studies decide through one function: on the same cells (a start row, a cell
    every seed below it) the study view's column and the library's agree on the best, the tie group,
    every p-value and every ≈ verdict."""
    from dataclasses import asdict

    from benchbench.report import study_view

    rng = np.random.default_rng(6)
    cells = {}
    for m, noises in {"start": [0.7] * 3, "x": [0.72, 0.7, 0.74], "y": [0.4, 1.6, 0.9], "z": [1.1, 1.2, 1.0]}.items():
        items = {
            s: pair_items({"all": (gold + rng.normal(0, sd, gold.size), gold)}, "spearman")
            for s, sd in enumerate(noises, 1)
        }
        cells[m] = Cell({s: aggregate_score(it) for s, it in items.items()}, items=items)
    mine = stats.column_stats("stsb", cells, start="start", margin=1.0, n_resamples=4000)
    theirs = study_view.column_stats("stsb", cells, start="start", margin=1.0, n_resamples=4000)
    assert asdict(mine) == asdict(theirs)
    assert mine.start["z"].verdict == theirs.start["z"].verdict
    # each row against its own reference, a context row as a second family, ranking over some rows only
    kw = dict(start={"y": "start", "z": "x"}, context={"x": "start"}, ranked={"y", "z", "start"}, n_resamples=4000)
    mine, theirs = stats.column_stats("stsb", cells, **kw), study_view.column_stats("stsb", cells, **kw)
    assert asdict(mine) == asdict(theirs) and "x" not in mine.p and mine.start["x"].reference == "start"


def _significance(root, capsys, rivals: str, *extra: str) -> str:
    args = ["significance", "--results", str(root), "--task", "stsb", "--method", "a", "--rivals", rivals]
    assert main([*args, "--resamples", "50", *extra]) == 0
    return capsys.readouterr().out


def test_significance_claims_equivalence_from_tost_alone(tmp_path, capsys):
    """`significance` decides through the same library: ≈ where TOST within the margin passes, for b
    (seeds on both sides of a) and for c (every seed of a above c, all within the margin: the one-side
    veto is gone, issue 47); not at a margin TOST cannot meet."""
    store = ResultStore(tmp_path / "results")
    for m, vals in {"a": (80.0, 80.1, 80.2), "b": (80.05, 80.15, 80.1), "c": (79.6, 79.7, 79.8)}.items():
        for s, v in enumerate(vals, 1):
            store.write(_record(m, s, v))
    text = _significance(store.root, capsys, "b,c")
    rows = {
        ln.split("|")[1].strip(): ln.split("|")
        for ln in text.splitlines()
        if ln.startswith("| b | +") or ln.startswith("| c | +")
    }
    assert rows["b"][5].strip().endswith("≈") and float(rows["b"][5].split()[0]) < stats.TIE_P, rows
    assert rows["c"][5].strip().endswith("≈") and float(rows["c"][5].split()[0]) < stats.TIE_P, rows
    assert "seeds: seeds resampled alone, no per-item scores stored)" in text and "TOST alone decides" in text
    tight = _significance(store.root, capsys, "b,c", "--margin", "0.05")
    assert "≈ |" not in tight and "TOST ±0.05" in tight


def test_significance_gives_a_bit_identical_rival_its_equivalence(tmp_path, capsys):
    """Five copies of one score for the method and its rival (their means one ulp above each copy): ≈."""
    store = ResultStore(tmp_path / "results")
    for m in ("a", "b"):
        for s in range(1, 6):
            store.write(_record(m, s, 53.24665654229489))
    text = _significance(store.root, capsys, "b")
    row = next(ln.split("|") for ln in text.splitlines() if ln.startswith("| b | +0.00"))
    assert row[5].strip().endswith("≈"), row


def test_significance_with_one_seed_and_no_items_says_no_test_could_decide(tmp_path, capsys):
    store = ResultStore(tmp_path / "results")
    store.write(_record("a", 1, 80.0))
    store.write(_record("b", 1, 70.0))
    text = _significance(store.root, capsys, "b")
    assert "no test could decide: no per-item scores stored; every row has one seed" in text, text
    assert "Holm-adjusted p |" not in text
    store.write(_record("a", 2, 80.5))  # one side with two seeds: the other's single seed still decides nothing
    assert "no per-item scores stored; one seed only: b, so no test" in _significance(store.root, capsys, "b")


def test_table_provenance_lists_every_code_version_dirty_ones_marked():
    """`table`'s provenance names each code version of a row, a run from uncommitted changes with its
    diff hash (before: the first record's sha alone, so a dirty seed passed as the commit)."""
    from benchbench.report.leaderboard import provenance

    clean = {**_record("a", 1, 80.0), "git_sha": "c" * 40, "git_dirty": False}
    dirty = {**_record("a", 2, 81.0), "git_sha": "c" * 40, "git_dirty": True, "git_diff_sha256": "d" * 64}
    old = {**_record("a", 3, 82.0), "git_sha": "e" * 40}  # a record from before git_dirty
    (line,) = provenance([clean, dirty, old])
    assert f"git {'c' * 12}, {'c' * 12}+dirty.{'d' * 8}, {'e' * 12};" in line, line


def test_a_tables_columns_are_reused_while_their_records_are_unchanged(tmp_path, capsys, gold, monkeypatch):
    """The second `table` over the same records reads each column from the cache (no bootstrap) and
    prints the same marks; a record written again (another checksum) recomputes its column only."""
    from benchbench.report import leaderboard

    monkeypatch.setattr(leaderboard, "tie_cache", lambda: tmp_path / "cache")
    calls = []
    real = stats.column_stats
    monkeypatch.setattr(stats, "column_stats", lambda task, *a, **k: calls.append(task) or real(task, *a, **k))
    rng = np.random.default_rng(7)
    store = ResultStore(tmp_path / "results")
    _write(store, "a", gold, [0.7, 0.71, 0.72], rng)
    _write(store, "b", gold, [1.3, 1.31, 1.32], rng)
    first = _table(store.root, capsys)
    assert calls == ["stsb"] and first["a"].endswith(" ¹") and not first["b"].endswith("¹")
    assert _table(store.root, capsys) == first and calls == ["stsb"]  # read back: same output, no bootstrap
    _write(store, "b", gold, [0.7, 0.71, 0.72], rng)  # b rewritten: its records' checksums change
    again = _table(store.root, capsys)
    assert calls == ["stsb", "stsb"] and again["b"].endswith(" ¹"), again
