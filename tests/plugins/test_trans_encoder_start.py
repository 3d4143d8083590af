"""Trans-Encoder's ``start=<method>``: the named method is trained first through the harness (its
own run folder under the same output, same seed and base model), reused when stored, recorded in the
Trans-Encoder record, and its encoder's weights are exactly the bi-encoder's start; a path still
works; anything else is an error naming the option and the methods."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from benchbench_plugins import simcse
from benchbench_plugins import trans_encoder as te
from test_trans_encoder import FAST, _ctx, _method, _tiny_dir

from benchbench import ConfigError, load_encoder, model_label_of


@pytest.fixture
def spies(monkeypatch):
    """Counts SimCSE trainings; keeps each Trans-Encoder track's start weights."""
    seen = {"simcse_trains": 0, "starts": []}
    real_train, real_init = simcse.SimCSE.train, te._Track.__init__

    def train(self, corpus, ctx):
        seen["simcse_trains"] += 1
        return real_train(self, corpus, ctx)

    def init(self, name, start, *a, **k):
        real_init(self, name, start, *a, **k)
        seen["starts"].append((start, {k: v.clone() for k, v in self.start_state.items()}))

    monkeypatch.setattr(simcse.SimCSE, "train", train)
    monkeypatch.setattr(te._Track, "__init__", init)
    return seen


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_start_method_trained_once_reused_and_is_the_start(tmp_path, tmp_cache, real_data, spies):
    from benchbench.run.runner import RunOptions, run

    model = _tiny_dir(tmp_path)
    out = tmp_path / "res"
    over = {
        **{k: str(v) for k, v in FAST.items()},
        "max_pairs": "8",
        "start": "simcse",
        "start_set": "steps=2,batch_size=4,mlp=none",
    }
    kw = dict(
        method="trans-encoder",
        tasks="mrpc-pairs",
        model=model,
        data_dir=str(real_data),
        output=str(out),
        progress=False,
    )
    r1 = run(RunOptions(**kw, overrides=over)).records[0]
    st = r1["train"]["start"]
    assert st["method"] == "simcse" and st["reused"] is False and spies["simcse_trains"] == 1
    assert st["config"]["steps"] == 2 and st["config"]["batch_size"] == 4 and st["config"]["mlp"] == "none"
    # the record names the start by its place in the result store, never by a machine path
    assert not Path(st["path"]).is_absolute() and st["path"].startswith("runs/simcse/"), st["path"]
    path = out / st["path"]
    assert (path / ".complete").is_file()
    # where `benchbench run --method simcse` trains: <output>/runs/simcse/<model>/unsupervised/<hash>/seed1/
    assert path.relative_to(out / "runs" / "simcse").parts[-4:-1] == (st["config_hash"], "seed1", path.parts[-2])
    # the bi-encoder starts from exactly the trained SimCSE weights, not from the base model
    loaded, start_state = spies["starts"][0]
    assert loaded == str(path)
    assert _same(start_state, load_encoder(str(path)).model.state_dict())
    assert not _same(start_state, load_encoder(model).model.state_dict())

    # another Trans-Encoder config trains again, but its start is reused from disk
    r2 = run(RunOptions(**kw, overrides={**over, "max_pairs": "6"})).records[0]
    assert r2["config_hash"] != r1["config_hash"]
    assert r2["train"]["start"]["reused"] is True and r2["train"]["start"]["path"] == st["path"]
    assert spies["simcse_trains"] == 1 and _same(spies["starts"][1][1], start_state)

    # and `benchbench run --method simcse` with the same options reuses the same trained encoder
    r3 = run(
        RunOptions(
            method="simcse",
            tasks="mrpc-pairs",
            model=model,
            data_dir=str(real_data),
            output=str(out),
            progress=False,
            overrides={"steps": "2", "batch_size": "4", "mlp": "none"},
        )
    ).records[0]
    assert r3["config_hash"] == st["config_hash"] and r3["train"]["reused_from_disk"]
    assert spies["simcse_trains"] == 1


def test_start_path_still_works_and_bad_values_are_named(tmp_path, spies):
    model, other = _tiny_dir(tmp_path), _tiny_dir(tmp_path, seed=3, name="other")
    ctx = _ctx(tmp_path, model)
    _method(start=other).train([], ctx)
    assert spies["starts"][0][0] == other
    # the record names a folder start by its label (name @ weights hash), never by its machine path
    assert ctx.accounting["start"] == {"model": model_label_of(other)}
    assert re.fullmatch(r"other@[0-9a-f]{12}", ctx.accounting["start"]["model"])
    assert _same(spies["starts"][0][1], load_encoder(other).model.state_dict())

    # a start saved with SimCSE's MLP head: the bi-encoder is its bare transformer, [CLS] pooled
    mlp_dir = tmp_path / "with-mlp"
    base = load_encoder(other)
    simcse.MLPEncoder(base, simcse.make_mlp(base)).save(mlp_dir)
    ctx = _ctx(tmp_path, model)
    res = _method(start=str(mlp_dir)).train([], ctx)
    assert ctx.accounting["start_head_dropped"] == {model_label_of(model): "MLPEncoder"}
    assert type(res.bi_encoder) is type(load_encoder(other)) and not hasattr(res.bi_encoder, "mlp")
    assert _same(spies["starts"][1][1], load_encoder(other).model.state_dict())

    from benchbench.core.registry import get_registry

    ctx = _ctx(tmp_path, model)
    ctx.registry = get_registry()
    with pytest.raises(ConfigError, match=r"option start='nope' is neither.*Methods: .*simcse.*tsdae"):
        _method(start="nope").train([], ctx)
    with pytest.raises(ConfigError, match="start_set applies only when start names a method"):
        _method(start=other, start_set="steps=2").train([], ctx)
    with pytest.raises(ConfigError, match="start_set='steps'"):
        _method(start="simcse", start_set="steps").train([], ctx)
    assert spies["simcse_trains"] == 0 and len(spies["starts"]) == 2
