"""``--train-task`` (a study's ``train_task``): every task is scored with the encoder trained on ONE task's
unlabelled text, trained once per seed and reused; the result key and the record say so."""

from __future__ import annotations

import pytest

from benchbench.core.errors import ConfigError
from benchbench.run.runner import RunOptions, run
from benchbench.train.corpora import training_corpus

TINY = "tiny-bert:16:1:2:32"


def _run(tmp_path, name, tasks, train_task=None, **kw):
    opts = RunOptions(
        method="simcse",
        tasks=tasks,
        model=TINY,
        seeds=[1],
        output=str(tmp_path / name),
        no_cache=True,
        progress=False,
        overrides={"steps": "2", "batch_size": "4"},
        train_task=train_task,
        **kw,
    )
    return {r["task"]: r for r in run(opts).records}


@pytest.mark.usefixtures("real_data")
def test_every_task_is_scored_by_the_one_encoder_trained_on_the_train_task(tmp_path):
    adapted = _run(tmp_path, "adapted", "stsb,sickr", train_task="twitterpara")
    own = _run(tmp_path, "own", "stsb")
    # one training, on TwitterPara's text, serves both columns: same weights, same corpus, named in the record
    assert adapted["stsb"]["encoder_fingerprint"] == adapted["sickr"]["encoder_fingerprint"]
    assert {r["train"]["task"] for r in adapted.values()} == {"twitterpara"}
    assert adapted["stsb"]["train"]["corpus"]["name"] == "task:twitterpara"
    assert adapted["sickr"]["train"].get("reused_from_task") == "twitterpara"
    # against the same method trained on the column's own text: other weights, other key
    assert own["stsb"]["train"]["task"] == "stsb"
    assert own["stsb"]["encoder_fingerprint"] != adapted["stsb"]["encoder_fingerprint"]
    assert own["stsb"]["config_hash"] != adapted["stsb"]["config_hash"]


def test_a_bad_train_task_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(ConfigError, match="--train-task: Unknown task .twiterpara.. Did you mean .twitterpara."):
        _run(tmp_path, "x", "stsb", train_task="twiterpara")
    with pytest.raises(ConfigError, match="does not combine with --corpus"):
        _run(tmp_path, "y", "stsb", train_task="twitterpara", corpus=str(tmp_path))


class _Adapter:
    name = "t"

    def train_sentences(self):
        return ["a b", "c d"]

    def train_pairs(self):
        return None


def test_a_general_corpus_method_trains_on_the_tasks_text_only_with_train_task(tmp_path):
    general = type("G", (), {"name": "g", "corpus": "general"})
    got = training_corpus(general, _Adapter(), None, None, from_task=True)
    assert (got.kind, got.name, got.sentences) == ("general", "task:t", ["a b", "c d"])
    ordered = type("O", (), {"name": "o", "corpus": "ordered"})
    with pytest.raises(ConfigError, match="--train-task: method 'o' trains on ordered documents"):
        training_corpus(ordered, _Adapter(), None, None, from_task=True)
