"""Stored training state never lies: each failure below was first reproduced, before its fix, through
what a user runs:

6. SIGINT printed a KeyboardInterrupt traceback and took seconds to exit; SIGTERM exited silently
   (status -15); neither said what was kept. Now both stop after the current optimizer step, keep a
   checkpoint there, print one line (the kept step, "run the same command") and exit with 130 / 143;
   the same command resumes from that step to the uninterrupted result.
7. A full disk while writing a checkpoint was "Method 'simcse' (plugin 'simcse') raised ... No space
   left on device", naming no folder, and left a ``.tmp-step`` folder behind; now the error names the
   folder and what to free, the partial folder is removed and the last good checkpoint is kept, and
   the same command resumes from it.
8. One checkpoint was kept, so a damaged one lost all progress, and the counters in its state file
   (which decide the data a resumed run draws) were not checked at all. Now two are kept; the drill
   damages the newest one's weights and state file three ways each, and every damage is named in a
   warning and the older checkpoint resumed instead, never the damaged one.
11. A pickled model folder was refused by torch with its advice to re-run with ``weights_only=False``,
   blamed on "Method 'sbert'"; now the error names the file, says benchbench never loads pickles and
   how to convert them. An OSError naming a path inside a plugin (disk full, permission) names the
   path and the cause instead of blaming the method.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import FIXTURES, local_plugin_workdir

from benchbench.cli.main import main
from benchbench.train.context import TrainContext
from benchbench.train.loop import LoopConfig, Objective, train_loop

TINY = "tiny-bert:16:1:2:32"


def _run_args(out: Path, steps: int, every: int, method: str = "simcse") -> list[str]:
    return [
        "run", "--method", method, "--model", TINY, "--tasks", "sts-mini", "--steps", str(steps),
        "--batch-size", "4", "--set", f"checkpoint_every={every}", "--output", str(out), "--no-cache", "--json",
    ]  # fmt: skip


def _weights(out: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    (f,) = Path(out).glob("runs/**/encoder/model.safetensors")
    return load_file(str(f))


def _same_weights(a: Path, b: Path) -> bool:
    wa, wb = _weights(a), _weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def _checkpoint_dirs(out: Path) -> list[Path]:
    return sorted(Path(out).glob("runs/**/checkpoints/step-*"))


# ---- 6. SIGINT / SIGTERM: a safe stop, one line, the right status, an exact resume --------------------
SIG_STEPS, SIG_EVERY = 150, 10


def _cli_env(tmp: Path) -> dict[str, str]:
    return dict(
        os.environ,
        BENCHBENCH_DATA=str(FIXTURES),
        BENCHBENCH_TASK_PATH=str(FIXTURES / "sts_mini.toml"),
        BENCHBENCH_CACHE=str(tmp / "cache"),
        OMP_NUM_THREADS="1",
    )


def _cli(tmp: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "benchbench.cli", *_run_args(out, SIG_STEPS, SIG_EVERY)],
        capture_output=True,
        text=True,
        env=_cli_env(tmp),
        timeout=300,
    )


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> tuple[Path, dict]:
    tmp = tmp_path_factory.mktemp("reference")
    proc = _cli(tmp, tmp / "out")
    assert proc.returncode == 0, proc.stderr[-2000:]
    (rec,) = json.loads(proc.stdout)
    return tmp / "out", rec


@pytest.mark.slow
@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_at_a_safe_point_says_what_was_kept_and_the_same_command_resumes(
    sig, status, tmp_path, uninterrupted
):
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchbench.cli", *_run_args(out, SIG_STEPS, SIG_EVERY)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_cli_env(tmp_path),
    )
    deadline = time.monotonic() + 240
    while not _checkpoint_dirs(out) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before its first checkpoint"
    t0 = time.monotonic()
    proc.send_signal(sig)
    try:
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    took = time.monotonic() - t0

    # before: SIGINT -> status -2 after a KeyboardInterrupt traceback; SIGTERM -> -15, nothing said
    assert proc.returncode == status, stderr[-2000:]
    assert took < 2.0, f"took {took:.2f}s to stop"
    lines = [ln for ln in stderr.replace("\r", "\n").splitlines() if ln.startswith("benchbench:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-2000:]
    m = re.fullmatch(
        rf"benchbench: interrupted \({sig.name}\) at training step (\d+) of {SIG_STEPS}: kept checkpoint step "
        r"(\d+) in (.+); run the same command to resume from it\.",
        lines[0],
    )
    assert m, lines[0]
    step, kept = int(m.group(1)), int(m.group(2))
    assert kept == step and SIG_EVERY <= step < SIG_STEPS  # stopped mid-training, a checkpoint at that step
    assert Path(m.group(3)).is_dir() and Path(m.group(3)).name == f"step-{kept:09d}"
    assert not list(out.rglob(".tmp-step-*"))

    again = _cli(tmp_path, out)  # the same command
    assert again.returncode == 0, again.stderr[-2000:]
    (rec,) = json.loads(again.stdout)
    ref_out, ref = uninterrupted
    assert rec["train"]["resumed_from_steps"] == [kept]
    assert rec["splits"]["test"]["scores"] == ref["splits"]["test"]["scores"]
    assert _same_weights(out, ref_out)


_STALL_PLUGIN = """
import os, signal, sys, time
from dataclasses import dataclass
sys.path.insert(0, {tests!r})
from helpers import CosineFixtureEncoder
from benchbench import Method, hookimpl

@dataclass
class Cfg:
    steps: int = 1

class Stall(Method):
    name = "stall"
    Config = Cfg
    trains = False
    default_model = None
    def train(self, corpus, ctx):
        os.kill(os.getpid(), signal.SIGTERM)  # as `kill PID` would, outside any training loop
        time.sleep(60)
        return CosineFixtureEncoder()

@hookimpl
def benchbench_register_methods(register):
    register("stall", Stall)
"""


def test_sigterm_outside_training_is_one_line_and_status_143(tmp_path):
    (tmp_path / "benchbench_plugin.py").write_text(_STALL_PLUGIN.format(tests=str(FIXTURES.parent)))
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "benchbench.cli", "run", "--method", "stall", "--tasks", "sts-mini"],
        capture_output=True,
        text=True,
        env=_cli_env(tmp_path),
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 143, (proc.returncode, proc.stderr[-2000:])  # before: -15, silent
    assert time.monotonic() - t0 < 50  # not after the plugin's sleep
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("benchbench:")]
    assert len(lines) == 1 and "interrupted (SIGTERM)" in lines[0] and "run the same command" in lines[0]
    assert "Traceback" not in proc.stderr


class NoisyAdam(Objective):
    """Least squares with torch noise (the checkpointed RNG matters) under AdamW (its moments matter)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(3))

    def collate(self, items, rng):
        x = torch.tensor([[v, v * v, 1.0] for v in items], dtype=torch.float32)
        y = torch.tensor([2 * v - 1 + 0.01 * rng.standard_normal() for v in items], dtype=torch.float32)
        return {"x": x, "y": y}

    def forward(self, x, y):
        return ((x @ self.w - y - 0.1 * torch.randn_like(y)) ** 2).mean()


ITEMS = [i / 10 for i in range(20)]


def _train(folder: Path, loop: LoopConfig, on_step=None) -> tuple[torch.Tensor, TrainContext]:
    ctx = TrainContext(model="none", seed=3, output_dir=folder, progress=False, device="cpu")
    torch.manual_seed(0)  # what a method's seed_everything does before it builds the objective
    obj = train_loop(
        NoisyAdam(),
        ITEMS,
        ctx,
        loop,
        lambda m: torch.optim.AdamW(m.parameters(), lr=0.05),
        fingerprint="drill",
        on_step=on_step,
    )
    return obj.w.detach().clone(), ctx


def _signal_at(step: int, times: int = 1):
    def on_step(s):
        if s.step == step:
            for _ in range(times):
                signal.raise_signal(signal.SIGINT)

    return on_step


def test_a_signal_in_the_loop_checkpoints_the_next_step_and_resumes_exactly(tmp_path):
    from benchbench.train.loop import TrainingInterrupted

    loop = LoopConfig(steps=9, batch_size=2, checkpoint_every=0, checkpoint_minutes=0)
    full, _ = _train(tmp_path / "full", loop)
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(TrainingInterrupted) as e:
        _train(tmp_path / "cut", loop, on_step=_signal_at(4))
    assert signal.getsignal(signal.SIGINT) is before  # the loop's handler is gone again
    assert (e.value.signum, e.value.step, e.value.kept) == (signal.SIGINT, 5, 5)  # the step under way finished
    assert "kept checkpoint step 5" in str(e.value) and "run the same command" in str(e.value)
    assert [d.name for d in (tmp_path / "cut" / "checkpoints").glob("step-*")] == ["step-000000005"]
    resumed, ctx = _train(tmp_path / "cut", loop)
    assert ctx.accounting["resumed_from_steps"] == [5] and torch.equal(resumed, full)


def test_a_signal_when_a_checkpoint_is_not_cheap_keeps_nothing_and_says_so(tmp_path, monkeypatch):
    from benchbench.train import loop as L

    monkeypatch.setattr(L, "CHEAP_SAVE_BYTES", 0)
    with pytest.raises(L.TrainingInterrupted) as e:
        _train(tmp_path, LoopConfig(steps=9, batch_size=2, checkpoint_every=0, checkpoint_minutes=0), _signal_at(2))
    assert e.value.kept == 0 and "nothing was kept" in str(e.value) and "starts this training over" in str(e.value)
    assert not list(tmp_path.rglob("step-*"))


def test_a_second_signal_stops_at_once(tmp_path):
    from benchbench.train.loop import TrainingInterrupted

    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt) as e:
        _train(tmp_path, LoopConfig(steps=9, batch_size=2, checkpoint_every=0), _signal_at(2, times=2))
    assert not isinstance(e.value, TrainingInterrupted)
    assert signal.getsignal(signal.SIGINT) is before


# ---- 7. a full disk while writing a checkpoint ---------------------------------------------------------
def _enospc_oserror():
    return OSError(errno.ENOSPC, "No space left on device")


def _enospc_safetensors():  # what safetensors really raises on a full disk (seen on a full tmpfs)
    from safetensors import SafetensorError

    return SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")


@pytest.mark.parametrize("error", [_enospc_oserror, _enospc_safetensors])
def test_a_full_disk_during_a_checkpoint_names_the_folder_and_keeps_the_last_good_one(error, env, monkeypatch, capsys):
    from benchbench.train import checkpoint as C

    real, optimizer_saves = C._save_tree, []

    def save_tree(obj, folder, name):  # the third checkpoint hits a full disk halfway through
        if name == "optimizer":
            optimizer_saves.append(folder)
            if len(optimizer_saves) == 3:
                (folder / "optimizer.safetensors").write_bytes(b"partial")
                raise error()
        return real(obj, folder, name)

    monkeypatch.setattr(C, "_save_tree", save_tree)
    out = env / "out"
    assert main(_run_args(out, 20, 4)) == 2
    err = capsys.readouterr().err
    (root,) = {p.parent for p in _checkpoint_dirs(out)}
    # before: "Method 'simcse' (plugin 'simcse') raised while training ...: OSError: [Errno 28] No space
    # left on device", no folder named, .tmp-step-000000012 left behind
    assert f"No space left on the device holding {root.absolute()}" in err and "Free space there" in err
    # drill (session 22): one line naming the path AND the space, as for an encoder save (was: no sizes)
    assert re.search(r"holding \S+ \(needs about [\d.,]+ MB, [\d.,]+ MB free\): training checkpoint", err), err
    assert "checkpoint step 12" in err and str((root / "step-000000008").absolute()) in err
    assert "Method 'simcse'" not in err and "run the same command" in err
    assert not list(out.rglob(".tmp-step-*"))
    assert [d.name for d in _checkpoint_dirs(out)] == ["step-000000004", "step-000000008"]

    monkeypatch.setattr(C, "_save_tree", real)  # space freed: the same command resumes
    assert main(_run_args(out, 20, 4)) == 0
    (rec,) = json.loads(capsys.readouterr().out)
    assert rec["train"]["resumed_from_steps"] == [8]
    assert main(_run_args(env / "ref", 20, 4)) == 0  # uninterrupted
    (ref,) = json.loads(capsys.readouterr().out)
    assert rec["splits"]["test"]["scores"] == ref["splits"]["test"]["scores"]
    assert _same_weights(out, env / "ref")


# ---- 8. two checkpoints, and the corruption drill -----------------------------------------------------
DRILL = LoopConfig(steps=9, batch_size=2, checkpoint_every=3, checkpoint_minutes=0)


class Killed(Exception):
    pass


def _two_checkpoints(folder: Path) -> tuple[Path, Path]:
    """A run killed at step 7: its checkpoints of steps 3 and 6."""

    def kill(s):
        if s.step == 7:
            raise Killed

    with pytest.raises(Killed):
        _train(folder, DRILL, on_step=kill)
    names = sorted(d.name for d in (folder / "checkpoints").glob("step-*"))
    assert names == ["step-000000003", "step-000000006"]  # before: only step-000000006
    return folder / "checkpoints" / names[0], folder / "checkpoints" / names[1]


def _truncate(f: Path) -> None:
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def _flip(f: Path) -> None:
    b = bytearray(f.read_bytes())
    b[-5] ^= 0xFF  # in the last tensor's bytes
    f.write_bytes(bytes(b))


def _counter_off_by_one(f: Path) -> None:  # a flipped digit that keeps the JSON valid
    meta = f.read_text()
    micro = json.loads(meta)["state"]["micro"]
    f.write_text(meta.replace(f'"micro": {micro}', f'"micro": {micro + 1}'))


WEIGHTS_CHANGED = "model.safetensors does not match its checksum"
DAMAGE = {  # name: (damage(old, new), the reason the warning gives)
    "weights truncated": (lambda old, new: _truncate(new / "model.safetensors"), WEIGHTS_CHANGED),
    "weights bytes flipped": (lambda old, new: _flip(new / "model.safetensors"), WEIGHTS_CHANGED),
    "weights of another step": (
        lambda old, new: shutil.copy(old / "model.safetensors", new / "model.safetensors"),
        WEIGHTS_CHANGED,
    ),
    "state truncated": (lambda old, new: _truncate(new / "benchbench_state.json"), "is unreadable"),
    "state counter changed": (
        lambda old, new: _counter_off_by_one(new / "benchbench_state.json"),
        "does not match its own checksum",
    ),
    "state of another step": (
        lambda old, new: shutil.copy(old / "benchbench_state.json", new / "benchbench_state.json"),
        "is the one of step 3",
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_drill_a_damaged_newest_checkpoint_is_named_and_the_older_one_resumed(damage, tmp_path, caplog):
    full, _ = _train(tmp_path / "full", DRILL)
    old, new = _two_checkpoints(tmp_path / "cut")
    harm, reason = DAMAGE[damage]
    harm(old, new)
    with caplog.at_level("WARNING"):
        resumed, ctx = _train(tmp_path / "cut", DRILL)
    warned = caplog.text
    assert f"NOT resuming from checkpoint {new}" in warned and reason in warned, warned
    assert f"resuming from the older intact checkpoint {old} (step 3)" in warned
    assert ctx.accounting["resumed_from_steps"] == [3]  # never the damaged step 6
    assert torch.equal(resumed, full)


def test_drill_both_checkpoints_damaged_starts_over_and_names_both(tmp_path, caplog):
    full, _ = _train(tmp_path / "full", DRILL)
    old, new = _two_checkpoints(tmp_path / "cut")
    _flip(old / "model.safetensors")
    _counter_off_by_one(new / "benchbench_state.json")
    with caplog.at_level("WARNING"):
        resumed, ctx = _train(tmp_path / "cut", DRILL)
    assert f"NOT resuming from checkpoint {new}" in caplog.text and f"NOT resuming from checkpoint {old}" in caplog.text
    assert "starts from step 0" in caplog.text
    assert ctx.accounting["resumed_from_steps"] == [] and torch.equal(resumed, full)


# ---- 11. pickles in a model folder; OS errors inside a plugin -------------------------------------------
class _Evil:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):  # unpickling it would create the marker file
        return (open, (str(self.marker), "w"))


@pytest.mark.parametrize("payload", ["code", "plain"])
def test_a_pickled_model_folder_is_refused_naming_the_file_not_the_method(payload, env, capsys):
    from benchbench.encode.models import tiny_bert

    folder = env / "pickled-model"
    enc = tiny_bert(16, 1, 2, 32)
    enc.save(folder)
    (folder / "model.safetensors").unlink()
    weights = dict(enc.model.state_dict())
    marker = env / "PWNED"
    if payload == "code":  # torch's weights_only guard blocks this one...
        weights["x"] = _Evil(marker)
    torch.save(weights, folder / "pytorch_model.bin")  # ...and lets this one through: it used to load

    assert (
        main(["run", "--method", "sbert", "--model", str(folder), "--tasks", "sts-mini", "--output", str(env / "o")])
        == 2
    )
    err = capsys.readouterr().err
    assert str(folder / "pytorch_model.bin") in err and "never loads pickles" in err
    assert "safetensors" in err and "save_pretrained" in err
    assert "weights_only" not in err and "Method 'sbert'" not in err
    assert not marker.exists()


_OSERROR_PLUGIN = """
import errno, os
from dataclasses import dataclass
from benchbench import Method, hookimpl

@dataclass
class Cfg:
    steps: int = 1

class Full(Method):
    name = "full"
    Config = Cfg
    trains = True
    default_model = None
    def train(self, corpus, ctx):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(ctx.output_dir / "weights.bin"))

class Denied(Full):
    name = "denied"
    def train(self, corpus, ctx):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(ctx.output_dir / "weights.bin"))

@hookimpl
def benchbench_register_methods(register):
    register("full", Full)
    register("denied", Denied)

@hookimpl
def benchbench_register_tasks(register):
    from pathlib import Path
    register("mini", Path({toml!r}))
"""


@pytest.fixture
def oserror_workdir(tmp_path, monkeypatch, tmp_cache):
    yield from local_plugin_workdir(tmp_path, monkeypatch, _OSERROR_PLUGIN.format(toml=str(FIXTURES / "sts_mini.toml")))


@pytest.mark.parametrize("method, cause, advice", [("full", "No space left on device", "free space there"),
                                                   ("denied", "Permission denied", "make it writable")])  # fmt: skip
def test_an_os_error_in_a_plugin_names_the_path_and_cause_not_the_method(
    method, cause, advice, oserror_workdir, capsys
):
    assert main(["run", "--method", method, "--tasks", "sts-mini"]) == 2
    err = capsys.readouterr().err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("benchbench: error:")]
    # before: "Method 'full' (plugin 'benchbench_local_plugin') raised while training on task ..."
    assert re.search(r"benchbench: error: /\S+/weights\.bin: " + cause, line), line
    assert advice in line and "raised" not in line
