"""The MTEB bridge maps only what measures the same thing: STSBenchmark <-> stsb (test split, cosine
Spearman). Every other MTEB result lands under ``mteb:<its name>`` and never in a benchbench column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchbench.core.errors import ConfigError
from benchbench.report import mteb_io
from benchbench.store.results import checksum


def _mteb_file(tmp_path: Path, task: str, entry: dict, split: str = "test", raw: str | None = None) -> Path:
    d = tmp_path / "results" / "org__model" / "rev"
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{task}.json"
    doc = {"task_name": task, "mteb_version": "2.26.24", "scores": {split: [{"hf_subset": "default", **entry}]}}
    p.write_text(raw if raw is not None else json.dumps(doc))
    return p


def test_stsbenchmark_maps_to_stsb_with_our_metric(tmp_path):
    p = _mteb_file(tmp_path, "STSBenchmark", {"main_score": 0.82, "cosine_spearman": 0.82, "cosine_pearson": 0.8})
    (rec,) = mteb_io.import_file(p)
    assert rec["task"] == "stsb"
    assert rec["splits"]["test"]["main_metric"] == "spearman"
    assert rec["splits"]["test"]["main_score"] == pytest.approx(82.0)


def test_stsbenchmark_whose_main_score_is_not_cosine_spearman_is_not_ours(tmp_path):
    """Without the shared metric (an MTEB file scoring something else) it is not our column."""
    p = _mteb_file(tmp_path, "STSBenchmark", {"main_score": 0.5, "manhattan_spearman": 0.5})
    (rec,) = mteb_io.import_file(p)
    assert rec["task"] == "mteb:STSBenchmark"


@pytest.mark.parametrize(
    ("mteb_name", "ours"),
    [
        ("SICK-R", "sickr"),
        ("CQADupstackRetrieval", "cqadupstack"),
        ("SciDocsRR", "scidocs"),
        ("AskUbuntuDupQuestions", "askubuntu"),
        ("STS12", "sts12"),
        ("TwitterURLCorpus", "twitterpara"),
    ],
)
def test_a_different_protocol_never_lands_in_our_column(tmp_path, mteb_name, ours):
    p = _mteb_file(tmp_path, mteb_name, {"main_score": 0.7, "cosine_spearman": 0.7, "ndcg_at_10": 0.7, "map": 0.7})
    (rec,) = mteb_io.import_file(p)
    assert rec["task"] == f"mteb:{mteb_name}" != ours
    assert rec["splits"]["test"]["main_metric"] == "main_score"


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity", "1e999", "1e308"])
def test_non_finite_scores_are_refused_naming_the_file(tmp_path, bad):
    raw = '{"task_name": "STSBenchmark", "scores": {"test": [{"hf_subset": "default", "main_score": %s}]}}' % bad
    p = _mteb_file(tmp_path, "STSBenchmark", {}, raw=raw)
    with pytest.raises(ConfigError, match=rf"{p.name}.*'main_score'.*not a finite number"):
        mteb_io.import_file(p)


def _record(task: str, metric: str, score: float) -> dict:
    r = {
        "schema_version": 2,
        "task_version": 1,
        "method": "sbert",
        "model": "all-MiniLM-L6-v2",
        "setup": "unsupervised",
        "config": {},
        "config_hash": "abc",
        "seed": 0,
        "task": task,
        "splits": {"test": {"main_metric": metric, "main_score": score, "scores": {metric: score}, "partial": False}},
    }
    return {**r, "checksum": checksum(r)}


@pytest.mark.parametrize(
    ("task", "metric", "exported"),
    [
        ("stsb", "spearman", "STSBenchmark"),
        ("mteb:SICK-R", "cosine_spearman", "SICK-R"),
        ("sickr", "spearman", "sickr"),
    ],
)
def test_export_uses_mteb_names_only_for_the_same_measure(tmp_path, task, metric, exported):
    res = tmp_path / "res"
    res.mkdir()
    (res / "r.json").write_text(json.dumps(_record(task, metric, 77.5)))
    (f,) = mteb_io.export(res, tmp_path / "out")
    doc = json.loads(f.read_text())
    assert doc["task_name"] == exported
    assert doc["scores"]["test"][0]["main_score"] == pytest.approx(0.775)
    if exported == "STSBenchmark":
        assert doc["scores"]["test"][0]["cosine_spearman"] == pytest.approx(0.775)
    # and it imports back into the column it came from; a benchbench-only task (no MTEB task has its
    # name) is refused, naming the file and the task: stored as ``mteb:sickr`` it would be a record of a
    # task no table can resolve
    if task == "sickr":
        with pytest.raises(ConfigError, match=rf"{f.name}: task_name 'sickr' is not a task this install can show"):
            mteb_io.import_file(f)
        return
    (back,) = mteb_io.import_file(f)
    assert back["task"] == task


# --- drills (issue 50): one bad record never blanks a page -------------------------------------------------
def _imported(task: str, score: float) -> dict:
    return {
        "schema_version": 2,
        "task_version": 1,
        "method": "m",
        "model": "org/m",
        "setup": "unsupervised",
        "config": {},
        "config_hash": "mteb",
        "seed": 0,
        "task": task,
        "splits": {"test": {"main_metric": "main_score", "main_score": score, "partial": False, "scores": {}}},
        "imported_from": "MTEB",
        "device": "?",
        "git_sha": None,
        "versions": {},
    }


def test_import_mteb_refuses_a_task_mteb_does_not_know_naming_file_and_task(tmp_path, capsys):
    """Before: ``import-mteb`` of a result whose task_name mteb does not know succeeded (rc 0, 1 record
    written); every later table failed. Now it is refused, naming the file and the task, nothing written;
    in a folder, all or nothing (a good file beside it is not imported either)."""
    from benchbench.cli.main import main

    bad = _mteb_file(tmp_path, "NoSuchTaskX", {"main_score": 0.5})
    _mteb_file(tmp_path, "STSBenchmark", {"main_score": 0.82, "cosine_spearman": 0.82})
    out = tmp_path / "out"
    assert main(["import-mteb", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: task_name 'NoSuchTaskX' is not a task this install can show" in err, err
    assert main(["import-mteb", str(tmp_path / "results"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "1 MTEB result file(s)" in err and "NoSuchTaskX.json: task_name 'NoSuchTaskX'" in err, err
    assert not out.exists() or not list(out.rglob("*.json"))


def test_a_record_of_a_task_no_table_can_resolve_is_left_out_and_named(tmp_path, capsys, caplog):
    """Before: one stored ``mteb:NoSuchTaskX`` record (an import by an older benchbench, or a task a later
    mteb dropped) made ``benchbench table`` and ``leaderboard`` fail entirely (rc 2), naming the task but
    not the file. Now the record is left out with a warning naming its file, and the pages show the rest."""
    from benchbench.cli.main import main

    res = tmp_path / "res"
    bad, good = mteb_io.save_imported([_imported("mteb:NoSuchTaskX", 50.0), _imported("mteb:SICK-R", 77.0)], res)
    with caplog.at_level("WARNING"):
        assert main(["table", "--output", str(res), "--resamples", "0"]) == 0
    out = capsys.readouterr().out
    assert "mteb:SICK-R" in out and "77.00" in out and "NoSuchTaskX" not in out, out
    assert f"{bad}: its task cannot be shown" in caplog.text and "left out" in caplog.text, caplog.text
    caplog.clear()
    lb = tmp_path / "lb"
    with caplog.at_level("WARNING"):
        assert main(["leaderboard", "--results", str(res), "--out", str(lb)]) == 0
    assert "mteb_NoSuchTaskX" in caplog.text and "its task cannot be shown" in caplog.text, caplog.text
    site = "\n".join(p.read_text() for p in lb.rglob("*.html"))
    assert "SICK-R" in site and "NoSuchTaskX" not in site
    assert good.is_file()
