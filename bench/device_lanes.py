"""Run the built-in studies' cells over parallel lanes of one machine until a deadline, as a user would:
one job per (study, method, seed), each ``benchbench study run STUDY --methods M --seeds S`` into the
study's one result store (resumable: stored cells are skipped), pulled by the next free lane, longest
chain first. RankCSE's job of a seed waits for that seed's SimCSE and DiffCSE jobs: its teachers are their cells.

    python bench/device_lanes.py --lanes 16 --seconds 520 --output /tmp/out --log-dir /tmp/lanes STUDY ...
    python bench/device_lanes.py --lanes 16 --dry-run STUDY ...   # the plan and its projected wall time

Why not the earlier plan (each study's methods dealt round-robin to the lanes before the start, one job per
method with all its seeds): on the H100 at 1c3a982 the lanes were busy ~45% of the run, because a lane that
drew two long methods kept going after the others had emptied. Jobs of one seed are ~5x shorter and a free
lane takes the next one, so the tail is one short job.

At the deadline no job starts, and each running one is stopped with its process group (its cell in flight is
lost; its stored cells stay). Every job's lane, start, end, exit status and last output line go to
``LOG_DIR/jobs.tsv``; the per-job times there are what the next plan's estimates (``TRAIN_S``) come from.
Before the lanes start, records of other code versions are set aside once per study (``study.supersede``), so
the lanes never race to move the same files.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

# Seconds per training (200 steps of 64, curves every 20 steps) on one of 16 lanes of one H100, from the
# records of the 1c3a982 run (its reading: `git show 42bb0ba:leaderboards/study_rerun.md`): the mean
# `train.seconds` of its CUDA records. The rest (no CUDA record then) are estimates from the method's extra
# work beside SimCSE's (a decoder, a second template, a cross-encoder phase). The queue adapts to wrong
# estimates; they only order the jobs.
TRAIN_S = {
    "simcse": 10.4, "simcse-plus-plus": 15.5, "esimcse": 17.5, "infocse": 22.0, "mirror-bert": 22.0,
    "diffcse": 24.0, "ct": 26.0, "bsl": 28.0,
    "tsdae": 40.0, "denosent": 40.0, "trans-encoder": 60.0, "promptbert": 25.0, "sncse": 25.0, "mlm": 15.0,
    "whitenedcse": 20.0, "rankcse": 20.0, "bertflow": 5.0, "plm-mean": 0.0,
}  # fmt: skip
DEFAULT_TRAIN_S = 30.0
JOB_OVERHEAD_S = 20.0  # a process's start (torch, transformers), the start model's load, two rows' evaluations
WAITS_FOR = {"rankcse": ("simcse", "diffcse")}  # its teachers are the study's own cells of these methods


@dataclass(order=True)
class Job:
    sort_key: float
    study: str = field(compare=False)
    method: str = field(compare=False)
    seed: int = field(compare=False)
    cost: float = field(compare=False, default=0.0)
    after: tuple[tuple[str, str, int], ...] = field(compare=False, default=())
    lane: int = field(compare=False, default=-1)
    start: float | None = field(compare=False, default=None)
    end: float | None = field(compare=False, default=None)
    status: str = field(compare=False, default="not started")
    rc: int | None = field(compare=False, default=None)
    last: str = field(compare=False, default="")

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.study, self.method, self.seed)


def job_cost(method: str) -> float:
    """Estimated lane-seconds of one (method, seed) job: two trainings (the TwitterPara text and the STS
    wiki text) and the overhead; the start row (plm-mean, no training) is evaluations and the overhead."""
    return 2 * TRAIN_S.get(method, DEFAULT_TRAIN_S) + JOB_OVERHEAD_S


def make_jobs(studies: dict[str, tuple[list[str], list[int]]]) -> list[Job]:
    """{study: (methods, seeds)} -> one job per (study, method, seed), in the order lanes should take them:
    by the longest chain a job starts (its own cost plus that of the job waiting for it). Why a chain: a
    teacher (SimCSE, DiffCSE) that ran late would hold its RankCSE job to the end of the session, and a RankCSE
    job left for the next lent session would have to train its teachers again (their encoders stay there)."""
    jobs = []
    for st, (methods, seeds) in studies.items():
        for m in methods:
            for s in seeds:
                deps = tuple((st, d, s) for d in WAITS_FOR.get(m, ()) if d in methods)
                jobs.append(Job(0.0, st, m, s, job_cost(m), deps))  # sort_key: set below, from the chains
    waiting: dict[tuple[str, str, int], float] = {}
    for j in jobs:
        for d in j.after:  # one level: no chain is longer here
            waiting[d] = max(waiting.get(d, 0.0), j.cost)
    for j in jobs:
        j.sort_key = -(j.cost + waiting.get(j.key, 0.0))
    return sorted(jobs)


def project(jobs: list[Job], lanes: int) -> float:
    """The wall time of list scheduling the estimates over ``lanes``: the ready job first in ``make_jobs``'
    order (the longest chain) to the lane that frees first (what :func:`run` does with real times)."""
    free = [0.0] * lanes
    done: dict[tuple[str, str, int], float] = {}
    known = {j.key for j in jobs}
    pending = sorted(jobs)
    while pending:
        t = min(free)
        lane = free.index(t)
        ready = [j for j in pending if all(d not in known or done.get(d, float("inf")) <= t for d in j.after)]
        if not ready:  # every pending job waits on one still running: this lane idles until the first ends
            free[lane] = min(v for v in done.values() if v > t)
            continue
        j = ready[0]
        pending.remove(j)
        free[lane] = done[j.key] = t + j.cost
    return max(free)


def command(job: Job, output: Path) -> list[str]:
    return [
        sys.executable, "-m", "benchbench.cli", "study", "run", job.study, "--output", str(output / job.study),
        "--methods", job.method, "--seeds", str(job.seed),
    ]  # fmt: skip


def run(
    jobs: list[Job], lanes: int, seconds: float, output: Path, log_dir: Path, argv=command
) -> list[Job]:  # fmt: skip
    """Run ``jobs`` over ``lanes`` threads (each runs one subprocess at a time) until ``seconds`` have passed."""
    log_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    deadline = t0 + seconds
    cv = threading.Condition()
    queue = list(jobs)
    known = {j.key for j in jobs}
    finished: set[tuple[str, str, int]] = set()
    running: dict[int, tuple[subprocess.Popen, Job]] = {}

    def take() -> Job | None:
        with cv:
            while True:
                if time.monotonic() >= deadline or not queue:
                    return None
                ready = [j for j in queue if all(d in finished or d not in known for d in j.after)]
                if ready:
                    j = min(ready)  # the longest chain (sort_key is minus its estimate)
                    queue.remove(j)
                    return j
                cv.wait(timeout=max(0.0, min(1.0, deadline - time.monotonic())))

    def lane(i: int) -> None:
        while (j := take()) is not None:
            j.lane, j.start = i, time.monotonic() - t0
            log = log_dir / f"{j.study}.{j.method}.{j.seed}.log"
            with log.open("w") as f:
                p = subprocess.Popen(argv(j, output), stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
                with cv:
                    running[i] = (p, j)
                try:
                    j.rc = p.wait(timeout=max(0.0, deadline - time.monotonic()))
                    j.status = "ok" if j.rc == 0 else "failed"
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)  # the job and whatever it started (a Ray worker, a tokenizer pool)
                    j.rc, j.status = p.wait(), "stopped at the deadline"
            j.end = time.monotonic() - t0
            lines = [
                x for x in log.read_text(errors="replace").splitlines() if x.strip() and not x.startswith("Plugin")
            ]
            j.last = lines[-1][:200] if lines else ""
            with cv:
                running.pop(i, None)
                finished.add(j.key)  # failed too: RankCSE then trains its teachers itself
                cv.notify_all()
            print(
                f"[{j.end:6.0f}s] lane {i:2d} {j.status:7s} {j.study} {j.method} seed {j.seed} ({j.end - j.start:.0f}s)",
                flush=True,
            )

    threads = [threading.Thread(target=lane, args=(i,), daemon=True) for i in range(lanes)]
    # the jobs run in their own process sessions (so a stop takes their children too), which also outlive this
    # process: stopped here (the call's limit, ^C) they are stopped with it, not left to write on
    previous = (
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        if threading.current_thread() is threading.main_thread()
        else None
    )
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        with cv:
            for p, j in running.values():
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                j.status, j.end = "stopped from outside", time.monotonic() - t0
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        write_tsv(jobs, log_dir / "jobs.tsv", lanes, time.monotonic() - t0)
    return jobs


def write_tsv(jobs: list[Job], path: Path, lanes: int, wall: float) -> None:
    rows = ["study\tmethod\tseed\tlane\tstart_s\tend_s\tseconds\tstatus\trc\testimate_s\tlast_line"]
    for j in sorted(jobs, key=lambda j: (j.start is None, j.start or 0.0)):
        secs = "" if j.start is None or j.end is None else f"{j.end - j.start:.1f}"
        rows.append("\t".join(map(str, (
            j.study, j.method, j.seed, j.lane, _f(j.start), _f(j.end), secs, j.status, "" if j.rc is None else j.rc,
            f"{j.cost:.0f}", j.last.replace("\t", " "),
        ))))  # fmt: skip
    busy = sum((j.end or 0) - (j.start or 0) for j in jobs if j.start is not None)
    kinds = ("ok", "failed", "stopped at the deadline", "stopped from outside", "not started")
    counts = {s: sum(j.status == s for j in jobs) for s in kinds}
    summary = f"# wall {wall:.0f}s, {lanes} lanes busy {100 * busy / max(1e-9, lanes * wall):.0f}% of it; " + ", ".join(
        f"{k}: {v}" for k, v in counts.items()
    )
    path.write_text(summary + "\n" + "\n".join(rows) + "\n")
    print(summary, flush=True)


def _f(x: float | None) -> str:
    return "" if x is None else f"{x:.1f}"


def studies_of(names: list[str], methods: list[str] | None) -> dict[str, tuple[list[str], list[int]]]:
    from benchbench.run.study import load_study

    out = {}
    for n in names:
        st = load_study(n)
        out[n] = ([m for m in st.methods if not methods or m in methods], list(st.seeds))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("studies", nargs="+")
    ap.add_argument("--lanes", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=520.0, help="the lanes' wall-clock budget")
    ap.add_argument("--output", type=Path, default=Path("/tmp/out"), help="one result store per study under it")
    ap.add_argument("--log-dir", type=Path, default=Path("/tmp/lanes"))
    ap.add_argument("--methods", default=None, help="only these methods (comma list)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and its projected wall time")
    args = ap.parse_args()
    plan = studies_of(args.studies, args.methods.split(",") if args.methods else None)
    jobs = make_jobs(plan)
    est = sum(j.cost for j in jobs)
    print(
        f"{len(jobs)} jobs, ~{est:.0f} lane-s estimated; over {args.lanes} lanes ~{project(jobs, args.lanes):.0f}s "
        f"of wall (list scheduling of the estimates)",
        flush=True,
    )
    if args.dry_run:
        for j in jobs:
            print(f"{j.study} {j.method} seed {j.seed}: ~{j.cost:.0f}s" + (f" after {j.after}" if j.after else ""))
        return
    from benchbench.run.study import load_study, supersede

    for n in plan:
        moved = supersede(load_study(n), args.output / n)
        if moved:
            print(f"{n}: set aside {sum(moved.values())} records of other code versions {moved}", flush=True)
    run(jobs, args.lanes, args.seconds, args.output, args.log_dir)


if __name__ == "__main__":
    main()
