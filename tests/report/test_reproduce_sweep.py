"""benchbench reproduce runs its runs through the sweep machinery: run_sweep receives exactly the
(row, task, seed) runs the records lack with each row's options; the executor is local unless Ray is
asked for (--workers/--address) and importable; a failing run is named and the others still run; a
second invocation passes only what is still missing (resumable). No test here starts Ray
(tests/run/test_sweep.py covers the Ray executor itself)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from test_reproduce import _rec

from benchbench.report import reproduce
from benchbench.report.reproduce import Budget
from benchbench.run import sweep
from benchbench.run.sweep import Outcome, SweepRun
from benchbench.store.results import checksum

TINY = "tiny-bert:16:1:2:32"


def _write_spec(path: Path, tasks: list[str], seeds: list[int], extra_row: str = "") -> Path:
    path.write_text(
        f'name = "t"\npaper = "P"\ntable = "T1"\nsource = "s"\nmodel = "bert-base-uncased"\nsteps = 100000\n'
        f"seeds = {seeds}\ntasks = {json.dumps(tasks)}\n"
        '[[rows]]\nlabel = "SimCSE"\nmethod = "simcse"\npublished = { "sts-mini" = 50.0 }\n' + extra_row
    )
    return path


class FakeSweep:
    """Stands in for sweep.run_sweep: records its arguments; the run on ``fail_task`` fails."""

    def __init__(self, fail_task: str | None = None):
        self.calls: list[dict] = []
        self.fail_task = fail_task

    def __call__(self, runs, base, executor="ray", address=None, workers=None, cpus_per_run=1.0, gpus_per_run=0.0):
        self.calls.append(
            {"runs": list(runs), "base": base, "executor": executor, "address": address, "workers": workers}
        )
        return [
            Outcome(r, "failed", error=f"DataError: no files for {r.task}\ntrace")
            if r.task == self.fail_task
            else Outcome(r, "done", {r.task: 1.0})
            for r in runs
        ]


def test_runs_go_through_run_sweep_with_row_options(tmp_path, monkeypatch):
    fake = FakeSweep(fail_task="twitterpara")
    monkeypatch.setattr(sweep, "run_sweep", fake)
    spec = _write_spec(
        tmp_path / "t.toml",
        ["twitterpara", "cqadupstack"],
        [1, 2],
        '[[rows]]\nlabel = "Cross"\nmethod = "simcse"\nscore = "cross"\nset = { temperature = "0.1" }\n'
        "published = {}\n",
    )
    res = tmp_path / "res"
    res.mkdir()
    # SimCSE on cqadupstack, seed 1, at the asked budget is stored: that run is not asked for again
    stored = {**_rec("simcse", "cqadupstack", 10.0, 7), "config": {"steps": 7, "batch_size": 4}}
    (res / "a.json").write_text(json.dumps({**stored, "checksum": checksum(stored)}))  # schema 2 records carry one
    out: list[str] = []
    b = Budget(model="all-MiniLM-L6-v2", steps=7, batch_size=4, sets={"max_seq_length": "32"})
    assert reproduce.reproduce(str(spec), str(res), b, echo=out.append) == 0
    assert len(fake.calls) == 1  # ONE sweep for the whole table
    call = fake.calls[0]
    assert call["executor"] == "local" and call["workers"] is None
    assert call["base"]["output"] == str(res) and not {"method", "tasks", "seeds"} & set(call["base"])
    over = {"steps": 7, "batch_size": 4, "max_seq_length": "32"}
    expect = [
        SweepRun("simcse", "twitterpara", 1, "unsupervised", {"overrides": over, "model": "all-MiniLM-L6-v2"}),
        SweepRun("simcse", "twitterpara", 2, "unsupervised", {"overrides": over, "model": "all-MiniLM-L6-v2"}),
        SweepRun("simcse", "cqadupstack", 2, "unsupervised", {"overrides": over, "model": "all-MiniLM-L6-v2"}),
    ]
    cross = {"overrides": {**over, "temperature": "0.1"}, "model": "all-MiniLM-L6-v2", "score": "cross"}
    expect += [SweepRun("simcse", t, s, "unsupervised", cross) for t in ("twitterpara", "cqadupstack") for s in (1, 2)]
    assert call["runs"] == expect
    text = "\n".join(out)
    # the failed runs are named with their error; the others are reported done
    assert "failed   SimCSE: simcse/twitterpara/seed1/unsupervised" in text
    assert "DataError: no files for twitterpara" in text
    assert "done     SimCSE: simcse/cqadupstack/seed2/unsupervised" in text
    assert "7 runs: 3 ok, 4 failed" in text

    # --tasks restricts the runs (the table still shows every task)
    fake.calls.clear()
    b2 = Budget(model="all-MiniLM-L6-v2", steps=7, batch_size=4, sets={"max_seq_length": "32"}, tasks=["cqadupstack"])
    reproduce.reproduce(str(spec), str(res), b2, echo=out.append)
    assert {r.task for r in fake.calls[0]["runs"]} == {"cqadupstack"}


def test_executor_choice_and_cli_flags(tmp_path, monkeypatch):
    fake = FakeSweep()
    monkeypatch.setattr(sweep, "run_sweep", fake)
    spec = _write_spec(tmp_path / "t.toml", ["sts-mini"], [1])
    res = str(tmp_path / "res")
    from benchbench.cli.main import main

    assert main(["reproduce", str(spec), "--results", res, "--model", TINY, "--workers", "2"]) == 0
    assert fake.calls[-1]["executor"] == "ray" and fake.calls[-1]["workers"] == 2
    assert main(["reproduce", str(spec), "--results", res, "--address", "ray://h:1"]) == 0
    assert fake.calls[-1]["executor"] == "ray" and fake.calls[-1]["address"] == "ray://h:1"
    # no Ray installed: the same request runs locally, and says so
    real = reproduce.importlib.util.find_spec
    monkeypatch.setattr(
        reproduce.importlib.util, "find_spec", lambda n, *a: None if n == "ray" else real(n, *a), raising=True
    )
    out: list[str] = []
    reproduce.reproduce(str(spec), res, Budget(model=TINY), echo=out.append, workers=2)
    assert fake.calls[-1]["executor"] == "local"
    assert any("Ray, which is not installed" in line for line in out)


def test_budget_flags_reach_only_methods_with_the_option(tmp_path, monkeypatch):
    """Trans-Encoder has no steps/batch_size/lr options (its budget is cycles and epochs): --steps
    and --batch-size go to the SimCSE row only, and a Trans-Encoder record matches without steps."""
    fake = FakeSweep()
    monkeypatch.setattr(sweep, "run_sweep", fake)
    row = '[[rows]]\nlabel = "TE"\nmethod = "trans-encoder"\nset = { start = "simcse" }\npublished = {}\n'
    spec = _write_spec(tmp_path / "t.toml", ["sts-mini", "stsb"], [1], row)
    res = tmp_path / "res"
    res.mkdir()
    te = {**_rec("trans-encoder", "stsb", 70.0, None, model=TINY), "config": {"start": "simcse", "cycles": 1}}
    (res / "te.json").write_text(json.dumps({**te, "checksum": checksum(te)}))
    reproduce.reproduce(str(spec), str(res), Budget(model=TINY, steps=3, batch_size=4, lr=1e-4), echo=print)
    by = {(r.method, r.task): r.options["overrides"] for r in fake.calls[0]["runs"]}
    assert by == {
        ("simcse", "sts-mini"): {"steps": 3, "batch_size": 4, "lr": 1e-4},
        ("simcse", "stsb"): {"steps": 3, "batch_size": 4, "lr": 1e-4},
        ("trans-encoder", "sts-mini"): {"start": "simcse"},  # stsb: its stored record matched
    }


def test_local_sweep_failure_isolated_then_resumed(env, monkeypatch):
    """Real runs (tiny BERT, 2 steps): stsb has no data here, so its runs fail FIRST; the sts-mini
    runs after them still train and are stored; the second invocation asks only for the stsb runs."""
    spec = _write_spec(env / "t.toml", ["stsb", "sts-mini"], [1, 2])
    res = env / "res"
    b = Budget(model=TINY, steps=2, batch_size=4, device="cpu")
    dry: list[str] = []
    reproduce.reproduce(str(spec), str(res), b, dry_run=True, echo=dry.append)
    assert "would run: benchbench run --method simcse --tasks stsb --seeds 1 " in "\n".join(dry)
    assert sum(line.startswith("would run:") for line in dry) == 4
    seen: list[list[SweepRun]] = []
    real = sweep.run_sweep

    def spy(runs, *a, **k):
        seen.append(list(runs))
        return real(runs, *a, **k)

    monkeypatch.setattr(sweep, "run_sweep", spy)
    out: list[str] = []
    assert reproduce.reproduce(str(spec), str(res), b, echo=out.append) == 0
    text = re.sub(r" +", " ", "\n".join(out))
    assert [(r.task, r.seed) for r in seen[0]] == [("stsb", 1), ("stsb", 2), ("sts-mini", 1), ("sts-mini", 2)]
    assert "failed SimCSE: simcse/stsb/seed1/unsupervised" in text and "stsb" in text.split("failed")[1]
    assert "done SimCSE: simcse/sts-mini/seed2/unsupervised" in text
    assert "4 runs: 2 ok, 2 failed" in text
    recs = [json.loads(p.read_text()) for p in res.rglob("*.json") if "runs" not in p.parts]
    recs = [r for r in recs if "splits" in r]
    assert sorted((r["task"], r["seed"], r["config"]["steps"]) for r in recs) == [
        ("sts-mini", 1, 2),
        ("sts-mini", 2, 2),
    ]
    assert re.search(r"\| SimCSE \| sts-mini \| 50.00 \| -?\d+\.\d\d \|", text)  # ours next to the paper's

    seen.clear()
    out.clear()
    reproduce.reproduce(str(spec), str(res), b, echo=out.append)
    assert [(r.task, r.seed) for r in seen[0]] == [("stsb", 1), ("stsb", 2)]  # stored sts-mini runs skipped
    assert "2 runs: 0 ok, 2 failed" in "\n".join(out)


def test_a_cell_takes_one_configuration_the_newest():
    """Two configurations match a row (the same budget before and after a fix changed the hash): the
    cell is the newest configuration's score, never the mean of both."""
    from benchbench.report.reproduce import newest_configuration

    old = {"config_hash": "a", "seed": 1, "created_at": "2026-11-20T10:00:00"}
    new = {"config_hash": "b", "seed": 1, "created_at": "2026-11-22T10:00:00"}
    new2 = {"config_hash": "b", "seed": 2, "created_at": "2026-11-22T11:00:00"}
    assert newest_configuration([new, old, new2]) == [new, new2]
    assert newest_configuration([old]) == [old] and newest_configuration([]) == []
