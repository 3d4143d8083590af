"""Mirror-BERT's defining mechanisms: the second view has one span of 5 characters replaced by [MASK]
at a uniform position (the reference's rule, its quirks included), the first view is the sentence
itself, and the two views differ (mask and dropout); the loss is NT-Xent at temperature 0.04 with each
vector's mirror as its positive and the 2N - 2 others as negatives; drophead zeroes whole heads and
rescales the kept ones. Defaults pinned to the paper's script; the same build path a run takes
(``MirrorBERT.train``, the CLI)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from benchbench_plugins.mirror_bert import (
    MirrorBERT,
    MirrorBERTConfig,
    MirrorBERTObjective,
    drophead_hook,
    mask_span,
    nt_xent,
    self_attention_modules,
)

from benchbench import TrainContext, tiny_bert
from benchbench.testing import check_method

TINY = "tiny-bert:16:1:2:32"
CORPUS = [f"sentence number {i} talks about topic {i % 5} with some extra words {i * 7}" for i in range(24)]
LONG = "sphinx of black quartz, judge my vow at dawn today"  # no 5-character substring twice


def _obj(pooling="mean", seed=0):
    torch.manual_seed(seed)
    enc = tiny_bert(16, 1, 2, 32, pooling=pooling, max_seq_length=50, seed=seed)
    return MirrorBERTObjective(enc, temperature=0.04, span_mask=5)


def test_defaults_are_the_papers_script():
    c = MirrorBERTConfig()
    assert (c.batch_size, c.lr, c.weight_decay, c.epochs, c.max_seq_length) == (200, 2e-5, 0.01, 1.0, 50)
    assert (c.temperature, c.span_mask, c.dropout, c.drophead) == (0.04, 5, 0.1, 0.0)
    assert (c.pooling, c.max_sentences, c.max_grad_norm, c.steps) == ("mean", 10_000, 0.0, None)


def test_span_mask_replaces_exactly_five_characters_at_a_uniform_position():
    n = len(LONG)
    starts = []
    for seed in range(3000):
        ind = int(np.random.default_rng(seed).integers(n - 5))  # the draw mask_span makes
        out = mask_span(LONG, 5, np.random.default_rng(seed))
        assert out == LONG[:ind] + " [MASK] " + LONG[ind + 5 :]
        starts.append(ind)
    assert min(starts) == 0 and max(starts) == n - 6  # every start in [0, len - 5), never len - 5
    counts = np.bincount(starts, minlength=n - 5)
    assert counts.min() > 0 and counts.max() < 3 * counts.mean()


def test_span_mask_leaves_short_sentences_and_cuts_at_the_first_occurrence():
    rng = np.random.default_rng(0)
    assert mask_span("a short one", 5, rng) == "a short one"  # < 30 characters: unchanged (reference)
    assert mask_span("x" * 29, 5, rng) == "x" * 29
    assert mask_span(LONG, 0, rng) == LONG
    # the reference splits at the FIRST occurrence of the chosen substring
    s = "abcde-----abcde-----abcde-----abcde"
    outs = {mask_span(s, 5, np.random.default_rng(i)) for i in range(200)}
    assert all(len(o) == len(s) - 5 + len(" [MASK] ") for o in outs)
    assert " [MASK] -----abcde-----abcde-----abcde" in outs  # "abcde" drawn anywhere: cut at position 0


def test_collate_first_view_is_the_sentence_second_its_masked_copy():
    obj = _obj()
    items = [LONG, "tiny", CORPUS[3]]
    b = obj.collate(items, np.random.default_rng(0))
    tok = obj.encoder.tokenizer
    assert torch.equal(b["a_input_ids"], obj.encoder.tokenize(items)["input_ids"])
    mask_id = tok.mask_token_id
    a_ids = [r[m.bool()].tolist() for r, m in zip(b["a_input_ids"], b["a_attention_mask"])]
    b_ids = [r[m.bool()].tolist() for r, m in zip(b["b_input_ids"], b["b_attention_mask"])]
    assert all(mask_id not in x for x in a_ids)
    assert b_ids[0].count(mask_id) == 1 and b_ids[2].count(mask_id) == 1 and b_ids[0] != a_ids[0]
    assert b_ids[1] == a_ids[1]  # too short to mask: the two views differ by dropout only


def test_the_two_views_differ_by_dropout_even_when_unmasked():
    obj = _obj()
    b = obj.collate(["tiny", "also tiny"], np.random.default_rng(0))
    b.pop("n_tokens")
    obj.train()
    za, zb = obj.views(**b)
    assert not torch.allclose(za, zb)
    obj.eval()
    za, zb = obj.views(**b)
    assert torch.allclose(za, zb)


def test_forward_is_nt_xent_of_the_two_views_at_the_configured_temperature():
    obj = _obj()
    b = obj.collate(CORPUS[:6], np.random.default_rng(0))
    b.pop("n_tokens")
    obj.train()
    torch.manual_seed(1)
    loss = obj(**b)
    torch.manual_seed(1)
    assert torch.allclose(loss, nt_xent(*obj.views(**b), 0.04), atol=1e-6)


def test_nt_xent_positive_is_the_mirror_negatives_are_both_views_temperature_004():
    g = torch.Generator().manual_seed(0)
    z1, z2 = torch.randn(4, 8, generator=g), torch.randn(4, 8, generator=g)
    z = F.normalize(torch.cat([z1, z2]), dim=-1)
    sim = z @ z.T / 0.04
    manual = []
    for i in range(8):
        pos = (i + 4) % 8
        negs = [j for j in range(8) if j not in (i, pos)]
        manual.append(-(sim[i, pos] - torch.logsumexp(sim[i, [pos, *negs]], 0)))
    assert torch.allclose(nt_xent(z1, z2, 0.04), torch.stack(manual).mean(), atol=1e-5)
    assert not torch.allclose(nt_xent(z1, z2, 0.05), torch.stack(manual).mean(), atol=1e-3)
    assert not torch.allclose(nt_xent(z1, z2.roll(1, 0), 0.04), nt_xent(z1, z2, 0.04), atol=1e-3)
    assert torch.allclose(nt_xent(z1, z2, 0.04), nt_xent(z2, z1, 0.04), atol=1e-5)  # symmetric
    # matching mirrors of near-orthogonal vectors: a near-zero loss
    e = torch.eye(8)[:4] * 5
    assert nt_xent(e, e, 0.04) < 1e-6


def test_drophead_zeroes_whole_heads_and_rescales_the_rest():
    enc = tiny_bert(16, 1, 4, 32, max_seq_length=16, seed=0)
    (block,) = self_attention_modules(enc.model)
    hook = drophead_hook(0.5)
    out = torch.randn(64, 5, 16)
    block.train()
    torch.manual_seed(0)
    (got,) = hook(block, None, (out,))
    heads = got.view(64, 5, 4, 4)
    ref = out.view(64, 5, 4, 4)
    for s in range(64):
        kept = [h for h in range(4) if not torch.all(heads[s, :, h] == 0)]
        for h in range(4):
            if h in kept:
                assert torch.allclose(heads[s, :, h], ref[s, :, h] * 4 / len(kept))
            else:
                assert torch.all(heads[s, :, h] == 0)
    assert torch.isfinite(got).all()  # a sentence that kept no head gets zeros, not NaN
    block.eval()
    assert hook(block, None, (out,))[0] is out


def test_train_samples_10k_drops_the_last_batch_and_removes_drophead_hooks(tmp_path):
    cfg = MirrorBERTConfig(batch_size=4, max_sentences=10, drophead=0.2, dropout=0.0)
    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu")
    enc = MirrorBERT(cfg).train(CORPUS, ctx)
    assert ctx.accounting["mirror_bert_sentences"] == 10 and ctx.accounting["steps"] == 2  # floor(10 / 4)
    assert all(not m._forward_hooks for m in self_attention_modules(enc.model))
    assert all(m.p == 0.0 for m in enc.model.modules() if isinstance(m, torch.nn.Dropout))
    assert enc.pooling == "mean" and enc.max_seq_length == 128  # the start's length, not the training 50


def test_drophead_needs_attention_blocks(tmp_path, monkeypatch):
    import benchbench_plugins.mirror_bert as P

    monkeypatch.setattr(P, "self_attention_modules", lambda model: [])
    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu")
    with pytest.raises(P.ConfigError, match="drophead"):
        MirrorBERT(MirrorBERTConfig(steps=1, batch_size=4, drophead=0.2)).train(CORPUS, ctx)


def test_cli_run_on_the_fixture_task(env, monkeypatch):
    from benchbench.cli.main import main

    monkeypatch.chdir(env)
    args = ["run", "--method", "mirror-bert", "--model", TINY, "--tasks", "sts-mini", "--batch-size", "4"]
    assert main([*args, "--set", "drophead=0.2", "--output", "out", "--json"]) == 0
    rec = next(
        json.loads(p.read_text()) for p in (env / "out").rglob("*.json") if '"method": "mirror-bert"' in p.read_text()
    )
    assert rec["config"]["drophead"] == 0.2 and rec["config"]["temperature"] == 0.04


def test_conformance():
    report = check_method(MirrorBERT, overrides={"steps": 4, "batch_size": 4, "checkpoint_every": 2})
    assert "resume equality" in report["passed"], report


def test_registered(registry):
    assert registry.methods["mirror-bert"] is MirrorBERT
