"""ESimCSE's defining mechanisms: word repetition (order kept, only existing tokens doubled, at the
reference code's rate); the momentum encoder moves only by EMA (with m, not 1 - m) and gets no
gradient; the queue is FIFO, bounded, detached and filled with the momentum encoder's vectors of the
ORIGINAL sentences; the loss is InfoNCE at 0.05 over [repeated views | queue] with the positive on the
diagonal. Defaults pinned to the paper; the same build path a run takes (``ESimCSE.train``, the CLI)."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from benchbench_plugins.esimcse import (
    ESimCSE,
    ESimCSEConfig,
    ESimCSEObjective,
    esimcse_loss,
    repeat_at,
    repetition_positions,
)

from benchbench import TrainContext, tiny_bert
from benchbench.testing import check_method

TINY = "tiny-bert:16:1:2:32"
CORPUS = [
    f"sentence number {i} talks about topic {i % 5} with quite a few extra words to repeat {i * 7}" for i in range(24)
]


def _obj(queue_size=10, momentum=0.9, seed=0):
    torch.manual_seed(seed)
    enc = tiny_bert(16, 1, 2, 32, pooling="cls", max_seq_length=32, seed=seed)
    return ESimCSEObjective(enc, temperature=0.05, dup_rate=0.32, momentum=momentum, queue_size=queue_size)


def _batch(obj, items, seed=0):
    b = obj.collate(items, np.random.default_rng(seed))
    b.pop("n_tokens")
    return b


def _undouble(rep: list[int], orig: list[int]) -> int:
    """How many tokens of ``rep`` are in-place copies of their predecessor, asserting that ``rep`` is
    ``orig`` with some tokens doubled (order kept, nothing new)."""
    i = extra = 0
    for j, t in enumerate(rep):
        if i < len(orig) and t == orig[i]:
            i += 1
        else:
            assert j > 0 and t == rep[j - 1], (rep, orig)
            extra += 1
    assert i == len(orig)
    return extra


def test_defaults_are_the_papers():
    c = ESimCSEConfig()
    assert (c.batch_size, c.lr, c.temperature, c.max_seq_length, c.epochs) == (64, 3e-5, 0.05, 32, 1.0)
    assert (c.dup_rate, c.momentum) == (0.32, 0.995)
    assert c.queue_size == 160 and c.queue_size / c.batch_size == 2.5
    assert (c.pooling, c.mlp, c.steps) == ("cls", True, None)


def test_repeat_at_doubles_in_place_and_keeps_order():
    ids = [101, 7, 8, 9, 10, 102]
    assert repeat_at(ids, [1, 3]) == [101, 7, 7, 8, 9, 9, 10, 102]
    assert repeat_at(ids, []) == ids


@pytest.mark.parametrize("n", [3, 6, 7, 20, 40, 60])
def test_repetition_positions_follow_the_reference_rule(n):
    """k uniform in 0..min(10, int(0.32 n)) - 1 (upper bound excluded); positions never [CLS]/[SEP]."""
    rng = np.random.default_rng(0)
    draws = [repetition_positions(n, 0.32, rng) for _ in range(6000)]
    top = min(10, int(0.32 * n))
    counts = Counter(len(d) for d in draws)
    if top <= 0:
        assert set(counts) == {0}
        return
    assert set(counts) == set(range(top))  # every k below top, never top itself
    for k in range(top):
        assert abs(counts[k] / len(draws) - 1 / top) < 0.03
    for d in draws:
        assert d == sorted(set(d)) and all(1 <= p <= n - 2 for p in d)
    inner = Counter(p for d in draws for p in d)
    if top > 1:
        assert set(inner) == set(range(1, n - 1))  # any inner position can be chosen


def test_dup_rate_scales_the_number_of_repeats():
    rng = np.random.default_rng(0)
    mean = lambda rate: np.mean([len(repetition_positions(30, rate, rng)) for _ in range(3000)])  # noqa: E731
    assert mean(0.0) == 0
    assert mean(0.1) == pytest.approx(1.0, abs=0.1)  # int(3) -> k in {0, 1, 2}
    assert mean(0.32) == pytest.approx(4.0, abs=0.2)  # int(9.6) = 9 -> k in 0..8


def test_collate_views_are_originals_then_their_repetitions():
    obj = _obj()
    b = _batch(obj, CORPUS[:8])
    ids, mask = b["input_ids"], b["attention_mask"]
    tok = obj.encoder.tokenizer
    plain = tok([s.strip() for s in CORPUS[:8]], truncation=True, max_length=32)["input_ids"]
    extras = []
    for i in range(8):
        orig = ids[i][mask[i].bool()].tolist()
        rep = ids[8 + i][mask[8 + i].bool()].tolist()
        assert orig == plain[i]
        assert rep[0] == tok.cls_token_id and rep[-1] == tok.sep_token_id and rep.count(tok.sep_token_id) == 1
        extras.append(_undouble(rep, orig))
        assert extras[-1] < min(10, int(0.32 * len(orig)))
    assert any(extras)  # the repeated view is longer for some sentence: the length cue is broken


def test_momentum_encoder_moves_only_by_ema_with_m_not_1_minus_m():
    obj = _obj(momentum=0.9)
    obj.train()
    with torch.no_grad():
        for p in obj.momentum_encoder.parameters():
            p.add_(0.05 * torch.randn_like(p))
    old = {k: v.clone() for k, v in obj.momentum_encoder.named_parameters()}
    online = {k: v.detach().clone() for k, v in obj.encoder.named_parameters()}
    assert all(not p.requires_grad for p in obj.momentum_encoder.parameters())
    loss = obj(**_batch(obj, CORPUS[:4]))
    loss.backward()
    assert all(p.grad is None for p in obj.momentum_encoder.parameters())
    for k, p in obj.momentum_encoder.named_parameters():
        assert torch.allclose(p, 0.9 * old[k] + 0.1 * online[k], atol=1e-7), k
        if not torch.equal(old[k], online[k]):
            assert not torch.allclose(p, 0.1 * old[k] + 0.9 * online[k], atol=1e-7), k  # a swapped EMA shows
    # eval mode: the loss is computed, nothing moves or is enqueued
    obj.eval()
    before = {k: v.clone() for k, v in obj.momentum_encoder.named_parameters()}
    n = int(obj.queue_len)
    obj(**_batch(obj, CORPUS[4:8]))
    assert int(obj.queue_len) == n
    assert all(torch.equal(p, before[k]) for k, p in obj.momentum_encoder.named_parameters())


def test_queue_is_fifo_bounded_detached_and_holds_momentum_keys_of_the_originals():
    obj = _obj(queue_size=10, momentum=0.9)
    obj.train()
    with torch.no_grad():  # the momentum encoder differs from the online one: whose keys are queued shows
        for p in obj.momentum_encoder.parameters():
            p.add_(0.05 * torch.randn_like(p))
    expected = []
    for step in range(3):
        b = _batch(obj, CORPUS[4 * step : 4 * step + 4], seed=step)
        obj(**b)
        orig = (b["input_ids"][:4], b["attention_mask"][:4])
        keys = obj.keys(*orig)  # the momentum encoder as this forward left it, dropout off
        assert torch.equal(keys, obj.keys(*orig))  # deterministic in train mode: dropout off for keys
        with torch.no_grad():
            online = obj.mlp(obj.encoder.eval()(input_ids=orig[0], attention_mask=orig[1])["sentence_embedding"])
            repeated = obj.keys(b["input_ids"][4:], b["attention_mask"][4:])
        obj.encoder.train()
        expected.append(keys)
        q = obj.negatives()
        assert len(q) == min(10, 4 * (step + 1)) == int(obj.queue_len)
        assert torch.allclose(q, torch.cat(expected)[-10:])  # oldest first, the oldest dropped
        assert torch.allclose(q[-4:], keys) and not torch.allclose(q[-4:], online, atol=1e-4)
        assert not torch.allclose(q[-4:], repeated, atol=1e-4)
    assert not obj.queue.requires_grad and obj.queue.shape == (10, obj.encoder.dim)
    # the queue enters the loss as constants: its logits use the queued vectors, and no gradient reaches them
    b = _batch(obj, CORPUS[12:16], seed=9)
    q_before = obj.negatives().clone()
    n = 4
    torch.manual_seed(3)
    loss = obj(**b)
    torch.manual_seed(3)
    z = obj.mlp(obj.encoder(input_ids=b["input_ids"], attention_mask=b["attention_mask"])["sentence_embedding"])
    assert torch.allclose(loss, esimcse_loss(z[:n], z[n:], q_before, 0.05), atol=1e-6)
    assert not torch.allclose(loss, esimcse_loss(z[:n], z[n:], q_before[:0], 0.05), atol=1e-4)
    loss.backward()
    assert obj.queue.grad is None


def test_loss_is_infonce_at_005_with_the_positive_on_the_diagonal():
    g = torch.Generator().manual_seed(0)
    z1, z2, q = torch.randn(5, 8, generator=g), torch.randn(5, 8, generator=g), torch.randn(7, 8, generator=g)
    cos = lambda a, b: F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T  # noqa: E731
    logits = torch.cat([cos(z1, z2), cos(z1, q)], 1) / 0.05
    manual = -(logits.diag() - logits.logsumexp(1)).mean()
    assert torch.allclose(esimcse_loss(z1, z2, q, 0.05), manual, atol=1e-5)
    assert not torch.allclose(esimcse_loss(z1, z2, q, 0.07), manual, atol=1e-3)  # the temperature matters
    assert not torch.allclose(esimcse_loss(z1, z2.roll(1, 0), q, 0.05), manual, atol=1e-3)  # labels: diagonal
    # the queue only adds negatives (terms in the denominator)
    assert esimcse_loss(z1, z1, q, 0.05) > esimcse_loss(z1, z1, q[:0], 0.05)


def test_train_runs_the_ema_per_micro_batch_and_returns_the_bare_cls_encoder(tmp_path, monkeypatch):
    calls = []
    real = ESimCSEObjective.momentum_update

    def counted(self):
        calls.append(int(self.queue_len))
        real(self)

    monkeypatch.setattr(ESimCSEObjective, "momentum_update", counted)
    cfg = ESimCSEConfig(steps=3, batch_size=4, grad_accum=2, queue_size=10, momentum=0.9)
    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu")
    enc = ESimCSE(cfg).train(CORPUS, ctx)
    assert calls == [0, 4, 8, 10, 10, 10]  # one EMA per micro-batch (as the reference), queue full at 10
    assert ctx.accounting["esimcse_queue_filled"] == 10 and ctx.accounting["steps"] == 3
    assert type(enc).__name__ == "TransformerEncoder" and enc.pooling == "cls"  # the MLP is training-only
    assert enc.max_seq_length == 128  # the start's, not the training truncation (32)
    assert not any("momentum" in n for n, _ in enc.named_modules())


def test_cli_run_on_the_fixture_task(env, monkeypatch):
    from benchbench.cli.main import main

    monkeypatch.chdir(env)
    args = ["run", "--method", "esimcse", "--model", TINY, "--tasks", "sts-mini", "--steps", "2", "--batch-size", "4"]
    assert main([*args, "--set", "queue_size=6", "--output", "out", "--json"]) == 0
    rec = next(
        json.loads(p.read_text()) for p in (env / "out").rglob("*.json") if '"method": "esimcse"' in p.read_text()
    )
    assert rec["config"]["queue_size"] == 6 and rec["config"]["momentum"] == 0.995


def test_conformance():
    report = check_method(ESimCSE, overrides={"steps": 4, "batch_size": 4, "checkpoint_every": 2})
    assert "resume equality" in report["passed"], report


def test_registered(registry):
    assert registry.methods["esimcse"] is ESimCSE
