"""A study's [curves] and step0_rows reach its cells: the curve options in every trained cell, one step-0
cell per trained method (trans-encoder's by cycles=0, none for bertflow, the start or plm rows)."""

from __future__ import annotations

import pytest

from benchbench.core.errors import ConfigError
from benchbench.run.study import parse, plan

DOC = {
    "name": "s",
    "version": 1,
    "model": "tiny-bert:16:1:2:32",
    "start": "plm-mean",
    "seeds": [1, 2, 3],
    "tasks": ["stsb"],
    "methods": ["plm-mean", "simcse", "bertflow", "trans-encoder"],
    "budget": {"steps": 100, "batch_size": 16},
    "set": {"trans-encoder": {"cycles": "1"}},
}


def test_curves_and_step0_rows_reach_the_cells():
    st = parse({**DOC, "curves": {"every": 10, "task": "stsb"}, "step0_rows": True}, "x.toml")
    cells = plan(st, ["sts12"], seeds=[1])
    got = {
        (c.method, c.options["overrides"].get("steps"), c.options["overrides"].get("cycles")): c.options for c in cells
    }
    assert set(got) == {
        ("plm-mean", None, None),
        ("simcse", "100", None),
        ("simcse", "0", None),
        ("bertflow", "100", None),  # no step-0 row: its step 0 is a random flow
        ("trans-encoder", None, "1"),
        ("trans-encoder", None, "0"),
    }
    curve = {"eval_every": 10, "eval_split": "dev", "eval_task": "stsb"}
    assert all(got[k].items() >= curve.items() for k in got if k[0] != "plm-mean")
    assert "eval_every" not in got[("plm-mean", None, None)]


def test_without_curves_the_cells_are_as_before():
    cells = plan(parse(DOC, "x.toml"), ["sts12"], seeds=[1])
    assert [c.options for c in cells if c.method == "simcse"] == [{"overrides": {"steps": "100", "batch_size": "16"}}]


@pytest.mark.parametrize("bad", [{"every": 0}, {"every": "10"}, {"evry": 10}, {"every": 5, "split": ""}])
def test_bad_curves_are_refused_naming_the_key(bad):
    with pytest.raises(ConfigError, match="curves"):
        parse({**DOC, "curves": bad}, "x.toml")
    with pytest.raises(ConfigError, match="step0_rows"):
        parse({**DOC, "step0_rows": "yes"}, "x.toml")


def test_a_study_file_with_curves_loads_and_names_an_unknown_curve_task(tmp_path):
    from benchbench.run.study import load_study

    text = """name = "s"
version = 1
model = "tiny-bert:16:1:2:32"
start = "plm-mean"
seeds = [1, 2, 3]
tasks = ["stsb"]
methods = ["plm-mean", "simcse"]
step0_rows = true
[budget]
steps = 100
batch_size = 16
[curves]
every = 25
task = "TASK"
"""
    good = tmp_path / "good.toml"
    good.write_text(text.replace("TASK", "stsb"))
    st = load_study(str(good))
    assert (st.curve_every, st.curve_split, st.curve_task, st.step0_rows) == (25, "dev", "stsb", True)
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("TASK", "no-such-task"))
    with pytest.raises(ConfigError, match=r"bad.toml: curves.task"):
        load_study(str(bad))


def test_per_task_curves_follow_each_task_on_its_own_split():
    """[curves.per_task]: TwitterPara cells (no dev split) follow its heldout split, STS cells STS-B dev; a
    training-free row gets no curve."""
    doc = {**DOC, "tasks": ["twitterpara", "stsb"], "step0_rows": True}
    st = parse(
        {**doc, "curves": {"every": 10, "task": "stsb", "per_task": {"twitterpara": "twitterpara:heldout"}}}, "x.toml"
    )
    assert st.curve_for("twitterpara") == ("twitterpara", "heldout") and st.curve_for("stsb") == ("stsb", "dev")
    cells = plan(st, ["twitterpara", "stsb"], seeds=[1])
    on = {(c.method, c.task): (c.options.get("eval_task"), c.options.get("eval_split")) for c in cells}
    assert on[("simcse", "twitterpara")] == ("twitterpara", "heldout")
    assert on[("simcse", "stsb")] == ("stsb", "dev")
    assert on[("plm-mean", "twitterpara")] == (None, None)


@pytest.mark.parametrize(
    "per, match",
    [
        ({"twitterpara": "twitterpara"}, r'curves.per_task.twitterpara.*"task:split"'),
        ({"twitterpara": ":heldout"}, r"curves.per_task.twitterpara"),
        ({"twitterpara": 3}, r"curves.per_task.twitterpara"),
    ],
)
def test_bad_per_task_curves_are_refused_naming_the_entry(per, match):
    with pytest.raises(ConfigError, match=match):
        parse({**DOC, "curves": {"every": 10, "per_task": per}}, "x.toml")


@pytest.mark.parametrize(
    "per, match",
    [
        ({"sickr": "twitterpara:heldout"}, r"curves.per_task.sickr.*not one of the study's tasks"),
        ({"twitterpara": "twitterpara:dev"}, r"curves.per_task.twitterpara.*no 'dev' split"),
        ({"twitterpara": "no-such:dev"}, r"curves.per_task.twitterpara"),
    ],
)
def test_per_task_curves_name_known_tasks_and_splits(per, match):
    from benchbench.run.study import check_known_names

    st = parse({**DOC, "tasks": ["twitterpara", "stsb"], "curves": {"every": 10, "per_task": per}}, "x.toml")
    with pytest.raises(ConfigError, match=match):
        check_known_names(st)
