"""The shared training loop: data order, budget, gradient accumulation, accounting, and exact resume
after the process is killed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from benchbench.core.errors import ConfigError
from benchbench.train.context import TrainContext
from benchbench.train.loop import ItemStream, LoopConfig, Objective, resolve_steps, train_loop


class LinearObjective(Objective):
    """Least squares on scalar items: deterministic (no dropout), per-item mean loss."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(3))

    def collate(self, items, rng):
        x = torch.tensor([[v, v * v, 1.0] for v in items], dtype=torch.float32)
        return {"x": x, "y": torch.tensor([2 * v - 1 for v in items], dtype=torch.float32), "n_tokens": len(items)}

    def forward(self, x, y):
        return ((x @ self.w - y) ** 2).mean()


def _ctx(tmp_path, seed=3):
    return TrainContext(model="none", seed=seed, output_dir=tmp_path, progress=False, device="cpu")


def _sgd(m):
    return torch.optim.SGD(m.parameters(), lr=0.05)


def test_item_stream_is_position_addressable_and_covers_each_epoch():
    s = ItemStream(10, seed=1)
    long = s.take(0, 35)
    assert sorted(long[:10]) == list(range(10)) and sorted(long[10:20]) == list(range(10))
    assert long[:10] != long[10:20]  # a fresh permutation each epoch
    assert ItemStream(10, seed=1).take(17, 9) == long[17:26]  # any position, no replay
    assert ItemStream(10, seed=2).take(0, 10) != long[:10]


def test_budget_and_accounting(tmp_path):
    ctx = _ctx(tmp_path)
    items = [i / 10 for i in range(20)]
    train_loop(LinearObjective(), items, ctx, LoopConfig(steps=7, batch_size=3, grad_accum=2, checkpoint_every=0), _sgd)
    a = ctx.accounting
    assert a["steps"] == 7 and a["examples"] == 7 * 3 * 2 and a["tokens"] == 7 * 3 * 2
    assert a["device"] == "cpu" and a["seconds"] > 0 and a["loss_curve"][-1][0] == 7
    assert resolve_steps(None, 100, 8) == 13 and resolve_steps(5, 100, 8) == 5
    assert resolve_steps(0, 100, 8) == 0  # the step-0 row
    with pytest.raises(ConfigError, match="steps"):
        resolve_steps(-1, 100, 8)


def test_gradient_accumulation_equals_the_large_batch(tmp_path):
    items = [i / 7 for i in range(40)]
    a = train_loop(
        LinearObjective(), items, _ctx(tmp_path / "a"), LoopConfig(steps=5, batch_size=8, checkpoint_every=0), _sgd
    )
    b = train_loop(
        LinearObjective(),
        items,
        _ctx(tmp_path / "b"),
        LoopConfig(steps=5, batch_size=4, grad_accum=2, checkpoint_every=0),
        _sgd,
    )
    c = train_loop(
        LinearObjective(), items, _ctx(tmp_path / "c"), LoopConfig(steps=10, batch_size=4, checkpoint_every=0), _sgd
    )
    assert torch.allclose(a.w, b.w, atol=1e-6)
    assert not torch.allclose(a.w, c.w, atol=1e-4)  # without accumulation: twice the updates


def test_checkpoint_of_another_run_is_not_resumed(tmp_path):
    items = [i / 10 for i in range(20)]
    ctx = _ctx(tmp_path)
    loop = LoopConfig(steps=4, batch_size=2, checkpoint_every=2, keep_checkpoints=True)
    train_loop(LinearObjective(), items, ctx, loop, _sgd, fingerprint="run-a")
    assert list(ctx.checkpoint_dir.glob("step-*"))
    ctx2 = _ctx(tmp_path)
    train_loop(LinearObjective(), items, ctx2, loop, _sgd, fingerprint="run-b")
    assert ctx2.accounting["resumed_from_steps"] == []
    ctx3 = _ctx(tmp_path)
    train_loop(
        LinearObjective(), items, ctx3, LoopConfig(steps=6, batch_size=2, checkpoint_every=2), _sgd, fingerprint="run-b"
    )
    assert ctx3.accounting["resumed_from_steps"] == [2]  # the last checkpoint written before the finished step 4


_SCRIPT = textwrap.dedent("""
    import os, signal, sys, torch
    from pathlib import Path
    from benchbench.train.context import TrainContext
    from benchbench_plugins.tsdae import TSDAE, TSDAEConfig
    out, kill_at = Path(sys.argv[1]), int(sys.argv[2])
    sents = [f"sentence number {i} is about topic {i % 7} and more words here" for i in range(40)]
    ctx = TrainContext(model="tiny-bert:16:1:2:32", seed=5, output_dir=out, progress=False, device="cpu")
    method = TSDAE(TSDAEConfig(steps=6, batch_size=4, checkpoint_every=2))
    import benchbench.train.loop as T
    real = T.train_loop
    def loop(*a, **k):
        k["on_step"] = (lambda s: os.kill(os.getpid(), signal.SIGKILL) if s.step == kill_at else None)
        return real(*a, **k)
    import benchbench_plugins.tsdae as P
    import benchbench.train.fit as F
    F.train_loop = loop
    enc = method.train(sents, ctx)
    torch.save({k: v for k, v in enc.model.state_dict().items()}, out / "final.pt")
    print("RESUMED", ctx.accounting["resumed_from_steps"])
""")


def _run(script: Path, out: Path, kill_at: int) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, str(script), str(out), str(kill_at)], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.mark.slow
def test_kill_and_resume_gives_the_uninterrupted_weights(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(_SCRIPT)
    full = _run(script, tmp_path / "full", kill_at=-1)  # uninterrupted, same process setup as the others
    assert full.returncode == 0, full.stderr[-2000:]
    assert "RESUMED []" in full.stdout
    killed = _run(script, tmp_path / "killed", kill_at=5)  # dies after step 5; last checkpoint is step 4
    assert killed.returncode == -9
    assert not (tmp_path / "killed" / "final.pt").exists()
    resumed = _run(script, tmp_path / "killed", kill_at=-1)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "RESUMED [4]" in resumed.stdout
    a = torch.load(tmp_path / "full" / "final.pt")
    b = torch.load(tmp_path / "killed" / "final.pt")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    start = __import__("benchbench.encode.models", fromlist=["tiny_bert"]).tiny_bert(16, 1, 2, 32)
    moved = [k for k, v in start.model.state_dict().items() if not torch.equal(v, a[k])]
    assert moved  # training changed the weights (the comparison is not between two untouched models)


class WatchedLinear(LinearObjective):
    def result(self):
        return self


def test_learning_curve_survives_a_resume_and_needs_an_encoder(tmp_path):
    items = [i / 10 for i in range(20)]
    watch = lambda step, m: {"w0": float(m.w[0])}  # noqa: E731
    ctx = _ctx(tmp_path)
    ctx.monitor, ctx.monitor_every = watch, 2
    loop = LoopConfig(steps=4, batch_size=2, checkpoint_every=2, keep_checkpoints=True)
    train_loop(WatchedLinear(), items, ctx, loop, _sgd, fingerprint="curve")
    assert [s for s, _ in ctx.accounting["monitor"]] == [2, 4]
    ctx2 = _ctx(tmp_path)  # a longer budget resumes from the step-2 checkpoint, whose state holds the step-2 point
    ctx2.monitor, ctx2.monitor_every = watch, 2
    train_loop(
        WatchedLinear(), items, ctx2, LoopConfig(steps=6, batch_size=2, checkpoint_every=2), _sgd, fingerprint="curve"
    )
    assert ctx2.accounting["resumed_from_steps"] == [2]
    assert [s for s, _ in ctx2.accounting["monitor"]] == [2, 4, 6]
    assert ctx2.accounting["monitor"][:2] == ctx.accounting["monitor"]  # the same run: the same points
    plain = _ctx(tmp_path / "plain")
    plain.monitor, plain.monitor_every = watch, 2
    with pytest.raises(ConfigError, match="no encoder to monitor"):
        train_loop(LinearObjective(), items, plain, LoopConfig(steps=2, batch_size=2, checkpoint_every=0), _sgd)


class NoisyLinear(LinearObjective):
    """Draws from the torch RNG in forward (like dropout), so a resume is exact only if the RNG state is."""

    def forward(self, x, y):
        noise = torch.randn_like(y) * 0.1
        return ((x @ self.w - y - noise) ** 2).mean()


def test_checkpoints_hold_no_pickle_and_resume_without_unpickling(tmp_path, monkeypatch):
    import pickle

    items = [i / 10 for i in range(20)]
    torch.manual_seed(0)  # what a method's seed_everything does before it builds the objective
    full = train_loop(
        NoisyLinear(), items, _ctx(tmp_path / "full"), LoopConfig(steps=6, batch_size=2, checkpoint_every=0), _sgd
    )
    ctx = _ctx(tmp_path / "part")
    # a run that kept its last checkpoint (step 3 of 6), then resumed with the same fingerprint
    torch.manual_seed(0)
    train_loop(
        NoisyLinear(),
        items,
        ctx,
        LoopConfig(steps=6, batch_size=2, checkpoint_every=3, keep_checkpoints=True),
        _sgd,
        fingerprint="f",
    )
    (ckpt,) = ctx.checkpoint_dir.glob("step-*")
    assert {p.suffix for p in ckpt.iterdir()} == {".safetensors", ".json"}  # no .pkl / .bin / .pt
    meta = json.loads((ckpt / "benchbench_state.json").read_text())
    assert meta["format"] == 3 and set(meta["files"]) >= {"model.safetensors", "optimizer.json", "rng-0.json"}

    def no_unpickling(*a, **k):
        raise AssertionError("a checkpoint was unpickled")

    monkeypatch.setattr(pickle, "load", no_unpickling)
    monkeypatch.setattr(pickle, "loads", no_unpickling)
    monkeypatch.setattr(torch, "load", no_unpickling)
    resumed_ctx = _ctx(tmp_path / "part")
    torch.manual_seed(123)  # the resumed run's RNG comes from the checkpoint, not from here
    resumed = train_loop(
        NoisyLinear(), items, resumed_ctx, LoopConfig(steps=6, batch_size=2, checkpoint_every=3), _sgd, fingerprint="f"
    )
    assert resumed_ctx.accounting["resumed_from_steps"] == [3]
    assert torch.equal(resumed.w, full.w)


def test_a_damaged_rng_state_is_a_loud_warning_with_an_exact_fallback(tmp_path, caplog):
    items = [i / 10 for i in range(20)]
    torch.manual_seed(0)  # what a method's seed_everything does before it builds the objective
    full = train_loop(
        NoisyLinear(), items, _ctx(tmp_path / "full"), LoopConfig(steps=6, batch_size=2, checkpoint_every=0), _sgd
    )
    ctx = _ctx(tmp_path / "part")
    loop = LoopConfig(steps=6, batch_size=2, checkpoint_every=3, keep_checkpoints=True)
    torch.manual_seed(0)
    train_loop(NoisyLinear(), items, ctx, loop, _sgd, fingerprint="g")
    (ckpt,) = ctx.checkpoint_dir.glob("step-*")
    rng = json.loads((ckpt / "rng-0.json").read_text())
    rng["__map__"]["python"]["__tuple__"][1]["__tuple__"][5] += 1  # one word of the Python RNG state changed
    (ckpt / "rng-0.json").write_text(json.dumps(rng))
    with caplog.at_level("WARNING"):
        ctx2 = _ctx(tmp_path / "part")
        torch.manual_seed(0)
        again = train_loop(NoisyLinear(), items, ctx2, loop, _sgd, fingerprint="g")
    assert "NOT resuming from checkpoint" in caplog.text and "rng-0.json does not match its checksum" in caplog.text
    assert ctx2.accounting["resumed_from_steps"] == []  # started over: exact
    assert torch.equal(again.w, full.w)


def test_checkpoints_by_wall_time_and_kept_until_the_encoder_is_complete(tmp_path):
    items = [i / 10 for i in range(20)]
    ctx = _ctx(tmp_path / "t")
    ctx.defer_checkpoint_cleanup = True  # as the runner sets it
    steps_seen = []

    def spy(state):
        steps_seen.append(sorted(p.name for p in ctx.checkpoint_dir.glob("step-*")))

    train_loop(
        LinearObjective(),
        items,
        ctx,
        LoopConfig(steps=4, batch_size=2, checkpoint_every=0, checkpoint_minutes=1e-9),
        _sgd,
        fingerprint="t",
        on_step=spy,
    )
    # time-based: every step here, with no step interval at all; the two newest are kept
    assert steps_seen[1] == ["step-000000001", "step-000000002"]
    assert sorted(p.name for p in ctx.checkpoint_dir.glob("step-*")) == ["step-000000003", "step-000000004"]
    none = _ctx(tmp_path / "n")
    train_loop(
        LinearObjective(),
        items,
        none,
        LoopConfig(steps=4, batch_size=2, checkpoint_every=0, checkpoint_minutes=0),
        _sgd,
        fingerprint="t",
    )
    assert not list(none.checkpoint_dir.glob("step-*"))


def test_speed_knobs_do_not_change_the_run_fingerprint(tmp_path):
    items = [i / 10 for i in range(20)]
    ctx = _ctx(tmp_path)
    train_loop(
        LinearObjective(),
        items,
        ctx,
        LoopConfig(steps=4, batch_size=2, checkpoint_every=2, keep_checkpoints=True),
        _sgd,
    )
    ctx3 = _ctx(tmp_path)  # another checkpoint interval, log interval and time interval: the same run, resumed
    train_loop(
        LinearObjective(),
        items,
        ctx3,
        LoopConfig(steps=4, batch_size=2, checkpoint_every=3, log_every=1, checkpoint_minutes=0),
        _sgd,
    )
    assert ctx3.accounting["resumed_from_steps"] == [2]


def test_the_resume_fingerprint_follows_the_result_keys_field_rule():
    """An option added later with hash "unless_default" keeps an earlier run's resume fingerprint while it
    holds its default and changes it when set; a speed knob (hash False) never changes it; every other
    field does (one at a time)."""
    import dataclasses
    from types import SimpleNamespace

    from benchbench.core.methods import config_hash
    from benchbench.train.loop import method_fingerprint

    @dataclasses.dataclass
    class Before:
        lr: float = 1e-4

    @dataclasses.dataclass
    class After:
        lr: float = 1e-4
        batch: int = dataclasses.field(default=8, metadata={"hash": False})
        dtype: str = dataclasses.field(default="float32", metadata={"hash": "unless_default"})

    ctx = SimpleNamespace(model="m", seed=1)

    def fp(cfg):
        return method_fingerprint(SimpleNamespace(name="x", config=cfg), ctx, ["a", "b"])

    assert fp(After()) == fp(Before()) and config_hash(After()) == config_hash(Before())
    assert fp(After(batch=64)) == fp(Before())
    assert fp(After(dtype="bfloat16")) != fp(Before())
    assert config_hash(After(dtype="bfloat16")) != config_hash(Before())
    assert fp(After(lr=2e-4)) != fp(After())


def test_a_training_in_another_precision_never_resumes_a_checkpoint(tmp_path):
    """The resume identity holds the precision: a bf16 training finds the full-precision one's checkpoints in
    its folder and starts afresh; the same bf16 training again resumes its own (the control)."""
    from benchbench.train.precision import training_precision

    items = [i / 10 for i in range(20)]
    loop = LoopConfig(steps=4, batch_size=2, checkpoint_every=2, keep_checkpoints=True)
    train_loop(LinearObjective(), items, _ctx(tmp_path), loop, _sgd)  # fp32 on the CPU: step 2 and 4 kept
    with training_precision("bf16"):
        bf16 = _ctx(tmp_path)
        train_loop(LinearObjective(), items, bf16, loop, _sgd)
        assert bf16.accounting["resumed_from_steps"] == []
        again = _ctx(tmp_path)
        train_loop(LinearObjective(), items, again, loop, _sgd)
        assert again.accounting["resumed_from_steps"] == [2]  # bf16's own (it replaced the fp32 step-2 one)
