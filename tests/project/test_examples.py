"""The examples a newcomer copies keep working: the one-TOML task and the third-party method plugin."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from conftest import REPO

from benchbench.core.errors import PluginError
from benchbench.core.registry import TASK_PATH_ENV, load_registry

EXAMPLE_TASK = REPO / "examples" / "example_task" / "example-sts.toml"
EXAMPLE_PLUGIN = REPO / "examples" / "benchbench-example-method" / "benchbench_wordcrop.py"


def test_one_toml_task_registers_through_the_task_path(monkeypatch):
    monkeypatch.setenv(TASK_PATH_ENV, str(EXAMPLE_TASK))
    reg = load_registry()
    spec = reg.task("example-sts")
    assert spec.kind == "sts" and spec.main_metric == "spearman"
    assert reg.owner[("tasks", "example-sts")].startswith(TASK_PATH_ENV)


def test_task_path_folder_and_bad_entry(monkeypatch, tmp_path):
    monkeypatch.setenv(TASK_PATH_ENV, str(EXAMPLE_TASK.parent))
    assert "example-sts" in load_registry().tasks
    monkeypatch.setenv(TASK_PATH_ENV, str(tmp_path / "nope.toml"))
    with pytest.raises(PluginError, match="nope.toml"):
        load_registry()


def test_example_task_evaluates_end_to_end(monkeypatch, tmp_path, tmp_cache):
    """The example method plugin trained for 3 steps on the example task's own sentences, scored on it."""
    monkeypatch.setenv(TASK_PATH_ENV, str(EXAMPLE_TASK))
    spec = importlib.util.spec_from_file_location("benchbench_wordcrop_example", EXAMPLE_PLUGIN)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["benchbench_wordcrop_example"] = mod
    spec.loader.exec_module(mod)
    reg = (
        load_registry(extra_plugins=[("wordcrop-example", mod)])
        if "wordcrop" not in load_registry().methods
        else load_registry()
    )
    from benchbench.run.runner import RunOptions, run

    report = run(
        RunOptions(
            method="wordcrop",
            tasks="example-sts",
            model="tiny-bert",
            data_dir=str(EXAMPLE_TASK.parent / "data"),
            output=str(tmp_path / "out"),
            overrides={"steps": "3", "batch_size": "8"},
            progress=False,
        ),
        reg,
    )
    (rec,) = report.records
    assert rec["task"] == "example-sts" and rec["train"]["steps"] == 3
    assert -100 <= rec["splits"]["test"]["main_score"] <= 100
    assert rec["data"] and all(len(v) == 64 for v in rec["data"].values())  # the pinned sha256 was checked
