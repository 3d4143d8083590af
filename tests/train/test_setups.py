"""Setups as stage pipelines (benchbench.train.setups): order, the data each stage sees (a supervised stage
never sees the target's evaluation pairs), sizes in the key, the sentence-transformers losses, and a
run through the runner."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import FIXTURES, fixture_adapter

from benchbench.core.errors import ConfigError
from benchbench.train import setups
from benchbench.train.setups import Labelled, parse_setup, run_stages, setup_string

TP = FIXTURES / "useb" / "native"


def test_parse_and_key_strings():
    assert parse_setup("unsupervised") == setups.Setup("unsupervised")
    s = parse_setup("unsupervised@corpus=1024")
    assert s.corpus_size == 1024 and str(s) == "unsupervised@corpus=1024"
    assert (
        str(parse_setup("pretrain-supervised@corpus=128@labelled=500")) == "pretrain-supervised@corpus=128@labelled=500"
    )
    assert setup_string("supervised", labelled=7) == "supervised@labelled=7"
    for bad in (
        "semi",
        "unsupervised@corpus=0",
        "unsupervised@corpus=x",
        "unsupervised@labelled=5",
        "supervised@corpus=10",
        "unsupervised@size=3",
    ):
        with pytest.raises(ConfigError):
            parse_setup(bad)
    assert setups.parse_sizes("128,1024") == [128, 1024] and setups.parse_sizes("") == [None]


EXPECTED = {
    "unsupervised": ["target"],
    "da-general-target": ["general", "target"],
    "da-target-general": ["target", "general"],
    "pretrain-supervised": ["target", "in-domain"],
    "supervised": ["in-domain"],
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_stage_order_and_data(name, monkeypatch, tmp_path):
    calls: list[tuple[str, object]] = []
    monkeypatch.setattr(setups, "general_data", lambda data: Labelled("general:nli+stsb", ["nli"], pairs=[("g", "h")]))
    monkeypatch.setattr(
        setups,
        "in_domain_data",
        lambda ad, n, seed: Labelled(f"in-domain:{ad.name}", ["turl"], scored=[("a", "b", 1.0)] * (n or 3)),
    )

    class Enc:
        def __init__(self, tag):
            self.tag = tag

        def save(self, path):
            Path(path).mkdir(parents=True, exist_ok=True)
            (Path(path) / "tag").write_text(self.tag)

    def target():
        calls.append(("target", ctx.model))  # the model the method starts from
        return Enc("target"), {"corpus": {"name": "task:t"}}

    def supervised(enc, data, cfg, seed):
        calls.append((data.name, enc.tag))
        return Enc(enc.tag + "+" + data.name), {"data": data.describe()}

    ctx = SimpleNamespace(model="base", seed=3, data=None)
    enc, info = run_stages(
        parse_setup(name + ("@labelled=2" if "in-domain" in EXPECTED[name] else "")),
        ctx,
        SimpleNamespace(name="twitterpara"),
        target,
        lambda m: Enc(f"load:{Path(m).name}"),
        tmp_path,
        supervised=supervised,
    )
    assert [s["kind"] for s in info["stages"]] == EXPECTED[name]
    kinds = [c[0].split(":")[0] for c in calls]
    assert kinds == EXPECTED[name]
    if name == "da-general-target":  # the target starts from the general stage's saved encoder
        assert calls[0] == ("general:nli+stsb", "load:base")
        assert calls[1][0] == "target" and Path(calls[1][1]).name.startswith("stage-general-")
        assert (Path(calls[1][1]) / "tag").read_text() == "load:base+general:nli+stsb"
    if name == "da-target-general":  # the general stage continues the target's encoder
        assert calls[1] == ("general:nli+stsb", "target") and enc.tag == "target+general:nli+stsb"
    if name == "pretrain-supervised":
        assert calls[1] == ("in-domain:twitterpara", "target")
        assert info["stages"][1]["data"]["mse_pairs"] == 2  # @labelled=2
    if name == "supervised":
        assert calls == [("in-domain:twitterpara", "load:base")]
    # a first supervised stage is stored and reused (not retrained) on a second call
    if EXPECTED[name][0] != "target":
        calls.clear()
        ctx.model = "base"
        run_stages(
            parse_setup(name + ("@labelled=2" if "in-domain" in EXPECTED[name] else "")),
            ctx,
            SimpleNamespace(name="twitterpara"),
            target,
            lambda m: Enc(f"load:{Path(m).name}"),
            tmp_path,
            supervised=supervised,
        )
        assert not any(c[0].startswith(EXPECTED[name][0]) for c in calls[:1])


def _tp_with_leak(tmp_path):
    root = tmp_path / "data"
    shutil.copytree(TP, root)
    d = root / "useb" / "twitterpara" / "train"
    # a train row that IS a test pair (case differs): it must never reach the supervised stage
    rows = [("a training tweet about news", "a second training tweet", "0"), ("pair two FIRST", "pair two second", "1")]
    rows += [(f"train a {i}", f"train b {i}", str(i % 2)) for i in range(40)]
    for col, name in enumerate(("a.toks", "b.toks", "sim.txt")):
        (d / name).write_text("\n".join(r[col] for r in rows) + "\n")
    return root


def test_in_domain_never_sees_eval_pairs_and_subsamples(registry, tmp_path):
    ad = fixture_adapter(registry, "twitterpara", _tp_with_leak(tmp_path))
    lab = setups.in_domain_data(ad, None, seed=1)
    seen = {frozenset((a.lower(), b.lower())) for a, b, _ in lab.scored + lab.dev}
    assert frozenset(("pair two first", "pair two second")) not in seen
    held = ad.heldout()  # the heldout split's pairs (a tenth of the 41 sources): never trained on either
    assert len(held[0]) == 4 and not seen & {frozenset((a.lower(), b.lower())) for a, b in zip(held[0], held[1])}
    assert len(lab.scored) + len(lab.dev) == 41 - 4  # 42 rows, the leaked test pair and the heldout pairs dropped
    assert not {(a, b) for a, b, _ in lab.scored} & {(a, b) for a, b, _ in lab.dev}  # dev held out
    small = setups.in_domain_data(ad, 5, seed=1)
    assert len(small.scored) == 5 and setups.in_domain_data(ad, 5, seed=1).scored == small.scored
    assert setups.in_domain_data(ad, 5, seed=2).scored != small.scored
    assert "sim.txt" in " ".join(lab.sources)


@pytest.mark.parametrize("task", ["askubuntu", "cqadupstack", "scidocs"])
def test_no_labelled_train_offline_is_a_clear_error(registry, task, tmp_path):
    ad = fixture_adapter(registry, task, tmp_path)
    with pytest.raises(ConfigError, match="no labelled in-domain train"):
        setups.in_domain_data(ad, None, 1)


def test_general_data_real_and_disjoint_from_twitterpara_eval(real_data, registry):
    from benchbench.store.data import DataStore

    g = setups.general_data(DataStore(real_data, allow_download=False))
    assert g.pairs and g.scored and g.dev
    assert any("snli" in s for s in g.sources) and any("sts-train" in s for s in g.sources)
    assert all(0.0 <= s <= 1.0 for _, _, s in g.scored)
    ad = fixture_adapter(registry, "twitterpara", real_data)
    ev = setups.eval_pairs(ad)
    assert ev and not ev & {frozenset((a.lower(), b.lower())) for a, b in g.pairs}


def test_corpus_subsample_by_seed():
    from benchbench.train.corpora import Corpus

    c = Corpus("task", "task:t", [f"s{i}" for i in range(100)], sha256="x")
    a = setups.subsample_corpus(c, parse_setup("unsupervised@corpus=10"), 1)
    assert len(a.sentences) == 10 and a.sha256 != "x" and a.info["subsampled_to"] == 10
    assert setups.subsample_corpus(c, parse_setup("unsupervised@corpus=10"), 1).sentences == a.sentences
    assert setups.subsample_corpus(c, parse_setup("unsupervised@corpus=10"), 2).sentences != a.sentences
    assert setups.subsample_corpus(c, parse_setup("unsupervised"), 1) is c


def test_train_supervised_uses_st_losses_and_early_stops(tiny_encoder):
    enc = tiny_encoder.clone()
    before = {k: v.clone() for k, v in enc.state_dict().items()}
    data = Labelled(
        "x",
        ["x"],
        pairs=[(f"a {i}", f"a {i} b") for i in range(8)],
        scored=[(f"c {i}", f"d {i}", float(i % 2)) for i in range(8)],
        dev=[(f"c {i}", f"d {i}", float(i % 2)) for i in range(8)],
    )
    out, info = setups.train_supervised(
        enc, data, setups.SupervisedConfig(batch_size=4, steps=2, eval_every=1, lr=1e-3), 0
    )
    assert info["steps"] == {"mnrl": 2, "mse": 2}
    assert "dev_spearman" in info and 0 <= info["best_step"] <= 4
    changed = any(not np.allclose(before[k].numpy(), v.numpy()) for k, v in out.state_dict().items())
    assert changed == (info["best_step"] > 0)  # the kept state is the best dev state (step 0 = untouched)


def test_run_supervised_setup_key_and_record(registry, tmp_path, monkeypatch):
    import dataclasses

    from benchbench.run.runner import RunOptions, run
    from benchbench.store.results import ResultKey, ResultStore

    monkeypatch.setenv("BENCHBENCH_CACHE", str(tmp_path / "cache"))
    registry.tasks["twitterpara"] = dataclasses.replace(registry.task("twitterpara"), files={})
    rep = run(
        RunOptions(
            method="sbert",
            model="tiny-bert:16:1:2:32",
            tasks="twitterpara",
            setup="supervised@labelled=4",
            overrides={"supervised.batch_size": "4", "supervised.steps": "1", "supervised.eval_every": "1"},
            data_dir=str(_tp_with_leak(tmp_path)),
            output=str(tmp_path / "o"),
            progress=False,
        ),
        registry,
    )
    rec = rep.records[0]
    assert rec["setup"] == "supervised@labelled=4"
    st = rec["train"]["stages"]
    assert [s["kind"] for s in st] == ["in-domain"] and st[0]["data"]["mse_pairs"] == 4
    assert ResultStore(tmp_path / "o").exists(
        ResultKey(
            "sbert", rec["config_hash"], rec["model"], "supervised@labelled=4", 1, "twitterpara", rec["task_version"]
        )
    )
