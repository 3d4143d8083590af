"""plm-last: a decoder LLM's last real token, untrained (the decoder study's point of comparison for Echo and
PromptEOL). It reads the LAST real token under either padding side, differs from mean pooling, and refuses an
encoder start by name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from benchbench_plugins.baselines import PLMLast, PLMMean, PoolConfig

from benchbench import ConfigError, TrainContext

TEXTS = ["a short one", "a somewhat longer sentence with several more tokens in it", "mid length text here"]


def _ctx(tmp_path: Path, model: str) -> TrainContext:
    return TrainContext(model=model, seed=1, output_dir=tmp_path / "run", progress=False, device="cpu")


@pytest.mark.parametrize("model", ["tiny-llama", "tiny-qwen2"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_plm_last_reads_the_last_real_token_under_either_padding(tmp_path, model, side):
    enc = PLMLast(PoolConfig()).train([], _ctx(tmp_path, model))
    enc.tokenizer.padding_side = side
    got = enc.encode(TEXTS)
    # by hand: each text alone (no padding at all), its final position's last-layer state
    model_ = enc.model.eval()
    for i, t in enumerate(TEXTS):
        ids = enc.tokenizer([t], return_tensors="pt")
        with torch.no_grad():
            h = model_(**ids).last_hidden_state[0, -1].numpy()
        np.testing.assert_allclose(got[i], h, rtol=1e-4, atol=1e-5)
    mean = PLMMean(PoolConfig()).train([], _ctx(tmp_path, model)).encode(TEXTS)
    assert np.abs(got - mean).max() > 1e-3  # not mean pooling under another name


def test_plm_last_refuses_an_encoder_start_by_name(tmp_path):
    with pytest.raises(ConfigError, match=r"plm-last reads a decoder LLM's last token; 'tiny-bert' is not"):
        PLMLast(PoolConfig()).train([], _ctx(tmp_path, "tiny-bert"))
