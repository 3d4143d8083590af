"""benchbench sweep: the expansion, failures reported without stopping, resume, and a 2-worker local
Ray sweep whose records equal sequential runs."""

from __future__ import annotations

import json

import pytest

from benchbench.run.sweep import SweepRun, base_options, expand, run_sweep


def test_expand_folds_sizes_into_setups():
    runs = expand(
        ["a", "b"],
        ["t"],
        [1, 2],
        ["unsupervised", "supervised", "pretrain-supervised@labelled=9"],
        corpus_sizes=[128, 1024],
        labelled_sizes=[500],
    )
    setups = sorted({r.setup for r in runs})
    assert setups == [
        "pretrain-supervised@labelled=9",
        "supervised@labelled=500",
        "unsupervised@corpus=1024",
        "unsupervised@corpus=128",
    ]
    assert len(runs) == 4 * 2 * 2
    assert len(expand(["a", "a"], ["t"], [1, 1], ["unsupervised"])) == 1  # de-duplicated


def _records(root):
    out = {}
    for p in sorted(root.rglob("*.json")):
        if "runs" in p.parts:
            continue
        r = json.loads(p.read_text())
        if "splits" in r:
            out[(r["method"], r["seed"], r["setup"])] = r["splits"]["test"]["scores"]
    return out


RUNS = [SweepRun("simcse", "sts-mini", s, "unsupervised") for s in (1, 2)] + [
    SweepRun("nope", "sts-mini", 1, "unsupervised")
]
BASE = {"model": "tiny-bert:16:1:2:32", "overrides": {"steps": 2, "batch_size": 4}, "device": "cpu", "progress": False}


def test_sweep_local_then_two_worker_ray_equals_sequential(env):
    import torch

    # the Ray workers below get cpus_per_run=1, so one intra-op thread; the thread count changes the
    # order of float reductions in training (measured: tiny-bert simcse, 2 steps, pearson_all 25.133588
    # with 1 thread vs 25.133634 with 2), so the sequential reference runs with one thread as well
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    base = base_options(output=str(env / "seq"), **BASE)
    try:
        seq = run_sweep(RUNS, base, executor="local")
    finally:
        torch.set_num_threads(threads)
    assert [o.status for o in seq] == ["done", "done", "failed"]  # a failed run does not stop the sweep
    assert "nope" in seq[2].error
    again = run_sweep(RUNS[:2], base, executor="local")  # resumable: stored keys are skipped
    assert [o.status for o in again] == ["skipped", "skipped"]
    assert [o.scores for o in again] == [o.scores for o in seq[:2]]
    with pytest.raises(Exception, match="sweep axes"):
        run_sweep(RUNS, {**base, "seeds": [1]}, executor="local")
    pytest.importorskip(
        "ray", reason="Ray is not installed (pip install 'benchbench[sweep]'); the Ray sweep is not tested"
    )
    par = run_sweep(RUNS, base_options(output=str(env / "ray"), **BASE), executor="ray", workers=2, cpus_per_run=1)
    assert [o.status for o in par] == ["done", "done", "failed"]
    a, b = _records(env / "seq"), _records(env / "ray")
    assert a.keys() == b.keys() and len(a) == 2
    for k in a:
        assert a[k] == pytest.approx(b[k], abs=1e-6)
    for o, q in zip(seq[:2], par[:2], strict=True):
        assert o.scores["sts-mini"] == pytest.approx(q.scores["sts-mini"], abs=1e-6)
