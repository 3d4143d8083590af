"""Runs end to end through the CLI on a fixture task: records, resume, --force with cache hits,
atomic writes, partial suites, bad options."""

from __future__ import annotations

import json
import os

import pytest
from helpers import FIXTURES, local_plugin_workdir

from benchbench.cli.main import main
from benchbench.store.results import ResultKey, ResultStore

PLUGIN = f"""
from pathlib import Path
from dataclasses import dataclass
import sys
sys.path.insert(0, {str(FIXTURES.parent)!r})
from helpers import CosineFixtureEncoder
from benchbench import Method, hookimpl

ENCODER = CosineFixtureEncoder()

@dataclass
class Cfg:
    steps: int = 10

class Fixed(Method):
    name = "fixed"
    Config = Cfg
    trains = False
    default_model = None
    def train(self, corpus, ctx):
        return ENCODER

class Trained(Fixed):
    name = "trained"
    trains = True
    calls = 0
    def train(self, corpus, ctx):
        Trained.calls += 1
        return ENCODER

@hookimpl
def benchbench_register_methods(register):
    register("fixed", Fixed)
    register("trained", Trained)

@hookimpl
def benchbench_register_tasks(register):
    register("mini", Path({str(FIXTURES / "sts_mini.toml")!r}))
"""


@pytest.fixture
def workdir(tmp_path, monkeypatch, tmp_cache):
    yield from local_plugin_workdir(tmp_path, monkeypatch, PLUGIN)


def _encoder():
    import sys

    return sys.modules["benchbench_local_plugin"].ENCODER


def test_run_resume_and_force(workdir, capsys):
    assert main(["run", "--method", "fixed", "--tasks", "mini", "--seeds", "1,2"]) == 0
    out = capsys.readouterr()
    assert "| fixed" in out.out and "90.00" in out.out and "mini avg" in out.out
    n = _encoder().n_encoded
    assert n == 10  # a0..a4, b0..b4
    recs = list(ResultStore("results").records())
    assert len(recs) == 2 and {r["seed"] for r in recs} == {1, 2}
    r = recs[0]
    assert r["splits"]["test"]["scores"]["spearman_mean"] == pytest.approx(0.0)
    assert r["config"] == {"steps": 10} and r["data"]["sts_mini/STS.gs.A.txt"]
    for key in ("versions", "device", "created_at", "config_hash", "encoder_fingerprint", "eval_seconds"):
        assert key in r
    # identical second run: skipped
    assert main(["run", "--method", "fixed", "--tasks", "mini", "--seeds", "1,2"]) == 0
    assert "0 evaluated, 2 already stored" in capsys.readouterr().err
    # --force re-evaluates and re-encodes each text once (the cache is refreshed, never trusted)
    assert main(["run", "--method", "fixed", "--tasks", "mini", "--seeds", "1", "--force", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed[0]["splits"]["test"]["main_score"] == pytest.approx(90.0)
    assert _encoder().n_encoded == n + 10
    # a different config is a different key
    assert main(["run", "--method", "fixed", "--tasks", "mini", "--steps", "5"]) == 0
    assert len(list(ResultStore("results").records())) == 3


def test_only_rank_zero_of_a_multi_process_run_evaluates_and_stores(workdir, capsys, monkeypatch):
    """Under accelerate launch / torchrun every rank trains; a rank other than 0 neither evaluates,
    nor writes records or encoders, nor prints the table."""
    import sys

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert main(["run", "--method", "trained", "--tasks", "mini"]) == 0
    assert main(["run", "--method", "fixed", "--tasks", "mini"]) == 0
    assert sys.modules["benchbench_local_plugin"].Trained.calls == 1  # it took part in the training
    assert _encoder().n_encoded == 0 and capsys.readouterr().out == ""
    assert not list(ResultStore("results").records())
    monkeypatch.setenv("RANK", "0")
    assert main(["run", "--method", "trained", "--tasks", "mini"]) == 0
    assert sys.modules["benchbench_local_plugin"].Trained.calls == 2
    assert len(list(ResultStore("results").records())) == 1 and "| trained" in capsys.readouterr().out


def test_atomic_write_keeps_previous_record(tmp_path, monkeypatch):
    store = ResultStore(tmp_path)
    rec = {
        "method": "m",
        "config_hash": "c",
        "model": "x/y",
        "setup": "unsupervised",
        "seed": 1,
        "task": "t",
        "schema_version": 1,
        "splits": {},
    }
    path = store.write(rec)
    before = path.read_text()

    def explode(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(json, "dump", explode)
    with pytest.raises(OSError):
        store.write({**rec, "splits": {"test": {}}})
    assert path.read_text() == before
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left behind
    assert store.exists(ResultKey("m", "c", "x/y", "unsupervised", 1, "t"))


def test_bad_option_and_names(workdir, capsys):
    assert main(["run", "--method", "fixed", "--tasks", "mini", "--lr", "0.1"]) == 2
    assert "Method 'fixed' has no option 'lr'. Its options: steps" in capsys.readouterr().err
    assert main(["run", "--method", "fixd", "--tasks", "mini"]) == 2
    assert "Did you mean 'fixed'" in capsys.readouterr().err
    assert main(["run", "--method", "fixed", "--tasks", "sts-mini", "--split", "dev"]) == 2
    assert "has no 'dev' split" in capsys.readouterr().err


def test_missing_data_marks_suite_partial(workdir, capsys, tmp_path, monkeypatch):
    # a suite whose second task has no data: the run says which file, and the average is marked partial
    spec = tmp_path / "extra.toml"
    spec.write_text(
        (FIXTURES / "sts_mini.toml")
        .read_text()
        .replace('name = "sts-mini"', 'name = "sts-gone"')
        .replace('dir = "sts_mini"', 'dir = "gone"')
        .replace('"sts_mini/', '"gone/')
        .replace('name = "mini"\ntasks = ["sts-mini"]', 'name = "mini2"\ntasks = ["sts-mini", "sts-gone"]')
    )
    src = open("benchbench_plugin.py").read()
    open("benchbench_plugin.py", "w").write(src + f"    register('extra', Path({str(spec)!r}))\n")
    monkeypatch.setenv("BENCHBENCH_OFFLINE", "1")
    assert main(["run", "--method", "fixed", "--tasks", "mini2"]) == 0
    out = capsys.readouterr().out
    # before: a "90.00*" average over 1 of 2 tasks beside complete ones; now no average, the missing task named
    assert "90.00*" not in out and "mini2 avg: only over rows with all 2 tasks complete" in out
    assert "missing sts-gone (in 1 row)" in out and "gone/STS.input.A.txt" in out
    # naming the task itself is an error that lists the missing files
    assert main(["run", "--method", "fixed", "--tasks", "sts-gone"]) == 2
    assert "missing data files ['gone/STS.gs.A.txt'" in capsys.readouterr().err
    assert os.path.isdir("results")


def test_table_keeps_configs_apart():
    """Two configurations of one method are two rows, never averaged as if they were seeds."""
    from benchbench.report.leaderboard import summarise

    def rec(chash, seed, score):
        return {
            "method": "m",
            "model": "x",
            "setup": "unsupervised",
            "config_hash": chash,
            "seed": seed,
            "task": "t",
            "splits": {"test": {"main_score": score, "partial": False, "notes": []}},
        }

    headers, rows, notes = summarise([rec("aaa", 1, 10.0), rec("bbb", 1, 20.0), rec("aaa", 2, 12.0)], ["t"])
    # sample std (ddof=1) over the two seeds, as the leaderboards print it (before: population std, "±1.00")
    assert [(r[0], r[2]) for r in rows] == [("m [aaa]", "11.00 ± 1.41"), ("m [bbb]", "20.00")]


def test_learning_curve_is_stored_and_ends_at_the_stored_score(workdir, capsys):
    """--eval-every scores the encoder as it trains on the chosen split; the last point is the very
    encoder that is then evaluated and stored, so the two scores agree."""
    args = [
        "run",
        "--method",
        "simcse",
        "--model",
        "tiny-bert:16:1:2:32",
        "--tasks",
        "sts-mini",
        "--steps",
        "3",
        "--batch-size",
        "4",
        "--lr",
        "1e-3",
        "--device",
        "cpu",
        "--json",
    ]
    assert main(args + ["--eval-every", "2"]) == 2  # the fixture has no dev split: named, before any training
    err = capsys.readouterr().err
    assert "--eval-every: task 'sts-mini' has no 'dev' split" in err and "--eval-split" in err
    assert main(args + ["--eval-every", "-1"]) == 2
    assert main(args + ["--eval-every", "2", "--eval-split", "test"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    curve = rec["train"]["monitor"]
    assert [step for step, _ in curve] == [0, 2, 3]  # 0: the start as the method built it, before any update
    assert list(curve[-1][1]) == ["test/spearman_all"]
    assert curve[-1][1]["test/spearman_all"] == pytest.approx(rec["splits"]["test"]["main_score"], abs=1e-9)
