"""Per-sentence preprocessing follows the step budget, not the corpus: BSL's views and
SNCSE's negations are made only for the sentences the training loop will draw (all of them once the
budget reaches an epoch), the same seed gives the same sentences, ``max_sentences`` still restricts
the corpus first, and the record's ``train.preprocessed_sentences`` says how many were made."""

from __future__ import annotations

import json
import types

import numpy as np
import pytest
from benchbench_plugins.bsl import BSL, BSLConfig

from benchbench import TrainContext, build_config, hookimpl
from benchbench.train.loop import ItemStream

TINY = "tiny-bert:16:1:2:32"
CORPUS = [f"sentence {i} talks about topic {i % 7} with extra words {i * 3}" for i in range(200)]


class CountingViews:
    """A two-view augmenter with a batch pre-pass (``apply``), as back-translation has: it records what
    it is asked to make before training (``applied``) and what training draws (``drawn``)."""

    def __init__(self):
        self.applied: dict[int, list[list[str]]] = {0: [], 1: []}
        self.drawn: list[str] = []

    def apply(self, texts, variant=0):
        self.applied[variant].append(list(texts))
        return [f"{t} v{variant}" for t in texts]

    def views(self, texts, rng, two_view=False):
        self.drawn += list(texts)
        return [f"{t} v0" for t in texts], [f"{t} v1" for t in texts]


def _train_bsl(tmp_path, monkeypatch=None, seed=0, corpus=CORPUS, **cfg):
    """BSL.train with the counting augmenter; with ``monkeypatch``, the training loop itself is skipped
    (what is prepared is decided before it) to keep the test fast."""
    if monkeypatch is not None:
        import benchbench_plugins.bsl as B

        monkeypatch.setattr(B, "train_loop", lambda obj, *a, **k: obj)
    aug = CountingViews()
    method = BSL(BSLConfig(**{"batch_size": 4, "max_seq_length": 16, **cfg}))
    method.augmenter_override = aug
    ctx = TrainContext(model=TINY, seed=seed, output_dir=tmp_path / f"run-{seed}", progress=False, device="cpu")
    method.train(list(corpus), ctx)
    return aug, ctx


def _prepared(aug: CountingViews, variant: int) -> list[str]:
    assert len(aug.applied[variant]) == 1, "one pre-pass per view, in one batch"
    return aug.applied[variant][0]


def test_bsl_views_are_made_for_the_sentences_the_budget_draws_only(tmp_path):
    aug, ctx = _train_bsl(tmp_path, steps=2, grad_accum=2)
    budget = 2 * 2 * 4  # steps x grad_accum x batch_size
    for variant in (0, 1):
        made = _prepared(aug, variant)
        assert len(made) == len(set(made)) == budget  # not the 200 of the corpus
        assert set(made) == set(aug.drawn)  # exactly what training then drew, nothing more or less
    assert len(aug.drawn) == budget
    assert ctx.accounting["preprocessed_sentences"] == budget and ctx.accounting["bsl_sentences"] == len(CORPUS)


@pytest.mark.parametrize("epochs,expected", [(0.5, 20), (1.0, 40), (2.0, 40)])
def test_bsl_epoch_budget_prepares_that_share_of_the_corpus(tmp_path, monkeypatch, epochs, expected):
    """No --steps: ``epochs`` passes; half an epoch prepares half the corpus, one epoch or more all of it."""
    aug, ctx = _train_bsl(tmp_path, monkeypatch, corpus=CORPUS[:40], steps=None, epochs=epochs)
    assert len(set(_prepared(aug, 0))) == expected and ctx.accounting["preprocessed_sentences"] == expected
    assert _prepared(aug, 1) == _prepared(aug, 0)


def test_bsl_single_view_prepares_one_view(tmp_path, monkeypatch):
    aug, ctx = _train_bsl(tmp_path, monkeypatch, steps=2, two_view=False)
    assert len(_prepared(aug, 0)) == 8 and aug.applied[1] == []
    assert ctx.accounting["preprocessed_sentences"] == 8


def test_same_seed_same_sentences_another_seed_others(tmp_path, monkeypatch):
    a, _ = _train_bsl(tmp_path, monkeypatch, seed=3, steps=2)
    b, _ = _train_bsl(tmp_path / "again", monkeypatch, seed=3, steps=2)
    c, _ = _train_bsl(tmp_path, monkeypatch, seed=4, steps=2)
    assert _prepared(a, 0) == _prepared(b, 0)
    assert set(_prepared(a, 0)) != set(_prepared(c, 0))


def test_budget_items_are_the_loop_s_own_draws():
    """``TrainContext.budget_items`` is the stream ``train_loop`` reads (seeded by the run's seed):
    the first steps x grad_accum x batch positions, distinct and sorted; the whole corpus from one
    epoch on; processes of a multi-process run counted in."""
    ctx = TrainContext(model=TINY, seed=11, output_dir=None)
    got = ctx.budget_items(500, steps=5, batch_size=8, grad_accum=2)
    assert got == sorted(ItemStream(500, 11).take(0, 80)) and len(got) == 80
    assert got != sorted(ItemStream(500, 12).take(0, 80))
    assert ctx.budget_items(50, steps=7, batch_size=8) == list(range(50))  # 56 >= 50: one epoch
    assert ctx.budget_items(0, steps=1, batch_size=8) == []


def test_budget_items_count_every_process(monkeypatch):
    ctx = TrainContext(model=TINY, seed=0, output_dir=None)
    monkeypatch.setenv("WORLD_SIZE", "3")
    assert len(ctx.budget_items(1000, steps=2, batch_size=10)) == 60


def test_max_sentences_still_restricts_the_corpus_first(tmp_path, monkeypatch):
    """``--set max_sentences=N`` picks its seeded subset as before; the budget is then drawn from it."""
    small, ctx = _train_bsl(tmp_path, monkeypatch, steps=3, max_sentences=10)  # budget 12 > 10: the whole subset
    subset = set(_prepared(small, 0))
    keep = np.sort(np.random.default_rng(0).permutation(len(CORPUS))[:10])
    assert subset == {CORPUS[i] for i in keep}
    assert ctx.accounting["bsl_sentences"] == 10 and ctx.accounting["preprocessed_sentences"] == 10
    big, ctx = _train_bsl(tmp_path, monkeypatch, steps=1, max_sentences=100)  # budget 4 < 100: 4 of the 100
    keep = {CORPUS[i] for i in np.random.default_rng(0).permutation(len(CORPUS))[:100]}
    assert len(_prepared(big, 0)) == 4 and set(_prepared(big, 0)) <= keep
    assert ctx.accounting["bsl_sentences"] == 100


def test_the_record_says_how_many_sentences_were_preprocessed(env, tmp_path):
    """Through the runner: ``train.preprocessed_sentences`` in the stored record."""
    from benchbench.core.registry import load_registry
    from benchbench.run.runner import RunOptions, run

    aug = CountingViews()
    extra = types.ModuleType("counting_views")
    extra.benchbench_register_augmenters = hookimpl(lambda register: register("counting-views", aug))
    reg = load_registry(extra_plugins=[("counting-views", extra)])
    text = tmp_path / "general.txt"
    text.write_text("\n".join(CORPUS[:60]) + "\n")
    opts = RunOptions(
        method="bsl",
        tasks="sts-mini",
        model=TINY,
        corpus=str(text),
        overrides={"steps": 2, "batch_size": 4, "augmenter": "counting-views", "max_seq_length": 16},
        output=str(tmp_path / "results"),
        device="cpu",
        progress=False,
    )
    (record,) = run(opts, reg).records
    assert record["train"]["preprocessed_sentences"] == 8 and record["train"]["bsl_sentences"] == 60
    stored = json.loads(next((tmp_path / "results").rglob("sts-mini.json")).read_text())
    assert stored["train"]["preprocessed_sentences"] == 8
    assert len(_prepared(aug, 0)) == 8


def test_sncse_negates_only_the_sentences_the_budget_draws(tmp_path, monkeypatch):
    """SNCSE parsed every corpus sentence with spaCy before training; now only the budget's, and a
    sentence drawn beyond them (another process's share) is negated on first use."""
    import benchbench_plugins.sncse as sn

    asked: list[list[str]] = []

    def fake_negations(texts, cache=None):
        asked.append(list(texts))
        return [f"not {t}" for t in texts]

    caught = {}

    def catch(method, objective, items, *a, **k):
        caught["items"] = items
        return objective

    monkeypatch.setattr(sn, "negations", fake_negations)
    monkeypatch.setattr(sn, "fit", catch)
    ctx = TrainContext(model="tiny-bert:32:2:2:64", seed=1, output_dir=tmp_path, progress=False, device="cpu")
    corpus = CORPUS[:50]
    sn.SNCSE(build_config(sn.SNCSE, {"steps": 2, "batch_size": 4})).train(corpus, ctx)
    assert [len(a) for a in asked] == [8] and ctx.accounting["preprocessed_sentences"] == 8
    items = caught["items"]
    assert len(items) == 50
    drawn = ctx.budget_items(50, 2, 4)
    assert [items[i] for i in drawn] == [(corpus[i], f"not {corpus[i]}") for i in drawn] and len(asked) == 1
    other = next(i for i in range(50) if i not in drawn)
    assert items[other] == (corpus[other], f"not {corpus[other]}") and asked[-1] == [corpus[other]]
