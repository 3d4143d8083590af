"""LLM2Vec's GPU path (issue 48): gradient checkpointing, bf16 weights, and the throughput bench.

- ``gradient_checkpointing`` is declared outside the result key (``metadata={"hash": False}``) because it
  changes no number: with dropout on (LoRA dropout 0.05, attention dropout), one seed, tiny-llama on the CPU,
  the loss and every LoRA gradient are bit-identical with and without it, and so is a whole trained encoder.
  The check is sharp: the same checkpointing without RNG-state restoring changes the gradients, and the
  checkpointing is really on (the forward keeps far fewer tensors for the backward).
- ``weights_dtype="bfloat16"`` changes numbers: it enters the result key when set; at its default the key is
  the one stored before the option existed (pinned below).
- bf16 weights are bf16 while training (the adapters float32, peft's default) and in the trained encoder.
- ``bench/gpu_llm_mfu.py --quick`` runs on the CPU.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys

import numpy as np
import pytest
import torch
from benchbench_plugins import llm2vec as L
from benchbench_plugins.llm2vec import (
    LLM2Vec,
    LLM2VecConfig,
    MNTPObjective,
    SimCSEStageObjective,
    add_lora,
    load_lm,
    set_attention_dropout,
    set_gradient_checkpointing,
)
from conftest import REPO

from benchbench import ConfigError, TrainContext, config_hash

CORPUS = [f"sentence number {i} is about topic {i % 5} and has some more words {i * 3}" for i in range(24)]
TEXTS = ["a cat sat on the mat", "the dog", "stocks fell sharply today after the report", "hello world again"]
# config_hash(LLM2VecConfig()) before the GPU options existed (commit 4f90b19): stored results keep their keys
HASH_AT_DEFAULTS = "012dce0c8413"


def _lm_with_lora(stage: str, seed: int = 11):
    """tiny-llama with its stage's LoRA (B perturbed so the adapter acts) and dropout on."""
    lm, tok = load_lm("tiny-llama")
    torch.manual_seed(seed)
    add_lora(lm, LLM2VecConfig())
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, p in sorted(lm.named_parameters()):
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.05)
    set_attention_dropout(lm, 0.3 if stage == "simcse" else 0.1)  # MNTP's own is 0: on here, to test the RNG
    if stage == "mntp":
        obj = MNTPObjective(lm, tok, 0.2, 128, None)
    else:
        obj = SimCSEStageObjective(lm, tok, 20.0, 128, "text", None)
    return lm, obj


def _step(stage: str, checkpointing: dict | None):
    """(loss, {LoRA parameter: gradient}, tensors the forward saved for the backward) of one step."""
    lm, obj = _lm_with_lora(stage)
    if checkpointing == {}:
        set_gradient_checkpointing(lm, True)  # the plugin's switch
    elif checkpointing is not None:
        kwargs = {"use_reentrant": False, **checkpointing}
        lm.body.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    batch = obj.collate(CORPUS[:6] + TEXTS, np.random.default_rng(1))
    batch.pop("n_tokens")
    obj.train()
    saved = [0]

    def pack(t):
        saved[0] += 1
        return t

    torch.manual_seed(7)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = obj(**batch)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in lm.model.named_parameters() if p.grad is not None}
    return loss.detach(), grads, saved[0]


@pytest.mark.parametrize("stage", ["mntp", "simcse"])
def test_gradient_checkpointing_keeps_loss_and_lora_gradients_bit_identical(stage):
    loss, grads, saved = _step(stage, None)
    loss_ck, grads_ck, saved_ck = _step(stage, {})
    assert saved_ck < saved / 2  # checkpointing is on: the layers' activations are not kept
    assert grads.keys() == grads_ck.keys() and len(grads) > 0 and all("lora_" in n for n in grads)
    assert all(g.abs().max() > 0 for g in grads.values())  # the adapter gets gradients through frozen layers
    assert torch.equal(loss, loss_ck)
    assert all(torch.equal(grads[n], grads_ck[n]) for n in grads)
    # control: recomputed without restoring the RNG, dropout draws other masks and the gradients move
    _, grads_rng, _ = _step(stage, {"preserve_rng_state": False})
    assert max((grads[n] - grads_rng[n]).abs().max() for n in grads) > 1e-6


def _ctx(tmp_path, name: str) -> TrainContext:
    return TrainContext(model="tiny-llama", seed=1, output_dir=tmp_path / name, progress=False, device="cpu")


@pytest.mark.slow  # four trainings; the one-step equality above runs in the fast suite
def test_gradient_checkpointing_trains_the_same_encoder(tmp_path):
    """Both stages (LoRA dropout 0.05, SimCSE's attention dropout 0.3), 2 steps each, a learning-curve monitor
    encoding the merged copy at every SimCSE step (taken while checkpointing is on): the same weights,
    vectors and monitored vectors, bit for bit; the record says checkpointing was on; the trained encoder is
    left without it."""
    runs = {}
    for name, on in (("plain", False), ("checkpointed", True)):
        ctx = _ctx(tmp_path, name)
        seen: list[np.ndarray] = []

        def monitor(step, encoder, seen=seen):
            seen.append(encoder.encode(TEXTS))
            return {"norm": float(np.linalg.norm(seen[-1]))}

        ctx.monitor, ctx.monitor_every = monitor, 1
        enc = LLM2Vec(LLM2VecConfig(steps=2, batch_size=4, gradient_checkpointing=on)).train(CORPUS, ctx)
        runs[name] = (enc, seen, ctx.accounting)
    (plain, seen, acc), (ck, seen_ck, acc_ck) = runs["plain"], runs["checkpointed"]
    assert acc_ck["gradient_checkpointing"] is True and "gradient_checkpointing" not in acc
    sd, sd_ck = plain.model.state_dict(), ck.model.state_dict()
    assert sd.keys() == sd_ck.keys() and all(torch.equal(sd[k], sd_ck[k]) for k in sd)
    assert np.array_equal(plain.encode(TEXTS), ck.encode(TEXTS)) and plain.fingerprint == ck.fingerprint
    assert len(seen) == len(seen_ck) == 2 and all(np.array_equal(a, b) for a, b in zip(seen, seen_ck))
    assert not ck.model.is_activation_checkpointing and not getattr(ck.model, "_require_grads_hooks", None)


def test_option_hash_unchanged_at_defaults_and_changed_by_bf16():
    c = LLM2VecConfig()
    assert (c.gradient_checkpointing, c.weights_dtype) == (False, "float32")
    assert config_hash(c) == HASH_AT_DEFAULTS
    assert config_hash(dataclasses.replace(c, gradient_checkpointing=True)) == HASH_AT_DEFAULTS
    bf16 = config_hash(dataclasses.replace(c, weights_dtype="bfloat16"))
    assert bf16 != HASH_AT_DEFAULTS
    assert config_hash(dataclasses.replace(c, weights_dtype="bfloat16", gradient_checkpointing=True)) == bf16


def test_a_bad_weights_dtype_is_refused_by_name(tmp_path):
    with pytest.raises(ConfigError, match="'weights_dtype'"):
        LLM2Vec(LLM2VecConfig(steps=1, weights_dtype="float16")).train(CORPUS, _ctx(tmp_path, "x"))


def test_bf16_weights_are_bf16_while_training_and_after(tmp_path, monkeypatch, caplog):
    """The decoder's weights and hidden states are bf16 in every training forward of both stages (the LoRA
    adapters float32); the trained encoder keeps bf16 weights; a CPU run says so; the record names it."""
    seen: list[tuple[str, set, set, torch.dtype]] = []

    def spy(cls, stage):
        real = cls.forward

        def forward(self, input_ids, attention_mask, **kw):
            base = {p.dtype for n, p in self.lm.named_parameters() if "lora_" not in n}
            lora = {p.dtype for n, p in self.lm.named_parameters() if "lora_" in n}
            hidden = self.lm.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            seen.append((stage, base, lora, hidden.dtype))
            return real(self, input_ids, attention_mask, **kw)

        monkeypatch.setattr(cls, "forward", forward)

    spy(MNTPObjective, "mntp")
    spy(SimCSEStageObjective, "simcse")
    ctx = _ctx(tmp_path, "bf16")
    with caplog.at_level(logging.WARNING, logger=L.__name__):
        enc = LLM2Vec(LLM2VecConfig(steps=2, batch_size=4, weights_dtype="bfloat16")).train(CORPUS, ctx)
    assert "weights_dtype='bfloat16' on the CPU" in caplog.text
    assert ctx.accounting["weights_dtype"] == "bfloat16" and "gradient_checkpointing" not in ctx.accounting
    assert [s for s, *_ in seen] == ["mntp", "mntp", "simcse", "simcse"]
    for _, base, lora, hidden in seen:
        assert base == {torch.bfloat16} and lora == {torch.float32} and hidden == torch.bfloat16
    assert {p.dtype for p in enc.model.parameters()} == {torch.bfloat16}
    v = enc.encode(TEXTS)
    assert v.dtype == np.float32 and np.isfinite(v).all()


def test_defaults_leave_the_record_as_it_was(tmp_path):
    ctx = _ctx(tmp_path, "d")
    LLM2Vec(LLM2VecConfig(steps=1, batch_size=4, stage="mntp")).train(CORPUS, ctx)
    assert "weights_dtype" not in ctx.accounting and "gradient_checkpointing" not in ctx.accounting


# ---- the bench --------------------------------------------------------------------------------------
sys.path.insert(0, str(REPO / "bench"))
import gpu_llm_mfu  # noqa: E402  (a bench script, not a package: importable once bench/ is on the path)


def test_datasheet_peaks_by_device_name():
    assert gpu_llm_mfu.datasheet_peak("NVIDIA H100 80GB HBM3") == ("H100", 989.0)
    assert gpu_llm_mfu.datasheet_peak("NVIDIA H100 PCIe") == ("H100 PCIe", 756.0)
    assert gpu_llm_mfu.datasheet_peak("NVIDIA H200") == ("H200", 989.0)
    assert gpu_llm_mfu.datasheet_peak("NVIDIA A100-SXM4-80GB") == ("A100", 312.0)
    assert gpu_llm_mfu.datasheet_peak("Some Future GPU") is None


@pytest.mark.slow
def test_bench_quick_runs_on_the_cpu(tmp_path):
    """``--quick`` on tiny-llama and a tiny random Llama shape: every section's row, FLOPs counted (more with
    the recomputation than without), MFU > 0, the JSON and Markdown written where asked."""
    assert gpu_llm_mfu.main(["--quick", "--model", "tiny-llama", "--model", "shape:tiny", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "gpu_llm_mfu.json").read_text())
    assert result["quick"] and not result["gpu"] and "NO GPU" in result["where"]
    assert [(r["model"], r["what"]) for r in result["rows"]] == [
        (m, w) for m in ("tiny-llama", "shape:tiny") for w in ("train mntp", "train simcse", "encode")
    ]
    for r in result["rows"]:
        assert r["mfu"] > 0 and r["tokens_per_s"] > 0 and r["sentences_per_s"] > 0
        if r["what"].startswith("train"):
            assert r["hw_flops_per_step"] > r["flops_per_step"] > 0 and r["steps_timed"] == 1
    assert "| tiny-llama |" in (tmp_path / "gpu_llm_mfu.md").read_text()
