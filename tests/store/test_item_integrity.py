"""Per-item scores are held to their record like the record is held to its checksum.

Before the fix: a truncated ``*.items.test.json.gz``, or another task's copied over it, made a study's
tie column fall back from the item bootstrap to the seed test with no word; items edited with
``items_sha256`` updated and the record's ``checksum`` deleted were used as-is; and a schema-2 record
with its checksum deleted and ``main_score`` set to 99 loaded silently. Records from before checksums
(schema 1, and schema 2's first day, 683 of them committed under ``leaderboards/``) still load.
"""

from __future__ import annotations

import gzip
import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO

from benchbench.core.errors import DataError
from benchbench.evaluate.item_scores import aggregate_score, query_items
from benchbench.store.results import (
    CHECKSUMS_SINCE,
    DamagedItems,
    DamagedRecord,
    ResultStore,
    checksum,
    read_record,
    record_items,
)

OLD = "2026-11-23T05:42:29+0000"  # the latest created_at among the committed records without a checksum


def _items(task: str, seed: int, shift: float = 0.0, n: int = 60) -> dict:
    rng = np.random.default_rng(seed)
    subsets = {"all": [f"q{i}" for i in range(n)]} if task == "one" else {"a": range(n), "b": range(n)}
    return query_items({s: (list(ids), rng.uniform(10, 90, n) + shift) for s, ids in subsets.items()}, "map")


def _record(method: str, task: str, seed: int, items: dict, created_at: str | None = None) -> dict:
    r = {
        "schema_version": 2,
        "task_version": 1,
        "method": method,
        "model": "m",
        "setup": "unsupervised",
        "config": {},
        "config_hash": "h",
        "seed": seed,
        "task": task,
        "splits": {
            "test": {
                "main_metric": "map",
                "main_score": aggregate_score(items),
                "partial": False,
                "notes": [],
                "scores": {},
                "subsets": {s: {} for s in items["subsets"]} if len(items["subsets"]) > 1 else {},
            }
        },
    }
    if created_at:
        r["created_at"] = created_at
        r["evaluated"] = {"test": {"created_at": created_at}}
    return r


@pytest.fixture
def store(tmp_path) -> ResultStore:
    st = ResultStore(tmp_path / "results")
    for m, shift in (("a", 0.0), ("b", 0.5)):
        for task in ("one", "two"):
            for seed in (1, 2):
                items = _items(task, seed, shift)
                st.write(_record(m, task, seed, items, created_at="2026-11-27T10:00:00+0000"), items={"test": items})
    return st


def _path(store: ResultStore, method: str, task: str, seed: int = 1) -> Path:
    from benchbench.store.results import ResultKey

    return store.path(ResultKey(method, "h", "m", "unsupervised", seed, task))


def _items_path(store: ResultStore, method: str, task: str, seed: int = 1) -> Path:
    p = _path(store, method, task, seed)
    return p.with_name(f"{p.stem}.items.test.json.gz")


# ---- the record: a checksum deleted is damage, unless the record predates checksums -------------------
def test_schema2_record_with_checksum_deleted_and_score_edited_is_refused_naming_the_file(store, caplog):
    p = _path(store, "a", "one")
    r = json.loads(p.read_text())
    del r["checksum"]
    r["splits"]["test"]["main_score"] = 99.0
    p.write_text(json.dumps(r))
    with pytest.raises(DamagedRecord, match="has no checksum") as e:
        read_record(p)
    assert e.value.path == p and CHECKSUMS_SINCE in str(e.value)
    with caplog.at_level(logging.WARNING):
        scores = [x["splits"]["test"]["main_score"] for x in store.records()]
    assert 99.0 not in scores and len(scores) == 7
    assert [d.path for d in store.damaged] == [p] and str(p) in caplog.text


@pytest.mark.parametrize("created_at", [None, "yesterday", "2026-11-24T10:00:00+0000"])
def test_a_checksum_less_record_must_show_it_predates_checksums(tmp_path, created_at):
    """No date, an unreadable one, or a date after checksums began: refused (a mutation that accepts a
    missing or unparsable date, or compares the wrong way, fails here)."""
    items = _items("one", 1)
    r = _record("a", "one", 1, items, created_at=created_at)
    if created_at == "yesterday":
        r["created_at"] = "yesterday"
    p = tmp_path / "r.json"
    p.write_text(json.dumps(r))
    with pytest.raises(DamagedRecord, match="has no checksum"):
        read_record(p)


def test_records_from_before_checksums_still_load(tmp_path):
    """Schema 1 (no checksum ever), and schema 2 written before checksums began (all its dates earlier)."""
    items = _items("one", 1)
    r2 = _record("a", "one", 1, items, created_at=OLD)
    r1 = {
        k: v for k, v in _record("a", "one", 1, items, created_at=OLD).items() if k not in ("task_version", "evaluated")
    }
    r1["schema_version"] = 1
    for r in (r1, r2):
        p = tmp_path / "r.json"
        p.write_text(json.dumps(r))
        assert read_record(p)["splits"]["test"]["main_score"] == r["splits"]["test"]["main_score"]
    # one split evaluated after checksums began is enough to refuse it
    r2["evaluated"]["dev"] = {"created_at": "2026-11-24T00:00:00+0000"}
    p.write_text(json.dumps(r2))
    with pytest.raises(DamagedRecord, match="has no checksum"):
        read_record(p)


def test_the_committed_records_all_load():
    """Every record under leaderboards/ loads (none is refused for a missing checksum), and every
    per-item file of theirs verifies against its record."""
    from benchbench.store.results import key_of

    root = REPO / "leaderboards"
    if not root.is_dir():
        pytest.skip("no leaderboards/ beside the tests")
    n_records = n_items = 0
    for p in sorted(root.rglob("*.json")):
        r = read_record(p)  # raises DamagedRecord, naming the file, if any is refused
        if r is None:
            continue
        n_records += 1
        store_root = p.parents[len(key_of(r).relpath().parts) - 1]
        for split in r.get("items") or {}:
            record_items(r, store_root, split)
            n_items += 1
    assert n_records >= 1400 and n_items >= 600


# ---- the per-item files ------------------------------------------------------------------------------
def _truncate(p: Path, store: ResultStore) -> None:
    b = p.read_bytes()
    p.write_bytes(b[: len(b) // 2])


def _other_task(p: Path, store: ResultStore) -> None:
    """Another task's (valid) per-item file copied over this one."""
    shutil.copy(_items_path(store, "a", "two"), p)


def _other_method(p: Path, store: ResultStore) -> None:
    """The same task's file of another method: right shape, wrong scores."""
    shutil.copy(_items_path(store, "b", "one"), p)


@pytest.mark.parametrize("damage", [_truncate, _other_task, _other_method])
def test_damaged_items_are_refused_naming_the_file(store, damage):
    p = _items_path(store, "a", "one")
    damage(p, store)
    rec = read_record(_path(store, "a", "one"))
    with pytest.raises(DamagedItems) as e:
        record_items(rec, store.root)
    assert e.value.path == p and str(p) in str(e.value) and "--store-items" in str(e.value)
    assert store.items_problems(rec)["test"].startswith(str(p))


def test_items_edited_with_their_sha256_updated_and_the_checksum_deleted_are_refused(store):
    """The lazy forgery: new items, their sha256 put in the record, the checksum deleted."""
    from benchbench.store.items import write_items

    p, rp = _items_path(store, "a", "one"), _path(store, "a", "one")
    items = _items("one", 1, shift=20.0)
    write_items(p, items)
    r = json.loads(rp.read_text())
    r["items_sha256"]["test"] = __import__("hashlib").sha256(p.read_bytes()).hexdigest()
    r["splits"]["test"]["main_score"] = aggregate_score(items)
    del r["checksum"]
    rp.write_text(json.dumps(r))
    with pytest.raises(DamagedRecord, match="has no checksum") as e:
        read_record(rp)
    assert e.value.path == rp


def test_a_checksummed_record_whose_items_lost_their_sha256_is_refused(store):
    """``items_sha256`` deleted and the checksum recomputed: every checksummed record holds a sha256 for
    each items file it names, so one without it was edited (else its items would be checked for
    presence only)."""
    rp = _path(store, "a", "one")
    r = json.loads(rp.read_text())
    del r["items_sha256"]
    r["checksum"] = checksum(r)
    rp.write_text(json.dumps(r))
    shutil.copy(_items_path(store, "b", "one"), _items_path(store, "a", "one"))
    with pytest.raises(DamagedItems, match="no sha256"):
        record_items(read_record(rp), store.root)


def test_items_of_a_record_from_before_checksums_are_checked_against_its_subsets(tmp_path):
    """A record written before items had a sha256 (17 are committed): another task's file copied over
    its own is told by its subsets; its own file still reads."""
    st = ResultStore(tmp_path)
    for task in ("one", "two"):
        items = _items(task, 1)
        path = st.write(_record("a", task, 1, items), items={"test": items})
        r = json.loads(path.read_text())
        for k in ("checksum", "items_sha256"):
            del r[k]
        r["created_at"] = OLD
        path.write_text(json.dumps(r))
    one, two = (tmp_path / "a/m/unsupervised/h/seed1" / f"{t}.items.test.json.gz" for t in ("one", "two"))
    rec = read_record(tmp_path / "a/m/unsupervised/h/seed1/one.json")
    assert aggregate_score(record_items(rec, tmp_path)) == pytest.approx(rec["splits"]["test"]["main_score"])
    shutil.copy(two, one)
    with pytest.raises(DamagedItems, match="another task's file") as e:
        record_items(rec, tmp_path)
    assert e.value.path == one
    one.write_bytes(gzip.compress(b"{}"))
    with pytest.raises(DamagedItems, match="unknown per-item format"):
        record_items(rec, tmp_path)


# ---- where items are read: significance and the study report ---------------------------------------
@pytest.mark.parametrize("damage", [_truncate, _other_task])
def test_significance_names_the_damaged_items_file(store, capsys, damage):
    from benchbench.cli.main import main

    p = _items_path(store, "a", "one")
    damage(p, store)
    args = ["significance", "--results", str(store.root), "--task", "one", "--method", "a", "--rivals", "b"]
    try:
        rc = main([*args, "--resamples", "50"])
        out = capsys.readouterr()
        text = out.out + out.err
    except DataError as e:  # refusing the whole report is as good as naming the file in it
        rc, text = 1, str(e)
    assert p.name in text, text
    assert rc != 0 or "seed 1: n/a" in text


def test_study_report_never_falls_back_in_silence(tmp_path):
    """A truncated items file under a study: ``collect`` (what `study report`, the README and the site
    read) raises naming the file, or the report it renders names it; it never quietly switches the tie
    test to the seeds (the old ``except DataError: pass``)."""
    from benchbench.core.methods import build_config, config_hash
    from benchbench.core.registry import get_registry
    from benchbench.encode.models import model_label_of
    from benchbench.report import study_view
    from benchbench.run import study

    (tmp_path / "mini.toml").write_text(
        'name = "mini"\nversion = 1\ndescription = "d"\nmodel = "tiny-bert"\nseeds = [1, 2, 3]\n'
        'tasks = ["askubuntu"]\nmethods = ["tsdae", "ct"]\n[budget]\nsteps = 1\nbatch_size = 2\n'
    )
    st = study.load_study(str(tmp_path / "mini.toml"))
    store = ResultStore(tmp_path / "lb" / "studies" / "mini")
    reg = get_registry()
    for m in st.methods:
        for s in st.seeds:
            items = _items("one", s, shift=0.1 if m == "ct" else 0.0)
            r = _record(m, "askubuntu", s, items)
            r["model"] = model_label_of(st.model)
            r["config_hash"] = config_hash(build_config(reg.method(m), st.overrides(m)))
            p = store.write(r, items={"test": items})
    damaged = p.with_name(f"{p.stem}.items.test.json.gz")
    _truncate(damaged, store)
    try:
        table = study_view.collect(st, list(store.records()), store.root, ["askubuntu"])
        text = study_view.report_markdown(st, table)
    except DataError as e:
        text = str(e)
    assert damaged.name in text, text
