"""The useb suite: Table 2's average of the four main scores, marked partial (never silently smaller)
when a dataset is missing or partial, and the dev-split rule inside a suite run."""

import dataclasses
import shutil

import pytest
from helpers import FIXTURES

from benchbench.report.leaderboard import render, summarise
from benchbench.run.runner import RunOptions, run

FIX = FIXTURES / "useb"
USEB = ["askubuntu", "cqadupstack", "twitterpara", "scidocs"]


@pytest.fixture
def reg(registry, tmp_path, monkeypatch):
    monkeypatch.setenv("BENCHBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("BENCHBENCH_OFFLINE", "1")
    for t in USEB:  # the fixtures are not the published bytes: no sha256 to check
        registry.tasks[t] = dataclasses.replace(registry.task(t), files={})
    return registry


def test_suite_is_the_four_datasets(registry):
    assert registry.suites["useb"].tasks == USEB


def test_suite_average_is_partial_when_a_dataset_is_missing(reg, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(FIX / "native", data)
    shutil.rmtree(data / "scidocs")
    report = run(
        RunOptions(
            method="bm25", tasks="useb", data_dir=str(data), output=str(tmp_path / "out"), splits=["dev", "test"]
        ),
        reg,
    )
    assert "scidocs/paper_metadata_view_cite_read.json" in report.missing["scidocs"]
    assert report.unavailable["twitterpara"] == ["dev"] and report.unavailable["cqadupstack"] == ["dev"]
    # BM25 ties every PIT fixture pair: its Spearman is undefined, stored as null and named, the rest kept
    tp = next(r for r in report.records if r["task"] == "twitterpara")["splits"]["test"]
    assert tp["scores"]["spearman_pit"] is None and tp["main_score"] is not None
    assert any("undefined" in n and "spearman_pit" in n for n in tp["notes"])
    headers, rows, notes = summarise(report.records, report.tasks, {"useb": USEB}, split="test", missing=report.missing)
    (row,) = rows
    cells = dict(zip(headers, row))
    assert cells["scidocs"] == "n/a" and cells["cqadupstack"].endswith("*")  # 2 of 12 forums: partial
    # before: an average over 3 of 4 tasks (one of them partial), marked only with "*"; now none, and
    # the footnote names what the row lacks
    assert cells["useb avg"] == ""
    text = render(headers, rows, notes)
    assert "useb avg: only over rows with all 4 tasks complete" in text
    assert "missing scidocs (in 1 row)" in text and "partial cqadupstack (in 1 row)" in text
    assert "2 of 12 forums" in text
    dev_rows = summarise(report.records, report.tasks, {"useb": USEB}, split="dev", missing=report.missing)[1]
    assert dict(zip(headers, dev_rows[0]))["twitterpara"] == ""  # nothing evaluated in place of the missing dev split


def test_complete_suite_average_is_not_marked(reg, tmp_path):
    records = []
    for t in USEB:
        records.append(
            {
                "method": "m",
                "model": "x",
                "task": t,
                "splits": {"test": {"main_score": 10.0 * (USEB.index(t) + 1), "partial": False, "notes": []}},
            }
        )
    headers, rows, notes = summarise(records, USEB, {"useb": USEB})
    assert dict(zip(headers, rows[0]))["useb avg"] == "25.00" and not any("useb avg" in n for n in notes)
