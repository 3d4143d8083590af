"""Concurrency drill: 4 processes run at once into ONE output folder and ONE embedding cache, with
overlapping result keys (same method, seeds and tasks) and two tasks that share a training corpus
(so they share a run folder, as TSDAE on STSb and SICK-R share the wiki corpus; this used to crash
one run at a checkpoint: ``Parent directory .../checkpoints/.tmp-step-... does not exist``).
No crash, no lost or torn record, and each training happens once (the others wait on its lock and
reuse the encoder)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from helpers import FIXTURES

STEPS = 12

_SERVER = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    work = Path(sys.argv[1])
    os.chdir(work)
    import torch
    torch.set_num_threads(1)
    from benchbench.cli.main import main
    from benchbench.core.registry import get_registry
    get_registry()
    import benchbench_plugins.tsdae as P
    orders = ["sts-mini,sts-twin", "sts-twin,sts-mini", "sts-mini,sts-twin", "sts-twin,sts-mini"]
    pids = []
    for i, tasks in enumerate(orders):
        pid = os.fork()
        if pid == 0:
            import benchbench.train.fit as F
            real = F.train_loop
            def log_steps(s):
                with open(work / "steps.txt", "a") as f:
                    f.write(f"{os.getpid()} {s.step}\\n")
            def loop(*a, **k):
                k["on_step"] = log_steps
                return real(*a, **k)
            F.train_loop = loop
            sys.stdout = open(work / f"proc{i}.out", "w")
            sys.stderr = sys.stdout
            rc = 3
            try:
                rc = main(["run", "--method", "tsdae", "--model", "tiny-bert:16:1:2:32", "--tasks", tasks,
                           "--seeds", "1,2" if i % 2 == 0 else "2,1", "--steps", "STEPS", "--batch-size", "4",
                           "--set", "checkpoint_every=2", "--output", "out", "--json"])
            except BaseException:
                import traceback
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                os._exit(rc)
        pids.append(pid)
    rcs = []
    for pid in pids:
        _, st = os.waitpid(pid, 0)
        rcs.append(-os.WTERMSIG(st) if os.WIFSIGNALED(st) else os.WEXITSTATUS(st))
    print(json.dumps(rcs))
""").replace('"STEPS"', f'"{STEPS}"')

_PLUGIN = """
from pathlib import Path
from benchbench import hookimpl

@hookimpl
def benchbench_register_tasks(register):
    register("mini", Path(__file__).parent / "mini.toml")
"""


@pytest.mark.slow
def test_four_processes_one_output_one_cache(tmp_path):
    spec = (FIXTURES / "sts_mini.toml").read_text().split("[[suite]]")[0]
    twin = spec.replace('name = "sts-mini"', 'name = "sts-twin"')  # same files, same corpus: same run folder
    (tmp_path / "mini.toml").write_text(spec + "\n" + twin)
    (tmp_path / "benchbench_plugin.py").write_text(_PLUGIN)
    (tmp_path / "server.py").write_text(_SERVER)
    env = dict(os.environ, OMP_NUM_THREADS="1", BENCHBENCH_DATA=str(FIXTURES), BENCHBENCH_CACHE=str(tmp_path / "cache"))
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "server.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    logs = "\n".join((tmp_path / f"proc{i}.out").read_text()[-2000:] for i in range(4))
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [0, 0, 0, 0], logs
    recs = [p for p in (tmp_path / "out").rglob("*.json") if "runs" not in p.parts]
    parsed = [json.loads(p.read_text()) for p in recs]  # none torn
    assert sorted((r["task"], r["seed"]) for r in parsed) == [
        ("sts-mini", 1),
        ("sts-mini", 2),
        ("sts-twin", 1),
        ("sts-twin", 2),
    ]
    assert not list((tmp_path / "out").rglob("*.tmp"))
    # every process printed the same 4 records (evaluated itself or read back after waiting)
    for i in range(4):
        text = (tmp_path / f"proc{i}.out").read_text()
        printed = json.loads(text[text.index("[\n") : text.rindex("]") + 1])
        got = {(r["task"], r["seed"]): r["splits"]["test"]["scores"] for r in printed}
        assert got == {(r["task"], r["seed"]): r["splits"]["test"]["scores"] for r in parsed}
    # two trainings (one per seed; the twin task shares the run folder), each done once, never twice at once
    steps = (tmp_path / "steps.txt").read_text().split()
    assert len(steps) == 2 * 2 * STEPS  # pid + step per line, 2 trainings of STEPS steps
    assert len(list((tmp_path / "out" / "runs").rglob("encoder/.complete"))) == 2
