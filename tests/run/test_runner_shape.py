"""What the runner promises across keys, checked from the outside (observer hook) so that a change
to how ``runner._run`` is cut into functions cannot quietly break it:

* a result key's lock is held until its record is written, and released before the next key;
* an observer (``benchbench_result_recorded``) sees each record once, after it is on disk, and not
  the records a resumed run only reads back;
* seeds never share a trained encoder, while tasks of one seed with the same corpus do;
* the observers of the registry handed to ``run()`` are the ones called."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
from filelock import FileLock
from helpers import FIXTURES, local_plugin_workdir

from benchbench import hookimpl
from benchbench.cli.main import main
from benchbench.store.results import ResultStore

PLUGIN = f"""
import json
from pathlib import Path
from dataclasses import dataclass
import sys
sys.path.insert(0, {str(FIXTURES.parent)!r})
from filelock import FileLock, Timeout
from helpers import CosineFixtureEncoder
from benchbench import Method, hookimpl

class SeedEncoder(CosineFixtureEncoder):
    def __init__(self, seed):
        super().__init__()
        self.fingerprint = f"seed-{{seed}}"

@dataclass
class Cfg:
    steps: int = 10

class Trained(Method):
    name = "trained"
    Config = Cfg
    trains = True
    default_model = None
    seeds = []
    def train(self, corpus, ctx):
        Trained.seeds.append(ctx.seed)
        return SeedEncoder(ctx.seed)

OBSERVED = []  # (record, record file existed with this content, result locks held at that moment)

def _held():
    out = []
    for p in sorted(Path("results/.locks").rglob("*.lock")):
        lock = FileLock(str(p), thread_local=False)
        try:
            lock.acquire(timeout=0)
            lock.release()
        except Timeout:
            out.append(str(p.relative_to("results/.locks")))
    return out

@hookimpl
def benchbench_result_recorded(result):
    stored = [json.loads(p.read_text()) for p in Path("results").rglob(result["task"] + ".json") if "runs" not in p.parts]
    OBSERVED.append((result, any(s == result for s in stored), _held()))

@hookimpl
def benchbench_register_methods(register):
    register("trained", Trained)

@hookimpl
def benchbench_register_tasks(register):
    register("twins", Path(__file__).parent / "twins.toml")
"""


@pytest.fixture
def workdir(tmp_path, monkeypatch, tmp_cache):
    spec = (FIXTURES / "sts_mini.toml").read_text().split("[[suite]]")[0]
    twin = spec.replace('name = "sts-mini"', 'name = "sts-twin"')  # same files: the same training corpus
    (tmp_path / "twins.toml").write_text(spec + "\n" + twin)
    yield from local_plugin_workdir(tmp_path, monkeypatch, PLUGIN)


def _plugin():
    return sys.modules["benchbench_local_plugin"]


def _lock_of(record: dict) -> str:
    from benchbench.store.results import ResultKey

    key = ResultKey(
        record["method"],
        record["config_hash"],
        record["model"],
        record["setup"],
        record["seed"],
        record["task"],
        record["task_version"],
    )
    return str(key.relpath().with_suffix(".lock"))


def test_lock_held_until_written_released_between_keys_and_seeds_never_share_an_encoder(workdir):
    assert main(["run", "--method", "trained", "--tasks", "sts-mini,sts-twin", "--seeds", "1,2"]) == 0
    p = _plugin()
    order = [(r["seed"], r["task"]) for r, _, _ in p.OBSERVED]
    assert order == [(1, "sts-mini"), (1, "sts-twin"), (2, "sts-mini"), (2, "sts-twin")]
    for record, on_disk, held in p.OBSERVED:
        assert on_disk, "the observer ran before the record was written"
        assert held == [_lock_of(record)], (record["seed"], record["task"], held)  # its own lock only
    # one training per seed; the twin task of a seed reuses that seed's encoder, never the other seed's
    assert p.Trained.seeds == [1, 2]
    for record, _, _ in p.OBSERVED:
        assert record["encoder_fingerprint"] == f"seed-{record['seed']}"
        assert record["train"].get("reused_from_task") == ("sts-mini" if record["task"] == "sts-twin" else None)
    # a resumed run reads the records back: nothing trained, nothing observed, no lock left held
    n = len(p.OBSERVED)
    assert main(["run", "--method", "trained", "--tasks", "sts-mini,sts-twin", "--seeds", "1,2"]) == 0
    assert len(p.OBSERVED) == n and p.Trained.seeds == [1, 2]
    for lock in Path("results/.locks").rglob("*.lock"):
        FileLock(str(lock), thread_local=False).acquire(timeout=0)
    assert len(list(ResultStore("results").records())) == 4


def test_observers_of_the_registry_given_to_run_are_called(workdir):
    from benchbench.core.registry import load_registry
    from benchbench.run.runner import RunOptions, run

    seen: list[dict] = []
    extra = types.ModuleType("extra_observer")
    extra.benchbench_result_recorded = hookimpl(lambda result: seen.append(result))
    reg = load_registry(extra_plugins=[("extra-observer", extra)])
    report = run(RunOptions(method="trained", tasks="sts-mini", data_dir=str(FIXTURES)), reg)
    assert [r["task"] for r in seen] == ["sts-mini"] and seen[0] is report.records[0]
    assert json.loads(next(Path("results").rglob("sts-mini.json")).read_text())["seed"] == 1


def test_an_observer_error_names_its_plugin(workdir):
    from benchbench.core.errors import PluginError
    from benchbench.core.registry import load_registry
    from benchbench.run.runner import RunOptions, run

    def boom(result):
        raise RuntimeError("exporter down")

    extra = types.ModuleType("extra_observer")
    extra.benchbench_result_recorded = hookimpl(boom)
    reg = load_registry(extra_plugins=[("my-exporter", extra)])
    with pytest.raises(PluginError, match=r"'my-exporter' raised in benchbench_result_recorded: RuntimeError"):
        run(RunOptions(method="trained", tasks="sts-mini", data_dir=str(FIXTURES)), reg)
