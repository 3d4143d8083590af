"""SimCSE++'s two ingredients (plugins/_contrastive.py) and the ``simcse-plus-plus`` method.

Off-dropout negatives: the negatives' pass really has every dropout off (hidden AND attention, which
transformers >= 4.48 reads from the attention module's own flag), keeps its gradient, leaves each
module's mode as it was, and the loss is -p_i + logsumexp(p_i, n_ij for j != i) with p from the two
dropout views and n from the off-dropout pass. DCL: per-dimension standardisation of each view with its
own batch statistics, the d x d cross-correlation with dimensions as rows of view 1, cross-entropy
toward the same dimension, temperature and weight as given. ``simcse`` keeps its result keys while
the options hold their defaults; ``simcse-plus-plus`` turns both on at the reference code's values,
through the build path a run takes."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from benchbench_plugins import simcse as simcse_mod
from benchbench_plugins._contrastive import dimension_contrastive_loss, dropout_off, off_dropout_infonce
from benchbench_plugins.simcse import SimCSE, SimCSEConfig, SimCSEObjective
from benchbench_plugins.simcse_plus_plus import SimCSEPlusPlus, SimCSEPlusPlusConfig

from benchbench import ConfigError, TrainContext, config_hash, tiny_bert
from benchbench.testing import check_method

TINY = "tiny-bert:16:1:2:32"
CORPUS = [f"sentence number {i} is about topic {i % 5} and has some more words {i * 3}" for i in range(24)]


def _encoder(hidden_p=0.1, attention_p=0.1, seed=0):
    enc = tiny_bert(16, 1, 2, 32, pooling="cls", max_seq_length=32, seed=seed)
    for name, m in enc.model.named_modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = attention_p if "attention.self" in name else hidden_p
    return enc


def _tok(enc, items=CORPUS[:6]):
    tok = dict(enc.tokenize(items))
    tok.pop("token_type_ids", None)
    return tok


def _cos(a, b):
    return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T


# ---- result keys ---------------------------------------------------------------------------------
def test_simcse_keeps_its_stored_result_key_while_the_ingredients_are_off():
    """The config of a stored record (leaderboards/results/simcse/.../0d6b36ec17ec) hashes as stored."""
    stored = {"batch_size": 64, "checkpoint_every": 1000, "epochs": 1.0, "eval_every": 125, "grad_accum": 1}
    stored |= {"lr": 5e-05, "max_grad_norm": 1.0, "max_seq_length": 32, "mlp": "train_and_test", "pooling": "cls"}
    stored |= {"select_on_stsb_dev": False, "steps": 200, "temperature": 0.05}
    assert config_hash(SimCSEConfig(**stored)) == "0d6b36ec17ec"
    assert config_hash(SimCSEConfig()) == "66fc78a9c641"  # the default config's key before the options existed
    keys = {config_hash(SimCSEConfig(**kw)) for kw in ({}, {"off_dropout_negatives": True}, {"dcl_weight": 0.1})}
    keys.add(config_hash(SimCSEConfig(dcl_temperature=10.0)))
    assert len(keys) == 4  # each option, once set, is in the key


def test_the_objectives_ingredients_are_off_by_default_at_the_reference_temperature():
    import inspect

    params = inspect.signature(SimCSEObjective).parameters
    got = {k: params[k].default for k in ("off_dropout_negatives", "dcl_weight", "dcl_temperature")}
    assert got == {"off_dropout_negatives": False, "dcl_weight": 0.0, "dcl_temperature": 5.0}


def test_simcse_plus_plus_defaults_are_the_reference_runs_and_all_hashed():
    c = SimCSEPlusPlusConfig()
    assert (c.off_dropout_negatives, c.dcl_weight, c.dcl_temperature) == (True, 0.1, 5.0)
    assert (c.batch_size, c.lr, c.temperature, c.max_seq_length, c.mlp, c.pooling) == (
        64,
        3e-5,
        0.05,
        32,
        "train_only",
        "cls",
    )
    assert (c.epochs, c.steps, c.max_grad_norm, c.select_on_stsb_dev) == (1.0, None, 1.0, False)
    base = SimCSEConfig()
    assert (base.off_dropout_negatives, base.dcl_weight, base.dcl_temperature) == (False, 0.0, 5.0)
    # defaults of the new method are in its key: changing them back to SimCSE's changes the key
    assert config_hash(SimCSEPlusPlusConfig(dcl_weight=0.0)) != config_hash(SimCSEPlusPlusConfig())
    assert config_hash(SimCSEPlusPlusConfig(off_dropout_negatives=False)) != config_hash(SimCSEPlusPlusConfig())


# ---- dropout off ---------------------------------------------------------------------------------
@pytest.mark.parametrize("hidden_p,attention_p", [(0.5, 0.0), (0.0, 0.5)])
def test_dropout_off_switches_off_hidden_and_attention_dropout_and_restores_each_mode(hidden_p, attention_p):
    enc = _encoder(hidden_p, attention_p)
    tok = _tok(enc)
    enc.train()
    enc.model.embeddings.eval()  # a submodule in eval mode before stays so after
    with torch.no_grad():
        a, b = (enc(**tok)["sentence_embedding"] for _ in range(2))
        assert not torch.allclose(a, b, atol=1e-4)  # dropout is on (the masks show)
        with dropout_off(enc):
            c, d = (enc(**tok)["sentence_embedding"] for _ in range(2))
        assert enc.training and enc.model.encoder.training and not enc.model.embeddings.training
        enc.eval()
        ref = enc(**tok)["sentence_embedding"]
    assert torch.equal(c, d) and torch.allclose(c, ref, atol=1e-6)


def test_negatives_are_the_dropout_free_vectors_with_gradient_after_the_views():
    enc = _encoder(0.3, 0.3)
    obj = SimCSEObjective(enc, 0.05, True, off_dropout_negatives=True).train()
    tok = _tok(enc)
    z0 = obj.negatives(**tok)
    assert z0.requires_grad  # the reference's negatives pass keeps its gradient
    obj.eval()
    with torch.no_grad():
        ref = obj.mlp(enc(**tok)["sentence_embedding"])
    obj.train()
    assert torch.allclose(z0, ref, atol=1e-6)
    assert obj.training and enc.training and all(m.training for m in enc.modules())


def test_forward_uses_dropout_views_for_positives_and_the_off_dropout_pass_for_negatives():
    enc = _encoder(0.3, 0.3)
    obj = SimCSEObjective(enc, 0.05, True, off_dropout_negatives=True).train()
    tok = _tok(enc)
    torch.manual_seed(7)
    loss = obj(**tok)
    torch.manual_seed(7)
    z1, z2 = obj.views(**tok)  # the same dropout masks as the forward's views (drawn first)
    with torch.no_grad():
        z0 = obj.negatives(**tok)
    p = F.cosine_similarity(z1, z2) / 0.05
    n = _cos(z0, z0) / 0.05
    n = n.masked_fill(torch.eye(len(p), dtype=torch.bool), float("-inf"))
    manual = (-p + torch.logsumexp(torch.cat([n, p[:, None]], 1), 1)).mean()
    assert torch.allclose(loss, manual, atol=1e-5)
    # neither plain SimCSE (negatives from the views) nor views-free positives
    plain = F.cross_entropy(_cos(z1, z2) / 0.05, torch.arange(len(p)))
    assert not torch.allclose(loss, plain, atol=1e-3)
    assert not torch.allclose(loss, off_dropout_infonce(z0, z0, z0, 0.05), atol=1e-3)
    # the gradient reaches the encoder through the negatives too: a loss of the negatives' pass alone
    enc.zero_grad()
    off_dropout_infonce(z1.detach(), z2.detach(), obj.negatives(**tok), 0.05).backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in enc.parameters())


def test_off_dropout_infonce_formula_sign_and_temperature():
    g = torch.Generator().manual_seed(0)
    z1, z2, z0 = (torch.randn(5, 8, generator=g) for _ in range(3))
    p = F.cosine_similarity(z1, z2) / 0.05
    n = (_cos(z0, z0) / 0.05).masked_fill(torch.eye(5, dtype=torch.bool), float("-inf"))
    manual = (-p + torch.logsumexp(torch.cat([n, p[:, None]], 1), 1)).mean()
    assert torch.allclose(off_dropout_infonce(z1, z2, z0, 0.05), manual, atol=1e-5)
    assert not torch.allclose(off_dropout_infonce(z1, z2, z0, 0.1), manual, atol=1e-3)
    # aligned positives lower the loss; the self-similarity of z0 (1/t, huge) is not among the terms
    assert off_dropout_infonce(z1, z1, z0, 0.05) < off_dropout_infonce(z1, z2, z0, 0.05)
    assert off_dropout_infonce(z1, z1, z0, 0.05) < 1.0


# ---- DCL -----------------------------------------------------------------------------------------
def _dcl_manual(z1, z2, t):
    n = len(z1)
    a = (z1 - z1.mean(0)) / torch.sqrt(z1.var(0, unbiased=False) + 1e-5)
    b = (z2 - z2.mean(0)) / torch.sqrt(z2.var(0, unbiased=False) + 1e-5)
    c = a.T @ b / n / t  # rows: dimensions of view 1
    return torch.stack([-c[k, k] + torch.logsumexp(c[k], 0) for k in range(c.shape[0])]).mean()


def test_dcl_is_dimension_wise_infonce_on_batch_standardised_views():
    g = torch.Generator().manual_seed(1)
    z1 = torch.randn(6, 4, generator=g) * torch.tensor([1.0, 3.0, 0.2, 5.0]) + 2.0
    z2 = torch.randn(6, 4, generator=g)
    got = dimension_contrastive_loss(z1, z2, 5.0)
    assert torch.allclose(got, _dcl_manual(z1, z2, 5.0), atol=1e-5)
    assert not torch.allclose(got, _dcl_manual(z2, z1, 5.0), atol=1e-4)  # the axis: view 1's dimensions are rows
    assert not torch.allclose(got, dimension_contrastive_loss(z1, z2, 10.0), atol=1e-4)
    # each view's own batch statistics: scaling/shifting a whole dimension of one view changes nothing
    assert torch.allclose(got, dimension_contrastive_loss(z1 * torch.tensor([7.0, 1, 1, 0.5]) - 3, z2, 5.0), atol=1e-4)
    # the sign: the same dimensions matched (z2 = z1) beat z2 = z1 with its dimensions permuted
    assert dimension_contrastive_loss(z1, z1, 5.0) < dimension_contrastive_loss(z1, z1[:, [1, 2, 3, 0]], 5.0)
    with pytest.raises(ConfigError, match="at least 2"):
        dimension_contrastive_loss(z1[:1], z2[:1], 5.0)
    assert torch.isfinite(dimension_contrastive_loss(z1[:2], z2[:2], 5.0))  # 2 rows: the smallest batch


def test_forward_adds_the_dcl_term_on_the_two_views_with_its_weight():
    enc = _encoder(0.3, 0.0)
    tok = _tok(enc)
    obj = SimCSEObjective(enc, 0.05, True, dcl_weight=0.1, dcl_temperature=5.0).train()
    torch.manual_seed(3)
    loss = obj(**tok)
    torch.manual_seed(3)
    z1, z2 = obj.views(**tok)
    base = F.cross_entropy(_cos(z1, z2) / 0.05, torch.arange(len(z1)))
    assert torch.allclose(loss, base + 0.1 * _dcl_manual(z1, z2, 5.0), atol=1e-5)
    assert not torch.allclose(loss, base + 0.1 * _dcl_manual(z1, z2, 10.0), atol=1e-4)
    obj.dcl_weight = 0.0
    torch.manual_seed(3)
    assert torch.allclose(obj(**tok), base, atol=1e-6)


def test_simcse_plus_plus_loss_is_both_terms():
    enc = _encoder(0.3, 0.3)
    tok = _tok(enc)
    obj = SimCSEObjective(enc, 0.05, True, off_dropout_negatives=True, dcl_weight=0.1, dcl_temperature=5.0).train()
    torch.manual_seed(4)
    loss = obj(**tok)
    torch.manual_seed(4)
    z1, z2 = obj.views(**tok)
    z0 = obj.negatives(**tok)
    assert torch.allclose(loss, off_dropout_infonce(z1, z2, z0, 0.05) + 0.1 * _dcl_manual(z1, z2, 5.0), atol=1e-5)


# ---- options and the build path ------------------------------------------------------------------
@pytest.mark.parametrize(
    "kw,option",
    [({"dcl_weight": -0.1}, "dcl_weight"), ({"dcl_temperature": 0.0}, "dcl_temperature")],
)
def test_bad_options_are_refused_naming_the_option(tmp_path, kw, option):
    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu")
    with pytest.raises(ConfigError, match=f"simcse-plus-plus: option '{option}'"):
        SimCSEPlusPlus(SimCSEPlusPlusConfig(steps=1, batch_size=4, **kw)).train(CORPUS, ctx)


def test_limits_of_the_ingredient_options_that_are_allowed():
    """Any positive DCL temperature (the reference's other script fixes 10; below 1 sharpens) and a
    zero weight (no DCL term) are taken; only a non-positive temperature or a negative weight is not."""
    from benchbench_plugins._contrastive import check_ingredients

    for t in (0.05, 0.5, 1.0, 10.0):
        check_ingredients("simcse", True, 0.1, t)
    check_ingredients("simcse", False, 0.0, 5.0)
    with pytest.raises(ConfigError, match="simcse: option 'dcl_temperature'"):
        check_ingredients("simcse", True, 0.1, -1.0)
    with pytest.raises(ConfigError, match="simcse: option 'off_dropout_negatives'"):
        check_ingredients("simcse", "yes", 0.1, 5.0)


def test_train_builds_the_objective_with_both_ingredients(tmp_path, monkeypatch):
    seen = []
    real_infonce, real_dcl = simcse_mod.off_dropout_infonce, simcse_mod.dimension_contrastive_loss

    def infonce(z1, z2, z0, t):
        seen.append(("infonce", t))
        return real_infonce(z1, z2, z0, t)

    def dcl(z1, z2, t):
        seen.append(("dcl", t))
        return real_dcl(z1, z2, t)

    monkeypatch.setattr(simcse_mod, "off_dropout_infonce", infonce)
    monkeypatch.setattr(simcse_mod, "dimension_contrastive_loss", dcl)
    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu")
    enc = SimCSEPlusPlus(SimCSEPlusPlusConfig(steps=2, batch_size=4)).train(CORPUS, ctx)
    assert seen == [("infonce", 0.05), ("dcl", 5.0)] * 2
    assert type(enc).__name__ == "TransformerEncoder"  # mlp="train_only": the saved encoder is the bare [CLS]
    seen.clear()
    SimCSE(SimCSEConfig(steps=1, batch_size=4)).train(CORPUS, ctx)
    assert seen == []  # plain simcse: neither ingredient


def test_cli_run_records_the_options(env, monkeypatch):
    from benchbench.cli.main import main

    monkeypatch.chdir(env)
    args = ["run", "--method", "simcse-plus-plus", "--model", TINY, "--tasks", "sts-mini", "--steps", "2"]
    assert main([*args, "--batch-size", "4", "--set", "dcl_weight=0.2", "--output", "out", "--json"]) == 0
    rec = next(
        json.loads(p.read_text())
        for p in (env / "out").rglob("*.json")
        if '"method": "simcse-plus-plus"' in p.read_text()
    )
    assert rec["config"]["dcl_weight"] == 0.2 and rec["config"]["off_dropout_negatives"] is True


def test_conformance():
    report = check_method(SimCSEPlusPlus, overrides={"steps": 4, "batch_size": 4, "checkpoint_every": 2})
    assert "resume equality" in report["passed"], report


def test_registered(registry):
    assert registry.methods["simcse-plus-plus"] is SimCSEPlusPlus
