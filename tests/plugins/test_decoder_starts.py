"""Decoder-only starts for the encoder methods (issue 48): a method whose mechanism needs an encoder part a
decoder lacks refuses a decoder start before loading anything, naming why (TSDAE: its decoder is a
BERT-style transformer cross-attending to the sentence vector and tied to the encoder; DiffCSE: its
generator is a masked LM over the encoder's vocabulary); SimCSE, whose mechanism is only dropout and a
pooled vector, trains a decoder start through its own pooling."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from benchbench_plugins.diffcse import DiffCSE, DiffCSEConfig
from benchbench_plugins.tsdae import TSDAE, TSDAEConfig

from benchbench import ConfigError, TrainContext

CORPUS = [f"sentence number {i} is about topic {i % 5} and has some more words {i * 3}" for i in range(16)]


def _ctx(tmp_path: Path, model: str = "tiny-llama") -> TrainContext:
    return TrainContext(model=model, seed=1, output_dir=tmp_path / "run", progress=False, device="cpu")


@pytest.mark.parametrize("model", ["tiny-llama", "tiny-qwen2", "smollm2-135m-instruct"])
def test_tsdae_refuses_a_decoder_naming_the_reason(tmp_path, model):
    with pytest.raises(ConfigError, match=r"tsdae: base model .* decoder-only .*CROSS-ATTENDS.*tied to the encoder"):
        TSDAE(TSDAEConfig(steps=1, batch_size=4)).train(CORPUS, _ctx(tmp_path, model))


@pytest.mark.parametrize("model", ["tiny-llama", "tiny-qwen2"])
def test_diffcse_refuses_a_decoder_naming_the_reason(tmp_path, model):
    with pytest.raises(ConfigError, match=r"diffcse: base model .* decoder-only .*generator is a masked LM"):
        DiffCSE(DiffCSEConfig(steps=1, batch_size=4)).train(CORPUS, _ctx(tmp_path, model))


def test_tsdae_still_trains_an_encoder_start(tmp_path):
    enc = TSDAE(TSDAEConfig(steps=1, batch_size=4)).train(CORPUS, _ctx(tmp_path, "tiny-bert:16:1:2:32"))
    assert np.isfinite(enc.encode(CORPUS[:2])).all()


def test_simcse_names_what_a_decoder_start_cannot_take(tmp_path):
    from benchbench_plugins.simcse import SimCSE, SimCSEConfig

    with pytest.raises(ConfigError, match=r"simcse: option 'pooling' = 'cls' cannot read decoder-only .*pooling=mean"):
        SimCSE(SimCSEConfig(steps=1, batch_size=4)).train(CORPUS, _ctx(tmp_path))
    with pytest.raises(ConfigError, match=r"simcse: option 'mlp' = 'train_and_test' .*mlp=train_only"):
        SimCSE(SimCSEConfig(steps=1, batch_size=4, pooling="mean")).train(CORPUS, _ctx(tmp_path))


@pytest.mark.parametrize("model", ["tiny-llama", "tiny-qwen2"])
def test_simcse_trains_a_decoder_start(tmp_path, model):
    """Mean pooling, the MLP for training only: the returned encoder is the decoder, moved by training."""
    from benchbench_plugins.simcse import SimCSE, SimCSEConfig

    from benchbench import DecoderEncoder, load_encoder

    enc = SimCSE(SimCSEConfig(steps=2, batch_size=4, pooling="mean", mlp="train_only")).train(
        CORPUS, _ctx(tmp_path, model)
    )
    start = load_encoder(model, pooling="mean")
    assert isinstance(enc, DecoderEncoder) and enc.fingerprint != start.fingerprint
    assert np.isfinite(enc.encode(CORPUS[:3])).all()
