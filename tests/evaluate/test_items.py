"""Per-item scores (benchbench.store.items): every adapter that stores them recomputes its own main score
from them, they are written beside the record only with --store-items and follow its splits, and
the stratified paired bootstrap on them behaves on hand-made cases."""

from __future__ import annotations

import dataclasses
import gzip
import json
import shutil
import zlib

import numpy as np
import pytest
from helpers import FIXTURES, TablePairScorer, fixture_adapter
from test_pairs import LookupEncoder, _adapter
from test_useb_cqadupstack import HashEncoder
from test_useb_twitterpara import TABLE

from benchbench.core.errors import ConfigError, DataError
from benchbench.encode.encoding import Embedder
from benchbench.evaluate.item_scores import aggregate_score, pair_items, query_items
from benchbench.report.stats import paired_bootstrap_items
from benchbench.run.runner import RunOptions, run
from benchbench.store.items import read_items
from benchbench.store.results import ResultStore, record_items

FIX = FIXTURES / "useb"


def test_each_adapter_recomputes_its_main_score_from_its_items(registry, tmp_path):
    tp = fixture_adapter(registry, "twitterpara", FIX / "native").evaluate(
        Embedder(TablePairScorer(TABLE, strict=True)), "test"
    )
    assert tp.items["unit"] == "pair" and list(tp.items["subsets"]) == ["turl", "pit"]
    assert aggregate_score(tp.items) == pytest.approx(tp.main_score)
    assert tp.items["subsets"]["turl"]["pred"] == [0.9, 0.2, 0.8, 0.3, 0.4]  # the task's pair order
    cq = fixture_adapter(registry, "cqadupstack", FIX / "native").evaluate(Embedder(HashEncoder()), "test")
    assert cq.items["unit"] == "query" and set(cq.items["subsets"]) == set(cq.details["forums"])
    assert aggregate_score(cq.items) == pytest.approx(cq.main_score)
    au = fixture_adapter(registry, "askubuntu", FIX / "native").evaluate(Embedder(TablePairScorer({})), "test")
    assert aggregate_score(au.items) == pytest.approx(au.main_score) and au.main_score == pytest.approx(100.0)
    pa = _adapter().evaluate(Embedder(LookupEncoder()), "test")
    assert aggregate_score(pa.items) == pytest.approx(pa.main_score) == pytest.approx(75.0)


def test_bootstrap_on_hand_made_items():
    gold = np.array([1, 0] * 40)
    good = gold + np.random.default_rng(0).normal(0, 0.3, gold.size)  # ranks positives first, mostly
    bad = np.random.default_rng(1).normal(0, 1, gold.size)  # unrelated to the labels
    a = pair_items({"x": (good, gold)}, "average_precision")
    b = pair_items({"x": (bad, gold)}, "average_precision")
    r = paired_bootstrap_items(a, b, n_resamples=300)
    assert r.mean_diff == pytest.approx(aggregate_score(a) - aggregate_score(b)) and r.mean_diff > 20
    assert r.p_value < 0.01 and r.name.startswith("paired bootstrap")
    same = paired_bootstrap_items(a, a, n_resamples=50)
    assert same.mean_diff == 0 and same.p_value == 1.0
    # a difference carried by one item of 80 is not significant (it is absent from ~37% of resamples)
    worse = good.copy()
    worse[0] -= 1.5  # one positive pushed down the ranking
    nudged = pair_items({"x": (worse, gold)}, "average_precision")
    r = paired_bootstrap_items(a, nudged, n_resamples=300)
    assert r.mean_diff > 0 and r.p_value > 0.3


def test_bootstrap_resamples_within_each_subset():
    """Subset sizes must stay fixed: a subset of 2 items with a constant metric never varies, so with a
    stratified draw the difference on it is constant; drawing over the concatenation would sometimes
    leave the small subset empty (an error) or change its size."""
    a = query_items({"big": (list("abcdefghij"), [50.0] * 10), "small": (["y", "z"], [100.0, 100.0])}, "map")
    b = query_items({"big": (list("abcdefghij"), [40.0] * 10), "small": (["y", "z"], [0.0, 0.0])}, "map")
    r = paired_bootstrap_items(a, b, n_resamples=200)
    assert r.mean_diff == pytest.approx((10 + 100) / 2) and r.p_value == pytest.approx(2 / 201)


def test_items_that_do_not_pair_are_refused():
    a = query_items({"f": (["1", "2"], [1.0, 2.0])}, "map")
    with pytest.raises(ConfigError, match="differ"):
        paired_bootstrap_items(a, query_items({"f": (["1", "3"], [1.0, 2.0])}, "map"))
    with pytest.raises(ConfigError, match="subsets"):
        paired_bootstrap_items(a, query_items({"g": (["1", "2"], [1.0, 2.0])}, "map"))


@pytest.fixture
def useb_reg(registry, monkeypatch):
    monkeypatch.setenv("BENCHBENCH_OFFLINE", "1")
    registry.tasks["twitterpara"] = dataclasses.replace(registry.task("twitterpara"), files={})
    return registry


def test_store_items_beside_the_record_and_follow_its_splits(useb_reg, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(FIX / "native", data)
    out = tmp_path / "out"
    opts = dict(method="bm25", tasks="twitterpara", data_dir=str(data), output=str(out), no_cache=True)
    (rec,) = run(RunOptions(**opts), useb_reg).records
    assert "items" not in rec and not list(out.rglob("*.items.*"))  # off by default
    # asked later: the stored split lacks its items, so it is evaluated again (no --force needed)
    (rec,) = run(RunOptions(**opts, store_items=True), useb_reg).records
    assert rec["items"] == {"test": "twitterpara@v2.items.test.json.gz"}  # the task version is in the name
    items = record_items(rec, out)
    assert aggregate_score(items) == pytest.approx(rec["splits"]["test"]["main_score"])
    (path,) = out.rglob("*.items.test.json.gz")
    assert json.loads(gzip.open(path).read())["unit"] == "pair"
    assert len(list(ResultStore(out).records())) == 1  # the items file is not read as a record
    # stored with items: a second --store-items run is a plain resume
    report = run(RunOptions(**opts, store_items=True), useb_reg)
    assert report.skipped and report.records[0]["created_at"] == rec["created_at"]
    # re-evaluated WITHOUT items: the old file scored another evaluation, so the record drops it
    (rec2,) = run(RunOptions(**opts, force=True), useb_reg).records
    assert "items" not in rec2
    with pytest.raises(DataError, match="--store-items"):
        record_items(rec2, out)


def test_unreadable_items_file_is_a_clear_error(tmp_path):
    p = tmp_path / "x.items.test.json.gz"
    p.write_bytes(b"not gzip")
    with pytest.raises(DataError, match="x.items.test.json.gz"):
        read_items(p)


def test_significance_command_from_stored_records(useb_reg, tmp_path, capsys, monkeypatch):
    """Two 'methods' on the TwitterPara fixture over 2 seeds: BM25 and a fixed table scorer; the command
    reports both, the dagger, the seed test and the per-seed bootstrap from the stored items."""
    from benchbench.cli.main import main
    from benchbench.report.significance import select

    data = tmp_path / "data"
    shutil.copytree(FIX / "native", data)
    out = tmp_path / "out"
    for m in ("bm25", "glove-avg"):
        run(
            RunOptions(
                method=m, tasks="twitterpara", data_dir=str(data), output=str(out), seeds=[1, 2], store_items=True
            ),
            useb_reg,
        )
    monkeypatch.setattr("benchbench.core.registry.get_registry", lambda: useb_reg)
    assert (
        main(
            [
                "significance",
                "--results",
                str(out),
                "--task",
                "twitterpara",
                "--method",
                "bm25",
                "--rivals",
                "glove-avg",
                "--resamples",
                "50",
                "--out",
                str(tmp_path / "sig.md"),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "| bm25 |" in text and "| glove-avg |" in text and "seed 1:" in text and "seed 2:" in text
    assert "seed 1: +" in text or "seed 1: -" in text  # computed, not n/a
    assert "paired bootstrap" in text and "t-test" in text and (tmp_path / "sig.md").read_text() == text
    records = list(ResultStore(out).records())
    with pytest.raises(DataError, match="No 'test' records of method 'ct'"):
        select(records, "twitterpara", ["bm25", "ct"])


@pytest.mark.parametrize("task", ["sts12", "stsb", "sickr"])
def test_sts_items_recompute_the_main_score_on_real_data(registry, real_data, task):
    """STS per-pair items: SimCSE's 'all' (sts12-16: Spearman over the subsets' pairs concatenated, not
    the mean of per-subset Spearman) and single-subset Spearman, recomputed from the stored items."""
    from benchbench.core.registry import make_adapter
    from benchbench.store.data import DataStore

    table = np.random.default_rng(0).standard_normal((4096, 64)).astype(np.float32)

    class Words:  # sum of seeded random word vectors: a real, imperfect similarity without exact ties
        fingerprint = "random-word-vectors-test"
        batch_size = 256

        def encode(self, texts):
            out = np.zeros((len(texts), 64), dtype=np.float32)
            for i, t in enumerate(texts):
                for w in t.lower().split():
                    out[i] += table[zlib.crc32(w.encode()) % 4096]
            return out

    ad = make_adapter(registry, task, DataStore(real_data))
    res = ad.evaluate(Embedder(Words()), "test")
    items = res.items
    assert items["unit"] == "pair" and items["metric"] == "spearman"
    assert aggregate_score(items) == pytest.approx(res.main_score, abs=1e-3)
    if task == "sts12":
        assert items["aggregate"] == "all" and len(items["subsets"]) == 5
        # the 'all' aggregate differs from the per-subset mean here, so a wrong aggregate is caught
        assert abs(res.scores["spearman_mean"] - res.main_score) > 0.1
    else:
        assert items["aggregate"] == "mean" and len(items["subsets"]) == 1


@pytest.mark.parametrize(
    ("metric", "aggregate"),
    [("spearman", "all"), ("spearman", "mean"), ("paraphrase_ap", "mean"), ("average_precision", "mean")],
)
def test_vectorised_bootstrap_equals_the_per_resample_loop(metric, aggregate, monkeypatch):
    """The STS fast path of ``paired_bootstrap_items`` gives the same observed difference, p and valid
    count as scoring each resample with ``aggregate_score`` (forced by a metric name the fast path does
    not take), with ties in the predictions (7-digit compaction makes them) and two seeds per side."""
    from benchbench.evaluate import item_scores
    from benchbench.report import stats

    rng = np.random.default_rng(3)

    def run(shift):
        subs = {}
        for name, n in (("a", 60), ("b", 45), ("c", 30), ("d", 4)):  # d: some draws hold no positive
            gold = np.round(rng.uniform(0, 5, n), 1)
            if metric == "paraphrase_ap":  # TwitterPara's 0-5 votes: 3 dropped, > 3 a paraphrase
                gold = rng.integers(0, 6, n).astype(float)
            elif metric == "average_precision":
                gold = rng.integers(0, 2, n).astype(float)
            subs[name] = (np.round(gold + rng.normal(shift, 1.5, n), 1), gold)  # rounded: many ties
        return subs

    base = run(0.0)
    sides = []
    for noise in (0.0, 0.4):
        sets = []
        for k in range(2):
            subs = {name: (np.round(p + rng.normal(0, noise + 0.3 * k, len(p)), 1), g) for name, (p, g) in base.items()}
            sets.append(pair_items(subs, metric, aggregate))
        sides.append(sets)
    fast = stats.paired_bootstrap_items(sides[0], sides[1], n_resamples=300, seed=5)
    monkeypatch.setitem(item_scores.PAIR_METRICS, "loop", item_scores.PAIR_METRICS[metric])
    slow_sides = [[{**s, "metric": "loop"} for s in side] for side in sides]
    slow = stats.paired_bootstrap_items(slow_sides[0], slow_sides[1], n_resamples=300, seed=5)
    assert fast.statistic == pytest.approx(slow.statistic, abs=1e-9)
    assert fast.p_value == slow.p_value and fast.n == slow.n
    assert 0 < fast.p_value < 1
