"""The example plugin's own tests: its mechanism, and benchbench's conformance kit."""

from __future__ import annotations

import benchbench_dropalign as da
import numpy as np
import pytest
import torch

from benchbench import TrainContext, linear_decay, load_encoder

CORPUS = [f"sentence number {i} has some words in it and then a few more words after those" for i in range(40)]


def test_loss_is_zero_for_equal_views_and_grows_with_their_distance():
    z = torch.randn(8, 16)
    assert da.align_uniform_loss(z, z.clone(), uniformity=0.0, t=2.0).item() == pytest.approx(0.0, abs=1e-7)
    near = da.align_uniform_loss(z, z + 0.01 * torch.randn(8, 16), 0.0, 2.0).item()
    far = da.align_uniform_loss(z, torch.randn(8, 16), 0.0, 2.0).item()
    assert 0 < near < far


def test_uniformity_prefers_a_spread_batch_to_a_collapsed_one():
    spread, collapsed = torch.eye(8), torch.ones(8, 8) + 0.01 * torch.eye(8)
    assert da.align_uniform_loss(spread, spread, 1.0, 2.0) < da.align_uniform_loss(collapsed, collapsed, 1.0, 2.0)
    # the uniformity term is what the weight adds: weight 0 leaves alignment alone (0 for equal views)
    assert da.align_uniform_loss(collapsed, collapsed, 0.0, 2.0).item() == pytest.approx(0.0, abs=1e-7)


def test_the_two_views_differ_by_dropout_only():
    """The mechanism: in train mode the two passes of one batch differ (dropout); in eval mode they
    are the same, so the alignment loss is exactly 0."""
    torch.manual_seed(0)
    obj = da.DropoutAlignObjective(load_encoder("tiny-bert", pooling="mean"), uniformity=0.0, t=2.0)
    batch = obj.collate(CORPUS[:8], np.random.default_rng(0))
    assert batch["n_tokens"] == 2 * int(batch["attention_mask"].sum())
    obj.train()
    assert obj(**batch).item() > 1e-6
    obj.eval()
    assert obj(**batch).item() == pytest.approx(0.0, abs=1e-6)


def train(tmp_path, seed: int, **options):
    config = {"steps": 3, "batch_size": 8, "checkpoint_every": 0, **options}
    method = da.DropoutAlign(da.DropoutAlignConfig(**config))
    ctx = TrainContext(model="tiny-bert", seed=seed, output_dir=tmp_path / f"s{seed}", progress=False)
    return method.train(CORPUS, ctx)


def test_training_moves_the_weights_deterministically(tmp_path):
    start = load_encoder("tiny-bert", pooling="mean").encode(CORPUS[:4])
    a, b = train(tmp_path / "a", 1).encode(CORPUS[:4]), train(tmp_path / "b", 1).encode(CORPUS[:4])
    np.testing.assert_array_equal(a, b)  # same seed, same weights
    assert not np.allclose(a, start, atol=1e-6)  # it trained


def test_learning_rate_decays_linearly_over_the_budget(tmp_path, monkeypatch):
    seen = []

    def spy(optimizer, steps):
        scheduler = linear_decay(optimizer, steps)
        seen.append((steps, scheduler))
        return scheduler

    monkeypatch.setattr(da, "linear_decay", spy)
    train(tmp_path, 1, steps=3)
    ((steps, scheduler),) = seen
    assert steps == 3 and scheduler.get_last_lr() == [0.0]  # decayed to 0 at the last step


def test_trains_at_the_short_length_and_evaluates_at_the_start_length(tmp_path):
    start = load_encoder("tiny-bert", pooling="mean")
    long_text = " ".join(["word"] * 200)
    assert start.tokenize([long_text])["input_ids"].shape[1] > 8  # the start cuts later than 8
    short = train(tmp_path / "short", 1, train_max_seq_length=8)
    assert short.max_seq_length == start.max_seq_length
    assert short.tokenize([long_text])["input_ids"].shape[1] == start.tokenize([long_text])["input_ids"].shape[1]
    # the option reaches the training: the corpus' sentences (about 18 tokens) cut at 8 train other weights
    longer = train(tmp_path / "longer", 1, train_max_seq_length=64)
    assert not np.allclose(short.encode(CORPUS[:4]), longer.encode(CORPUS[:4]), atol=1e-6)


def test_bad_options_are_refused_by_name(tmp_path):
    from benchbench import ConfigError

    with pytest.raises(ConfigError, match="uniformity"):
        train(tmp_path, 1, uniformity=-1.0)


def test_plugin_is_discovered_through_its_entry_point():
    from importlib.metadata import entry_points

    if not [e for e in entry_points(group="benchbench") if e.value == "benchbench_dropalign"]:
        pytest.skip("benchbench-example-dropout is not installed (pip install ./examples/benchbench-example-dropout)")
    from benchbench import get_registry

    assert get_registry().method("dropout-align") is da.DropoutAlign


def test_conformance_kit():
    from benchbench.testing import check_method

    report = check_method(da.DropoutAlign, overrides={"steps": "4", "batch_size": "4", "checkpoint_every": "2"})
    assert {"Config dataclass", "determinism", "encoder contract", "resume equality"} <= set(report["passed"])
