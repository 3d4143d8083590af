"""Base-model cards and the zero-shot flag: every model benchbench resolves has a valid card, every
task spec names its data's sources, a (base model, task) cell whose model was trained on the task's
source is flagged in the record the runner writes, and no record (nor a committed leaderboard file)
holds an absolute machine path."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import REPO
from helpers import FIXTURES

from benchbench.core.errors import ConfigError
from benchbench.encode import cards
from benchbench.encode.models import OFFLINE_MODELS, SPLIT_ZIP_MODELS, canonical_model_name, model_card
from benchbench.run.runner import RunOptions, run

FIX = FIXTURES / "useb"
# an absolute machine path: a POSIX home/temp/work root or a Windows drive
ABS_PATH = re.compile(r"(?<![\w.~-])(/(?:root|home|tmp|work|Users|mnt|scratch|var/folders)/|[A-Za-z]:\\\\)")


# ---- the card files --------------------------------------------------------------------------------
def test_every_card_file_is_valid_and_names_its_source():
    files = sorted(cards.CARDS_DIR.glob("*.toml"))
    assert files, "no model cards packaged"
    for f in files:
        card = cards.load_card(f)  # unknown keys or source ids are errors
        assert card.card, f
        assert card.saw_nothing or card.training or card.pretraining, f"{f.name}: says nothing it was trained on"
        for d in (*card.training, *card.pretraining):
            assert d.source and d.sources, (f.name, d.name)
    assert len({id(c) for c in cards.all_cards().values()}) == len(files)  # no alias claimed twice


def test_sentence_transformers_cards_list_the_model_cards_training_data():
    mini = cards.card_for("sentence-transformers/all-MiniLM-L6-v2")[0]
    names = " | ".join(d.name for d in mini.training)
    for expected in ("Reddit", "S2ORC", "WikiAnswers", "PAQ", "Stack Exchange", "MS MARCO", "GooAQ", "Yahoo"):
        assert expected in names
    for expected in ("COCO", "SPECTER", "SearchQA", "ELI5", "Natural Questions", "SQuAD", "TriviaQA", "AllNLI"):
        assert expected in names
    for expected in ("Quora", "Simple Wikipedia", "AltLex", "Flickr 30k", "Sentence Compression", "WikiHow"):
        assert expected in names
    # the rows add up to the README's stated total once amazon-qa (data_config.json; no row) is counted
    assert sum(d.tuples for d in mini.training) == 1_170_060_424
    assert mini.parameters == 22_713_216
    assert cards.card_for("tiny-bert")[0].saw_nothing
    assert not cards.card_for("bert-base-uncased")[0].training  # pre-training only
    assert {s for d in cards.card_for("glove.6B.50d")[0].pretraining for s in d.sources} == {"wikipedia", "gigaword"}


def test_every_model_name_benchbench_resolves_has_a_card(registry):
    names = {"tiny-bert", "tiny-bert:64:2:2:128", "bert-base-uncased"}
    for key in (*OFFLINE_MODELS, *SPLIT_ZIP_MODELS):
        names |= {key, canonical_model_name(key)}
    names |= {hub for hub, *_ in SPLIT_ZIP_MODELS.values()}
    for cls in registry.methods.values():  # what methods name: their default base model, or a fixed one
        names |= {n for n in (getattr(cls, "default_model", None), getattr(cls, "fixed_model", None)) if n}
    missing = [n for n in sorted(names) if model_card(n)[0] is None]
    assert not missing, f"no model card for {missing}: add one to {cards.CARDS_DIR}"


def test_cards_are_shipped_as_package_data():
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    patterns = data["benchbench.resources"]
    for f in cards.CARDS_DIR.glob("*.toml"):
        rel = f.relative_to(cards.CARDS_DIR.parent).as_posix()
        # setuptools globs each pattern from the package folder, never into subfolders
        assert any(Path(rel).match(p) and p.count("/") == rel.count("/") for p in patterns), (rel, patterns)


def test_a_bad_card_is_an_error_naming_the_file(tmp_path):
    bad = tmp_path / "x.toml"
    bad.write_text('name = "x"\ncard = "u"\n[[training]]\nname = "d"\nsources = ["stack-exchange"]\n')
    with pytest.raises(ConfigError, match=r"x\.toml.*stack-exchange"):
        cards.load_card(bad)


# ---- the task specs -------------------------------------------------------------------------------
def test_every_builtin_task_names_its_domain_and_known_sources(registry):
    builtin = [t for t in registry.tasks.values() if Path(t.source).parent == REPO / "tasks"]
    assert len(builtin) > 30
    for spec in builtin:
        assert spec.domain and spec.sources, f"{spec.name} ({spec.source}): give domain and sources"
        for s in spec.sources:
            cards.check_source_id(s, spec.name)


def test_a_spec_with_bad_sources_is_refused(tmp_path):
    from benchbench.core.tasks import load_spec_file

    f = tmp_path / "t.toml"
    f.write_text('[[task]]\nname = "t"\nkind = "sts"\nsources = "twitter"\n')
    with pytest.raises(ConfigError, match="sources must be a list"):
        load_spec_file(f)


# ---- the flag, through the runner's record ----------------------------------------------------------
@pytest.fixture
def useb(registry, tmp_path, monkeypatch):
    monkeypatch.setenv("BENCHBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("BENCHBENCH_OFFLINE", "1")
    registry.tasks["cqadupstack"] = dataclasses.replace(registry.task("cqadupstack"), files={})  # fixture bytes
    data = tmp_path / "data"
    shutil.copytree(FIX / "native", data)
    return registry, data


def _record(reg, data, tmp_path, method: str, model: str, out: str = "out") -> dict:
    opts = RunOptions(method=method, tasks="cqadupstack", model=model, data_dir=str(data), output=str(tmp_path / out))
    (rec,) = run(opts, reg).records
    return rec


def _no_absolute_path(record: dict, *roots: Path) -> None:
    text = json.dumps(record)
    for root in (*roots, Path.home(), Path(sys.prefix), REPO):
        assert str(root) not in text, f"record holds the machine path {root}"
    assert not ABS_PATH.search(text), ABS_PATH.search(text).group(0)


def test_minilm_on_cqadupstack_is_flagged_not_zero_shot_in_the_record(useb, tmp_path):
    reg, data = useb
    rec = _record(reg, data, tmp_path, "sbert", "all-MiniLM-L6-v2")
    assert rec["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert rec["zero_shot"] is False and rec["model_card"] == "all-MiniLM-L6-v2"
    seen = {c["dataset"] for c in rec["contamination"]}
    assert "Stack Exchange duplicate questions (titles)" in seen
    assert all(c["overlap"] == "stackexchange" and c["via"] == "base model" for c in rec["contamination"])
    assert all(c["source"].startswith("https://huggingface.co/sentence-transformers/") for c in rec["contamination"])
    stored = json.loads(next((tmp_path / "out").rglob("cqadupstack*.json")).read_text())
    assert stored["zero_shot"] is False and stored["contamination"] == rec["contamination"]
    _no_absolute_path(stored, tmp_path, data)


def test_tiny_bert_on_cqadupstack_is_zero_shot(useb, tmp_path):
    reg, data = useb
    rec = _record(reg, data, tmp_path, "plm-mean", "tiny-bert")
    assert rec["zero_shot"] is True and rec["contamination"] == [] and rec["model_card"] == "tiny-bert"
    _no_absolute_path(rec, tmp_path, data)


def test_a_local_folder_is_known_by_its_name_else_unknown(useb, tmp_path, tiny_encoder):
    reg, data = useb
    named = tiny_encoder.save(tmp_path / "models" / "all-MiniLM-L6-v2")
    rec = _record(reg, data, tmp_path, "plm-mean", str(named), out="out1")
    assert rec["model"].startswith("all-MiniLM-L6-v2@")
    assert rec["model_card"] == "all-MiniLM-L6-v2" and rec["model_card_match"] == "folder name"
    assert rec["zero_shot"] is False
    other = tiny_encoder.save(tmp_path / "models" / "my-model")
    rec = _record(reg, data, tmp_path, "plm-mean", str(other), out="out2")
    assert rec["model_card"] == "unknown" and rec["zero_shot"] is None and rec["contamination"] == []
    assert "my-model" in rec["zero_shot_unknown"]
    _no_absolute_path(rec, tmp_path, data)


# ---- what a trained encoder inherits ----------------------------------------------------------------
NLI = {"kind": "general", "name": "nli:snli-devtest+xnli-en-devtest"}


def test_a_trained_encoder_inherits_its_corpus():
    # BSL's NLI corpus holds SNLI sentences, the source of STS17; a random-init base saw nothing else
    z = cards.zero_shot("tiny-bert", "sts17-en-en", ["snli"], corpus=NLI)
    assert z["zero_shot"] is False and z["contamination"][0]["via"] == "training corpus"
    assert cards.zero_shot("tiny-bert", "twitterpara", ["twitter"], corpus=NLI)["zero_shot"] is True
    # the task's own unlabelled text is the protocol, not contamination
    own = {"kind": "task", "name": "task:twitterpara"}
    assert cards.zero_shot("tiny-bert", "twitterpara", ["twitter"], corpus=own)["zero_shot"] is True
    # a --corpus file: its sources are unknown, and its path never reaches the record
    user = {"kind": "general", "name": "file:/home/someone/corpus.txt"}
    z = cards.zero_shot("tiny-bert", "twitterpara", ["twitter"], corpus=user)
    assert z["zero_shot"] is None and "corpus.txt" in z["zero_shot_unknown"] and "/home" not in json.dumps(z)


def test_setup_stages_and_extra_base_models_count():
    z = cards.zero_shot("tiny-bert", "stsb", ["stsb", "semeval-sts"], stages=["general"])
    assert z["zero_shot"] is False and z["contamination"][0]["via"] == "setup"
    z = cards.zero_shot("tiny-bert", "twitterpara", ["twitter"], stages=["in-domain"])
    assert z["zero_shot"] is False and "twitterpara" in z["contamination"][0]["overlap"]
    z = cards.zero_shot("tiny-bert", "qqp", ["quora"], also_models=["all-mpnet-base-v2"])
    assert z["zero_shot"] is False and z["contamination"][0]["via"] == "base model all-mpnet-base-v2"


@pytest.mark.parametrize(
    ("task", "flagged"),
    [
        ("askubuntu", True),
        ("cqadupstack", True),
        ("scidocs", True),
        ("twitterpara", False),
        ("qqp", True),
        ("qnli", True),
        ("coco-retrieval", True),
        ("sts17-en-en", True),
        ("sts17-es-en-wmt", False),
        ("sts12", False),
        ("sts15", True),
        ("stsb", True),
        ("sickr", False),
        ("mr", False),
        ("mrpc-pairs", False),
    ],
)
def test_minilm_cells(registry, task, flagged):
    z = cards.zero_shot("sentence-transformers/all-MiniLM-L6-v2", task, registry.task(task).sources)
    assert z["zero_shot"] is (not flagged), z["contamination"]
    assert cards.zero_shot("glove.6B.50d", task, registry.task(task).sources)["zero_shot"] is True


# ---- committed leaderboards -------------------------------------------------------------------------
TEXT = (".md", ".json", ".jsonl", ".html", ".tex", ".svg", ".csv", ".toml", ".sh", ".py")


def _committed_leaderboard_files() -> list[Path]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "leaderboards"], cwd=REPO, capture_output=True, check=True, timeout=60
        ).stdout.decode()
        files = [REPO / f for f in out.split("\0") if f]
    except (OSError, subprocess.SubprocessError):
        files = [p for p in (REPO / "leaderboards").rglob("*") if p.is_file()]
    return [f for f in files if f.suffix in TEXT and f.is_file()]


def test_no_committed_leaderboard_file_holds_an_absolute_path():
    bad = {}
    for f in _committed_leaderboard_files():
        m = ABS_PATH.search(f.read_text(encoding="utf-8", errors="replace"))
        if m:
            bad[f.relative_to(REPO).as_posix()] = m.group(0)
    assert not bad, f"{len(bad)} leaderboard files hold absolute paths: {sorted(bad)}"


def test_the_plain_start_has_a_card_that_flags_stsb_and_old_unknown_records_are_judged_by_it():
    """tiny-mlm-nli (bench/pretrain_tiny_mlm.py) saw the NLI sentences by MLM: STS-B (its SNLI-derived
    test pairs) is not zero-shot for it, STS12 is. A record written before the card existed
    (``zero_shot: null``) is flagged from the card now; one that stored its own verdict keeps it."""
    from benchbench.report.aggregate import contamination

    label = "tiny-mlm-nli@e7d4e08212c3"
    assert cards.zero_shot(label, "stsb", ["stsb", "snli"])["zero_shot"] is False
    assert cards.zero_shot(label, "sts12", ["semeval-sts"])["zero_shot"] is True
    old = {"model": label, "task": "stsb", "zero_shot": None, "contamination": []}
    assert [c["overlap"] for c in contamination(old)] == ["snli"]
    judged = {**old, "zero_shot": True}  # a verdict stored by the run stands
    assert contamination(judged) == []
    assert contamination({**old, "task": "sts12"}) == []
