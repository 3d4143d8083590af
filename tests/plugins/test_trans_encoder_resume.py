"""A Trans-Encoder run interrupted inside a cross-encoder phase resumes that phase from its loop
checkpoint and ends with the weights, dev choices and scores of an uninterrupted run.

Through the runner (``benchbench run``'s path: its run folder, its ``TrainContext``), on mrpc-pairs
with real dev selection, a tiny BERT WITH dropout (so the resumed phase is exact only if the torch RNG
state is restored) and checkpoints every 2 steps. Interrupted in cycle 2's bi->cross phase, after dev
checkpoints of that phase were scored, so their scores and best weights must come back from the
checkpoint too; by Ctrl-C (SIGINT: the loop stops after the step under way and keeps it) and by a
crash (an exception: the last checkpoint, one step earlier, is resumed and the step after it redone).
"""

from __future__ import annotations

import signal

import pytest
import torch
from benchbench_plugins import trans_encoder as te

from benchbench import tiny_bert

KILL_STEP = 5  # of cycle 2's cross phase (8 steps); dev points at 2, 3 (epoch end), 4, 6, 6, 8


def _options(model: str, out) -> dict:
    return dict(
        method="trans-encoder",
        tasks="mrpc-pairs",
        model=model,
        output=str(out),
        progress=False,
        overrides={
            "cycles": "2",
            "max_pairs": "6",
            "both_orders": "true",  # 12 examples: 3 batches of 4 an epoch
            "cross_batch_size": "4",
            "cross_min_steps": "8",
            "cross_epochs": "1",
            "bi_batch_size": "4",
            "bi_epochs": "2",
            "cross_max_length": "32",
            "bi_max_length": "16",
            "cross_lr": "1e-3",
            "bi_lr": "1e-3",
            "select": "true",
            "dev_max_pairs": "24",
            "eval_every": "2",
            "checkpoint_every": "2",
        },
    )


def _run(model, out, real_data):
    from benchbench.run.runner import RunOptions, run

    return run(RunOptions(**_options(model, out), data_dir=str(real_data))).records[0]


def _interrupt_at(monkeypatch, how: str) -> None:
    """Cycle 2's cross phase stops after optimizer step KILL_STEP (once)."""
    real = te.train_loop
    fired = []

    def loop(*a, **k):
        if k.get("desc", "").endswith("cycle 2 cross") and not fired:

            def on_step(state):
                if state.step == KILL_STEP:
                    fired.append(how)
                    if how == "sigint":
                        signal.raise_signal(signal.SIGINT)
                    else:
                        raise RuntimeError("the machine went away")

            k["on_step"] = on_step
        return real(*a, **k)

    monkeypatch.setattr(te, "train_loop", loop)


def _weights(out) -> dict[str, torch.Tensor]:
    """Both trained encoders as the run stored them (its run folder's ``encoder``)."""
    from benchbench import load_encoder

    (folder,) = out.rglob("train-*/encoder")
    res = load_encoder(str(folder))
    return {
        **{f"bi.{k}": v for k, v in res.bi_encoder.model.state_dict().items()},
        **{f"cross.{k}": v for k, v in res.cross_encoder.model.state_dict().items()},
    }


# SIGINT during step 5 is honoured after the step under way (6, kept); a crash at 5 leaves checkpoint 4
@pytest.mark.parametrize(
    "how,resumed_at", [("sigint", KILL_STEP + 1), pytest.param("crash", KILL_STEP - 1, marks=pytest.mark.slow)]
)
def test_an_interrupted_cross_phase_resumes_to_the_uninterrupted_result(
    tmp_path, tmp_cache, real_data, monkeypatch, how, resumed_at
):
    model = str(tiny_bert(16, 1, 2, 32, seed=2).save(tmp_path / "tiny"))  # dropout 0.1: the RNG matters
    full = _run(model, tmp_path / "full", real_data)
    with monkeypatch.context() as m:
        _interrupt_at(m, how)
        with pytest.raises(KeyboardInterrupt if how == "sigint" else Exception) as e:
            _run(model, tmp_path / "cut", real_data)
    said = "the machine went away" if how == "crash" else f"at training step {resumed_at} of 8: kept checkpoint"
    assert said in str(e.value), str(e.value)
    resumed = _run(model, tmp_path / "cut", real_data)
    loops = resumed["train"]["cross_loop"]
    # cycle 1's cross phase had finished (replayed from its start); cycle 2's resumed from its checkpoint
    assert [p["resumed_from_steps"] for p in loops] == [[], [resumed_at]]
    assert full["train"]["cross_loop"][1]["resumed_from_steps"] == []
    for key in ("selection", "labels", "cross_phase_steps", "bi_phase_steps"):
        assert resumed["train"][key] == full["train"][key], key
    # the interrupted phase's dev points before the interruption are in the history (from the checkpoint)
    cross2 = [h for h in full["train"]["selection"][next(iter(full["train"]["selection"]))] if h.get("cycle") == 2]
    assert [h["at"] for h in cross2 if h["kind"] == "cross"][:3] == ["step 2", "epoch end (step 3)", "step 4"]
    assert resumed["splits"] == full["splits"]
    a, b = _weights(tmp_path / "full"), _weights(tmp_path / "cut")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    start = tiny_bert(16, 1, 2, 32, seed=2).model.state_dict()
    assert any(not torch.equal(v, a[f"bi.{k}"]) for k, v in start.items())  # training moved the weights
