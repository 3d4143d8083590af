"""bench/device_lanes.py, the lanes that run the studies' re-run on a lent GPU (device time is scarce: a lane
left idle or a job run past the deadline is time no later session gets back). Jobs are stand-in sleeps
whose length is the method's estimate, so order, dependencies and the deadline are checked on real processes."""

from __future__ import annotations

import importlib.util
import sys
import time

import pytest
from conftest import REPO

spec = importlib.util.spec_from_file_location("bb_device_lanes", REPO / "bench" / "device_lanes.py")
lanes = importlib.util.module_from_spec(spec)
sys.modules["bb_device_lanes"] = lanes  # dataclasses look their module up while the class is built
spec.loader.exec_module(lanes)


def _jobs(monkeypatch, train: dict[str, float], studies):
    monkeypatch.setattr(lanes, "TRAIN_S", train)
    monkeypatch.setattr(lanes, "JOB_OVERHEAD_S", 0.0)
    return lanes.make_jobs(studies)


def _sleep(seconds_per_cost: float):
    return lambda job, output: [sys.executable, "-c", f"import time; time.sleep({job.cost * seconds_per_cost})"]


def test_one_job_per_method_and_seed_longest_chain_first_rankcse_after_its_teachers(monkeypatch):
    jobs = _jobs(
        monkeypatch,
        {"a": 1.0, "simcse": 2.0, "diffcse": 3.0, "rankcse": 4.0, "mid": 5.0},
        {"s": (["a", "simcse", "diffcse", "rankcse", "mid"], [1, 2]), "t": (["rankcse", "simcse"], [7])},
    )
    assert len(jobs) == 12 and {j.cost for j in jobs if j.method == "rankcse"} == {8.0}  # two trainings per job
    by = {j.key: j for j in jobs}
    assert by[("s", "rankcse", 2)].after == (("s", "simcse", 2), ("s", "diffcse", 2))  # its own seed's
    assert by[("t", "rankcse", 7)].after == (("t", "simcse", 7),)  # a study without DiffCSE: SimCSE alone
    assert by[("s", "simcse", 1)].after == ()
    # a teacher's place is its chain's: DiffCSE 6 + RankCSE 8 before "mid" (10) before SimCSE alone would be
    assert by[("s", "diffcse", 1)].sort_key == -14.0 and by[("s", "simcse", 1)].sort_key == -12.0
    assert by[("s", "mid", 1)].sort_key == -10.0 and by[("s", "rankcse", 1)].sort_key == -8.0
    order = [(j.study, j.method) for j in jobs]
    assert order.index(("s", "simcse")) < order.index(("s", "mid")) < order.index(("s", "rankcse"))
    assert [j.sort_key for j in jobs] == sorted(j.sort_key for j in jobs)


def test_projection_is_list_scheduling_with_the_teachers_first(monkeypatch):
    jobs = _jobs(monkeypatch, {"a": 2.0, "b": 1.5, "c": 1.5}, {"s": (["a", "b", "c"], [1])})  # costs 4, 3, 3
    assert lanes.project(jobs, 2) == 6.0  # 4 | 3 then 3 (dealt in advance the same: 4+3 | 3)
    assert lanes.project(jobs, 3) == 4.0
    jobs = _jobs(
        monkeypatch, {"simcse": 1.0, "diffcse": 0.5, "rankcse": 3.0}, {"s": (["simcse", "diffcse", "rankcse"], [1])}
    )
    # rankcse (6) cannot start before simcse (2) and diffcse (1) end: 2 + 6, not 6 with the others beside it
    assert lanes.project(jobs, 3) == 8.0


def test_lanes_pull_the_longest_ready_job_and_the_teachers_end_before_rankcse_starts(monkeypatch, tmp_path):
    jobs = _jobs(
        monkeypatch,
        {"simcse": 0.1, "diffcse": 0.15, "rankcse": 0.5, "x": 0.05},
        {"s": (["simcse", "diffcse", "rankcse", "x"], [1])},
    )
    done = lanes.run(jobs, 2, 30.0, tmp_path / "out", tmp_path / "logs", argv=_sleep(1.0))
    by = {j.method: j for j in done}
    assert all(j.status == "ok" and j.rc == 0 for j in done)
    assert by["rankcse"].start >= max(by["simcse"].end, by["diffcse"].end)
    assert by["diffcse"].start <= by["simcse"].start < by["x"].start  # the ready ones, longest first
    tsv = (tmp_path / "logs" / "jobs.tsv").read_text().splitlines()
    assert tsv[0].startswith("# wall ") and "ok: 4" in tsv[0] and "not started: 0" in tsv[0]
    assert tsv[1].split("\t")[:3] == ["study", "method", "seed"] and len(tsv) == 6


def _gone(pid: int) -> bool:
    import os

    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    os.kill(pid, 9)
    return False


def test_at_the_deadline_running_jobs_are_stopped_and_no_job_starts(monkeypatch, tmp_path):
    jobs = _jobs(monkeypatch, {"long": 30.0, "short": 0.05, "later": 0.01}, {"s": (["long", "short", "later"], [1])})
    child = tmp_path / "child.pid"  # the long job starts a process of its own (a Ray worker, a tokenizer pool)
    code = (
        "import subprocess, sys, time; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(child)!r}, 'w').write(str(p.pid)); time.sleep(60)"
    )
    argv = lambda job, output: [sys.executable, "-c", code] if job.method == "long" else _sleep(1.0)(job, output)  # noqa: E731
    t0 = time.monotonic()
    done = lanes.run(jobs, 1, 1.5, tmp_path / "out", tmp_path / "logs", argv=argv)
    assert time.monotonic() - t0 < 10  # not the 60 s the long job asked for
    assert _gone(int(child.read_text()))  # its whole process group went with it
    by = {j.method: j for j in done}
    assert by["long"].status == "stopped at the deadline" and by["long"].rc != 0
    assert by["short"].status == by["later"].status == "not started" and by["short"].start is None
    head = (tmp_path / "logs" / "jobs.tsv").read_text().splitlines()[0]
    assert "stopped at the deadline: 1" in head and "not started: 2" in head


def test_a_failed_teacher_does_not_hold_rankcse_back(monkeypatch, tmp_path):
    jobs = _jobs(monkeypatch, {"simcse": 0.05, "rankcse": 0.05}, {"s": (["simcse", "rankcse"], [1])})

    def argv(job, output):
        code = "import sys; sys.exit(3)" if job.method == "simcse" else "print('rankcse trained its teachers')"
        return [sys.executable, "-c", code]

    by = {j.method: j for j in lanes.run(jobs, 2, 30.0, tmp_path / "o", tmp_path / "l", argv=argv)}
    assert by["simcse"].status == "failed" and by["simcse"].rc == 3
    assert by["rankcse"].status == "ok" and by["rankcse"].last == "rankcse trained its teachers"


def test_each_job_is_one_study_run_of_one_method_and_seed(tmp_path):
    job = lanes.Job(-1.0, "plain-start", "simcse", 3, 1.0)
    argv = lanes.command(job, tmp_path)
    assert argv[1:6] == ["-m", "benchbench.cli", "study", "run", "plain-start"]
    assert argv[argv.index("--output") + 1] == str(tmp_path / "plain-start")
    assert argv[argv.index("--methods") + 1] == "simcse" and argv[argv.index("--seeds") + 1] == "3"
    from benchbench.cli.main import build_parser

    args = build_parser().parse_args(argv[3:])  # the CLI takes it as written
    assert args.methods == "simcse" and args.seeds == [3]


@pytest.mark.parametrize("study", ["post-training-minilm", "plain-start"])
def test_every_built_in_study_method_has_a_measured_or_stated_estimate(study):
    from benchbench.run.study import load_study

    assert set(load_study(study).methods) <= set(lanes.TRAIN_S)


def test_stopped_from_outside_the_lanes_take_their_jobs_with_them(tmp_path):
    """The jobs run in their own process sessions, which outlive their parent: a SIGTERM to the lanes (the
    call's limit) must stop them too, or they write on into the next call's store on the warm machine."""
    import os
    import signal
    import subprocess

    pidfile = tmp_path / "job.pid"
    job_py = tmp_path / "job.py"
    job_py.write_text(f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n")
    script = tmp_path / "lanes_run.py"
    script.write_text(
        "import sys\n"
        "from pathlib import Path\n"
        f"sys.path.insert(0, {str(REPO / 'bench')!r})\n"
        "import device_lanes as L\n"
        "jobs = [L.Job(-1.0, 's', 'm', 1, 1.0)]\n"
        f"L.run(jobs, 1, 60.0, Path({str(tmp_path / 'o')!r}), Path({str(tmp_path / 'l')!r}), "
        f"argv=lambda j, o: [sys.executable, {str(job_py)!r}])\n"
    )
    p = subprocess.Popen([sys.executable, str(script)])
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text():
            break
        time.sleep(0.1)
    job = int(pidfile.read_text())
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=20) != 0
    for _ in range(50):
        try:
            os.kill(job, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(job, signal.SIGKILL)
        raise AssertionError("the job outlived the lanes")
    row = (tmp_path / "l" / "jobs.tsv").read_text().splitlines()[2].split("\t")
    assert row[7] == "stopped from outside" and row[4] == "0.0"  # said as it was, with its start
