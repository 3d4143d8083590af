"""A core study's front-page pieces: the three-sentence summary from both readings (own step 0, the
start), the paired interval of the figure, and the primary-endpoint figure itself."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from benchbench.report import study_view
from benchbench.report.site.plots import study_endpoint_plot, study_endpoint_plots
from benchbench.report.stats import Column, StartTest
from benchbench.run.study import load_study

CORE = {"tier": '"core"', "question": '"q?"', "seeds": "[1, 2, 3, 4, 5]", "step0_rows": "true"}
EXTRA = (
    '[primary]\ntask = "sts-mini"\nsplit = "test"\nstatistic = "spearman"\ncomparison = "own-step0"\n'
    '[cost]\ncpu_hours = 1.0\nmeasured = "probe"\n'
)


def _write(tmp_path, top, extra):
    doc = {"name": '"c"', "version": "1", "model": '"tiny-bert"', **top}
    text = "".join(f"{k} = {v}\n" for k, v in doc.items()) + "[budget]\nsteps = 4\nbatch_size = 2\n" + extra
    (tmp_path / "c.toml").write_text(text)
    return tmp_path / "c.toml"


@pytest.fixture
def core(tmp_path, env):
    top = {**CORE, "tasks": '["sts-mini", "stsb"]', "start": '"plm-mean"', "methods": '["plm-mean", "simcse", "mlm"]'}
    return load_study(str(_write(tmp_path, top, extra=EXTRA)))


def _col(task, tests):
    start = {m: StartTest(d, p, pt, eq, ref) for m, (d, p, pt, eq, ref) in tests.items()}
    return Column(task, None, set(), "seeds", {}, start=start)


def test_the_summary_reads_primary_own_step0_then_the_start_then_the_secondary_column(core):
    own = {
        "sts-mini": _col(
            "sts-mini",
            {"simcse": (2.5, 0.01, 0.9, False, "simcse (step 0)"), "mlm": (-0.2, 0.8, 0.01, True, "mlm (step 0)")},
        ),
        "stsb": _col("stsb", {"simcse": (-3.0, 0.02, 0.9, False, "s"), "mlm": (0.1, 0.5, 0.3, False, "m")}),
    }
    start = {"sts-mini": _col("sts-mini", {"simcse": (-1.5, 0.03, 0.6, False, "plm-mean")})}
    scores = {"sts-mini": {"plm-mean": {1: 60.0, 2: 62.0}}}
    text = study_view.core_summary(core, own, start, scores)
    sentences = text.split(". ")
    assert len(sentences) == 3
    assert sentences[0].startswith("Primary endpoint, sts-mini test spearman against each row's own step 0 (margin ±1)")
    assert "1 moved up (simcse +2.50), 1 stayed within the margin (≈) (mlm -0.20)" in sentences[0]
    assert sentences[1].startswith("Against the start's own training-free readout (plm-mean, 61.00): 1 moved down")
    assert (
        "stsb with the same encoders against own step 0: 1 inconclusive (mlm +0.10), 1 moved down (simcse -3.00)"
        in (sentences[2])
    )


def test_paired_interval_pairs_by_seed_and_uses_students_t():
    a, b = {1: 10.0, 2: 12.0, 3: 11.0, 9: 99.0}, {1: 9.0, 2: 10.0, 3: 11.0}  # seed 9 has no pair: left out
    mean, half, n = study_view.paired_interval(a, b)
    assert (mean, n) == (1.0, 3)
    assert half == pytest.approx(4.302652729911275 * 1.0 / math.sqrt(3))  # t(0.975, 2) x sd 1 / sqrt 3
    assert math.isnan(study_view.paired_interval({1: 1.0}, {1: 0.0})[1])


def test_the_endpoint_figure_draws_each_trained_row_and_the_start_line(core):
    scores = {
        "sts-mini": {
            "plm-mean": dict.fromkeys(range(1, 6), 60.0),
            "simcse (step 0)": dict.fromkeys(range(1, 6), 50.0),
            "simcse": {s: 55.0 + s / 10 for s in range(1, 6)},
            "mlm (step 0)": dict.fromkeys(range(1, 6), 60.0),
            "mlm": {},
        }
    }
    view = SimpleNamespace(study=core, extended=False, seed_scores=scores)
    plots = study_endpoint_plots([SimpleNamespace(view=view)])
    name, title = study_endpoint_plot(core.name)
    assert list(plots) == [name] and plots[name][0] == title
    svg = plots[name][1]
    assert "simcse" in svg and "start's readout (plm-mean)" in svg
    assert ">mlm<" not in svg  # a row with no stored cell is not drawn
    assert study_endpoint_plots([SimpleNamespace(view=SimpleNamespace(**{**vars(view), "extended": True}))]) == {}
