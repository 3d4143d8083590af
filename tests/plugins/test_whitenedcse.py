"""WhitenedCSE's mechanisms: each shuffled group of dimensions comes out white (covariance identity,
mean zero) over its block of rows while different groups stay correlated; every block draws its own
permutation; the whitening matrix carries no gradient (the reference's leaf covariance); the blocks
are the reference's thirds of the rows in its order (the views of a sentence adjacent) or one per
view; the loss is the sum over the positive views of InfoNCE against the first view. Defaults pinned
to the reference run; the build path a run takes (``WhitenedCSE.train``, the CLI)."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from benchbench_plugins import whitenedcse as mod
from benchbench_plugins.whitenedcse import (
    WhitenedCSE,
    WhitenedCSEConfig,
    WhitenedCSEObjective,
    shuffled_group_whitening,
    whiten_groups,
    whitenedcse_loss,
)

from benchbench import ConfigError, TrainContext, tiny_bert
from benchbench.testing import check_method

TINY = "tiny-bert:16:1:2:32"
CORPUS = [f"sentence number {i} is about topic {i % 5} and has some more words {i * 3}" for i in range(24)]
OVERRIDES = {"num_groups": 8, "batch_size": 4}


def _correlated(n=60, d=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(n, d, generator=g)
    mix = torch.eye(d) + 0.8 * torch.randn(d, d, generator=g)  # every dimension correlated with the others
    return (base @ mix) * torch.linspace(0.3, 4.0, d) + 5.0


def _cov(x):
    x = x - x.mean(0)
    return x.T @ x / len(x)


def test_the_objectives_own_defaults_are_the_references():
    import inspect

    got = {k: v.default for k, v in inspect.signature(WhitenedCSEObjective).parameters.items() if k != "encoder"}
    want = {"temperature": 0.05, "num_pos": 3, "num_groups": 128, "shuffle": True}
    assert got == want | {"whiten_rows": "reference", "whiten_eps": 0.0}


def test_defaults_are_the_reference_runs():
    c = WhitenedCSEConfig()
    assert (c.batch_size, c.lr, c.temperature, c.max_seq_length, c.epochs) == (128, 1e-5, 0.05, 32, 1.0)
    assert (c.num_pos, c.shuffle, c.whiten_rows, c.pooling) == (3, True, "reference", "cls")
    assert c.num_groups is None  # the reference's 128 where the start allows it (``default_groups``)
    assert c.whiten_eps == 1e-5  # benchbench's departure (the reference has none): see the plugin's table
    assert (c.max_grad_norm, c.steps, c.grad_accum, c.checkpoint_every) == (1.0, None, 1, 1000)


def _shape(hidden: int):
    from benchbench.encode.sizes import Shape

    return Shape(hidden, 2, 2, 4 * hidden, 30522, 512)


@pytest.mark.parametrize(
    "hidden,groups",
    [(768, 128), (384, 128), (1024, 128), (32, 8), (16, 4), (128, 32), (312, 104), (5, 1)],
)
def test_num_groups_defaults_to_the_most_groups_up_to_128_of_at_least_3_dimensions(hidden, groups):
    """BERT-base's 768: the reference's 128 groups of 6; all-MiniLM-L6-v2's 384: 128 groups of 3 (what the
    stored records ran); tiny-bert's 32: 8 groups of 4, never groups of 1 or 2."""
    assert mod.default_groups(hidden) == groups
    assert WhitenedCSE.model_defaults(WhitenedCSEConfig(), _shape(hidden)) == {"num_groups": groups}
    assert WhitenedCSE(WhitenedCSEConfig()).num_groups(hidden) == groups  # the build path's rule is the same
    assert hidden % groups == 0 and (hidden // groups >= 3 or groups == 1)
    assert WhitenedCSE.model_defaults(WhitenedCSEConfig(num_groups=2), _shape(hidden)) == {}  # explicit wins


def test_a_default_run_keeps_the_key_of_the_stored_minilm_records():
    """The stored all-MiniLM-L6-v2 records ran the old default 128: the resolved default hashes as they do,
    on BERT-base too; on tiny-bert it is the explicit 8's key."""
    from benchbench.core.methods import config_hash, resolve_model_defaults

    for hidden, value in ((384, 128), (768, 128), (32, 8)):
        resolved = resolve_model_defaults(WhitenedCSE, WhitenedCSEConfig(), _shape(hidden))
        assert config_hash(resolved) == config_hash(WhitenedCSEConfig(num_groups=value))


def test_the_studies_stored_whitenedcse_and_infocse_cells_keep_their_keys():
    """A study's row key resolves the defaults against its base model as the runner does: the stored
    post-training-minilm cells (all-MiniLM-L6-v2: the old default 128 groups; InfoCSE's explicit 3 layers)
    are still the rows' cells."""
    from pathlib import Path

    from benchbench.run.study import load_study

    st = load_study("post-training-minilm")
    got = {r.name: st.record_hash(r) for r in st.rows() if r.method in ("whitenedcse", "infocse")}
    assert got["whitenedcse (step 0)"] == "f031a87b183d"
    assert got["infocse (step 0)"] == "d553640d5b25" and got["infocse"] == "9c8e228a824f"
    root = Path(__file__).resolve().parents[2] / "leaderboards" / "studies" / "post-training-minilm"
    stored = {p.parent.parent.name for p in root.glob("whitenedcse/*/unsupervised/*/seed1/twitterpara.json")}
    assert stored == {"f031a87b183d"}


def test_table_labels_name_a_model_relative_option_where_it_differs_from_the_papers_value():
    """A row's label lists the options that differ from the method's defaults as the paper states them
    (BERT-base's 128 groups, 6 frozen layers): the stored all-MiniLM-L6-v2 rows keep their labels."""
    from benchbench.report.aggregate import method_defaults, row_label

    def label(method, **config):
        return row_label({"method": method, "config": config}, method_defaults(method))

    assert label("whitenedcse", num_groups=128, steps=0) == "whitenedcse steps=0"
    assert label("whitenedcse", num_groups=8) == "whitenedcse num_groups=8"
    assert label("infocse", skip_from=6) == "infocse" and label("infocse", skip_from=3) == "infocse skip_from=3"


@pytest.mark.parametrize("groups", [1, 3, 4])
def test_each_shuffled_group_is_white_and_the_groups_stay_correlated(groups):
    x = _correlated()
    perm = torch.randperm(12, generator=torch.Generator().manual_seed(1))
    out = whiten_groups(x, groups, perm)
    assert torch.allclose(out.mean(0), torch.zeros(12), atol=1e-4)
    k = 12 // groups
    for g in range(groups):
        dims = perm[g * k : (g + 1) * k]  # the original dimensions that formed group g
        assert torch.allclose(_cov(out[:, dims]), torch.eye(k), atol=1e-2)
        assert torch.allclose(out[:, dims], whiten_groups(x[:, dims], 1), atol=1e-3)  # exactly those dimensions
    if groups > 1:  # whitening is per group: across groups the covariance is not the identity
        assert (_cov(out) - torch.eye(12)).abs().max() > 0.1
        # and a different permutation groups other dimensions together
        other = torch.randperm(12, generator=torch.Generator().manual_seed(2))
        assert (_cov(out[:, other[:k]]) - torch.eye(k)).abs().max() > 0.05
    # the original order is restored: without shuffling, groups are consecutive dimensions
    plain = whiten_groups(x, groups)
    assert torch.allclose(_cov(plain[:, :k]), torch.eye(k), atol=1e-2)


def test_zca_not_just_any_whitening():
    """W = U S^-1/2 U^T (symmetric, ZCA): the whitened vectors stay as close to the centred input as a
    whitening can; PCA whitening (U S^-1/2) would rotate them."""
    x = _correlated(d=4)
    out = whiten_groups(x, 1)
    xc = x - x.mean(0)
    s, u = torch.linalg.eigh(_cov(x))
    assert torch.allclose(out, xc @ u @ torch.diag(s.rsqrt()) @ u.T, atol=1e-4)
    assert not torch.allclose(out, xc @ u @ torch.diag(s.rsqrt()), atol=1e-2)


def test_every_block_is_whitened_alone_with_its_own_permutation():
    x = torch.cat([_correlated(seed=s) * (s + 1) for s in range(3)])  # three blocks of 60 rows
    torch.manual_seed(9)
    perms = [torch.randperm(12) for _ in range(3)]
    torch.manual_seed(9)
    out = shuffled_group_whitening(x, 3, 4, shuffle=True)
    for b in range(3):
        rows = slice(60 * b, 60 * (b + 1))
        assert torch.allclose(out[rows], whiten_groups(x[rows], 4, perms[b]), atol=1e-5)
    assert not torch.allclose(out[60:120], whiten_groups(x[60:120], 4, perms[0]), atol=1e-3)
    # whitening over all rows at once would not make each block white
    whole = whiten_groups(x, 4, perms[0])
    assert not torch.allclose(whole[:60], out[:60], atol=1e-3)
    torch.manual_seed(9)
    fixed = shuffled_group_whitening(x, 3, 4, shuffle=False)
    assert torch.allclose(fixed[:60], whiten_groups(x[:60], 4), atol=1e-5)


def test_the_last_block_takes_the_remainder_and_one_group_draws_no_permutation():
    x = torch.cat([_correlated(seed=s) for s in range(3)] + [_correlated(n=1, seed=7)])  # 181 rows
    torch.manual_seed(2)
    perms = [torch.randperm(12) for _ in range(3)]
    torch.manual_seed(2)
    out = shuffled_group_whitening(x, 3, 4)
    assert out.shape == x.shape  # blocks of 60, 60 and 61 rows (the reference's x[2 * batch:])
    assert torch.allclose(out[120:], whiten_groups(x[120:], 4, perms[2]), atol=1e-5)
    # one group: no shuffling and no draw from the generator (the reference's shuffle=False for G=1)
    state = torch.get_rng_state()
    shuffled_group_whitening(x, 3, 1, shuffle=True)
    assert torch.equal(state, torch.get_rng_state())
    shuffled_group_whitening(x, 3, 2, shuffle=True)
    assert not torch.equal(state, torch.get_rng_state())


def test_the_whitening_matrix_carries_no_gradient():
    x = _correlated(d=6).requires_grad_()
    w = torch.randn(60, 6, generator=torch.Generator().manual_seed(3))
    (whiten_groups(x, 2) * w).sum().backward()
    # expected: centring and a constant W per group
    xd = x.detach().clone().requires_grad_()
    g = (xd - xd.mean(0)).reshape(60, 2, 3).transpose(0, 1)
    with torch.no_grad():
        s, u = torch.linalg.eigh(g.transpose(1, 2) @ g / 60)
        wm = u @ torch.diag_embed(s.rsqrt()) @ u.transpose(1, 2)
    ((g @ wm).transpose(0, 1).reshape(60, 6) * w).sum().backward()
    assert torch.allclose(x.grad, xd.grad, atol=1e-5)
    # with the gradient through the eigendecomposition it would differ
    xe = x.detach().clone().requires_grad_()
    ge = (xe - xe.mean(0)).reshape(60, 2, 3).transpose(0, 1)
    s, u = torch.linalg.eigh(ge.transpose(1, 2) @ ge / 60)
    ((ge @ (u @ torch.diag_embed(s.rsqrt()) @ u.transpose(1, 2))).transpose(0, 1).reshape(60, 6) * w).sum().backward()
    assert not torch.allclose(x.grad, xe.grad, atol=1e-3)


def _objective(whiten_rows="reference", dropout=0.0, num_pos=3):
    enc = tiny_bert(16, 1, 2, 32, pooling="cls", max_seq_length=32, seed=0)
    for m in enc.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = dropout
    return WhitenedCSEObjective(enc, 0.05, num_pos=num_pos, num_groups=8, whiten_rows=whiten_rows).train()


@pytest.mark.parametrize("rows", ["reference", "view"])
def test_which_rows_share_a_whitening(rows, monkeypatch):
    seen = []
    real = mod.shuffled_group_whitening

    def spy(x, blocks, groups, shuffle, eps):
        seen.append((x.detach().clone(), blocks, groups, shuffle, eps))
        return real(x, blocks, groups, shuffle, eps)

    monkeypatch.setattr(mod, "shuffled_group_whitening", spy)
    obj = _objective(rows)
    n = 6
    tok = obj.encoder.tokenize(CORPUS[:n])
    obj(input_ids=tok["input_ids"], attention_mask=tok["attention_mask"])
    ((x, blocks, groups, shuffle, eps),) = seen
    assert (blocks, groups, shuffle, eps) == (3, 8, True, 0.0) and x.shape == (3 * n, 16)
    if rows == "reference":  # the views of one sentence adjacent: rows 3i, 3i+1, 3i+2 (dropout 0: equal)
        assert torch.allclose(x[0], x[1], atol=1e-6) and torch.allclose(x[1], x[2], atol=1e-6)
        assert not torch.allclose(x[2], x[3], atol=1e-3)
    else:  # one block per view: rows v*n + i
        assert torch.allclose(x[0], x[n], atol=1e-6) and torch.allclose(x[0], x[2 * n], atol=1e-6)
        assert not torch.allclose(x[0], x[1], atol=1e-3)


@pytest.mark.parametrize("rows", ["reference", "view"])
def test_views_differ_by_dropout_and_come_back_in_sentence_order(rows, monkeypatch):
    obj = _objective(rows, dropout=0.3)
    tok = obj.encoder.tokenize(CORPUS[:6])
    z = obj.views(tok["input_ids"], tok["attention_mask"])
    assert z.shape == (3, 6, 16)
    assert not torch.allclose(z[0], z[1], atol=1e-4) and not torch.allclose(z[1], z[2], atol=1e-4)
    # row i of every view is sentence i after the whitening's row reordering: with the whitening made
    # the identity and dropout 0, every view equals tanh(dense(h_i)) row by row
    monkeypatch.setattr(mod, "shuffled_group_whitening", lambda x, *a: x)
    obj = _objective(rows, dropout=0.0)
    z = obj.views(tok["input_ids"], tok["attention_mask"])
    h = obj.encoder(input_ids=tok["input_ids"], attention_mask=tok["attention_mask"])["sentence_embedding"]
    for v in range(3):
        assert torch.allclose(z[v], torch.tanh(obj.dense(h)), atol=1e-5)


@pytest.mark.parametrize("rows", ["reference", "view"])
def test_every_view_masks_the_padding(rows, monkeypatch):
    """Sentences of different lengths in one batch: each view of a padded sentence is that sentence
    encoded alone (its attention mask repeated with the ids, not dropped or widened)."""
    monkeypatch.setattr(mod, "shuffled_group_whitening", lambda x, *a: x)
    obj = _objective(rows, dropout=0.0)
    items = ["a short one.", CORPUS[0] + " and then a much longer tail of many more words to pad the others"]
    tok = obj.encoder.tokenize(items)
    assert not bool(tok["attention_mask"].all())  # there is padding to mask
    z = obj.views(tok["input_ids"], tok["attention_mask"])
    for i, s in enumerate(items):
        alone = obj.encoder.tokenize([s])
        h = obj.encoder(input_ids=alone["input_ids"], attention_mask=alone["attention_mask"])["sentence_embedding"]
        for v in range(3):
            assert torch.allclose(z[v, i], torch.tanh(obj.dense(h[0])), atol=1e-5), (i, v)


def test_eps_keeps_a_constant_dimension_finite_and_leaves_the_others_nearly_as_they_were():
    """all-MiniLM-L6-v2's [CLS] has a dimension constant over a batch: without eps W is infinite."""
    x = _correlated(d=6)
    x[:, 4] = 0.7
    assert not torch.isfinite(whiten_groups(x, 2)).all()
    out = whiten_groups(x, 2, eps=1e-5)
    assert torch.isfinite(out).all()
    assert torch.allclose(out[:, :3], whiten_groups(x[:, :3], 1), atol=1e-3)  # a regular group: ~unchanged
    assert not torch.allclose(out[:, :3], whiten_groups(x[:, :3], 1, eps=1.0), atol=1e-2)  # eps is what it says
    torch.manual_seed(0)
    a = shuffled_group_whitening(x.repeat(3, 1), 3, 2, True, 1e-5)
    torch.manual_seed(0)
    b = shuffled_group_whitening(x.repeat(3, 1), 3, 2, True, 1.0)
    assert torch.isfinite(a).all() and not torch.allclose(a, b, atol=1e-2)  # passed down to every block


def test_train_passes_whiten_eps_down(tmp_path, monkeypatch):
    seen = []
    real = mod.shuffled_group_whitening
    monkeypatch.setattr(mod, "shuffled_group_whitening", lambda x, *a: seen.append(a) or real(x, *a))
    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu")
    WhitenedCSE(WhitenedCSEConfig(steps=1, whiten_eps=0.25, whiten_rows="view", **OVERRIDES)).train(CORPUS, ctx)
    assert seen == [(3, 8, True, 0.25)]
    with pytest.raises(ConfigError, match="option 'whiten_eps'"):
        WhitenedCSE(WhitenedCSEConfig(whiten_eps=-1.0, **OVERRIDES))._check(16)


def test_a_singular_group_covariance_gives_nan_as_in_the_reference():
    """No epsilon (the reference's W = U S^-1/2 U^T): rows that repeat make a group's covariance
    singular; Method.train refuses batches no larger than a group for that reason."""
    x = _correlated(n=2, d=4).repeat(3, 1)
    assert torch.isnan(whiten_groups(x, 1)).any() or torch.isinf(whiten_groups(x, 1)).any()


def test_loss_is_the_sum_over_positive_views_against_the_first():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(3, 5, 8, generator=g)
    cos = lambda a, b: F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T  # noqa: E731
    ce = lambda a, b: F.cross_entropy(cos(a, b) / 0.05, torch.arange(5))  # noqa: E731
    assert torch.allclose(whitenedcse_loss(z, 0.05), ce(z[0], z[1]) + ce(z[0], z[2]), atol=1e-5)
    assert not torch.allclose(whitenedcse_loss(z, 0.05), ce(z[1], z[0]) + ce(z[1], z[2]), atol=1e-3)
    assert not torch.allclose(whitenedcse_loss(z, 0.1), ce(z[0], z[1]) + ce(z[0], z[2]), atol=1e-3)
    assert torch.allclose(whitenedcse_loss(z[:2], 0.05), ce(z[0], z[1]), atol=1e-5)


def test_forward_is_whitening_then_dense_tanh_then_the_loss():
    obj = _objective(dropout=0.3)
    n = 12
    tok = obj.encoder.tokenize(CORPUS[:n])
    ids, mask = tok["input_ids"], tok["attention_mask"]
    torch.manual_seed(4)
    loss = obj(input_ids=ids, attention_mask=mask)
    torch.manual_seed(4)  # the same dropout masks, then the same permutations
    h = obj.encoder(input_ids=ids.repeat(3, 1), attention_mask=mask.repeat(3, 1))["sentence_embedding"]
    inter = h.view(3, n, 16).transpose(0, 1).reshape(3 * n, 16)  # the reference's order: views adjacent
    white = shuffled_group_whitening(inter, 3, 8, True)
    z = torch.tanh(obj.dense(white)).view(n, 3, 16).transpose(0, 1)
    assert torch.allclose(loss, whitenedcse_loss(z, 0.05), atol=1e-4)
    # dense before the whitening, or no whitening, gives another loss
    z_plain = torch.tanh(obj.dense(inter)).view(n, 3, 16).transpose(0, 1)
    assert not torch.allclose(loss, whitenedcse_loss(z_plain, 0.05), atol=1e-3)


@pytest.mark.parametrize(
    "kw,option",
    [
        ({"num_groups": 5}, "num_groups"),
        ({"num_groups": 8, "batch_size": 2}, "batch_size"),
        ({"num_groups": 8, "whiten_rows": "rows"}, "whiten_rows"),
        ({"num_groups": 8, "num_pos": 1}, "num_pos"),
    ],
)
def test_bad_options_are_refused_naming_the_option(tmp_path, kw, option):
    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu")
    with pytest.raises(ConfigError, match=f"whitenedcse: option '{option}'"):
        WhitenedCSE(WhitenedCSEConfig(**{"steps": 1, "batch_size": 4, **kw})).train(CORPUS, ctx)


def test_a_too_small_batch_is_refused_naming_the_dimensions_per_group():
    """The message gives the whole number of dimensions per group ("2", not "2.0")."""
    with pytest.raises(ConfigError, match=r"dimensions per group \(2\): a group's covariance"):
        WhitenedCSE(WhitenedCSEConfig(num_groups=8, batch_size=2))._check(16)


def test_checkpoint_interval_is_not_in_the_result_key():
    from benchbench import config_hash

    assert config_hash(WhitenedCSEConfig(checkpoint_every=7)) == config_hash(WhitenedCSEConfig())
    assert config_hash(WhitenedCSEConfig(batch_size=7)) != config_hash(WhitenedCSEConfig())


def test_limits_of_the_options_that_are_allowed():
    ok = dict(num_groups=8, batch_size=4)
    WhitenedCSE(WhitenedCSEConfig(**ok, num_pos=2))._check(16)  # two views: one positive
    WhitenedCSE(WhitenedCSEConfig(num_groups=1, batch_size=17))._check(16)  # one group of all 16
    WhitenedCSE(WhitenedCSEConfig(**ok, whiten_eps=0.0))._check(16)  # the reference's (no epsilon)
    with pytest.raises(ConfigError, match="option 'temperature'"):
        WhitenedCSE(WhitenedCSEConfig(**ok, temperature=0.0))._check(16)
    with pytest.raises(ConfigError, match="option 'num_groups'"):
        WhitenedCSE(WhitenedCSEConfig(num_groups=0, batch_size=4))._check(16)


@pytest.mark.parametrize("init_range,std", [(0.5, 0.5), (None, 0.02)])
def test_the_head_dense_is_initialised_as_the_models_own_layers(init_range, std):
    """The reference's head is a BertModel layer: weights N(0, initializer_range) (BERT's 0.02 when
    the model's config names none), bias 0."""
    from types import SimpleNamespace

    config = SimpleNamespace() if init_range is None else SimpleNamespace(initializer_range=init_range)
    enc = SimpleNamespace(dim=64, model=SimpleNamespace(config=config), device="cpu", max_seq_length=32)
    torch.manual_seed(0)
    dense = WhitenedCSEObjective(enc, num_groups=8).dense
    w = dense.weight.detach()
    assert abs(float(w.std()) - std) < 0.1 * std and abs(float(w.mean())) < 0.1 * std
    assert torch.equal(dense.bias, torch.zeros(64))


def test_collate_counts_the_tokens_of_every_view():
    obj = _objective()
    b = obj.collate(CORPUS[:5], None)
    assert b["n_tokens"] == 3 * int(b["attention_mask"].sum()) and set(b) == {"input_ids", "attention_mask", "n_tokens"}


def test_train_returns_the_bare_cls_encoder_at_the_start_length(tmp_path):
    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu")
    enc = WhitenedCSE(WhitenedCSEConfig(steps=2, **OVERRIDES)).train(CORPUS, ctx)
    assert type(enc).__name__ == "TransformerEncoder" and enc.pooling == "cls"
    assert enc.max_seq_length == 128 and ctx.accounting["steps"] == 2


def test_cli_run_on_tiny_bert_with_the_defaults(env, monkeypatch):
    """``--model tiny-bert`` (hidden size 32) with no option set: 8 groups of 4, named and hashed in the record."""
    from benchbench.cli.main import main
    from benchbench.core.methods import config_hash

    monkeypatch.chdir(env)
    args = ["run", "--method", "whitenedcse", "--model", "tiny-bert", "--tasks", "sts-mini", "--steps", "2"]
    assert main([*args, "--output", "out", "--json"]) == 0
    rec = next(json.loads(p.read_text()) for p in (env / "out").rglob("sts-mini.json"))
    assert rec["config"]["num_groups"] == 8 and rec["train"]["num_groups"] == 8
    assert rec["config_hash"] == config_hash(WhitenedCSEConfig(steps=2, num_groups=8))


def test_cli_run_on_the_fixture_task(env, monkeypatch):
    from benchbench.cli.main import main

    monkeypatch.chdir(env)
    args = ["run", "--method", "whitenedcse", "--model", TINY, "--tasks", "sts-mini", "--steps", "2"]
    assert main([*args, "--batch-size", "4", "--set", "num_groups=8", "--output", "out", "--json"]) == 0
    rec = next(
        json.loads(p.read_text()) for p in (env / "out").rglob("*.json") if '"method": "whitenedcse"' in p.read_text()
    )
    assert rec["config"]["num_groups"] == 8 and rec["config"]["num_pos"] == 3


def test_conformance():
    report = check_method(WhitenedCSE, overrides={"steps": 4, "checkpoint_every": 2, **OVERRIDES})
    assert "resume equality" in report["passed"], report


def test_registered(registry):
    assert registry.methods["whitenedcse"] is WhitenedCSE
