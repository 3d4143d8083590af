"""Kill -9 drill: a real ``benchbench run`` (TSDAE on a tiny random BERT, the sts-mini fixture) is
killed at least 10 times at random instants (mid-interval, mid-checkpoint-save, while the trained
encoder is being saved, during evaluation, while the record is being written, and at timer instants
chosen at random while it trains), then finished. The final encoder weights and scores must equal
those of an uninterrupted run, exactly one whole record must exist, and each kill may cost at most
one checkpoint interval of training.

To keep it fast, one "server" process imports torch/transformers/benchbench once and forks one child
per segment (the server itself never computes, so the children start clean)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import FIXTURES

CKPT_EVERY = 4
STEPS = 40

_SERVER = textwrap.dedent("""
    import json, os, random, signal, sys, time
    from pathlib import Path
    work, plan = Path(sys.argv[1]), json.loads(sys.argv[2])
    os.chdir(work)
    import torch
    torch.set_num_threads(1)
    import benchbench.encode.encoding as E
    import benchbench.encode.models as M
    import benchbench.train.checkpoint as T
    from benchbench.cli.main import main
    from benchbench.core.registry import get_registry
    get_registry()
    import benchbench_plugins.tsdae as P

    def args(out):
        return ["run", "--method", "tsdae", "--model", "tiny-bert:16:1:2:32", "--tasks", "sts-mini", "--steps", "%(steps)d",
                "--batch-size", "4", "--set", "checkpoint_every=%(every)d", "--output", out, "--no-cache", "--json"]

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    def child(kind, n, out, progress):
        done = []
        def on_step(s):
            with open(progress, "a") as f:
                f.write(f"{os.getpid()} {s.step}\\n")
            done.append(s.step)
            if kind == "step" and len(done) == n:
                die()
        import benchbench.train.fit as F
        real = F.train_loop
        def loop(*a, **k):
            k["on_step"] = on_step
            return real(*a, **k)
        F.train_loop = loop
        calls = [0]
        def counted(orig, after=False):
            def f(*a, **k):
                calls[0] += 1
                if calls[0] == n and not after:
                    die()
                r = orig(*a, **k)
                if calls[0] == n and after:
                    die()
                return r
            return f
        if kind == "ckpt":  # mid-checkpoint: n-th state file of this segment, before it is written
            T._save_tree = counted(T._save_tree)
        elif kind == "encsave":  # the trained encoder is written but not yet marked complete
            M.TransformerEncoder.save = counted(M.TransformerEncoder.save, after=True)
        elif kind == "eval":  # during evaluation, after the first batch of vectors
            E.Embedder.embed = counted(E.Embedder.embed, after=True)
        elif kind == "write":  # the record's temp file is whole, the rename has not happened
            real_replace = os.replace
            def rep(src, dst, *a, **k):
                if str(dst).endswith("sts-mini.json"):
                    die()
                return real_replace(src, dst, *a, **k)
            os.replace = rep
        sys.stdout = open(work / f"child-{os.getpid()}.out", "w")
        sys.stderr = sys.stdout
        rc = 3
        try:
            rc = main(args(out))
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            os._exit(rc)

    def segment(kind, n, out, progress, delay=None):
        pid = os.fork()
        if pid == 0:
            child(kind, n, out, progress)
        if kind == "timer":  # a random instant while this child trains
            deadline = time.time() + 60
            while time.time() < deadline:
                try:
                    if any(l.startswith(f"{pid} ") for l in Path(progress).read_text().splitlines()):
                        break
                except FileNotFoundError:
                    pass
                if os.waitpid(pid, os.WNOHANG) != (0, 0):
                    return "exited-before-kill"
                time.sleep(0.002)
            time.sleep(delay)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _, status = os.waitpid(pid, 0)
        return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)

    result = {"ref": segment("none", 0, "ref", "ref-progress.txt"), "segments": []}
    rng = random.Random(plan["seed"])
    for kind, n in plan["kills"]:
        delay = rng.uniform(0.0, 0.05)
        result["segments"].append([kind, n, segment(kind, n, "drill", "progress.txt", delay)])
    result["final"] = segment("none", 0, "drill", "progress.txt")
    print(json.dumps(result))
""") % {"steps": STEPS, "every": CKPT_EVERY}

_PLUGIN = f"""
from pathlib import Path
from benchbench import hookimpl

@hookimpl
def benchbench_register_tasks(register):
    register("mini", Path({str(FIXTURES / "sts_mini.toml")!r}))
"""

# (kind, n): step -> the n-th step of the segment; ckpt -> the n-th checkpoint state file; timer -> a
# random instant (n unused) after the segment's first step; encsave/eval/write -> see the server
_PLAN = [
    ["step", 3],
    ["timer", 0],
    ["ckpt", 2],
    ["step", 5],
    ["timer", 0],
    ["ckpt", 4],
    ["step", 2],
    ["timer", 0],
    ["step", 6],
    ["timer", 0],
    ["encsave", 1],
    ["eval", 1],
    ["write", 1],
]


def _weights(root: Path) -> dict:
    from safetensors.torch import load_file

    (f,) = list(root.glob("runs/**/encoder/**/model.safetensors")) or list(root.glob("runs/**/encoder/*.safetensors"))
    return load_file(str(f))


@pytest.mark.slow
def test_kill_minus_9_drill(tmp_path):
    (tmp_path / "benchbench_plugin.py").write_text(_PLUGIN)
    (tmp_path / "server.py").write_text(_SERVER)
    env = dict(os.environ, OMP_NUM_THREADS="1", BENCHBENCH_DATA=str(FIXTURES), BENCHBENCH_CACHE=str(tmp_path / "cache"))
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "server.py"), str(tmp_path), json.dumps({"seed": 7, "kills": _PLAN})],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    logs = "\n".join(p.read_text()[-1500:] for p in tmp_path.glob("child-*.out"))
    assert res["ref"] == 0 and res["final"] == 0, (res, logs)
    kills = [s for s in res["segments"] if s[2] == -9]
    assert len(kills) >= 10, res
    assert {k for k, _, rc in res["segments"] if rc == -9} >= {"step", "timer", "ckpt", "encsave", "eval", "write"}, res

    # identical weights and scores
    ref_w, drill_w = _weights(tmp_path / "ref"), _weights(tmp_path / "drill")
    assert ref_w.keys() == drill_w.keys()
    assert all((ref_w[k] == drill_w[k]).all() for k in ref_w)
    ref_recs = [json.loads(p.read_text()) for p in (tmp_path / "ref").rglob("sts-mini*.json")]
    recs = [p for p in (tmp_path / "drill").rglob("*.json") if "runs" not in p.parts]
    assert len(ref_recs) == 1 and len(recs) == 1, recs  # no duplicated and no lost record
    rec = json.loads(recs[0].read_text())  # whole (parses), not torn
    assert rec["splits"]["test"]["scores"] == ref_recs[0]["splits"]["test"]["scores"]
    assert rec["train"]["steps"] == STEPS
    assert not [p for p in (tmp_path / "drill").rglob("*.tmp") if "runs" not in p.parts]  # no temp file left
    assert not list((tmp_path / "drill").rglob("checkpoints/step-*"))  # dropped once the encoder was complete

    # at most one interval redone per kill: the last step a killed segment logged vs where the next
    # training segment started again
    segs: list[list[int]] = []
    last_pid = None
    for line in (tmp_path / "progress.txt").read_text().splitlines():
        pid, step = line.split()
        if pid != last_pid:
            segs.append([])
            last_pid = pid
        segs[-1].append(int(step))
    assert segs[0][0] == 1 and max(segs[-1]) == STEPS
    redone = [a[-1] - (b[0] - 1) for a, b in itertools.pairwise(segs)]
    assert all(0 <= r <= CKPT_EVERY for r in redone), redone
    assert len(segs) >= 7  # the training was really cut many times
