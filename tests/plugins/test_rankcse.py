"""RankCSE's mechanisms: the student's similarity lists (both dropout views, SimCSE's MLP on [CLS], rows
interleaved (sentence, view)) are trained by InfoNCE + ``beta`` x a consistency term between the two
views' lists + ``gamma`` x a listwise distillation of the TEACHERS' lists ``cos(t_i, t_j) / tau2``
(first teacher ``alpha``, second ``1 - alpha``; eval mode, no gradient): ListNet without the diagonal,
ListMLE (Plackett-Luce over the teacher's order, ties broken by the batch's own shuffle). The teachers
are trained by the harness (``train_method`` under a task: reused, recorded with their config hash and
store path); the student's init does not depend on them; a step-0 row trains none. Equality with the
reference's own code when its mirror is here (bench/fidelity_rankcse.py). Defaults pinned to
``run_rankcse.sh``; the build path a run takes."""

from __future__ import annotations

import copy
import functools
import inspect
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from benchbench_plugins import rankcse as mod
from benchbench_plugins.rankcse import (
    RankCSE,
    RankCSEConfig,
    RankCSEObjective,
    consistency_loss,
    listmle,
    listnet,
    parse_teacher_set,
)
from helpers import lrs_over

from benchbench import ConfigError, TrainContext, config_hash, load_encoder, model_label_of, tiny_bert
from benchbench.testing import check_method

TINY = "tiny-bert:16:1:2:32"
CORPUS = [f"sentence number {i} is about topic {i % 5} and has some more words {i * 3}" for i in range(24)]
# every third sentence cut to a few words: each batch of 6 holds padding, so the attention masks matter
RAGGED = [s if i % 3 else " ".join(s.split()[: 2 + i % 4]) for i, s in enumerate(CORPUS)]
ONE_TEACHER = {"teachers": ["simcse"], "teacher_set": "simcse.steps=2,simcse.batch_size=4", "batch_size": 4}


@functools.lru_cache(maxsize=8)
def _loaded(seed: int):
    return tiny_bert(16, 2, 2, 32, pooling="cls", max_seq_length=64, seed=seed)


def _encoder(dropout=0.0, seed=0, spread=None):
    enc = _loaded(seed).clone()
    enc.model.config._attn_implementation = "eager"
    if spread:  # at BERT's init every [CLS] cosine is ~1: redraw the matrices so the lists spread
        with torch.no_grad():
            g = torch.Generator().manual_seed(seed)
            for p in enc.model.parameters():
                if p.dim() == 2:
                    p.copy_(torch.randn(p.shape, generator=g) * spread)
    for m in enc.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = dropout
    return enc


def _objective(dropout=0.0, **kw):
    teachers = [_encoder(seed=5, spread=0.5), _encoder(seed=6, spread=0.5)]
    torch.manual_seed(0)
    args = {"weights": [0.3, 0.7], "temperature": 0.1, "tau2": 0.2, "beta": 0.6, "gamma": 0.4, **kw}
    return RankCSEObjective(_encoder(dropout), teachers, **args).train()


def _batch(obj, n=6, seed=0, items=None):
    b = obj.collate(items or RAGGED[:n], np.random.default_rng(seed))
    b.pop("n_tokens")
    assert (b["attention_mask"] == 0).any() or items
    return b


# ---- defaults -------------------------------------------------------------------------------------
def test_defaults_are_the_run_scripts():
    """run_rankcse.sh: batch 128, lr 3e-5, 1 epoch, max length 32, temp 0.05, tau2 0.05, listmle,
    alpha 0.33, beta 1, gamma 1, teachers DiffCSE (first) then SimCSE, [CLS] with the MLP at training only."""
    c = RankCSEConfig()
    assert (c.steps, c.epochs, c.batch_size, c.lr, c.max_seq_length) == (None, 1.0, 128, 3e-5, 32)
    # the consistency term is the paper's JS divergence: the community code's Divergence contradicts the paper
    # and did not produce its numbers (the authors' code is not public)
    assert (c.temperature, c.tau2, c.distillation, c.consistency) == (0.05, 0.05, "listmle", "js")
    assert (c.alpha, c.beta, c.gamma) == (0.33, 1.0, 1.0)
    assert c.teachers == ["diffcse", "simcse"] and c.teacher_set == ""
    assert (c.pooling, c.grad_accum, c.max_grad_norm) == ("cls", 1, 1.0)
    got = {k: v.default for k, v in inspect.signature(RankCSEObjective).parameters.items() if v.default is not v.empty}
    assert got == {
        "temperature": 0.05,
        "tau2": 0.05,
        "distillation": "listmle",
        "consistency": "js",
        "beta": 1.0,
        "gamma": 1.0,
    }
    assert mod.EPS == 1e-7


def test_the_speed_knob_is_not_in_the_result_key_the_teachers_are():
    assert config_hash(RankCSEConfig(checkpoint_every=7)) == config_hash(RankCSEConfig())
    assert config_hash(RankCSEConfig(teachers=["simcse"])) != config_hash(RankCSEConfig())
    assert config_hash(RankCSEConfig(teacher_set="simcse.steps=3")) != config_hash(RankCSEConfig())


# ---- the three terms ------------------------------------------------------------------------------
def _lists(n=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, n, generator=g) * 3, torch.randn(n, n, generator=g) * 3


def test_listnet_is_the_cross_entropy_of_the_top_one_distributions_without_the_diagonal():
    teacher, student = _lists()
    want = 0.0
    for i in range(5):
        js = [j for j in range(5) if j != i]
        q = np.exp(teacher[i, js].numpy()) / np.exp(teacher[i, js].numpy()).sum()
        logp = student[i, js].numpy() - np.log(np.exp(student[i, js].numpy()).sum())
        want -= (q * logp).sum()
    assert listnet(teacher, student).item() == pytest.approx(want / 5, rel=1e-5)
    eye = torch.eye(5, dtype=torch.bool)
    moved = listnet(teacher.masked_fill(eye, 50.0), student.masked_fill(eye, -50.0)).item()
    assert moved == pytest.approx(want / 5, rel=1e-5)  # the diagonal plays no part
    assert listnet(student, teacher).item() != pytest.approx(want / 5, rel=1e-2)  # teacher is the target


def test_listmle_is_the_plackett_luce_likelihood_of_the_teachers_order():
    teacher, student = _lists(seed=1)
    want = 0.0
    for i in range(5):
        s = student[i, torch.argsort(teacher[i], descending=True)].double().numpy()
        want += sum(np.log(np.exp(s[k:]).sum()) - s[k] for k in range(5))
    perm = torch.tensor([3, 0, 4, 1, 2])
    assert listmle(teacher, student, perm).item() == pytest.approx(want / 5, rel=1e-5)
    assert listmle(teacher, student, torch.arange(5)).item() == pytest.approx(want / 5, rel=1e-5)  # no ties
    assert listmle(student, teacher, perm).item() != pytest.approx(want / 5, rel=1e-2)
    # a tie in the teacher's list is broken by the batch's shuffle: two shuffles, two orders
    tied = teacher.clone()
    tied[:, 1] = tied[:, 0]
    a, b = listmle(tied, student, torch.tensor([0, 1, 2, 3, 4])), listmle(tied, student, torch.tensor([1, 0, 2, 3, 4]))
    assert a.item() != pytest.approx(b.item(), rel=1e-4)


def test_listmle_is_stable_at_the_scores_a_low_temperature_gives():
    """cos / 0.02 reaches 50: exp(50 + 50) overflows float32; the row's max is taken out first (then the
    reference's 1e-7 is added to sums of exp(s - max), as there)."""
    teacher, student = _lists(seed=3)
    student = 40.0 + student.abs() * 3  # scores 40-60
    want = 0.0
    for i in range(5):
        s = student[i, torch.argsort(teacher[i], descending=True)].double().numpy()
        want += sum(np.log(np.exp(s[k:] - s.max()).sum() + 1e-7) - (s[k] - s.max()) for k in range(5))
    got = listmle(teacher, student, torch.arange(5))
    assert torch.isfinite(got) and got.item() == pytest.approx(want / 5, rel=1e-5)


def test_consistency_js_is_the_jensen_shannon_divergence_and_reference_minus_the_mean_entropy():
    from scipy.spatial.distance import jensenshannon

    a, b = _lists(seed=2)
    p, q = a.softmax(-1), b.softmax(-1)
    js = np.mean([jensenshannon(p[i].numpy(), q[i].numpy()) ** 2 for i in range(5)])
    assert consistency_loss(p, q, "js").item() == pytest.approx(js, rel=1e-4)
    assert consistency_loss(p, p, "js").item() == pytest.approx(0.0, abs=1e-6)
    entropy = lambda d: -(d * d.log()).sum(-1).mean().item()  # noqa: E731
    want = -(entropy(p) + entropy(q)) / 2 - 1e-7
    assert consistency_loss(p, q, "reference").item() == pytest.approx(want, rel=1e-6, abs=1e-9)


def test_the_reference_consistency_is_minus_the_mean_entropy_minus_1e_7_to_the_last_bit():
    """In float64 the reference's constant (1e-7 per row, from its clamped mixture) is resolved: its sign
    matters to the loss's value (curves, the chance level), not to its gradient."""
    a, b = _lists(seed=4)
    p, q = a.double().softmax(-1), b.double().softmax(-1)
    entropy = lambda d: -(d * d.log()).sum(-1).mean().item()  # noqa: E731
    got = consistency_loss(p, q, "reference").item()
    assert got == pytest.approx(-(entropy(p) + entropy(q)) / 2 - 1e-7, abs=1e-12)


def test_teacher_weights_and_teachers_must_pair_up():
    obj = _objective()
    obj.weights = [1.0]
    b = _batch(obj)
    with pytest.raises(ValueError):
        obj.teacher_scores({k: v for k, v in b.items() if k.startswith("t")})


def test_a_tokenizer_without_token_type_ids_is_served():
    """RoBERTa-like tokenizers give no ``token_type_ids``: the forward runs without them, as BERT's zeros."""
    obj = _objective()
    b = _batch(obj)
    with_types = obj(**b).item()
    b.pop("token_type_ids")
    assert obj(**b).item() == pytest.approx(with_types, abs=1e-6)


def test_teacher_scores_are_the_weighted_cosine_lists_at_tau2_in_eval_mode_without_gradient():
    obj = _objective()
    for t in obj.teachers:  # dropout the teachers must not use
        for m in t.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.5
    b = _batch(obj)
    got = obj.teacher_scores({k: v for k, v in b.items() if k.startswith("t")})
    zs = [torch.from_numpy(t.encode(RAGGED[:6])) for t in obj.teachers]
    lists = [F.cosine_similarity(z[:, None], z[None], dim=-1) / 0.2 for z in zs]
    assert torch.allclose(got, 0.3 * lists[0] + 0.7 * lists[1], atol=1e-5)
    assert not torch.allclose(got, 0.7 * lists[0] + 0.3 * lists[1], atol=1e-3)  # the first teacher gets alpha
    assert not got.requires_grad and all(t.training is False for t in obj.teachers)
    assert all(not p.requires_grad for p in obj.teachers.parameters())


def _by_hand(obj, b):
    """InfoNCE + beta x consistency + gamma x distillation, transcribed from the reference's
    ``cl_forward`` on the same weights: its layout (batch, 2 views, length) flattened to one pass."""
    n, width = b["input_ids"].shape
    two = {k: torch.stack([b[k], b[k]], 1).view(-1, width) for k in ("input_ids", "attention_mask", "token_type_ids")}
    z = obj.mlp(obj.encoder(**two)["sentence_embedding"]).view(n, 2, -1)
    z1, z2 = z[:, 0], z[:, 1]
    sim = F.cosine_similarity(z1[:, None], z2[None], dim=-1) / obj.temperature
    info = F.cross_entropy(sim, torch.arange(n))
    teacher = obj.teacher_scores({k: v for k, v in b.items() if k.startswith("t")})
    kd = listnet(teacher, sim) if obj.distillation == "listnet" else listmle(teacher, sim, b["perm"])
    sim21 = F.cosine_similarity(z2[:, None], z1[None], dim=-1) / obj.temperature
    p, q = sim.softmax(-1).clamp(min=1e-7), sim21.softmax(-1).clamp(min=1e-7)
    return info + obj.beta * consistency_loss(p, q, obj.consistency) + obj.gamma * kd


@pytest.mark.parametrize("distillation,consistency", [("listmle", "reference"), ("listnet", "js")])
def test_equal_to_a_transcription_of_the_references_cl_forward_over_three_sgd_steps(distillation, consistency):
    """Dropout 0.2 on both sides, the same torch RNG state before each: the two views differ, so the
    consistency term and the direction of each list are exercised."""
    ours = _objective(dropout=0.2, distillation=distillation, consistency=consistency)
    ref = copy.deepcopy(ours)
    opts = [torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.1) for m in (ours, ref)]
    for step in range(3):
        b = _batch(ours, seed=step, items=RAGGED[step * 6 : (step + 1) * 6])
        torch.manual_seed(10 + step)
        loss_ours = ours(**b)
        torch.manual_seed(10 + step)
        loss_ref = _by_hand(ref, b)
        assert abs(loss_ours.item() - loss_ref.item()) < 1e-5
        for opt, loss in zip(opts, (loss_ours, loss_ref), strict=True):
            opt.zero_grad()
            loss.backward()
        pairs = list(zip(ours.parameters(), ref.parameters(), strict=True))
        assert sum(p.grad is not None for p, _ in pairs) > 20
        for p, q in pairs:
            assert (p.grad is None) == (q.grad is None)
            if p.grad is not None:
                assert torch.allclose(p.grad, q.grad, atol=1e-5)
        assert all(p.grad is None for p in ours.teachers.parameters())  # the teachers never learn
        for opt in opts:
            opt.step()
        assert max((p - q).abs().max().item() for p, q in pairs) < 1e-5
    start = _objective(distillation=distillation, consistency=consistency)
    assert not torch.allclose(ours.mlp[0].weight, start.mlp[0].weight)  # the steps trained


@pytest.mark.parametrize("term", ["beta", "gamma"])
def test_each_weight_scales_its_own_term(term):
    # the reference's consistency: without dropout the two views are one, so the JS divergence would be 0
    # and beta would scale nothing
    b = _batch(_objective())
    losses = {w: _objective(consistency="reference", **{term: w})(**b).item() for w in (0.0, 1.0, 2.0)}
    assert losses[2.0] - losses[1.0] == pytest.approx(losses[1.0] - losses[0.0], rel=1e-4)
    assert abs(losses[1.0] - losses[0.0]) > 1e-3
    other = "gamma" if term == "beta" else "beta"
    zero_both = _objective(consistency="reference", **{term: 0.0, other: 0.0})(**b).item()
    b_cl = _objective(consistency="reference", **{term: 1.0, other: 0.0})(**b).item()
    assert b_cl - zero_both == pytest.approx(losses[1.0] - losses[0.0], rel=1e-4)  # the term is its own


def test_the_views_are_two_dropout_passes_interleaved_in_one_forward():
    obj = _objective(dropout=0.3)
    seen = []
    obj.encoder.register_forward_hook(lambda m, a, k, out: seen.append(k["input_ids"]), with_kwargs=True)
    b = _batch(obj)
    obj(**b)
    (ids,) = seen
    assert torch.equal(ids, b["input_ids"].repeat_interleave(2, 0))  # rows (i, v) at 2i + v, one pass
    torch.manual_seed(0)
    z = obj.mlp(
        obj.encoder(input_ids=ids, attention_mask=b["attention_mask"].repeat_interleave(2, 0))["sentence_embedding"]
    )
    assert not torch.allclose(z[0], z[1], atol=1e-4)  # the two views of a sentence differ by dropout


def test_collate_cuts_the_teachers_text_at_the_training_length_and_draws_the_shuffle_from_the_rng():
    obj = _objective()
    obj.encoder.train_max_seq_length = 8
    long = ["word " * 40] * 3 + RAGGED[:3]
    b = obj.collate(long, np.random.default_rng(3))
    assert b["input_ids"].shape[1] == 8 and b["t0_input_ids"].shape[1] == 8 and b["t1_input_ids"].shape[1] == 8
    assert b["n_tokens"] == 2 * int(b["attention_mask"].sum())
    assert sorted(b["perm"].tolist()) == list(range(6))
    again = obj.collate(long, np.random.default_rng(3))["perm"]
    assert torch.equal(b["perm"], again)
    assert any(not torch.equal(obj.collate(long, np.random.default_rng(s))["perm"], again) for s in range(4, 8))


# ---- options and the build path --------------------------------------------------------------------
@pytest.mark.parametrize(
    "kw,option",
    [
        ({"temperature": 0.0}, "'temperature'"),
        ({"tau2": -1.0}, "'tau2'"),
        ({"distillation": "listwise"}, "'distillation'"),
        ({"consistency": "kl"}, "'consistency'"),
        ({"alpha": 1.5}, "'alpha'"),
        ({"alpha": -0.1}, "'alpha'"),
        ({"batch_size": 1}, "'batch_size'"),
        ({"teachers": []}, "'teachers'"),
        ({"teachers": ["simcse", "diffcse", "ct"]}, "'teachers'"),
        ({"teachers": ["simcse", "simcse"]}, "'teachers'"),
        ({"teachers": ["rankcse"]}, "'teachers'"),
    ],
)
def test_bad_options_are_refused_naming_the_option(tmp_path, kw, option):
    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu")
    with pytest.raises(ConfigError, match=f"rankcse: option {option}"):
        RankCSE(RankCSEConfig(**{"steps": 1, "batch_size": 4, **kw})).train(CORPUS, ctx)


def test_limits_of_the_options_that_are_allowed():
    assert RankCSE(RankCSEConfig(alpha=0.0, batch_size=2))._check() == [0.0, 1.0]
    assert RankCSE(RankCSEConfig(alpha=1.0))._check() == [1.0, 0.0]
    assert RankCSE(RankCSEConfig(teachers=["simcse"], alpha=0.2))._check() == [1.0]  # alpha: two teachers only


def test_teacher_set_parses_per_teacher_and_names_a_mistake():
    got = parse_teacher_set(" diffcse.generator=/x/y , simcse.steps=2,simcse.mlp=train_only", ["diffcse", "simcse"])
    assert got == {"diffcse": {"generator": "/x/y"}, "simcse": {"steps": "2", "mlp": "train_only"}}
    assert parse_teacher_set("", ["simcse"]) == {"simcse": {}}
    with pytest.raises(ConfigError, match=r"teacher_set names 'ct', which is not a teacher"):
        parse_teacher_set("ct.steps=2", ["simcse"])
    for bad in ("simcse.steps", "steps=2", "simcse.=2"):
        with pytest.raises(ConfigError, match="expected METHOD.OPTION=VALUE"):
            parse_teacher_set(bad, ["simcse"])


@pytest.mark.parametrize("distillation", ["listnet", "listmle"])
@pytest.mark.parametrize("consistency", ["reference", "js"])
def test_the_chance_level_is_the_loss_when_every_candidate_looks_alike(distillation, consistency):
    b = 6
    cfg = RankCSEConfig(batch_size=b, distillation=distillation, consistency=consistency, beta=0.7, gamma=0.3)
    flat = torch.zeros(b, b)
    teacher, _ = _lists(b)
    p = flat.softmax(-1)
    kd = listnet(teacher, flat) if distillation == "listnet" else listmle(teacher, flat, torch.arange(b))
    loss = F.cross_entropy(flat, torch.arange(b)) + 0.7 * consistency_loss(p, p, consistency) + 0.3 * kd
    assert RankCSE(cfg).loss_chance(None) == pytest.approx(loss.item(), abs=1e-5)


def _caught(tmp_path, monkeypatch, **kw) -> dict:
    """What ``RankCSE.train`` hands to ``fit`` (training skipped; teachers trained without a task)."""
    from benchbench.core.registry import get_registry

    caught = {}
    monkeypatch.setattr(mod, "fit", lambda m, obj, items, ctx, **k: caught.update(k, obj=obj, ctx=ctx) or obj)
    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu", registry=get_registry())
    RankCSE(RankCSEConfig(**{**ONE_TEACHER, **kw})).train(CORPUS, ctx)
    return caught


def test_adamw_without_weight_decay_on_the_student_linear_decay_to_zero(tmp_path, monkeypatch):
    caught = _caught(tmp_path, monkeypatch, steps=10, lr=1e-3)
    obj = caught["obj"]
    opt = caught["make_optimizer"](obj)
    (group,) = opt.param_groups
    assert group["lr"] == 1e-3 and group["weight_decay"] == 0.0 and isinstance(opt, torch.optim.AdamW)
    trained = {id(p) for p in group["params"]}
    assert trained == {id(p) for p in [*obj.encoder.parameters(), *obj.mlp.parameters()]}
    assert not trained & {id(p) for p in obj.teachers.parameters()} and len(obj.teachers) == 1
    lrs = lrs_over(opt, caught["make_scheduler"](opt), 10)
    assert lrs == pytest.approx([1e-3 * (1 - s / 10) for s in range(10)])
    assert caught["loop"].steps == 10 and caught["loop"].batch_size == 4 and caught["loop"].max_grad_norm == 1.0


@pytest.mark.parametrize("grad_accum,steps", [(1, 6), (2, 3)])
def test_the_default_budget_is_one_epoch_over_the_corpus(tmp_path, monkeypatch, grad_accum, steps):
    caught = _caught(tmp_path, monkeypatch, grad_accum=grad_accum)  # 24 sentences, batch 4, 1 epoch
    assert caught["loop"].steps == steps and caught["loop"].grad_accum == grad_accum


def test_train_builds_the_objective_from_the_options_with_the_saved_teachers(tmp_path, monkeypatch):
    caught = _caught(
        tmp_path, monkeypatch, steps=2, temperature=0.2, tau2=0.3, beta=0.4, gamma=0.6, distillation="listnet"
    )
    obj, ctx = caught["obj"], caught["ctx"]
    assert (obj.temperature, obj.tau2, obj.beta, obj.gamma) == (0.2, 0.3, 0.4, 0.6)
    assert (obj.distillation, obj.consistency, obj.weights) == ("listnet", "js", [1.0])
    assert obj.encoder.train_max_seq_length == 32 and obj.encoder.pooling == "cls"
    assert isinstance(obj.mlp[1], torch.nn.Tanh)
    saved = load_encoder(str(tmp_path / "teachers" / "simcse" / "encoder"))
    assert all(torch.equal(a, b) for a, b in zip(obj.teachers[0].state_dict().values(), saved.state_dict().values()))
    (t,) = ctx.accounting["teachers"]
    assert t["method"] == "simcse" and t["path"] == "teachers/simcse/encoder" and t["reused"] is False
    assert t["model"] == model_label_of(TINY)
    from benchbench_plugins.simcse import SimCSEConfig

    assert t["config_hash"] == config_hash(SimCSEConfig(steps=2, batch_size=4))
    assert "abs_path" not in t


def test_the_students_init_does_not_depend_on_the_teachers_training(tmp_path, monkeypatch):
    a = _caught(tmp_path / "a", monkeypatch, steps=2)["obj"]
    b = _caught(tmp_path / "b", monkeypatch, steps=2, teacher_set="simcse.steps=3,simcse.batch_size=4")["obj"]
    assert not all(torch.equal(x, y) for x, y in zip(a.teachers.parameters(), b.teachers.parameters()))
    assert torch.equal(a.mlp[0].weight, b.mlp[0].weight)
    assert all(torch.equal(x, y) for x, y in zip(a.encoder.parameters(), b.encoder.parameters()))


def test_without_a_task_the_teachers_are_trained_once_in_the_output_folder(tmp_path, monkeypatch):
    from benchbench_plugins import simcse

    trains = []
    real = simcse.SimCSE.train
    monkeypatch.setattr(
        simcse.SimCSE, "train", lambda self, c, ctx: trains.append(ctx.output_dir) or real(self, c, ctx)
    )
    _caught(tmp_path, monkeypatch, steps=2)
    second = _caught(tmp_path, monkeypatch, steps=3)["ctx"]
    assert trains == [tmp_path / "teachers" / "simcse"]
    assert second.accounting["teachers"][0]["reused"] is True


def test_result_is_a_bare_cls_copy_at_the_evaluation_length(tmp_path, monkeypatch):
    obj = _caught(tmp_path, monkeypatch, steps=1)["obj"]
    assert len(obj.teachers) == 1  # one step is a training: it has its teacher
    enc = obj.result()
    assert enc is not obj.encoder and type(enc).__name__ == "TransformerEncoder" and enc.pooling == "cls"
    assert enc.max_seq_length == 128 and not hasattr(enc, "mlp")
    assert np.allclose(enc.encode(CORPUS[:2]), obj.encoder.encode(CORPUS[:2]), atol=1e-6)


def test_a_direct_call_without_a_registry_trains_its_teachers_from_the_default_one(tmp_path, monkeypatch):
    monkeypatch.setattr(mod, "fit", lambda m, obj, items, ctx, **k: obj)
    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu")
    assert ctx.registry is None
    RankCSE(RankCSEConfig(steps=1, **ONE_TEACHER)).train(CORPUS, ctx)
    assert [t["method"] for t in ctx.accounting["teachers"]] == ["simcse"]


def test_teachers_need_an_output_folder(monkeypatch):
    ctx = TrainContext(model=TINY, seed=0, output_dir=None, progress=False, device="cpu")
    with pytest.raises(ConfigError, match="rankcse: the teachers are trained into ctx.output_dir"):
        RankCSE(RankCSEConfig(steps=1, **ONE_TEACHER)).train(CORPUS, ctx)


def test_under_a_task_every_teacher_is_trained_in_its_order(env, monkeypatch):
    from benchbench import DataStore, get_registry

    seen = []
    real = mod.train_method
    monkeypatch.setattr(mod, "train_method", lambda name, ctx, o: seen.append((name, o)) or real(name, ctx, o))
    caught = {}
    monkeypatch.setattr(mod, "fit", lambda m, obj, items, ctx, **k: caught.update(obj=obj) or obj)
    ctx = TrainContext(
        model=TINY, seed=1, output_dir=env / "out" / "runs" / "rankcse" / "x", progress=False, device="cpu",
        task="sts-mini", registry=get_registry(), data=DataStore(None),
    )  # fmt: skip
    cfg = RankCSEConfig(
        steps=2, batch_size=4, teachers=["esimcse", "simcse"], teacher_set="esimcse.steps=2,simcse.steps=3"
    )
    RankCSE(cfg).train(CORPUS, ctx)
    assert seen == [("esimcse", {"steps": "2"}), ("simcse", {"steps": "3"})]
    assert [t["method"] for t in ctx.accounting["teachers"]] == ["esimcse", "simcse"]
    assert caught["obj"].weights == [0.33, 1.0 - 0.33] and len(caught["obj"].teachers) == 2


def test_step0_trains_no_teacher_and_returns_the_start_encoder(tmp_path, monkeypatch):
    monkeypatch.setattr(mod, "train_method", lambda *a, **k: pytest.fail("a step-0 row trains no teacher"))
    ctx = TrainContext(model=TINY, seed=0, output_dir=tmp_path, progress=False, device="cpu", task="sts-mini")
    enc = RankCSE(RankCSEConfig(steps=0, **ONE_TEACHER)).train(CORPUS, ctx)
    start = tiny_bert(16, 1, 2, 32, pooling="cls")
    assert ctx.accounting["steps"] == 0 and ctx.accounting["teachers"] == [] and enc.pooling == "cls"
    assert np.allclose(enc.encode(CORPUS[:3]), start.encode(CORPUS[:3]), atol=1e-6)
    assert not (tmp_path / "teachers").exists()


def test_under_a_task_the_teachers_are_the_harness_runs_recorded_and_reused(env, monkeypatch):
    """Under a task (as the runner calls it), each teacher is ``benchbench run --method simcse``'s own
    training (same folder, same config hash), reused by a second RankCSE config, named in the record."""
    from benchbench_plugins import simcse

    from benchbench import DataStore, get_registry
    from benchbench.cli.main import main

    trains = []
    real = simcse.SimCSE.train
    monkeypatch.setattr(simcse.SimCSE, "train", lambda self, c, ctx: trains.append(1) or real(self, c, ctx))
    monkeypatch.chdir(env)
    out = env / "out"

    def rankcse(steps: int) -> TrainContext:
        folder = out / "runs" / "rankcse" / f"steps{steps}"  # a run folder under the result store ``out``
        ctx = TrainContext(
            model=TINY, seed=1, output_dir=folder, progress=False, device="cpu", task="sts-mini",
            registry=get_registry(), data=DataStore(None),
        )  # fmt: skip
        RankCSE(RankCSEConfig(steps=steps, **ONE_TEACHER)).train(CORPUS, ctx)
        return ctx

    first, second = rankcse(2).accounting, rankcse(3).accounting
    (t,) = first["teachers"]
    assert t["method"] == "simcse" and t["reused"] is False and second["teachers"][0]["reused"] is True
    assert t["path"].startswith("runs/simcse/") and not Path(t["path"]).is_absolute()
    assert (out / t["path"] / ".complete").is_file() and trains == [1]
    assert second["teachers"][0]["path"] == t["path"]
    # `benchbench run --method simcse` with the teacher's options is the same training: reused, same hash
    args = ["run", "--model", TINY, "--tasks", "sts-mini", "--batch-size", "4", "--output", "out", "--json"]
    assert main([*args, "--method", "simcse", "--steps", "2"]) == 0
    rec = next(json.loads(p.read_text()) for p in out.rglob("*.json") if '"method": "simcse"' in p.read_text())
    assert rec["config_hash"] == t["config_hash"] and rec["train"]["reused_from_disk"] and trains == [1]


def test_cli_run_records_the_teachers(env, monkeypatch):
    from benchbench.cli.main import main

    monkeypatch.chdir(env)
    args = ["run", "--method", "rankcse", "--model", TINY, "--tasks", "sts-mini", "--steps", "2", "--batch-size", "4"]
    sets = ["--set", "teachers=simcse", "--set", "teacher_set=simcse.steps=2,simcse.batch_size=4"]
    assert main([*args, *sets, "--output", "out", "--json"]) == 0
    rec = next(
        json.loads(p.read_text()) for p in (env / "out").rglob("*.json") if '"method": "rankcse"' in p.read_text()
    )
    assert rec["config"]["teachers"] == ["simcse"] and rec["train"]["teachers"][0]["method"] == "simcse"


MIRROR = Path(os.environ.get("RANKCSE_MIRROR", "/work/.mirror/perceptiveshawty+RankCSE/repo"))


def _reference_models(tmp_path, monkeypatch):
    import importlib.util
    import sys

    bench = Path(__file__).resolve().parents[2] / "bench"
    monkeypatch.syspath_prepend(str(bench))
    spec = importlib.util.spec_from_file_location("fidelity_rankcse", bench / "fidelity_rankcse.py")
    fid = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fid)
    fid.extract(str(MIRROR), tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("rankcse", "rankcse.models"):  # the reference's package, fresh from tmp_path
        monkeypatch.delitem(sys.modules, name, raising=False)
    import rankcse.models as models

    return fid, models


@pytest.mark.skipif(not MIRROR.is_dir(), reason="no mirror of perceptiveshawty/RankCSE (fetch it)")
def test_the_loss_terms_equal_the_reference_codes_classes(tmp_path, monkeypatch):
    _, models = _reference_models(tmp_path, monkeypatch)
    for seed in range(3):
        teacher, student = _lists(6, seed)
        ref_net = models.ListNet(0.05, 1.0)(teacher.clone(), student.clone())
        assert listnet(teacher, student).item() == pytest.approx(ref_net.item(), rel=1e-6)
        perm = torch.randperm(6, generator=torch.Generator().manual_seed(seed))
        real = torch.randperm
        torch.randperm = lambda *a, _p=perm, **k: _p.clone()  # the reference's shuffle: the one given to ours
        try:
            ref_mle = models.ListMLE(0.05, 1.0)(teacher.clone(), student.clone())
        finally:
            torch.randperm = real
        assert listmle(teacher, student, perm).item() == pytest.approx(ref_mle.item(), rel=1e-6)
        p, q = student.softmax(-1).clamp(min=1e-7), teacher.softmax(-1).clamp(min=1e-7)
        ref_div = models.Divergence(1.0)(p, q)
        assert consistency_loss(p, q, "reference").item() == pytest.approx(ref_div.item(), rel=1e-6)


@pytest.mark.slow
@pytest.mark.skipif(not MIRROR.is_dir(), reason="no mirror of perceptiveshawty/RankCSE (fetch it)")
def test_equal_to_the_reference_codes_own_cl_forward(tmp_path, monkeypatch):
    fid, models = _reference_models(tmp_path, monkeypatch)
    monkeypatch.setattr(fid, "sts_sentences", lambda k: (RAGGED * 10)[:k])
    for s in fid.SETTINGS.values():
        for _, dt, _, dl, dg, _, dw in fid.check_training_steps(models, s):
            assert max(dt, dl, dg, dw) < fid.TOL


def test_conformance():
    report = check_method(RankCSE, overrides={"steps": 4, "checkpoint_every": 2, **ONE_TEACHER})
    assert "resume equality" in report["passed"], report


def test_registered(registry):
    assert registry.methods["rankcse"] is RankCSE
