"""Every plugin's learning-rate schedule with ``grad_accum`` > 1.

``grad_accum`` makes one optimizer step out of several micro-batches; the schedule counts optimizer
steps (the loop steps the scheduler once per update), so its warm-up and decay must be the same at
``grad_accum`` 1 and 4 for the same ``steps``. No test ran a schedule above 1 before, and MLM's warm-up
scaled by ``grad_accum`` passed the whole suite. Each plugin that takes the option is built through its
own ``train`` up to the loop (no training), and its optimizer and scheduler factories are stepped.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

from benchbench import TrainContext

TINY = "tiny-bert:16:1:2:32"
CORPUS = [f"sentence number {i} talks about topic {i % 5} with quite a few extra words {i * 7}" for i in range(24)]
STEPS = 40
SCHEDULED = {"mlm", "ct", "simcse", "whitenedcse", "infocse", "esimcse", "promptbert", "sncse", "diffcse", "bsl"}
SCHEDULED |= {"denosent"}

# plugin module -> its Method class, and options a build here needs (no download, no spaCy)
PLUGINS = {
    "mlm": ("MLM", {"warmup_ratio": 0.1}),
    "ct": ("CT", {"segment_steps": 10}),  # four segments in 40 steps
    "simcse": ("SimCSE", {}),
    "whitenedcse": ("WhitenedCSE", {"num_groups": 4}),
    "infocse": ("InfoCSE", {"skip_from": 1}),
    # warm-up over 10 of the 40 steps; no back-translation (not what is tested here)
    "denosent": ("DenoSent", {"warmup_steps": 10, "augmenter": "none", "decoder_layers": 1, "decoder_ffn": 16}),
    "esimcse": ("ESimCSE", {}),
    "promptbert": ("PromptBERT", {}),
    "sncse": ("SNCSE", {}),
    "diffcse": ("DiffCSE", {}),
    "bsl": ("BSL", {"augmenter": "word-delete", "two_view": False, "recipe": "reference"}),  # warm-up + decay
    "tsdae": ("TSDAE", {}),
    "mirror_bert": ("MirrorBERT", {}),
    "bertflow": ("BertFlow", {}),
}


def _build(name: str, tmp_path, monkeypatch, **overrides) -> dict:
    """What ``<Method>.train`` hands to the loop (``fit`` or ``train_loop``): the loop config and the
    optimizer and scheduler factories, with the objective; training itself is skipped."""
    mod = importlib.import_module(f"benchbench_plugins.{name}")
    caught: dict = {}

    def via_fit(method, objective, items, ctx, **kw):
        caught.update(kw, obj=objective)
        if "loop" not in kw or kw["loop"] is None:
            from benchbench.train.loop import LoopConfig

            caught["loop"] = LoopConfig.from_config(method.config)
        return objective

    def via_train_loop(objective, items, ctx, loop, **kw):
        caught.update(kw, obj=objective, loop=loop)
        return objective

    if hasattr(mod, "fit"):
        monkeypatch.setattr(mod, "fit", via_fit)
    if hasattr(mod, "train_loop"):
        monkeypatch.setattr(mod, "train_loop", via_train_loop)
    if name == "sncse":  # spaCy is not what is tested here
        monkeypatch.setattr(mod, "negations", lambda texts, *a, **k: ["not " + t for t in texts])
    cls_name, extra = PLUGINS[name]
    cls = getattr(mod, cls_name)
    from benchbench.core.registry import load_registry

    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu", registry=load_registry())
    cls(cls.Config(**{**extra, **overrides})).train(CORPUS * 20, ctx)
    assert "loop" in caught, f"{name}: train() never reached the loop"
    return caught


def _lrs(caught: dict, steps: int) -> list[float]:
    """The learning rate of each optimizer step, from the method's own factories (none for a method
    without a scheduler: its rate is constant)."""
    if not caught.get("make_scheduler"):
        return []
    opt = caught["make_optimizer"](caught["obj"])
    sched = caught["make_scheduler"](opt) if caught.get("make_scheduler") else None
    out = []
    for _ in range(steps):
        out.append([g["lr"] for g in opt.param_groups])
        opt.step()
        if sched is not None:
            sched.step()
    return out


def _options(name: str, generator_dir) -> dict:
    return {"generator": str(generator_dir)} if name == "diffcse" else {}


@pytest.mark.parametrize("name", sorted(PLUGINS))
def test_grad_accum_changes_the_micro_batches_not_the_schedule(name, tmp_path, monkeypatch, generator_dir):
    """At ``grad_accum`` 4 the loop runs the same number of optimizer steps with 4 micro-batches each,
    and the learning rate of every optimizer step is the one it has at ``grad_accum`` 1."""
    opts = _options(name, generator_dir)
    one = _build(name, tmp_path / "1", monkeypatch, steps=STEPS, grad_accum=1, **opts)
    four = _build(name, tmp_path / "4", monkeypatch, steps=STEPS, grad_accum=4, **opts)
    assert (one["loop"].steps, one["loop"].grad_accum) == (STEPS, 1)
    assert (four["loop"].steps, four["loop"].grad_accum) == (STEPS, 4)
    assert four["loop"].batch_size == one["loop"].batch_size
    a, b = _lrs(one, STEPS), _lrs(four, STEPS)
    if name in SCHEDULED:  # the schedule moves within these steps, so a rescaled one cannot match
        assert len(a) == STEPS and a[0] != a[-1], (name, a[:3], a[-3:])
    else:
        assert a == [] and not four.get("make_scheduler")
    assert np.allclose(a, b, rtol=1e-12, atol=0), (name, a[:12], b[:12])


def test_mlm_warmup_and_decay_count_optimizer_steps(tmp_path, monkeypatch):
    """Devlin et al.'s schedule at ``grad_accum`` 4: linear warm-up over the first 10% of the 40
    optimizer steps (peak at step 4), then linear decay to 0 at step 40."""
    caught = _build("mlm", tmp_path, monkeypatch, steps=STEPS, grad_accum=4, warmup_ratio=0.1, lr=1e-3)
    lrs = [g[0] for g in _lrs(caught, STEPS)]
    warm = 4
    expected = [1e-3 * min((s + 1) / warm, (STEPS - s) / (STEPS - warm)) for s in range(STEPS)]
    assert np.allclose(lrs, expected, rtol=1e-9, atol=0), lrs
    assert max(lrs) == pytest.approx(1e-3) and int(np.argmax(lrs)) == warm - 1
    assert isinstance(caught["make_optimizer"](caught["obj"]), torch.optim.Optimizer)


def test_mlm_without_warmup_starts_at_the_full_rate(tmp_path, monkeypatch):
    """``warmup_ratio`` 0: one warm-up step at most (the rate is full from the first step), never a
    division by zero; then the decay reaches 0 at the last step."""
    caught = _build("mlm", tmp_path, monkeypatch, steps=STEPS, grad_accum=2, warmup_ratio=0.0, lr=1e-3)
    lrs = [g[0] for g in _lrs(caught, STEPS)]
    assert lrs[0] == pytest.approx(1e-3)
    assert np.allclose(lrs, [1e-3 * (STEPS - s) / (STEPS - 1) if s else 1e-3 for s in range(STEPS)], rtol=1e-9)


@pytest.mark.parametrize("ratio,ok", [(0.0, False), (1.0, False), (-0.1, False), (1e-3, True), (0.999, True)])
def test_mlm_mask_ratio_is_a_share_strictly_between_0_and_1(tmp_path, monkeypatch, ratio, ok):
    """(The mutation tool's survivors of MLM.train: the bounds of this check were never tested.)"""
    from benchbench import ConfigError

    if ok:
        assert _build("mlm", tmp_path, monkeypatch, steps=1, mask_ratio=ratio)["obj"] is not None
    else:
        with pytest.raises(ConfigError, match="mask_ratio"):
            _build("mlm", tmp_path, monkeypatch, steps=1, mask_ratio=ratio)
