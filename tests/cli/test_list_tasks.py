"""`benchbench list tasks` says how MTEB's tasks are named (``mteb:NAME``), and ``--mteb`` lists every
task of the installed mteb that such a name resolves (the ones ``mteb_spec`` accepts), or says how to
install mteb when it is not installed."""

from __future__ import annotations

import sys

import pytest

from benchbench.cli.main import main


def test_list_tasks_says_how_mteb_tasks_are_named_and_how_to_list_them(capsys):
    assert main(["list", "tasks"]) == 0
    out = capsys.readouterr().out
    assert "mteb:NAME" in out and "--tasks mteb:STSBenchmark" in out and "benchbench list tasks --mteb" in out


def test_list_tasks_mteb_lists_exactly_the_tasks_mteb_spec_accepts(capsys):
    pytest.importorskip("mteb")
    from benchbench.evaluate.adapters.hf import mteb_spec

    assert main(["list", "tasks", "--mteb"]) == 0
    out = capsys.readouterr().out
    rows = [line.split()[0] for line in out.splitlines() if line.startswith("mteb:")]
    assert "mteb:STSBenchmark" in rows and "mteb:SprintDuplicateQuestions" in rows and "mteb:SciFact" in rows
    assert "mteb:STS22" not in rows  # multilingual: refused by mteb_spec, so not listed
    assert "mteb:Banking77Classification" not in rows  # a type benchbench does not score
    assert "mteb:CQADupstackRetrieval" not in rows  # aggregate: no dataset of its own
    assert len(rows) == len(set(rows)) > 100
    for name in rows[:: max(1, len(rows) // 12)]:  # a sample across types: each resolves to a task spec
        assert mteb_spec(name.removeprefix("mteb:")).name == name
    assert f"{len(rows)} tasks of mteb" in out


def test_list_tasks_mteb_without_mteb_says_how_to_install_it(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "mteb", None)  # import mteb raises ImportError
    assert main(["list", "tasks", "--mteb"]) == 2
    err = capsys.readouterr().err
    assert "needs the mteb package, which is not installed" in err and "pip install 'benchbench[hf]'" in err


def test_mteb_is_an_option_of_list_tasks_only(capsys):
    assert main(["list", "methods", "--mteb"]) == 2
    assert "benchbench list tasks --mteb" in capsys.readouterr().err
