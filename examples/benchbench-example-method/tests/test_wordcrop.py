"""The example plugin's own tests: its mechanism, and benchbench's conformance kit."""

from __future__ import annotations

import benchbench_wordcrop as wc
import numpy as np
import pytest

from benchbench import TrainContext


def test_crop_deletes_words_and_keeps_one():
    rng = np.random.default_rng(0)
    out = [wc.crop_words("a b c d e f g h i j", 0.5, rng) for _ in range(200)]
    lengths = [len(o.split()) for o in out]
    assert 3 <= np.mean(lengths) <= 7 and min(lengths) >= 1 and max(lengths) < 10
    assert wc.crop_words("a b c", 0.999, rng).strip()  # never empty


def test_plugin_is_discovered_through_its_entry_point():
    from benchbench.registry import load_registry

    reg = load_registry()
    assert reg.method("wordcrop") is wc.WordCrop
    assert reg.owner[("methods", "wordcrop")] == "wordcrop"


def test_training_moves_the_weights_deterministically(tmp_path):
    corpus = [f"sentence number {i} has some words in it" for i in range(40)]

    def train(seed: int):
        method = wc.WordCrop(wc.WordCropConfig(steps=3, batch_size=8, checkpoint_every=0))
        ctx = TrainContext(model="tiny-bert", seed=seed, output_dir=tmp_path / f"s{seed}", progress=False)
        return method.train(corpus, ctx).encode(corpus[:4])

    from benchbench import load_encoder

    start = load_encoder("tiny-bert", pooling="mean", max_seq_length=64).encode(corpus[:4])
    a, b = train(1), train(1)
    np.testing.assert_array_equal(a, b)  # same seed, same weights
    assert not np.allclose(a, start, atol=1e-6)  # it trained


def test_conformance_kit():
    testing = pytest.importorskip("benchbench.testing", reason="benchbench without the conformance kit")
    testing.check_method(wc.WordCrop, overrides={"steps": "3", "batch_size": "4", "checkpoint_every": "2"})
