"""``benchbench run``'s reference rows: beside a trained row, the start read untrained with its own
mean pooling (plm-mean) and the method's own step 0, each an ordinary run under its own key (reused
once stored, so a second run costs nothing), first in the table under a label that says what it is;
opt-in (--reference): none without it, none for a training-free method, none with --json."""

from __future__ import annotations

import json

import pytest

from benchbench.cli.main import main
from benchbench.core.registry import load_registry
from benchbench.run.references import references_for
from benchbench.run.runner import RunOptions

TINY = "tiny-bert:16:1:2:32"
START = "start: plm-mean (no training)"
STEP0 = "tsdae at step 0 (no training)"


def _run(*extra: str) -> None:
    args = ["run", "--method", "tsdae", "--model", TINY, "--tasks", "sts-mini", "--steps", "2"]
    assert main([*args, "--batch-size", "4", "--output", "out", *extra]) == 0


def _stored(root) -> list[dict]:
    return [json.loads(p.read_text()) for p in root.rglob("sts-mini.json")]


def _table_rows(out: str) -> list[str]:
    """The method cell of each row of the printed table."""
    return [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ") and "---" not in line][1:]


def test_a_trained_run_shows_the_start_and_its_step_0_first_and_reuses_them(env, monkeypatch, capsys):
    monkeypatch.chdir(env)
    _run("--reference")
    out, err = capsys.readouterr()
    assert _table_rows(out) == [START, STEP0, "tsdae batch_size=4 steps=2"]
    assert "reference rows: 2 evaluated, 0 already stored" in err
    by_method = {(r["method"], r["config"].get("steps")): r for r in _stored(env / "out")}
    assert set(by_method) == {("plm-mean", None), ("tsdae", 0), ("tsdae", 2)}
    assert by_method[("tsdae", 0)]["train"]["step0_row"] is True  # the loop's step 0, not another encoder
    assert by_method[("tsdae", 0)]["config"]["batch_size"] == 4  # the run's options, stopped at step 0
    assert by_method[("plm-mean", None)]["model"] == by_method[("tsdae", 2)]["model"]  # the same start
    _run("--reference")  # stored: nothing is evaluated again, the rows are the same
    out, err = capsys.readouterr()
    assert _table_rows(out) == [START, STEP0, "tsdae batch_size=4 steps=2"]
    assert "0 evaluated, 1 already stored" in err and "reference rows: 0 evaluated, 2 already stored" in err


def test_no_reference_and_json_compute_none(env, monkeypatch, capsys):
    monkeypatch.chdir(env)
    _run()
    out, err = capsys.readouterr()
    assert _table_rows(out) == ["tsdae batch_size=4 steps=2"] and "reference rows" not in out + err
    _run("--json", "--reference")
    assert [r["method"] for r in json.loads(capsys.readouterr().out)] == ["tsdae"]
    assert [r["method"] for r in _stored(env / "out")] == ["tsdae"]  # no reference was computed


def test_a_training_free_method_has_no_reference_rows(env, monkeypatch, capsys):
    monkeypatch.chdir(env)
    assert (
        main(["run", "--method", "plm-cls", "--model", TINY, "--tasks", "sts-mini", "--output", "out", "--reference"])
        == 0
    )
    out, err = capsys.readouterr()
    assert _table_rows(out) == ["plm-cls"] and "reference rows" not in out + err


def _refs(method: str, **kw):
    opts = RunOptions(method=method, tasks="sts-mini", model=TINY, **kw)
    refs, why = references_for(opts, load_registry())
    return [(r.options.method, r.options.overrides, r.label) for r in refs], why


def test_which_reference_rows_a_run_gets():
    got, why = _refs("tsdae", overrides={"steps": "200", "lr": "1e-4"}, force=True, retrain=True, eval_every=5)
    assert got == [("plm-mean", {}, START), ("tsdae", {"steps": "0", "lr": "1e-4"}, STEP0)]
    assert why == ""
    refs, _ = references_for(RunOptions(method="tsdae", tasks="x", model=TINY, force=True, retrain=True, eval_every=5))
    assert all(not r.options.force and not r.options.retrain and not r.options.eval_every for r in refs)
    assert _refs("tsdae", overrides={"steps": "0"})[0] == [("plm-mean", {}, START)]  # the run IS its step 0
    got, why = _refs("bertflow")  # no meaningful step 0: the start only, and the table says why
    assert got == [("plm-mean", {}, START)] and why.startswith("no step-0 row")
    assert _refs("plm-mean") == ([], "") and _refs("glove-avg") == ([], "")  # training-free: no rows
    got, why = _refs("tsdae", setup="supervised")
    assert got == [] and "--setup" in why


def test_the_start_row_is_read_by_the_bi_encoder_without_the_runs_corpus_or_train_task():
    opts = RunOptions(method="tsdae", tasks="sts-mini", model=None, score="cross", corpus="x.txt", train_task="stsb")
    start, step0 = references_for(opts, load_registry())[0]
    assert start.options.model == "all-MiniLM-L6-v2"  # the method's default start, named
    assert (start.options.score, start.options.corpus, start.options.train_task) == ("bi", None, None)
    assert (step0.options.score, step0.options.corpus, step0.options.train_task) == ("cross", "x.txt", "stsb")


@pytest.mark.parametrize("world", ["2"])
def test_a_multi_process_run_computes_none(monkeypatch, world):
    monkeypatch.setenv("WORLD_SIZE", world)
    got, why = _refs("tsdae")
    assert got == [] and "one process" in why


def test_summarise_puts_the_reference_rows_first_under_their_labels():
    from benchbench.report.leaderboard import summarise

    def rec(method, chash, score):
        return {
            "method": method,
            "config_hash": chash,
            "config": {},
            "model": "m",
            "seed": 1,
            "task": "t",
            "splits": {"test": {"main_metric": "s", "main_score": score, "metrics": {"s": score}}},
        }

    records = [rec("a-trained", "h1", 0.5), rec("b-start", "h2", 0.4), rec("a-trained", "h3", 0.3)]
    _, rows, _ = summarise(records, ["t"], references=[("b-start", "h2", "start"), ("a-trained", "h3", "step 0")])
    assert [r[0] for r in rows] == ["start", "step 0", "a-trained [h1]"]
    _, rows, _ = summarise(records, ["t"])
    assert [r[0] for r in rows] == ["a-trained [h1]", "a-trained [h3]", "b-start"]
