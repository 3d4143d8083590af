"""BSL's defining mechanism: the target changes only by EMA, never by gradients; the predictor is on the
online side only; the loss is symmetric; BatchNorm trains in train mode; views are drawn per step."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from benchbench_plugins.bsl import BSL, BSLConfig, BSLObjective, make_optimizer, predictor, symmetric_negative_cosine

from benchbench import TrainContext, tiny_bert

TINY = "tiny-bert:16:1:2:32"
CORPUS = [f"sentence {i} talks about topic {i % 5} with some extra words number {i * 7}" for i in range(24)]


class DropLast:
    """A two-view augmenter that records every call: view 1 drops the last word, view 2 the first."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def views(self, texts, rng, two_view=False):
        self.calls.append(list(texts))
        return [" ".join(t.split()[:-1]) for t in texts], [" ".join(t.split()[1:]) for t in texts]


def _obj(momentum=0.5, seed=0):
    torch.manual_seed(seed)
    enc = tiny_bert(16, 1, 2, 32, pooling="mean", seed=seed)
    return BSLObjective(enc, DropLast(), momentum, k=8, two_view=True)


def _batch(obj):
    b = obj.collate(CORPUS[:6], np.random.default_rng(0))
    b.pop("n_tokens")
    return b


def test_predictor_shape_and_batchnorm():
    q = predictor(16, 8)
    linears = [m for m in q if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(16, 128), (128, 128), (128, 16)]
    assert [type(m).__name__ for m in q] == ["Linear", "BatchNorm1d", "ReLU", "Linear", "BatchNorm1d", "ReLU", "Linear"]


def test_target_gets_no_gradient_and_moves_exactly_by_ema():
    obj = _obj(momentum=0.5)
    obj.train()
    # make the target differ from the online encoder, so the EMA is not trivially the identity
    with torch.no_grad():
        for p in obj.target.parameters():
            p.add_(0.01)
    old = {k: v.clone() for k, v in obj.target.state_dict().items()}
    assert all(not p.requires_grad for p in obj.target.parameters())
    opt = make_optimizer(obj, lr=1e-2)
    assert not any(p is q for g in opt.param_groups for p in g["params"] for q in obj.target.parameters())
    loss = obj(**_batch(obj))
    loss.backward()
    assert all(p.grad is None for p in obj.target.parameters())
    opt.step()  # the post-step hook applies one EMA update
    online = dict(obj.encoder.named_parameters())
    moved = 0
    for name, p in obj.target.named_parameters():
        expected = old[name].mul(0.5).add(online[name].detach(), alpha=0.5)
        assert torch.equal(p, expected), name
        moved += int(not torch.equal(p, old[name]))
    assert moved > 0
    opt.zero_grad()
    opt.step()  # a second step with no gradients: online unchanged, target keeps converging by EMA only
    for name, p in obj.target.named_parameters():
        assert torch.allclose(p, old[name].mul(0.5).add(online[name], alpha=0.5).mul(0.5).add(online[name], alpha=0.5))


def test_predictor_only_on_online_side():
    obj = _obj()
    obj.train()
    assert not any("predictor" in n for n, _ in obj.target.named_modules())
    b = _batch(obj)
    torch.manual_seed(1)
    loss = obj(**b)
    torch.manual_seed(1)  # same dropout masks: recompute by hand with the predictor on the online side only
    p1 = obj.predictor(obj.encoder(**b["view1"])["sentence_embedding"])
    p2 = obj.predictor(obj.encoder(**b["view2"])["sentence_embedding"])
    z1 = obj.target(**b["view1"])["sentence_embedding"]
    z2 = obj.target(**b["view2"])["sentence_embedding"]
    expected = -(F.cosine_similarity(p1, z2).mean() + F.cosine_similarity(p2, z1).mean())
    assert torch.allclose(loss, expected, atol=1e-6)


def test_loss_is_symmetric_in_the_views():
    g = torch.Generator().manual_seed(0)
    p1, p2, z1, z2 = (torch.randn(5, 8, generator=g) for _ in range(4))
    a = symmetric_negative_cosine(p1, p2, z1, z2)
    assert torch.allclose(a, symmetric_negative_cosine(p2, p1, z2, z1))
    # both directions count: dropping either half changes the value
    assert not torch.allclose(a, -2 * F.cosine_similarity(p1, z2).mean())
    assert not torch.allclose(a, -2 * F.cosine_similarity(p2, z1).mean())
    assert torch.allclose(symmetric_negative_cosine(z2, z1, z1, z2), torch.tensor(-2.0))
    obj = _obj()
    obj.eval()  # deterministic: swapping the views leaves the loss unchanged
    b = _batch(obj)
    assert torch.allclose(obj(**b), obj(view1=b["view2"], view2=b["view1"]), atol=1e-6)


def _train(tmp_path, monkeypatch, steps=3, grad_accum=1):
    aug = DropLast()
    method = BSL(BSLConfig(steps=steps, batch_size=4, grad_accum=grad_accum, momentum=0.9, max_seq_length=16))
    method.augmenter_override = aug
    modes, emas = [], []
    orig_bn = torch.nn.BatchNorm1d.forward
    orig_ema = BSLObjective.ema_update

    def bn_forward(self, x):
        modes.append(self.training)
        return orig_bn(self, x)

    def ema(self):
        emas.append(1)
        return orig_ema(self)

    monkeypatch.setattr(torch.nn.BatchNorm1d, "forward", bn_forward)
    monkeypatch.setattr(BSLObjective, "ema_update", ema)
    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu")
    enc = method.train(CORPUS, ctx)
    return enc, aug, modes, emas, ctx


def test_training_draws_views_per_step_batchnorm_train_mode_one_ema_per_update(tmp_path, monkeypatch):
    enc, aug, modes, emas, ctx = _train(tmp_path, monkeypatch, steps=3, grad_accum=2)
    assert len(aug.calls) == 6  # one call per micro-batch, with that micro-batch's sentences
    assert all(len(c) == 4 and set(c) <= set(CORPUS) for c in aug.calls)
    assert len({tuple(c) for c in aug.calls}) > 1
    assert modes and all(modes)  # the predictor's BatchNorm ran in train mode throughout
    assert len(emas) == 3  # once per optimizer step, not per micro-batch
    assert ctx.accounting["steps"] == 3
    assert not any("predictor" in n for n, _ in enc.named_modules())  # the online encoder alone comes back


def test_target_is_part_of_the_checkpointed_state():
    obj = _obj()
    keys = obj.state_dict().keys()
    assert any(k.startswith("target.") for k in keys) and any(k.startswith("predictor.") for k in keys)


def test_registered_and_general_corpus(registry):
    assert registry.methods["bsl"] is BSL and BSL.corpus == "general"
    for name in ("backtranslate", "synonym", "mlm", "nli-entail"):
        assert name in registry.augmenters


def test_single_view_plain_augmenter_and_two_view_error(tmp_path):
    method = BSL(BSLConfig(steps=1, batch_size=4, augmenter="word-delete", two_view=True))
    from benchbench.core.registry import load_registry

    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu", registry=load_registry())
    with pytest.raises(Exception, match="two_view=false"):
        method.train(CORPUS, ctx)
    method = BSL(BSLConfig(steps=1, batch_size=4, augmenter="word-delete", two_view=False, max_seq_length=16))
    assert method.train(CORPUS, ctx) is not None


def test_both_recipes_constants_are_pinned():
    """paper = BSL as written; reference = github.com/yanzhangnlp/BSL at cfacb3b (see plugins/bsl.py)."""
    from benchbench_plugins.bsl import RECIPES, reference_predictor, schedule

    assert BSLConfig().recipe == "paper" and BSLConfig().lr is None and BSLConfig().predictor_k is None
    p, r = RECIPES["paper"], RECIPES["reference"]
    assert (p["optimizer"], p["lr"], p["warmup"], p["schedule"], p["predictor_k"], p["predictor_stack"]) == (
        "adam",
        5e-4,
        0.0,
        "constant",
        8,
        1,
    )
    assert (p["loss_scale"], p["select_on_stsb_dev"]) == (1.0, False)
    assert (r["optimizer"], r["lr"], r["weight_decay"], r["warmup"], r["schedule"]) == (
        "adamw",
        1e-4,
        0.0,
        0.1,
        "linear",
    )
    assert (r["predictor_k"], r["predictor_stack"], r["loss_scale"], r["select_on_stsb_dev"]) == (10, 3, 2.0, True)
    q = reference_predictor(4)  # three MLPs 4 -> 40 -> 40 -> 4, BatchNorm only after the first layer
    assert len(q) == 3 and all(
        [type(m).__name__ for m in mlp] == ["Linear", "BatchNorm1d", "ReLU", "Linear", "ReLU", "Linear"] for mlp in q
    )
    assert (q[0][0].in_features, q[0][0].out_features, q[0][3].out_features, q[0][5].out_features) == (4, 40, 40, 4)
    w = torch.nn.Parameter(torch.zeros(1))
    lrs = []
    for recipe in ("paper", "reference"):
        opt = make_optimizer(
            type("O", (), {"parameters": lambda self: [w], "ema_update": lambda self: None})(), 1.0, recipe
        )
        sch = schedule(opt, recipe, 20)
        seen = []
        for _ in range(20):
            seen.append(opt.param_groups[0]["lr"])
            opt.step()
            sch.step()
        lrs.append(seen)
        assert type(opt).__name__ == ("Adam" if recipe == "paper" else "AdamW")
    assert lrs[0] == [1.0] * 20  # constant
    assert lrs[1][:3] == [0.0, 0.5, 1.0] and lrs[1][-1] == pytest.approx(1 / 18)  # 2 warm-up steps, linear decay


def test_reference_recipe_is_recorded_and_uses_its_predictor(tmp_path, monkeypatch):
    import benchbench_plugins.bsl as B

    monkeypatch.setattr(B, "_stsb_dev_selection", lambda obj, ctx, steps: None)  # no STS-B data in this test
    seen = {}
    real = B.BSLObjective.__init__

    def init(self, *a, **k):
        real(self, *a, **k)
        seen["predictor"], seen["scale"] = self.predictor, self.loss_scale

    monkeypatch.setattr(B.BSLObjective, "__init__", init)
    ctx = TrainContext(model=TINY, seed=1, output_dir=tmp_path, device="cpu", progress=False)
    m = BSL(BSLConfig(recipe="reference", steps=2, batch_size=4, augmenter="word-delete", two_view=False))
    m.augmenter_override = lambda texts, rng: [t[: max(1, len(t) // 2)] for t in texts]
    m.train([f"sentence number {i} is here" for i in range(8)], ctx)
    assert ctx.accounting["recipe"]["name"] == "reference" and ctx.accounting["recipe"]["lr"] == 1e-4
    assert len(seen["predictor"]) == 3 and seen["scale"] == 2.0
