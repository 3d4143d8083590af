"""Every built-in method and a fixture task pass the conformance kit (benchbench.testing) with tiny
budgets; the kit itself catches a non-deterministic method and a method whose resume is inexact."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pytest
from helpers import FIXTURES

from benchbench import Method
from benchbench.core.registry import load_registry
from benchbench.testing import ConformanceError, check_method, check_task

_TINY_RNN = {"hidden": 16, "emb_dim": 8, "vocab_size": 300, "max_tokens": 12, "batch_size": 4, "steps": 3}
_TINY_TENC = {
    "cycles": 1,
    "cross_epochs": 1.0,
    "bi_epochs": 1.0,
    "cross_min_steps": 2,
    "cross_batch_size": 8,
    "bi_batch_size": 8,
    "cross_max_length": 24,
    "bi_max_length": 16,
}
# per-method tiny budgets (options by name, as --set gives them); a method not listed gets the
# generic budget for the options it has
BUDGETS: dict[str, dict] = {
    # the published read-out layer (27 of Llama-2-7B's 32) does not exist in the 2-layer tiny decoder
    "token-prepending": {"layer": "2", "tp_start": "1", "tp_exit": "2"},
    "qt": _TINY_RNN,
    "mc-qt": _TINY_RNN,
    "combine-qt": _TINY_RNN,
    "skip-thought": _TINY_RNN,
    "ct": {"steps": 3, "batch_size": 4, "negatives": 2},
    # shuffled group whitening needs groups that divide the hidden size (tiny BERT: 16)
    "whitenedcse": {"steps": 3, "batch_size": 4, "num_groups": 8},
    # InfoCSE's frozen network is the start's first skip_from layers (default 6; tiny BERT has 1)
    "infocse": {"steps": 3, "batch_size": 4, "skip_from": 1},
    # RankCSE: one teacher (SimCSE, 2 steps), trained by the kit's call into its output folder (no task here)
    "rankcse": {
        "steps": 3,
        "batch_size": 4,
        "teachers": "simcse",
        "teacher_set": "simcse.steps=2,simcse.batch_size=4",
    },
    # DenoSent: a 2-layer decoder (the default 16 x 2048 is slow on a CPU) and no warm-up (500 steps: lr 0, then
    # 1/500 and 2/500 of it in a 3-step budget, so resume equality would compare weights that barely moved)
    "denosent": {"steps": 3, "batch_size": 4, "decoder_layers": 2, "decoder_ffn": 32, "warmup_steps": 0},
    # the kit hands every method the corpus as unlabelled pairs (ctx.pairs: 18 pairs) and no task, so
    # there is no dev split: the last checkpoint is kept (the record says "none (last checkpoint)")
    "trans-encoder": _TINY_TENC,
    "trans-encoder-mutual": {**_TINY_TENC, "models": ["tiny-bert:16:1:2:32", "tiny-bert:24:1:2:48"]},
}
GENERIC = {"steps": 3, "batch_size": 4}
# options whose value is a pytest fixture (a model folder built offline): option -> fixture name
FIXTURE_OPTIONS: dict[str, dict[str, str]] = {
    # DiffCSE's default generator (distilbert-base-uncased) is a hub download: use a tiny masked LM
    # with the encoder's vocabulary instead
    "diffcse": {"generator": "generator_dir"},
}
# methods the kit cannot run on a tiny random BERT alone, with why (reported, never silently passed)
NOT_HERE: dict[str, str] = {}
# methods that start from another kind of model than the kit's tiny BERT: method -> tiny model name
MODELS: dict[str, str] = dict.fromkeys(("llm2vec", "prompteol", "echo", "token-prepending", "plm-last"), "tiny-qwen2")

_REG = load_registry()


@pytest.mark.parametrize("name", sorted(_REG.methods))
def test_builtin_method_conforms(name, tmp_path, request):
    if name in NOT_HERE:
        pytest.skip(NOT_HERE[name])
    cls = _REG.method(name)
    fields = {f.name for f in dataclasses.fields(cls.Config)}
    budget = {k: v for k, v in BUDGETS.get(name, GENERIC).items() if k in fields}
    for option, fixture in FIXTURE_OPTIONS.get(name, {}).items():
        assert option in fields, f"{name} has no option {option!r}"
        budget[option] = str(request.getfixturevalue(fixture))
    report = check_method(
        cls, overrides=budget, tmp_dir=tmp_path, **({"model": MODELS[name]} if name in MODELS else {})
    )
    assert {"Config dataclass", "encoder contract", "finiteness", "determinism"} <= set(report["passed"])
    if cls.trains and "checkpoint_every" in fields:
        assert "resume equality" in report["passed"], report


def test_fixture_task_conforms(registry):
    from benchbench.core.tasks import load_spec_file

    (spec,), _ = load_spec_file(FIXTURES / "sts_mini.toml")
    report = check_task(spec, data_dir=FIXTURES, registry=registry)
    assert report["passed"] == ["spec", "evaluate test", "train sentences"]


class _Random:
    fingerprint = "random"

    def encode(self, texts):
        return np.random.default_rng().standard_normal((len(texts), 4))


@dataclass
class _Cfg:
    size: int = 4


class _Flaky(Method):
    name = "flaky"
    Config = _Cfg
    trains = False

    def train(self, corpus, ctx):
        return _Random()


class _NaN(_Flaky):
    name = "nan"

    def train(self, corpus, ctx):
        enc = _Random()
        enc.encode = lambda texts: np.full((len(texts), 4), np.nan)
        return enc


def test_the_kit_catches_broken_methods(tmp_path):
    with pytest.raises(ConformanceError, match=r"'flaky'.*determinism"):
        check_method(_Flaky, tmp_dir=tmp_path / "a")
    with pytest.raises(ConformanceError, match=r"'nan'.*finiteness"):
        check_method(_NaN, tmp_dir=tmp_path / "b")


def test_the_kit_catches_an_inexact_resume(tmp_path, monkeypatch):
    """A resume that loses the RNG state (what a silently ignored damaged RNG file did) is caught."""
    import benchbench.train.checkpoint as T

    monkeypatch.setattr(T, "_set_rng_state", lambda st: None)
    cls = _REG.method("tsdae")  # dropout + noise: the RNG matters
    with pytest.raises(ConformanceError, match="resume equality"):
        check_method(cls, overrides={"steps": 4, "batch_size": 4}, tmp_dir=tmp_path)
