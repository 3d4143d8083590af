"""Weights named by an option's path are checked before anything stored is reused (``Method.provenance``).

Results are keyed by the options' text. DiffCSE's ``generator`` and Trans-Encoder's ``start`` / ``plm``
name folders, so new weights saved into the same folder would meet the old result, and the old
generator's score would be reported for the new one. The runner now compares the labels (folder name
@ weights hash) the method states with the ones the stored record, or the stored encoder's
accounting, carries. On a difference it refuses, names both labels, and changes nothing."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from benchbench_plugins.diffcse import DiffCSE, DiffCSEConfig
from benchbench_plugins.trans_encoder import TransEncoder, TransEncoderConfig

from benchbench import ConfigError, model_label_of
from benchbench.train.reuse import check_provenance

TINY = "tiny-bert:16:1:2:32"


def resave_with_other_weights(folder):
    """The same folder, architecture and vocabulary; other weights (what a rebuilt generator is)."""
    from transformers import BertForMaskedLM

    m = BertForMaskedLM.from_pretrained(folder)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.01)
    m.save_pretrained(folder)


def run_diffcse(main, gen, out="out"):
    args = ["run", "--method", "diffcse", "--model", TINY, "--tasks", "sts-mini", "--steps", "2", "--batch-size", "4"]
    return main([*args, "--set", f"generator={gen}", "--output", out, "--json"])


def records(root):
    return {p: p.read_bytes() for p in root.rglob("*.json") if '"method": "diffcse"' in p.read_text()}


def test_new_generator_weights_in_the_same_folder_are_refused_not_reused(env, monkeypatch, generator_dir, capsys):
    from benchbench.cli.main import main

    monkeypatch.chdir(env)
    gen = env / "gen"
    shutil.copytree(generator_dir, gen)
    assert run_diffcse(main, gen) == 0
    stored = records(env / "out")
    (rec,) = [json.loads(b) for b in stored.values()]
    old_label = rec["train"]["diffcse_generator"]
    assert old_label == model_label_of(str(gen))
    capsys.readouterr()

    assert run_diffcse(main, gen) == 0  # the same weights: the stored result is reused, as before
    assert records(env / "out") == stored
    capsys.readouterr()

    resave_with_other_weights(gen)
    new_label = model_label_of(str(gen))
    assert new_label != old_label and new_label.split("@")[0] == old_label.split("@")[0]
    assert run_diffcse(main, gen) != 0
    err = capsys.readouterr().err
    assert "diffcse_generator" in err and old_label in err and new_label in err and "stored result" in err
    assert records(env / "out") == stored  # nothing changed

    # the record gone, its trained encoder still stored: the encoder is refused the same way
    for p in stored:
        p.unlink()
    assert run_diffcse(main, gen) != 0
    err = capsys.readouterr().err
    assert "stored encoder" in err and old_label in err and new_label in err
    assert not records(env / "out")

    # a new --output folder trains with the new weights and records their label
    assert run_diffcse(main, gen, out="out2") == 0
    (rec2,) = [json.loads(b) for b in records(env / "out2").values()]
    assert rec2["train"]["diffcse_generator"] == new_label


def test_diffcse_states_its_generators_label_not_the_option_text(generator_dir, tmp_path):
    gen = tmp_path / "g"
    shutil.copytree(generator_dir, gen)
    before = DiffCSE(DiffCSEConfig(generator=str(gen))).provenance()
    assert before == {"diffcse_generator": model_label_of(str(gen))}
    resave_with_other_weights(gen)
    assert DiffCSE(DiffCSEConfig(generator=str(gen))).provenance() != before
    # a hub name (no folder): its canonical name, what the record would say
    assert DiffCSE(DiffCSEConfig()).provenance() == {"diffcse_generator": "distilbert-base-uncased"}


def test_trans_encoder_states_folder_valued_start_and_plm(generator_dir, tmp_path):
    start, plm = tmp_path / "start", tmp_path / "plm"
    shutil.copytree(generator_dir, start)
    shutil.copytree(generator_dir, plm)
    te = TransEncoder(TransEncoderConfig(start=str(start), plm=str(plm)))
    assert te.provenance() == {"start": {"model": model_label_of(str(start))}, "plm": model_label_of(str(plm))}
    assert TransEncoder(TransEncoderConfig()).provenance() == {}  # the base model is in the key already
    assert TransEncoder(TransEncoderConfig(start="simcse")).provenance() == {}  # a start method has its own key


def test_mutual_states_the_labels_of_folder_models(generator_dir, tmp_path):
    from benchbench_plugins.trans_encoder import TransEncoderMutual

    a = tmp_path / "a"
    shutil.copytree(generator_dir, a)
    cfg = TransEncoderMutual.Config(models=[str(a), "all-MiniLM-L6-v2"])
    assert TransEncoderMutual(cfg).provenance() == {
        "model_labels": [model_label_of(str(a)), "sentence-transformers/all-MiniLM-L6-v2"]
    }
    assert TransEncoderMutual(TransEncoderMutual.Config()).provenance() == {}
    assert TransEncoderMutual(TransEncoderMutual.Config(models=["all-MiniLM-L6-v2"])).provenance() == {}


def test_check_provenance_compares_only_what_the_store_holds():
    now = {"diffcse_generator": "g@aaaaaaaaaaaa", "start": {"model": "s@1"}}
    check_provenance(now, {"diffcse_generator": "g@aaaaaaaaaaaa"}, "m", "x")  # equal
    check_provenance(now, {"steps": 3}, "m", "x")  # a record from before the label was stored
    check_provenance(now, None, "m", "x")  # a training-free method's record
    check_provenance({}, {"diffcse_generator": "other"}, "m", "x")  # nothing stated
    with pytest.raises(ConfigError, match=r"start = \{'model': 's@2'\}.*\{'model': 's@1'\}"):
        check_provenance(now, {"start": {"model": "s@2"}}, "m", "the stored result R")


def test_a_method_class_without_provenance_states_none():
    """A plugin's class need only have ``train`` and ``Config``: no provenance means nothing to compare."""
    from benchbench.core.methods import provenance_of

    class Bare:
        def train(self, corpus, ctx):
            raise NotImplementedError

    assert provenance_of(Bare()) == {}
    assert provenance_of(DiffCSE(DiffCSEConfig())) == {"diffcse_generator": "distilbert-base-uncased"}
