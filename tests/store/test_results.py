"""Result keys and resume that cannot lose data: split merging, --force vs --retrain, task versions in
the key, schema-1 records, option validation, no-data runs, checkpoint_every out of the hash, locks."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap

import pytest
from helpers import FIXTURES

from benchbench.cli.main import main
from benchbench.core import registry as plugins
from benchbench.core.errors import ConfigError, DataError
from benchbench.store.results import ResultKey, ResultStore

PLUGIN = f"""
from pathlib import Path
from dataclasses import dataclass
import sys
sys.path.insert(0, {str(FIXTURES.parent)!r})
from helpers import CosineFixtureEncoder
from benchbench import Method, hookimpl

ENCODER = CosineFixtureEncoder()

class SavableEncoder(CosineFixtureEncoder):
    def save(self, path):
        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / "weights.txt").write_text("fixture")

@dataclass
class Cfg:
    steps: int = 10

class Trained(Method):
    name = "trained"
    Config = Cfg
    trains = True
    default_model = None
    calls = 0
    def train(self, corpus, ctx):
        Trained.calls += 1
        return ENCODER_SAVABLE

ENCODER_SAVABLE = SavableEncoder()

@hookimpl
def benchbench_register_methods(register):
    register("trained", Trained)

@hookimpl
def benchbench_register_tasks(register):
    register("mini", Path(__file__).parent / "mini.toml")
"""

SPEC = (
    (FIXTURES / "sts_mini.toml")
    .read_text()
    .replace('splits = ["test"]', 'splits = ["dev", "test"]\ndefault_splits = ["test"]')
)


@pytest.fixture
def workdir(tmp_path, monkeypatch, tmp_cache):
    (tmp_path / "benchbench_plugin.py").write_text(textwrap.dedent(PLUGIN))
    (tmp_path / "mini.toml").write_text(SPEC)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BENCHBENCH_DATA", str(FIXTURES))
    monkeypatch.setattr(plugins, "_REGISTRY", None)
    import benchbench.encode.models

    # the fixture encoder is not a transformer: "loading" the saved encoder gives it back
    monkeypatch.setattr(
        benchbench.encode.models, "load_encoder", lambda *a, **k: sys.modules["benchbench_local_plugin"].ENCODER_SAVABLE
    )
    yield tmp_path
    plugins.reset_registry()


def _plugin():
    return sys.modules["benchbench_local_plugin"]


def _records():
    return list(ResultStore("results").records())


def test_a_new_split_is_evaluated_and_merged_and_force_keeps_the_others(workdir, capsys):
    assert main(["run", "--method", "trained", "--tasks", "sts-mini"]) == 0
    (r,) = _records()
    assert list(r["splits"]) == ["test"]
    test_score = r["splits"]["test"]["main_score"]
    capsys.readouterr()
    # before: skipped (exit 0, empty table); now dev is evaluated and merged in
    assert main(["run", "--method", "trained", "--tasks", "sts-mini", "--split", "dev"]) == 0
    assert "1 evaluated, 0 already stored" in capsys.readouterr().err
    (r,) = _records()
    assert sorted(r["splits"]) == ["dev", "test"] and sorted(r["evaluated"]) == ["dev", "test"]
    # asking again for both: nothing to do
    assert main(["run", "--method", "trained", "--tasks", "sts-mini", "--split", "dev,test"]) == 0
    assert "0 evaluated, 1 already stored" in capsys.readouterr().err
    # before: --force --split dev rewrote the record with dev only (the test score was lost)
    assert main(["run", "--method", "trained", "--tasks", "sts-mini", "--split", "dev", "--force"]) == 0
    (r,) = _records()
    assert sorted(r["splits"]) == ["dev", "test"] and r["splits"]["test"]["main_score"] == test_score
    assert _plugin().Trained.calls == 1  # --force re-evaluates; it never retrained (it used to retrain)


def test_retrain_trains_again_and_rescores_every_stored_split(workdir, capsys):
    assert main(["run", "--method", "trained", "--tasks", "sts-mini", "--split", "dev,test"]) == 0
    assert main(["run", "--method", "trained", "--tasks", "sts-mini", "--split", "test", "--force"]) == 0
    assert _plugin().Trained.calls == 1
    before = _records()[0]["evaluated"]["dev"]["created_at"]
    assert main(["run", "--method", "trained", "--tasks", "sts-mini", "--split", "test", "--retrain"]) == 0
    assert _plugin().Trained.calls == 2
    (r,) = _records()
    assert sorted(r["splits"]) == ["dev", "test"] and r["evaluated"]["dev"]["created_at"] >= before
    from benchbench.cli.main import build_parser

    helps = build_parser()._subparsers._group_actions[0].choices["run"].format_help()
    assert "does not retrain" in helps and "--retrain" in helps


def test_task_version_is_part_of_the_key_and_schema_1_records_stay_readable(workdir, capsys):
    assert main(["run", "--method", "trained", "--tasks", "sts-mini"]) == 0
    (r,) = _records()
    assert r["task_version"] == 1 and r["schema_version"] == 2
    path_v1 = ResultStore("results").path(
        ResultKey(r["method"], r["config_hash"], r["model"], r["setup"], 1, "sts-mini")
    )
    assert path_v1.is_file()
    # a schema-1 record (as written before task versions) is read as task version 1 and still resumes
    old = json.loads(path_v1.read_text())
    old["schema_version"] = 1
    for k in ("task_version", "evaluated"):
        old.pop(k)
    path_v1.write_text(json.dumps(old))
    (m,) = _records()
    assert m["task_version"] == 1 and m["evaluated"]["test"]["created_at"] == old["created_at"]
    capsys.readouterr()
    assert main(["run", "--method", "trained", "--tasks", "sts-mini"]) == 0
    assert "0 evaluated, 1 already stored" in capsys.readouterr().err
    # editing the spec and bumping its version: the old record is not passed off as current
    (workdir / "mini.toml").write_text(SPEC.replace('kind = "sts"', 'kind = "sts"\nversion = 2'))
    plugins.reset_registry()
    assert main(["run", "--method", "trained", "--tasks", "sts-mini"]) == 0
    assert "1 evaluated, 0 already stored" in capsys.readouterr().err
    assert sorted(r["task_version"] for r in _records()) == [1, 2]
    (workdir / "mini.toml").write_text(SPEC.replace('kind = "sts"', 'kind = "sts"\nversion = 0'))
    plugins.reset_registry()
    assert main(["run", "--method", "trained", "--tasks", "sts-mini"]) == 2
    assert "version must be an integer >= 1" in capsys.readouterr().err


def test_bad_seeds_and_batch_size_are_errors(workdir, capsys):
    from benchbench.run.runner import RunOptions, run

    with pytest.raises(SystemExit):
        main(["run", "--method", "trained", "--tasks", "sts-mini", "--seeds", ""])
    assert "--seeds needs at least one seed, e.g. --seeds 1,2,3 or --seeds 1-5" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", "--method", "trained", "--tasks", "sts-mini", "--encode-batch-size", "0"])
    assert "must be >= 1" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="--seeds is empty"):
        run(RunOptions(method="trained", tasks="sts-mini", seeds=[]))
    with pytest.raises(ConfigError, match="--encode-batch-size must be >= 1"):
        run(RunOptions(method="trained", tasks="sts-mini", encode_batch_size=0))
    # --seeds 1,1 is one seed: one record, counted once
    report = run(RunOptions(method="trained", tasks="sts-mini", seeds=[1, 1]))
    assert len(report.records) == 1
    capsys.readouterr()
    assert main(["run", "--method", "trained", "--tasks", "sts-mini", "--seeds", "1,1,2"]) == 0
    assert "1 evaluated, 1 already stored" in capsys.readouterr().err


def test_a_run_with_no_data_at_all_fails(workdir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BENCHBENCH_DATA", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    spec = SPEC + '\n[[suite]]\nname = "both"\ntasks = ["sts-mini"]\n'
    (workdir / "mini.toml").write_text(spec.replace('[[suite]]\nname = "mini"\ntasks = ["sts-mini"]\n', ""))
    assert main(["run", "--method", "trained", "--tasks", "both"]) == 2  # before: exit 0, empty table
    err = capsys.readouterr().err
    assert "Nothing was evaluated" in err and "sts-mini" in err and "STS.input.A.txt" in err
    from benchbench.run.runner import RunOptions, run

    with pytest.raises(DataError):
        run(RunOptions(method="trained", tasks="both"))


def test_checkpoint_every_is_not_part_of_any_config_hash(registry):
    from benchbench.core.methods import config_hash

    checked = 0
    for name, cls in registry.methods.items():
        cfg = cls.Config()
        for knob in ("checkpoint_every", "checkpoint_minutes"):
            if hasattr(cfg, knob):
                assert config_hash(cfg) == config_hash(dataclasses.replace(cfg, **{knob: 7})), (name, knob)
                checked += 1
    assert checked >= 5  # simcse, ct, mlm, tsdae, bertflow (+ any newer trainer)


_HOLDER = """
import sys, time
from benchbench.store.locks import hold
with hold(sys.argv[1], "result X"):
    print("held", flush=True)
    time.sleep(30)
"""


@pytest.mark.parametrize("value", ["-5", "nan", "inf", "soon"])
def test_a_bad_lock_timeout_is_the_variables_error_when_a_lock_is_contended(value, tmp_path, monkeypatch):
    """Before: ``BENCHBENCH_LOCK_TIMEOUT=-5`` waited forever (filelock reads a negative timeout as
    "forever"), ``=nan`` raised a raw ``ValueError`` from filelock once a lock was contended. Now both
    are a ConfigError naming the variable and its value, at once."""
    import time

    from benchbench.core.errors import ConfigError
    from benchbench.store.locks import hold

    lock = tmp_path / "k.lock"
    p = subprocess.Popen([sys.executable, "-c", _HOLDER, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        monkeypatch.setenv("BENCHBENCH_LOCK_TIMEOUT", value)
        t0 = time.monotonic()
        done: list[BaseException] = []

        def contend():
            try:
                with hold(lock, "result X"):
                    pass
            except BaseException as e:
                done.append(e)

        import threading

        t = threading.Thread(target=contend, daemon=True)
        t.start()
        t.join(10)
        assert not t.is_alive(), f"BENCHBENCH_LOCK_TIMEOUT={value} still waiting after 10 s"
        (err,) = done
        assert isinstance(err, ConfigError), repr(err)
        assert f"BENCHBENCH_LOCK_TIMEOUT={value!r} is not allowed" in str(err) and "seconds" in str(err)
        assert time.monotonic() - t0 < 10
    finally:
        p.kill()
        p.wait()


def test_a_held_lock_waits_or_names_its_holder(tmp_path, monkeypatch):
    from benchbench.store.locks import LockedError, hold

    lock = tmp_path / "k.lock"
    p = subprocess.Popen([sys.executable, "-c", _HOLDER, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        monkeypatch.setenv("BENCHBENCH_LOCK_TIMEOUT", "0.3")
        with pytest.raises(LockedError, match=rf"another run holds result X \(pid {p.pid} on .* since 20"):
            with hold(lock, "result X"):
                pass
    finally:
        p.kill()
        p.wait()
    with hold(lock, "result X"):  # a killed holder's lock is free at once (kernel lock, no stale file)
        assert json.loads((tmp_path / "k.lock.owner").read_text())["pid"] == os.getpid()
