"""``train_method`` (a method trained as another's start or teacher: Trans-Encoder's start, RankCSE's
teachers) trains with the caller's learning curve when on the caller's task, so the study cell that
later reuses that encoder still has its curve (before: whichever ran first decided, and a teacher trained
inside a RankCSE cell left the SimCSE cell without a curve: "not assessable")."""

from __future__ import annotations

from benchbench import DataStore, train_method
from benchbench.train.context import TrainContext

OPTS = {"steps": "2", "batch_size": "4", "mlp": "none", "select_on_stsb_dev": "false"}


def _ctx(tmp_path, real_data, calls):
    def monitor(step, encoder):
        calls.append(step)
        return {"stsb:dev/spearman": float(step)}

    out = tmp_path / "runs" / "rankcse" / "m" / "unsupervised" / "h" / "seed1" / "train-x"
    return TrainContext(
        model="tiny-bert:16:1:2:32",
        seed=1,
        output_dir=out,
        task="stsb",
        data=DataStore(str(real_data)),
        progress=False,
        monitor=monitor,
        monitor_every=1,
        monitor_start=monitor,
    )


def test_a_method_trained_for_another_on_its_task_keeps_the_callers_curve(tmp_path, real_data):
    calls: list[int] = []
    got = train_method("simcse", _ctx(tmp_path, real_data, calls), OPTS)
    assert not got.reused and calls == [0, 1, 2]
    assert [p[0] for p in got.info["monitor"]] == [0, 1, 2]
    # reused from disk (what the SimCSE cell gets when its teacher ran first): the curve comes with it
    again = train_method("simcse", _ctx(tmp_path, real_data, calls), OPTS)
    assert again.reused and [p[0] for p in again.info["monitor"]] == [0, 1, 2] and calls == [0, 1, 2]


def test_on_another_task_the_callers_curve_is_not_used(tmp_path, real_data):
    calls: list[int] = []
    got = train_method("simcse", _ctx(tmp_path, real_data, calls), OPTS, task="sts12")
    assert calls == [] and not got.info.get("monitor")
