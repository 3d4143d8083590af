"""Integrity of stored results: each failure below was first reproduced, before its fix, through the
CLI a user runs:

1. a damaged record (truncated, merge-conflict markers) ended `run` in a JSONDecodeError naming no
   file (--force too), and `table`/`leaderboard` dropped its cell silently; now it is named, moved to
   ``<results>/.quarantine/`` (never deleted) and recomputed, and every table names it;
3. tasks ``coll a`` and ``coll_a`` shared one record file (the second was "already stored" with a blank
   cell, --force on one overwrote the other); now record names are injective;
5. a local --model folder with new weights got the old score back (the key held the folder's path);
   now a local model is labelled by its folder name and a hash of its files.

Then the corruption drills for the two kinds of stored state the store owns, the result record and the
per-item scores file: each damaged three ways, and no wrong number may be stored or shown.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import shutil
import textwrap
from pathlib import Path

import pytest
from helpers import FIXTURES

from benchbench.cli.main import main
from benchbench.core import registry as plugins
from benchbench.core.errors import DataError
from benchbench.store.results import record_items

STS_MINI = (FIXTURES / "sts_mini.toml").read_text()
TASK = STS_MINI[: STS_MINI.index("[[suite]]")]

PLUGIN = f"""
from pathlib import Path
from dataclasses import dataclass
import sys
sys.path.insert(0, {str(FIXTURES.parent)!r})
from helpers import CosineFixtureEncoder
from benchbench import Method, hookimpl

@dataclass
class Cfg:
    steps: int = 10

class Fixed(Method):
    name = "fixed"
    Config = Cfg
    trains = False
    default_model = None
    def train(self, corpus, ctx):
        return CosineFixtureEncoder()

class FromModel(Fixed):
    name = "frommodel"
    def train(self, corpus, ctx):
        from benchbench.encode.models import load_encoder
        return load_encoder(ctx.model)

@hookimpl
def benchbench_register_methods(register):
    register("fixed", Fixed)
    register("frommodel", FromModel)

@hookimpl
def benchbench_register_tasks(register):
    register("mini", Path(__file__).parent / "mini.toml")
"""


@pytest.fixture
def workdir(tmp_path, monkeypatch, tmp_cache):
    """sts-mini plus two tasks whose names differ only in a character the old file names replaced."""
    (tmp_path / "benchbench_plugin.py").write_text(textwrap.dedent(PLUGIN))
    spec = STS_MINI + TASK.replace('"sts-mini"', '"coll a"') + TASK.replace('"sts-mini"', '"coll_a"')
    (tmp_path / "mini.toml").write_text(spec)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BENCHBENCH_DATA", str(FIXTURES))
    monkeypatch.setattr(plugins, "_REGISTRY", None)
    yield tmp_path
    plugins.reset_registry()


def _record_files(root: Path = Path("results")) -> list[Path]:
    return sorted(p for p in root.rglob("*.json") if not {".quarantine", ".locks", "runs"} & set(p.parts))


def _run(*args: str) -> int:
    return main(["run", "--method", "fixed", "--tasks", "sts-mini", *args])


def _warnings(caplog) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.levelname == "WARNING")


def _table(capsys) -> str:
    capsys.readouterr()
    assert main(["table", "--no-provenance"]) == 0
    return capsys.readouterr().out


def _truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2])


def _conflict(p: Path) -> None:
    text = p.read_text()
    p.write_text(f"<<<<<<< HEAD\n{text}=======\n{text.replace('fixed', 'other')}>>>>>>> theirs\n")


# ---- 1. a damaged record --------------------------------------------------------------------------------
@pytest.mark.parametrize("damage", [_truncate, _conflict], ids=["truncated", "conflict-markers"])
@pytest.mark.parametrize("force", [False, True], ids=["resume", "force"])
def test_a_damaged_record_is_named_moved_aside_and_recomputed(workdir, caplog, capsys, damage, force):
    assert _run() == 0
    (path,) = _record_files()
    good = json.loads(path.read_text())
    damage(path)
    damaged_bytes = path.read_bytes()
    # before: json.JSONDecodeError escaped main() (a traceback naming no file), with --force too
    assert _run(*(["--force"] if force else [])) == 0
    assert "1 evaluated, 0 already stored" in capsys.readouterr().err
    warned = _warnings(caplog)
    why = "truncated" if damage is _truncate else "merge-conflict markers"
    assert str(path) in warned and why in warned and ".quarantine" in warned
    (moved,) = (workdir / "results" / ".quarantine").rglob("sts-mini.json.*[0-9]")
    assert moved.read_bytes() == damaged_bytes  # moved, byte for byte: nothing stored is lost
    assert moved.relative_to(workdir / "results" / ".quarantine").parent == path.parent.relative_to("results")
    assert why in moved.with_name(moved.name + ".why").read_text()
    again = json.loads(path.read_text())  # recomputed in place
    assert again["splits"]["test"]["main_score"] == good["splits"]["test"]["main_score"]


def test_tables_and_leaderboard_check_name_every_damaged_record(workdir, caplog, capsys, monkeypatch):
    from benchbench.report import site

    assert _run("--seeds", "1,2") == 0
    # --check wants the site's screenshot: a stand-in for headless chromium takes it
    monkeypatch.setattr(site, "screenshot", lambda index, png: png.write_bytes(b"\x89PNG\r\n\x1a\n") and None)
    assert main(["leaderboard", "--results", "results", "--out", "lb", "--screenshot"]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "--check", "--results", "results", "--out", "lb"]) == 0
    one, two = _record_files()
    _truncate(one)
    _conflict(two)
    caplog.clear()
    _table(capsys)  # before: both left out silently
    warned = _warnings(caplog)
    assert str(one) in warned and "truncated" in warned
    assert str(two) in warned and "merge-conflict markers" in warned
    caplog.clear()
    assert main(["leaderboard", "--results", "results", "--out", "lb2"]) == 0  # built, but not silently
    warned = _warnings(caplog)
    assert str(one) in warned and str(two) in warned
    capsys.readouterr()
    # before: "stale leaderboard: lb/README.md: differs ..." and nothing about the records
    assert main(["leaderboard", "--check", "--results", "results", "--out", "lb"]) == 1
    err = capsys.readouterr().err
    assert f"damaged record: Result record {one}: is truncated" in err
    assert f"damaged record: Result record {two}: contains git merge-conflict markers" in err
    assert one.is_file() and two.is_file()  # reading commands never move anything


def test_a_record_of_a_newer_schema_is_refused_not_overwritten(workdir, capsys):
    assert _run() == 0
    (path,) = _record_files()
    r = json.loads(path.read_text())
    r["schema_version"] = 99
    path.write_text(json.dumps(r))
    assert _run("--force") == 2
    err = capsys.readouterr().err
    assert str(path) in err and "schema_version 99" in err and "upgrade benchbench" in err
    assert json.loads(path.read_text())["schema_version"] == 99


# ---- 3. colliding names ---------------------------------------------------------------------------------
def test_task_names_that_slug_alike_get_their_own_records(workdir, capsys):
    assert main(["run", "--method", "fixed", "--tasks", "coll a"]) == 0
    capsys.readouterr()
    # before: "0 evaluated, 1 already stored" (coll_a.json held coll a's record), and a blank cell
    assert main(["run", "--method", "fixed", "--tasks", "coll_a"]) == 0
    assert "1 evaluated, 0 already stored" in capsys.readouterr().err
    files = _record_files()
    assert len(files) == 2 and sorted(json.loads(p.read_text())["task"] for p in files) == ["coll a", "coll_a"]
    plain = next(p for p in files if p.name == "coll_a.json")  # a name that needs no escaping is unchanged
    spaced = next(p for p in files if p != plain)
    assert spaced.name.startswith("coll_a~")
    before = spaced.read_bytes()
    # before: --force on one rewrote the file of the other
    assert main(["run", "--method", "fixed", "--tasks", "coll_a", "--force"]) == 0
    assert spaced.read_bytes() == before
    out = _table(capsys)
    (row,) = [ln for ln in out.splitlines() if ln.startswith("| fixed")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] and cells[3] and cells[2] == cells[3]  # both columns filled
    # and the leaderboard site gives each its own page (before: one tasks/coll-a.html for both)
    assert main(["leaderboard", "--results", "results", "--out", "lb"]) == 0
    pages = sorted((workdir / "lb" / "site" / "tasks").glob("coll*.html"))
    assert len(pages) == 2 and {"task: coll a" in p.read_text() for p in pages} == {True, False}


def test_records_written_under_the_old_names_still_resume(workdir, capsys):
    """A record written by an older version (``coll_a.json`` for task ``coll a``) is found where it is; a
    key whose own name it occupies moves it aside (the two could not both be kept before) and
    recomputes, and nothing is lost."""
    assert main(["run", "--method", "fixed", "--tasks", "coll a"]) == 0
    (new,) = _record_files()
    legacy = new.with_name("coll_a.json")
    r = json.loads(new.read_text())
    r.pop("checksum", None)  # as older versions wrote it, before checksums began
    r["created_at"] = "2026-11-23T05:00:00+0000"
    r["evaluated"] = {s: {**e, "created_at": r["created_at"]} for s, e in r["evaluated"].items()}
    legacy.write_text(json.dumps(r))
    new.unlink()
    capsys.readouterr()
    assert main(["run", "--method", "fixed", "--tasks", "coll a"]) == 0
    assert "0 evaluated, 1 already stored" in capsys.readouterr().err
    assert _record_files() == [legacy]
    assert main(["run", "--method", "fixed", "--tasks", "coll_a"]) == 0
    assert "1 evaluated, 0 already stored" in capsys.readouterr().err
    assert json.loads(legacy.read_text())["task"] == "coll_a"
    (kept,) = (workdir / "results" / ".quarantine").rglob("coll_a.json.*[0-9]")
    assert json.loads(kept.read_text())["task"] == "coll a"


# ---- 5. a local model is its weights ---------------------------------------------------------------------
def test_a_local_model_with_new_weights_is_a_new_result(workdir, tmp_path, capsys, caplog):
    from benchbench.encode.models import tiny_bert

    folder = tmp_path / "my-model"
    tiny_bert(16, 1, 2, 32, seed=0).save(folder)

    def run_model(path: Path) -> str:
        capsys.readouterr()
        assert main(["run", "--method", "frommodel", "--model", str(path), "--tasks", "sts-mini"]) == 0
        return capsys.readouterr().err

    run_model(folder)
    (first,) = _record_files()
    rec1 = json.loads(first.read_text())
    assert rec1["model"].startswith("my-model@") and str(folder) not in first.read_text()
    shutil.rmtree(folder)
    tiny_bert(16, 1, 2, 32, seed=1).save(folder)  # new weights, same folder
    caplog.clear()
    # before: "0 evaluated, 1 already stored": the first weights' score handed back for the new ones
    assert "1 evaluated, 0 already stored" in run_model(folder)
    assert "its files are not those" in _warnings(caplog) and str(first) in _warnings(caplog)
    recs = {json.loads(p.read_text())["model"]: json.loads(p.read_text()) for p in _record_files()}
    assert len(recs) == 2 and rec1["model"] in recs
    new = recs[next(m for m in recs if m != rec1["model"])]
    assert new["encoder_fingerprint"] != rec1["encoder_fingerprint"]
    # the same weights in another folder of the same name are the same model: resumed, not recomputed
    shutil.copytree(folder, tmp_path / "elsewhere" / "my-model")
    assert "0 evaluated, 1 already stored" in run_model(tmp_path / "elsewhere" / "my-model")


# ---- corruption drill: the result record -----------------------------------------------------------------
WRONG = 12.34  # a number the fixture never scores: it must never reach a table


def _flip_bytes(p: Path) -> None:
    b = bytearray(p.read_bytes())
    for i in range(len(b) // 3, len(b) // 3 + 8):
        b[i] ^= 0xFF
    p.write_bytes(bytes(b))


def _edit_score(p: Path) -> None:
    """Valid JSON, key intact, score edited (by hand, or one flipped digit): only the checksum tells."""
    r = json.loads(p.read_text())
    r["splits"]["test"]["main_score"] = WRONG
    p.write_text(json.dumps(r, indent=1))


def _other_key(p: Path) -> None:
    """Valid JSON with a matching checksum, but another key's (seed 7, score edited): a record copied
    or edited into the wrong file; its key fields no longer name this file."""
    from benchbench.store.results import checksum

    r = json.loads(p.read_text())
    r["seed"], r["splits"]["test"]["main_score"] = 7, WRONG
    r["checksum"] = checksum(r)
    p.write_text(json.dumps(r, indent=1))


@pytest.mark.parametrize("damage", [_truncate, _flip_bytes, _edit_score, _other_key])
def test_drill_record_damage_never_shows_or_stores_a_wrong_number(workdir, capsys, caplog, damage):
    assert _run() == 0
    (path,) = _record_files()
    score = f"{json.loads(path.read_text())['splits']['test']['main_score']:.2f}"
    damage(path)
    caplog.clear()
    out = _table(capsys)
    assert f"{WRONG:.2f}" not in out and score not in out  # left out, not shown
    assert str(path) in _warnings(caplog)  # and named
    assert _run() == 0  # detected, moved aside, recomputed
    assert list((workdir / "results" / ".quarantine").rglob("sts-mini.json.*[0-9]"))
    out = _table(capsys)
    assert score in out and f"{WRONG:.2f}" not in out
    assert [json.loads(p.read_text())["seed"] for p in _record_files()] == [1]


def test_drill_limit_an_edited_record_without_checksum_cannot_be_told(workdir, capsys):
    """What the drill cannot detect: a record written before checksums (schema 2's first day, dated so)
    that is valid JSON, at its own path, with only a score edited. It loads as genuine; this test pins
    that limit. Deleting the checksum of a newer record is caught (tests/store/test_item_integrity.py)."""
    assert _run() == 0
    (path,) = _record_files()
    r = json.loads(path.read_text())
    r.pop("checksum", None)
    r["created_at"] = "2026-11-23T05:00:00+0000"
    r["evaluated"] = {s: {**e, "created_at": r["created_at"]} for s, e in r["evaluated"].items()}
    r["splits"]["test"]["main_score"] = WRONG
    path.write_text(json.dumps(r))
    assert f"{WRONG:.2f}" in _table(capsys)


# ---- corruption drill: the per-item scores file ----------------------------------------------------------
@pytest.fixture
def useb_reg(workdir, monkeypatch):
    from benchbench.core.registry import load_registry

    monkeypatch.setenv("BENCHBENCH_OFFLINE", "1")
    reg = load_registry()
    reg.tasks["twitterpara"] = dataclasses.replace(reg.task("twitterpara"), files={})
    monkeypatch.setattr(plugins, "_REGISTRY", reg)
    data = workdir / "data"
    shutil.copytree(FIXTURES / "useb" / "native", data)
    return data


def _other_items(p: Path) -> None:
    """Valid per-item scores of another evaluation (predictions reversed): right format, wrong data."""
    from benchbench.store.items import read_items, write_items

    items = read_items(p)
    for sub in items["subsets"].values():
        sub["pred"] = sub["pred"][::-1]
    write_items(p, items)


@pytest.mark.parametrize("damage", [_truncate, _flip_bytes, _other_items], ids=["truncated", "flipped", "swapped"])
def test_drill_items_damage_is_refused_then_recomputed(useb_reg, workdir, capsys, caplog, damage):
    from benchbench.evaluate.item_scores import aggregate_score

    args = ["run", "--method", "bm25", "--tasks", "twitterpara", "--data-dir", str(useb_reg), "--no-cache"]
    assert main([*args, "--store-items"]) == 0
    (path,) = _record_files()
    rec = json.loads(path.read_text())
    (items,) = path.parent.glob("*.items.test.json.gz")
    original = items.read_bytes()
    damage(items)
    # refused with a clear message (before: the swapped file was read as if genuine)
    with pytest.raises(DataError, match=r"twitterpara@v2\.items\.test\.json\.gz.*--store-items"):
        record_items(rec, "results")
    assert main(args) == 0  # a plain resume names it and says how to recompute it
    assert str(items) in _warnings(caplog) and "--store-items" in _warnings(caplog)
    caplog.clear()
    assert main([*args, "--store-items"]) == 0  # moved aside and recomputed
    assert str(items) in _warnings(caplog)
    (moved,) = (workdir / "results" / ".quarantine").rglob("*.items.test.json.gz.*[0-9]")
    assert moved.read_bytes() != original and items.read_bytes() == original
    rec = json.loads(path.read_text())
    assert aggregate_score(record_items(rec, "results")) == pytest.approx(rec["splits"]["test"]["main_score"])
    assert gzip.decompress(items.read_bytes())  # whole again
