"""``study run --supersede``: a study resumed at new code sets aside the records another code version wrote
(with their per-item files and the encoder trained on their corpus) so their cells run again, and every
row comes from one code version. Set aside, never deleted; never read as cells."""

from __future__ import annotations

import time

from benchbench.run import study as spec
from benchbench.run.study import parse
from benchbench.store import records
from benchbench.store.records import new_record
from benchbench.store.results import SUPERSEDED, ResultStore, code_version, key_of
from benchbench.train.reuse import training_folder

DOC = {
    "name": "s",
    "version": 1,
    "model": "tiny-bert:16:1:2:32",
    "start": "plm-mean",
    "seeds": [1, 2, 3],
    "tasks": ["stsb"],
    "methods": ["plm-mean", "simcse"],
    "budget": {"steps": 10, "batch_size": 4},
}
NOW = {"git_sha": "a" * 40, "git_dirty": False, "git_code_tree": "1" * 64}
OLD = {"git_sha": "b" * 40, "git_dirty": False, "git_code_tree": "2" * 64}
SAME_TREE = {"git_sha": "c" * 40, "git_dirty": False, "git_code_tree": "1" * 64}  # a results-only commit later


def _write(store, monkeypatch, method, seed, code, data="d" * 64):
    monkeypatch.setattr(records, "loaded_code", lambda: code)
    fields = {"method": method, "config": {}, "config_hash": "h" * 12, "model": "m", "setup": "unsupervised"}
    rec = new_record(
        {**fields, "seed": seed, "task": "stsb", "task_version": 1, "train": {"train_data_sha256": data}},
        {"test": {"main_score": 50.0 + seed, "main_metric": "spearman", "scores": {"spearman": 50.0}}},
        time.perf_counter(),
        "cpu",
    )
    items = {"test": {"pred": [0.1, 0.2], "gold": [1.0, 2.0], "metric": "spearman"}}
    path = store.write(rec, items=items)
    enc = training_folder(store.root, key_of(rec)) / f"train-{data[:16]}" / "encoder"
    enc.mkdir(parents=True)
    (enc / "model.safetensors").write_bytes(b"weights of " + code["git_sha"].encode())
    return rec, path


def test_supersede_sets_aside_other_code_and_keeps_this_code(tmp_path, monkeypatch):
    st = parse(DOC, "s.toml")
    store = ResultStore(tmp_path / "out")
    old, old_path = _write(store, monkeypatch, "simcse", 1, OLD)
    same, same_path = _write(store, monkeypatch, "simcse", 2, SAME_TREE, data="e" * 64)
    foreign, foreign_path = _write(store, monkeypatch, "ct", 1, OLD, data="f" * 64)  # not the study's method
    monkeypatch.setattr(records, "loaded_code", lambda: NOW)
    assert spec.other_code_versions(st, store.root) == {code_version(OLD): 1}

    assert spec.supersede(st, store.root) == {code_version(OLD): 1}
    # the old record, its per-item file and its encoder are under .superseded, with why
    assert not old_path.exists()
    aside = store.root / SUPERSEDED / old_path.relative_to(store.root)
    (moved,) = aside.parent.glob(f"{old_path.name}.*[0-9]")
    assert any(p.name.endswith(".why") and code_version(OLD) in p.read_text() for p in aside.parent.iterdir())
    assert list(aside.parent.glob(f"{old_path.stem}.items.test.json.gz*"))
    enc_rel = (training_folder(store.root, key_of(old)) / f"train-{'d' * 16}").relative_to(store.root)
    assert not (store.root / enc_rel).exists()
    assert (
        store.root / SUPERSEDED / enc_rel / "encoder" / "model.safetensors"
    ).read_bytes() == b"weights of " + b"b" * 40
    # one code tree at another commit stays (a results-only commit between runs), and its encoder too
    assert same_path.exists() and (training_folder(store.root, key_of(same)) / f"train-{'e' * 16}").is_dir()
    # not the study's: untouched
    assert foreign_path.exists()
    # what is set aside is never read as a record; nothing of another version is left
    assert {(r["method"], r["seed"]) for r in store.records()} == {("simcse", 2), ("ct", 1)}
    assert spec.other_code_versions(st, store.root) == {}
    assert spec.supersede(st, store.root) == {}


def test_the_cli_sets_aside_before_running_and_says_so(tmp_path, monkeypatch, capsys):
    from benchbench.cli.main import main

    st = parse(DOC, "s.toml")
    store = ResultStore(tmp_path / "out")
    _, old_path = _write(store, monkeypatch, "simcse", 1, OLD)
    monkeypatch.setattr(records, "loaded_code", lambda: NOW)
    monkeypatch.setattr(spec, "load_study", lambda name: st)
    ran = []
    monkeypatch.setattr(spec, "run", lambda *a, **k: ran.append(k["cells"]) or [])
    assert main(["study", "run", "s", "--output", str(store.root), "--methods", "simcse", "--supersede"]) == 0
    out = capsys.readouterr().out
    assert f"set aside 1 records of other code versions ({code_version(OLD)}: 1)" in out and not old_path.exists()
    assert "holds" not in out  # nothing of another version is left to warn about
    assert ran and all(c.method == "simcse" for c in ran[0])


def test_supersede_keeps_a_named_older_version_when_the_study_ran_at_a_pinned_commit(tmp_path, monkeypatch):
    """The studies' re-run is pinned to one commit across lent GPU sessions (bench/device_studies_pack.py
    --at) while this checkout moves on: back here, the pinned version's records are kept and the rest set
    aside, whatever the loaded code is."""
    st = parse(DOC, "s.toml")
    store = ResultStore(tmp_path / "out")
    _, pinned_path = _write(store, monkeypatch, "simcse", 1, OLD)
    _, now_path = _write(store, monkeypatch, "simcse", 2, NOW, data="e" * 64)
    monkeypatch.setattr(records, "loaded_code", lambda: NOW)
    assert spec.supersede(st, store.root, keep=code_version(OLD)) == {code_version(NOW): 1}
    assert pinned_path.exists() and not now_path.exists()
    monkeypatch.setattr(records, "loaded_code", lambda: {"git_sha": None, "git_dirty": None})  # not a checkout
    assert spec.supersede(st, store.root) == {}  # nothing to compare with: nothing moves
    assert spec.supersede(st, store.root, keep=code_version(NOW)) == {code_version(OLD): 1}
    assert not pinned_path.exists()
