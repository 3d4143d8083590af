"""The TSDAE paper's unsupervised baselines: each one's defining mechanism, and that each trains,
returns an encoder, and round-trips through a sentence-transformers folder."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from benchbench_plugins.bertflow import BertFlow, BertFlowConfig, FlowEncoder, Glow
from benchbench_plugins.ct import CT, CTConfig, CTObjective, segmented_lr
from benchbench_plugins.mlm import MLM, MLMConfig, MLMObjective, build_mlm_head
from benchbench_plugins.simcse import SimCSE, SimCSEConfig, SimCSEObjective

from benchbench.encode.models import TransformerEncoder, load_encoder, tiny_bert
from benchbench.train.context import TrainContext

TINY = "tiny-bert:16:1:2:32"
CORPUS = [f"sentence {i} talks about topic {i % 5} with some extra words number {i * 7}" for i in range(24)]


def _ctx(tmp_path):
    return TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu")


def _params(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def test_ct_keeps_two_distinct_encoders_and_returns_the_second(tmp_path, monkeypatch):

    import benchbench.train.fit as fit_mod

    seen = {}
    real = fit_mod.train_loop

    def spy(obj, *a, **k):
        seen["obj"] = obj
        return real(obj, *a, **k)

    monkeypatch.setattr(fit_mod, "train_loop", spy)
    start = _params(load_encoder(TINY).model)
    enc = CT(CTConfig(steps=4, batch_size=8, lr=1e-3)).train(CORPUS, _ctx(tmp_path))
    obj = seen["obj"]
    assert enc is obj.second and obj.first is not obj.second
    first, second = _params(obj.first.model), _params(obj.second.model)
    assert not {p.data_ptr() for p in obj.first.parameters()} & {p.data_ptr() for p in obj.second.parameters()}
    assert any(not torch.equal(first[k], start[k]) for k in start)  # both moved ...
    assert any(not torch.equal(second[k], start[k]) for k in start)
    assert any(not torch.equal(first[k], second[k]) for k in start)  # ... differently
    assert obj.second.pooling == "mean"


def test_ct_batches_one_positive_per_k_negatives_and_segmented_lr():
    obj = CTObjective(tiny_bert(16, 1, 2, 32), CORPUS, negatives=3)
    b = obj.collate(CORPUS[:8], np.random.default_rng(0))
    assert b["labels"].tolist() == [1.0, 0, 0, 0, 1.0, 0, 0, 0]
    assert torch.equal(b["a_input_ids"][0], b["b_input_ids"][0]) and not torch.equal(
        b["a_input_ids"][1], b["b_input_ids"][1]
    )
    f = segmented_lr(500)
    assert [f(s) for s in (0, 499, 500, 1000, 1500, 1999, 2000, 10**5)] == [1.0, 1.0, 0.8, 0.6, 0.4, 0.4, 0.2, 0.2]
    c = CTConfig()
    assert (c.lr, c.batch_size, c.negatives, c.pooling) == (1e-5, 8, 7, "mean")


def test_simcse_views_differ_only_by_dropout():
    obj = SimCSEObjective(tiny_bert(16, 1, 2, 32), temperature=0.05, mlp=True)
    tok = obj.collate(CORPUS[:6], np.random.default_rng(0))
    tok.pop("n_tokens")
    obj.eval()
    with torch.no_grad():
        z1, z2 = obj.views(**tok)
    assert torch.equal(z1, z2)  # same ids, no dropout: identical
    obj.train()
    with torch.no_grad():
        z1, z2 = obj.views(**tok)
    assert not torch.allclose(z1, z2)  # dropout on: the positive pair differs
    for m in obj.modules():  # training mode with every dropout switched off: identical again
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    with torch.no_grad():
        z1, z2 = obj.views(**tok)
    assert torch.equal(z1, z2)
    loss = obj(**tok)
    assert 0 < float(loss.detach()) < np.log(6) + 1


def test_simcse_in_batch_negatives_and_temperature():
    obj = SimCSEObjective(tiny_bert(16, 1, 2, 32), temperature=0.05, mlp=False)
    z = torch.nn.functional.normalize(torch.randn(4, 16), dim=-1)
    obj.views = lambda **_: (z, z)
    expected = torch.nn.functional.cross_entropy(z @ z.T / 0.05, torch.arange(4))
    assert torch.allclose(obj(), expected, atol=1e-5)
    c = SimCSEConfig()
    assert (c.batch_size, c.lr, c.temperature, c.pooling, c.steps) == (512, 5e-5, 0.05, "cls", None)


def test_simcse_trains_one_epoch_by_default(tmp_path):
    ctx = _ctx(tmp_path)
    enc = SimCSE(SimCSEConfig(batch_size=8, lr=1e-3)).train(CORPUS, ctx)
    assert ctx.accounting["steps"] == 3 and isinstance(enc, TransformerEncoder) and enc.pooling == "cls"


def test_bertflow_leaves_the_encoder_untouched_and_learns_the_flow(tmp_path):
    start = _params(load_encoder(TINY).model)
    ctx = _ctx(tmp_path)
    enc = BertFlow(BertFlowConfig(steps=30, batch_size=8, levels=2, depth=2)).train(CORPUS, ctx)
    assert isinstance(enc, FlowEncoder)
    after = _params(enc.model)
    assert all(torch.equal(after[k], start[k]) for k in start)
    curve = ctx.accounting["loss_curve"]
    assert curve[-1][1] < curve[0][1]  # the likelihood improved
    base = load_encoder(TINY, pooling="mean").encode(CORPUS[:4])
    assert not np.allclose(enc.encode(CORPUS[:4]), base)
    enc.save(tmp_path / "flow")
    again = load_encoder(str(tmp_path / "flow"))
    assert isinstance(again, FlowEncoder) and again.fingerprint == enc.fingerprint
    assert np.allclose(again.encode(CORPUS[:4]), enc.encode(CORPUS[:4]), atol=1e-5)


def test_glow_log_determinant_is_exact():
    flow = Glow(6, levels=2, depth=2, hidden=8, seed=3)
    for p in flow.parameters():  # leave the identity start
        p.data.add_(0.1 * torch.randn_like(p))
    flow.train()
    flow(torch.randn(16, 6))  # ActNorm initialisation
    flow.eval()
    u = torch.randn(1, 6)
    jac = torch.autograd.functional.jacobian(lambda x: flow(x)[0], u).reshape(6, 6)
    assert torch.allclose(flow(u)[1], torch.slogdet(jac)[1].reshape(1), atol=1e-4)
    assert float(flow(u)[1]) != 0.0  # a non-trivial Jacobian was checked


def test_mlm_masks_the_ratio_and_projects_only_masked_positions(tmp_path):
    enc = tiny_bert(16, 1, 2, 32, pooling="mean")
    head = build_mlm_head(enc, None)
    assert head.get_output_embeddings().weight is enc.model.embeddings.word_embeddings.weight
    obj = MLMObjective(enc, head, 0.15, whole_word=False)
    text = [" ".join(f"word{i}" for i in range(60))] * 20
    b = obj.collate(text, np.random.default_rng(0))
    b.pop("n_tokens")
    special = (b["input_ids"] == 101) | (b["input_ids"] == 102)
    chosen = (b["labels"] != -100).float().sum() / (~special).float().sum()
    assert abs(float(chosen) - 0.15) < 0.02
    assert (
        obj.collate(text[:2], np.random.default_rng(3))["labels"].tolist()
        == obj.collate(text[:2], np.random.default_rng(3))["labels"].tolist()
    )
    rows = []
    h = obj.head.register_forward_hook(lambda m, a, o: rows.append(a[0].shape[0]))
    obj(**b)
    h.remove()
    assert rows == [int((b["labels"] != -100).sum())]
    wwm = MLMObjective(enc, head, 0.15, whole_word=True)
    assert "labels" in wwm.collate(["unbelievably tokenised wordpieces here"] * 4, np.random.default_rng(0))


@pytest.mark.parametrize(
    "method",
    [
        MLM(MLMConfig(steps=3, lr=1e-3)),
        CT(CTConfig(steps=3, lr=1e-3)),
        SimCSE(SimCSEConfig(steps=2, batch_size=4, lr=1e-3)),
    ],
)
def test_each_method_trains_and_round_trips(method, tmp_path):
    ctx = _ctx(tmp_path)
    start = load_encoder(TINY, pooling=getattr(method.config, "pooling", None)).encode(CORPUS[:3])
    enc = method.train(CORPUS, ctx)
    assert ctx.accounting["steps"] == method.config.steps and ctx.accounting["examples"] > 0
    out = enc.encode(CORPUS[:3])
    assert not np.allclose(out, start)
    enc.save(tmp_path / "enc")
    assert np.allclose(load_encoder(str(tmp_path / "enc")).encode(CORPUS[:3]), out, atol=1e-5)


def test_training_monitor_sees_the_result_encoder_and_does_not_move_the_run(tmp_path):
    """A learning curve (ctx.monitor) evaluates the encoder the method would return (CT: the second)
    at the chosen steps; evaluating must not change the trained weights (dropout RNG restored, model
    back in training mode) and its time is not training time."""
    probe = CORPUS[:6]
    cfg = CTConfig(steps=5, batch_size=8, lr=1e-3)
    plain = CT(cfg).train(CORPUS, _ctx(tmp_path / "plain"))
    seen = []

    def monitor(step, encoder):
        seen.append((step, encoder))
        assert not encoder.training  # encode() switches to eval and back; the loop resumes training after
        encoder.encode(probe)
        torch.rand(3)  # draws from the global RNG; the run's dropout stream must not see it
        return {"norm": float(np.linalg.norm(encoder.encode(probe)))}

    ctx = _ctx(tmp_path / "monitored")
    ctx.monitor, ctx.monitor_every = monitor, 2
    watched = CT(cfg).train(CORPUS, ctx)
    assert [s for s, _ in seen] == [2, 4, 5]  # every 2 steps and the last one
    assert all(e is watched for _, e in seen)  # the second encoder, not the first
    assert [s for s, _ in ctx.accounting["monitor"]] == [2, 4, 5]
    assert all(set(d) == {"norm"} for _, d in ctx.accounting["monitor"])
    a, b = _params(plain.model), _params(watched.model)
    assert all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(Exception, match="monitor_every"):
        bad = _ctx(tmp_path / "bad")
        bad.monitor = monitor
        CT(cfg).train(CORPUS, bad)
