"""Step-0 rows and the loss's chance level.

A method's step-0 row is what its trainer returns at ``steps=0``: the start read through the method's
own pooling, head and template. It must be the very encoder the trainer builds before its first
optimizer step (captured there by the loop's ``ctx.monitor_start``), not plain mean pooling; and a
loss at ``train.loss_chance`` must be what the objective scores when every candidate looks alike."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
import torch
from benchbench_plugins.denosent import DenoSent, DenoSentConfig
from benchbench_plugins.esimcse import esimcse_loss
from benchbench_plugins.mirror_bert import nt_xent
from benchbench_plugins.promptbert import PromptBERT, PromptBERTConfig
from benchbench_plugins.rankcse import RankCSE, RankCSEConfig
from benchbench_plugins.simcse import MLPEncoder, SimCSE, SimCSEConfig, SimCSEObjective
from benchbench_plugins.sncse import SNCSE, SNCSEConfig, SNCSEObjective
from benchbench_plugins.tsdae import TSDAE, TSDAEConfig
from benchbench_plugins.whitenedcse import WhitenedCSE, WhitenedCSEConfig, whitenedcse_loss

from benchbench.core.errors import ConfigError, PluginError
from benchbench.core.methods import loss_chance_of
from benchbench.encode.models import load_encoder
from benchbench.train.context import TrainContext
from benchbench.train.loop import resolve_steps

TINY = "tiny-bert:16:1:2:32"
CORPUS = [f"sentence {i} talks about topic {i % 5} with some extra words number {i * 7}" for i in range(24)]
PROBE = ["a man is playing a guitar", "the cat sleeps on the mat", "stocks fell sharply today"]


def _ctx(path, **kw) -> TrainContext:
    return TrainContext(model=TINY, seed=3, output_dir=path, progress=False, device="cpu", **kw)


CASES = {
    # method, its config at a budget, whether its pooling differs from plain mean pooling
    "simcse": (SimCSE, lambda steps: SimCSEConfig(steps=steps, batch_size=4, lr=5e-2)),
    "promptbert": (PromptBERT, lambda steps: PromptBERTConfig(steps=steps, batch_size=4, lr=5e-2)),
    "tsdae": (TSDAE, lambda steps: TSDAEConfig(steps=steps, batch_size=4, lr=5e-2)),
    # the bare [MASK] vector of its template (projector, decoder and MLM head are training-only); no warm-up,
    # whose first step has lr 0
    # [CLS] bare (the MLP is training only); one teacher, trained before the student is built
    "rankcse": (
        RankCSE,
        lambda steps: RankCSEConfig(
            steps=steps, batch_size=4, lr=5e-2, teachers=["simcse"], teacher_set="simcse.steps=1,simcse.batch_size=4"
        ),
    ),
    "denosent": (
        DenoSent,
        lambda steps: DenoSentConfig(
            steps=steps, batch_size=4, lr=5e-2, warmup_steps=0, decoder_layers=1, decoder_ffn=16
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_step0_row_is_the_encoder_the_trainer_builds_before_its_first_step(name, tmp_path):
    cls, cfg = CASES[name]
    seen = {}

    def at_start(step, encoder):
        seen["step"], seen["type"], seen["v"] = step, type(encoder), np.asarray(encoder.encode(PROBE))
        return {"probe": 0.0}

    trained_ctx = _ctx(tmp_path / "one", monitor=lambda s, e: {}, monitor_every=50, monitor_start=at_start)
    trained = cls(cfg(1)).train(CORPUS, trained_ctx)
    ctx0 = _ctx(tmp_path / "zero")
    step0 = cls(cfg(0)).train(CORPUS, ctx0)
    v0 = np.asarray(step0.encode(PROBE))

    assert seen["step"] == 0 and type(step0) is seen["type"]
    np.testing.assert_allclose(v0, seen["v"], atol=1e-6)  # same pooling, head, template, head init
    assert not np.allclose(np.asarray(trained.encode(PROBE)), v0, atol=1e-4)  # the capture preceded step 1
    assert not np.allclose(np.asarray(load_encoder(TINY, pooling="mean").encode(PROBE)), v0, atol=1e-3)
    assert ctx0.accounting["steps"] == 0 and ctx0.accounting["step0_row"] is True
    assert ctx0.accounting["loss_curve"] == [] and "step0_row" not in trained_ctx.accounting
    assert trained_ctx.accounting["monitor"][0] == [0, {"probe": 0.0}]  # the curve's step-0 point, kept


def test_simcse_step0_keeps_its_fresh_mlp_and_seeds_it(tmp_path):
    """SimCSE's head (dense + tanh, kept at test time) is part of its step-0 row: not the bare CLS vector,
    and drawn from the run's seed (a step-0 row needs its seeds like a trained one)."""
    enc = SimCSE(SimCSEConfig(steps=0, batch_size=4)).train(CORPUS, _ctx(tmp_path / "a"))
    assert isinstance(enc, MLPEncoder)
    cls_only = np.asarray(load_encoder(TINY, pooling="cls").encode(PROBE))
    assert not np.allclose(np.asarray(enc.encode(PROBE)), cls_only, atol=1e-3)
    other = SimCSE(SimCSEConfig(steps=0, batch_size=4)).train(
        CORPUS, TrainContext(model=TINY, seed=4, output_dir=tmp_path / "b", progress=False, device="cpu")
    )
    assert not torch.equal(enc.mlp[0].weight, other.mlp[0].weight)


def test_steps_zero_is_a_budget_negative_is_not(tmp_path):
    assert resolve_steps(0, 100, 8) == 0
    with pytest.raises(ConfigError, match="must be >= 0"):
        resolve_steps(-1, 100, 8)
    with pytest.raises(ConfigError, match="option 'steps' must be >= 0"):  # named, through a trainer
        SimCSE(SimCSEConfig(steps=-1, batch_size=4)).train(CORPUS, _ctx(tmp_path))


# ---- the loss's chance level ---------------------------------------------------------------------------
def test_fit_records_the_chance_level_in_the_accounting(tmp_path):
    ctx = _ctx(tmp_path)
    SimCSE(SimCSEConfig(steps=1, batch_size=4)).train(CORPUS, ctx)
    assert ctx.accounting["loss_chance"] == round(math.log(4), 5)
    ctx = _ctx(tmp_path / "t")
    TSDAE(TSDAEConfig(steps=0, batch_size=4)).train(CORPUS, ctx)
    assert ctx.accounting["loss_chance"] == round(math.log(len(load_encoder(TINY).tokenizer)), 5)


def test_a_bad_chance_level_is_the_plugins_error():
    class Bad:
        name = "bad"

        def loss_chance(self, objective):
            return float("nan")

    with pytest.raises(PluginError, match="'bad'.*loss_chance"):
        loss_chance_of(Bad(), None)
    assert loss_chance_of(object(), None) is None


def test_simcse_chance_is_its_loss_when_every_candidate_looks_alike(tmp_path, monkeypatch):
    b = 6
    obj = SimCSEObjective(load_encoder(TINY, pooling="cls"), 0.05, mlp=False)
    same = torch.ones(b, 16)
    monkeypatch.setattr(obj, "views", lambda **tok: (same, same))
    loss = obj.forward(input_ids=torch.zeros(b, 3, dtype=torch.long))
    assert float(loss) == pytest.approx(SimCSE(SimCSEConfig(batch_size=b)).loss_chance(obj), abs=1e-5)
    dcl = SimCSE(SimCSEConfig(batch_size=b, dcl_weight=0.5)).loss_chance(obj)
    assert dcl == pytest.approx(math.log(b) + 0.5 * math.log(16))


def test_each_contrastive_chance_matches_its_loss_at_equal_scores(monkeypatch):
    from benchbench_plugins.diffcse import DiffCSE, DiffCSEConfig
    from benchbench_plugins.esimcse import ESimCSE, ESimCSEConfig
    from benchbench_plugins.mirror_bert import MirrorBERT, MirrorBERTConfig

    b, d = 5, 8
    z = torch.ones(b, d)
    esim = ESimCSE(ESimCSEConfig(batch_size=b, queue_size=7))
    assert float(esimcse_loss(z, z, torch.ones(7, d), 0.05)) == pytest.approx(esim.loss_chance(None), abs=1e-5)
    mirror = MirrorBERT(MirrorBERTConfig(batch_size=b))
    assert float(nt_xent(z, z, 0.04)) == pytest.approx(mirror.loss_chance(None), abs=1e-5)
    white = WhitenedCSE(WhitenedCSEConfig(batch_size=b, num_pos=3))
    assert float(whitenedcse_loss(torch.ones(3, b, d), 0.05)) == pytest.approx(white.loss_chance(None), abs=1e-5)
    assert DiffCSE(DiffCSEConfig(batch_size=b, lambda_weight=0.5)).loss_chance(None) == pytest.approx(
        math.log(b) + 0.5 * math.log(2)
    )
    cfg = SNCSEConfig(batch_size=b)
    obj = SNCSEObjective.__new__(SNCSEObjective)
    torch.nn.Module.__init__(obj)
    obj.c = cfg
    monkeypatch.setattr(obj, "embed", lambda *a: (z, z, z))
    assert float(obj.forward(None, None, None)) == pytest.approx(SNCSE(cfg).loss_chance(None), abs=1e-5)


# ---- through the run path -------------------------------------------------------------------------------
HELDOUT = """
[[task]]
name = "sts-mini-heldout"
kind = "sts"
splits = ["test"]
main_metric = "spearman_all"
[task.params]
format = "senteval-sts"
dir = "sts_mini"
subsets = ["A", "B"]
[task.files]
"sts_mini/STS.input.A.txt" = { sha256 = "f5635db9406c7f5a31016a034ab9d1a6a47b0b9f5a7946f06d94cbf37eb3e25b" }
"sts_mini/STS.gs.A.txt" = { sha256 = "7d6edae66ec5a5f5b83c72032a6c79f85fc07c9a65f04725a206319cf2f2fbc4" }
"sts_mini/STS.input.B.txt" = { sha256 = "2666062b1f737823405dbf68ab686f2b6c120005909b29f93d44e3e5fdc61b3c" }
"sts_mini/STS.gs.B.txt" = { sha256 = "ab2fafd33682c9e5457b36098c493a9f06572e6bd9b562f2513943b7869560a1" }
"""


def test_a_step0_cell_and_a_curve_on_another_tasks_split_through_the_cli(env, monkeypatch, capsys):
    from benchbench.cli.main import main

    (env / "heldout.toml").write_text(HELDOUT)
    monkeypatch.setenv(
        "BENCHBENCH_TASK_PATH", os.pathsep.join([os.environ["BENCHBENCH_TASK_PATH"], str(env / "heldout.toml")])
    )
    monkeypatch.chdir(env)
    base = ["run", "--method", "simcse", "--model", TINY, "--tasks", "sts-mini", "--batch-size", "4"]
    base += ["--lr", "5e-2", "--device", "cpu", "--json", "--eval-every", "2", "--eval-split", "test"]
    assert main(base + ["--steps", "0", "--eval-task", "nope"]) == 2
    assert "--eval-task 'nope'" in capsys.readouterr().err
    curve_key = "sts-mini-heldout:test/spearman_all"
    assert main(base + ["--steps", "0", "--eval-task", "sts-mini-heldout"]) == 0
    rec0 = json.loads(capsys.readouterr().out)[0]
    assert rec0["train"]["steps"] == 0 and rec0["train"]["step0_row"] is True
    assert rec0["train"]["loss_chance"] == round(math.log(4), 5)
    [[step, point]] = rec0["train"]["monitor"]
    # the held-out task holds the same pairs: its step-0 point is the stored step-0 encoder's score
    assert step == 0 and point[curve_key] == pytest.approx(rec0["splits"]["test"]["main_score"], abs=1e-9)
    assert main(base + ["--steps", "3", "--eval-task", "sts-mini-heldout"]) == 0
    rec3 = json.loads(capsys.readouterr().out)[0]
    assert rec3["config_hash"] != rec0["config_hash"] and "step0_row" not in rec3["train"]
    assert [s for s, _ in rec3["train"]["monitor"]] == [0, 2, 3]
    assert rec3["train"]["monitor"][0][1][curve_key] == pytest.approx(point[curve_key], abs=1e-9)


# ---- every registered trainable method -----------------------------------------------------------------
EXTRA = {  # options a method needs on tiny-bert (16 dims), besides its step-0 options
    "whitenedcse": {"num_groups": "4", "batch_size": "8"},
    "infocse": {"skip_from": "1"},
    "diffcse": {"generator": "GENERATOR"},
    "trans-encoder": {"max_pairs": "8"},
}
OFFLINE_MISSING = {"trans-encoder-mutual": "its second base model (all-mpnet-base-v2) is not available offline"}
MODELS = {"llm2vec": "tiny-llama"}  # methods that start from a decoder-only LLM, not tiny BERT


def _trainable():
    from benchbench.core.registry import get_registry

    reg = get_registry()
    return sorted(n for n in reg.methods if reg.method(n).trains)


def test_step0_options_of_says_what_stops_each_method_or_why_not():
    from benchbench_plugins.bertflow import BertFlow
    from benchbench_plugins.trans_encoder import TransEncoder

    from benchbench.core.methods import step0_options_of

    assert step0_options_of(SimCSE) == {"steps": "0"}
    assert step0_options_of(TransEncoder) == {"cycles": "0"}
    with pytest.raises(ConfigError, match="'bertflow' has no meaningful step-0 row: .*randomly initialised flow"):
        step0_options_of(BertFlow)
    from benchbench.core.registry import get_registry

    with pytest.raises(ConfigError, match="does not train"):
        step0_options_of(get_registry().method("plm-mean"))


@pytest.mark.slow
@pytest.mark.parametrize("name", _trainable())
def test_every_trainable_method_has_a_step0_row_or_says_why(name, tmp_path, generator_dir):
    from benchbench.core.methods import build_config, step0_options_of
    from benchbench.core.registry import get_registry

    if name in OFFLINE_MISSING:
        pytest.skip(OFFLINE_MISSING[name])
    reg = get_registry()
    cls = reg.method(name)
    try:
        options = step0_options_of(cls)
    except ConfigError as e:
        assert "no meaningful step-0 row" in str(e)
        fields = {f for f in cls.Config.__dataclass_fields__}
        if "steps" in fields:  # and training at 0 steps says the same, naming the option
            with pytest.raises(ConfigError, match="'steps' = 0"):
                cls(build_config(cls, {"steps": "0"})).train(CORPUS, _ctx(tmp_path))
        return
    extra = {k: str(generator_dir) if v == "GENERATOR" else v for k, v in EXTRA.get(name, {}).items()}
    fields = {f for f in cls.Config.__dataclass_fields__}
    if "batch_size" in fields:
        extra.setdefault("batch_size", "4")
    ctx = _ctx(tmp_path, registry=reg)
    ctx.model = MODELS.get(name, ctx.model)
    ctx.pairs = list(zip(CORPUS[::2], CORPUS[1::2], strict=True))
    enc = cls(build_config(cls, {**extra, **options})).train(CORPUS, ctx)
    assert ctx.accounting["steps"] == 0 and ctx.accounting["step0_row"] is True
    assert np.asarray(enc.encode(PROBE)).shape[0] == len(PROBE)
