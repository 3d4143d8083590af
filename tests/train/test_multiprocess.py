"""Multi-process training: ``torchrun`` with 2 CPU processes (gloo) gives the weights of a
1-process run with the same global batch, and its checkpoints hold one RNG state per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

_SCRIPT = textwrap.dedent("""
    import json, sys, torch
    from pathlib import Path
    from benchbench.train.context import TrainContext
    from benchbench.train.loop import LoopConfig, Objective, train_loop

    class Linear(Objective):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(3))
        def collate(self, items, rng):
            x = torch.tensor([[v, v * v, 1.0] for v in items], dtype=torch.float32)
            return {"x": x, "y": torch.tensor([2 * v - 1 for v in items], dtype=torch.float32)}
        def forward(self, x, y):
            return ((x @ self.w - y) ** 2).mean()

    out, batch = Path(sys.argv[1]), int(sys.argv[2])
    ctx = TrainContext(model="none", seed=3, output_dir=out, progress=False, device="cpu")
    items = [i / 13 for i in range(26)]
    # a tiny time interval: the main process decides and every process saves at the same step
    loop = LoopConfig(steps=6, batch_size=batch, checkpoint_every=0, checkpoint_minutes=1e-9, keep_checkpoints=True)
    obj = train_loop(Linear(), items, ctx, loop, lambda m: torch.optim.SGD(m.parameters(), lr=0.1), fingerprint="mp")
    import os
    if int(os.environ.get("RANK", "0")) == 0:
        (out / "w.json").write_text(json.dumps({"w": obj.w.tolist(), "acc": ctx.accounting["processes"],
                                                "examples": ctx.accounting["examples"]}))
""")


@pytest.mark.slow
def test_two_cpu_processes_equal_one_with_the_same_global_batch(tmp_path):
    script = tmp_path / "mp.py"
    script.write_text(_SCRIPT)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    one = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "one"), "4"], capture_output=True, text=True, env=env, timeout=300
    )
    assert one.returncode == 0, one.stderr[-2000:]
    two = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            str(script),
            str(tmp_path / "two"),
            "2",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    if two.returncode != 0 and "gloo" in two.stderr.lower() and "not available" in two.stderr.lower():
        pytest.skip("torch.distributed has no gloo backend here")
    assert two.returncode == 0, two.stderr[-3000:]
    a = json.loads((tmp_path / "one" / "w.json").read_text())
    b = json.loads((tmp_path / "two" / "w.json").read_text())
    assert a["acc"] == 1 and b["acc"] == 2 and a["examples"] == b["examples"] == 6 * 4
    assert torch.allclose(torch.tensor(a["w"]), torch.tensor(b["w"]), atol=1e-6), (a, b)
    assert any(abs(x) > 1e-3 for x in a["w"])  # it trained
    *_, ckpt = sorted((tmp_path / "two" / "checkpoints").glob("step-*"))  # the newest of the two kept
    assert {"rng-0.json", "rng-1.json", "rng-0.safetensors", "rng-1.safetensors"} <= {p.name for p in ckpt.iterdir()}
    meta = json.loads((ckpt / "benchbench_state.json").read_text())
    assert meta["processes"] == 2 and meta["step"] == 5  # time-based: saved at every step before the last
