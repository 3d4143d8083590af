"""``study rederive``: the sampled cell (cheapest trained cell of the primary endpoint, first seed) is
re-computed from scratch and must equal its stored record; a stored score off by 0.01 fails."""

from __future__ import annotations

import json
import shutil

import pytest
from test_study_spec import _write

from benchbench.core.errors import ConfigError
from benchbench.run import rederive, study
from benchbench.run.study import load_study
from benchbench.store.results import ResultStore, checksum

PRIMARY = '[primary]\ntask = "sts-mini"\nsplit = "test"\nstatistic = "spearman"\ncomparison = "own-step0"\n'


@pytest.fixture
def ran(tmp_path, env):
    f = _write(
        tmp_path,
        {
            "tasks": '["sts-mini"]',
            "start": '"plm-mean"',
            "methods": '["plm-mean", "simcse", "mlm"]',
            "step0_rows": "true",  # a step-0 row shares its method's name: it must never be the sampled cell
        },
        extra=PRIMARY,
    )
    st = load_study(str(f))
    out = tmp_path / "out"
    cells = [c for c in study.plan(st, ["sts-mini"], [1, 2]) if c.method != "plm-mean"]
    assert {o.status for o in study.run(st, str(out), "local", cells=cells)} == {"done"}
    return st, out


def test_the_sampled_cell_is_the_cheapest_trained_cell_of_the_primary_task_at_the_first_seed(ran):
    st, out = ran
    records = list(ResultStore(out).records())
    trained = [r for r in records if r["seed"] == 1 and r["task"] == "sts-mini" and r["train"].get("steps")]
    assert len(trained) == 2  # simcse and mlm; their step-0 cells are stored too but never sampled
    cheapest = min((r["train"]["seconds"], r["method"]) for r in trained)[1]
    assert rederive.sampled_cell(st, records) == (cheapest, "sts-mini", 1)


def test_a_rederived_cell_equals_its_record_and_a_planted_0_01_difference_fails(ran, tmp_path):
    st, out = ran
    got = rederive.rederive(st, list(ResultStore(out).records()))
    assert got.ok and got.same_weights and got.diff == 0.0
    trained = {r["method"]: r for r in ResultStore(out).records() if r["seed"] == 1 and r["train"].get("steps")}
    assert got.stored == trained[got.cell.split("/")[0]]["splits"]["test"]["main_score"]  # the trained cell's
    assert "bit-identical weights: OK" in got.line()
    # a copy of the records whose stored score is 0.01 points off
    planted = tmp_path / "planted"
    shutil.copytree(out, planted)
    method = got.cell.split("/")[0]
    for f in planted.rglob("sts-mini.json"):
        rec = json.loads(f.read_text())
        if rec["method"] == method and rec["seed"] == 1 and rec["train"].get("steps"):
            rec["splits"]["test"]["main_score"] += 0.01
            rec["checksum"] = checksum(rec)  # a record stored so, not a damaged one (that would be left out)
            f.write_text(json.dumps(rec))
    bad = rederive.rederive(st, list(ResultStore(planted).records()))
    assert not bad.ok and bad.diff == pytest.approx(0.01)
    assert "DIFFERS by more than 0.005 points" in bad.line()
    assert rederive.TOLERANCE == 0.005


def test_without_a_primary_endpoint_or_stored_cell_there_is_nothing_to_rederive(tmp_path, env):
    st = load_study(str(_write(tmp_path, {"tasks": '["sts-mini"]'})))
    with pytest.raises(ConfigError, match="declares no primary endpoint"):
        rederive.sampled_cell(st, [])
    st = load_study(str(_write(tmp_path, {"tasks": '["sts-mini"]'}, extra=PRIMARY)))
    with pytest.raises(ConfigError, match="no stored trained cell of sts-mini at seed 1"):
        rederive.sampled_cell(st, [])
