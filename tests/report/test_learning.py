"""The dev-curve verdict (benchbench.report.learning: moved up / moved down / flat / not assessable) at
the values where each branch of its rule shows, and the study-column curves figure
(benchbench.report.plots_curves) with a hostile name."""

from __future__ import annotations

import io
import math

import pytest

from benchbench.report.learning import (
    FLAT,
    MOVED_DOWN,
    MOVED_UP,
    NOT_ASSESSABLE,
    VERDICTS,
    cell_verdict,
    dev_curve_of,
    learning_verdict,
    record_verdict,
)
from benchbench.report.plots_curves import curves_figure, plot_text

LN16 = math.log(16)
ESIMCSE_CHANCE = math.log(16 + 160)  # batch 16 + a full queue of 160
STEPS = [0, 20, 40, 60, 80, 100]


def _curve(values, steps=STEPS):
    return list(zip(steps, values, strict=True))


def test_a_fall_is_never_learned_bsl_stsb_dev():
    """BSL's STS-B dev curve on post-training-minilm (seed 1, 200 steps): 86.72 at step 0, 85.45 at the end,
    with a loss far below zero. The page called such cells "learned"; the verdict is "moved down"."""
    bsl = [(0, 86.7163), (20, 85.2331), (40, 85.6524), (60, 85.1447), (100, 85.4282), (200, 85.4470)]
    loss = [(10, -0.771), (100, -1.503), (200, -1.576)]
    v = learning_verdict(bsl, loss, None, tolerance=1.0)
    assert v.verdict == MOVED_DOWN and "86.72 -> 85.45 (-1.27)" in v.reason
    assert "learned" not in VERDICTS and all("learn" not in w for w in VERDICTS)


def test_flat_loss_at_chance_is_flat_and_a_rising_curve_moved_up():
    at_chance = _curve([2.80, 2.78, 2.77, 2.79, 2.76, 2.75])  # 2.75 / ln 16 = 0.99
    v = learning_verdict(None, at_chance, LN16, tolerance=1.0)
    assert v.verdict == FLAT and "0.99 x chance" in v.reason and "did not move" in v.reason
    # the same loss, but the dev curve ends 1.4 points above its step-0 value: the dev curve decides
    rising = _curve([40.0, 40.5, 41.0, 41.5, 41.2, 41.4])
    assert learning_verdict(rising, at_chance, LN16, tolerance=1.0).verdict == MOVED_UP
    # a loss that fell well below chance with no dev curve: the objective was fit, the direction unknown
    falling = _curve([2.5, 1.9, 1.2, 0.8, 0.5, 0.3])
    v = learning_verdict(None, falling, LN16, tolerance=1.0)
    assert v.verdict == NOT_ASSESSABLE and "which way" in v.reason


def test_no_signal_is_not_assessable_never_silent():
    for dev, loss, chance in [
        (None, None, None),
        ([], [], LN16),
        ([(0, 40.0)], None, None),  # one point is no curve (a step-0 row's)
        (None, _curve([2.5, 1.9, 1.2, 0.8, 0.5, 0.3]), None),  # a falling loss with no level to read it by
    ]:
        v = learning_verdict(dev, loss, chance, tolerance=1.0)
        assert v.verdict == NOT_ASSESSABLE and v.reason


def test_the_last_point_decides_and_the_tolerance_is_strict():
    """+1.0 exactly at the end is flat; past it, moved up; a curve that rose 3 points and came back ends
    flat, and the reason says it left the margin on the way."""
    fell_loss = _curve([2.5, 1.9, 1.2, 0.8, 0.5, 0.3])
    edge = _curve([40.0, 40.5, 39.2, 40.3, 40.9, 41.0])
    v = learning_verdict(edge, fell_loss, LN16, tolerance=1.0)
    assert v.verdict == FLAT and "within 1 at the end" in v.reason
    assert learning_verdict(edge, fell_loss, LN16, tolerance=0.99).verdict == MOVED_UP
    back = learning_verdict(_curve([40.0, 43.0, 42.0, 41.0, 40.5, 40.2]), None, None, tolerance=1.0)
    assert back.verdict == FLAT and "after reaching +3.00" in back.reason
    down = _curve([40.0, 40.5, 39.2, 39.3, 39.1, 38.9])
    assert learning_verdict(down, None, None, tolerance=1.0).verdict == MOVED_DOWN


def test_a_flat_curve_on_another_tasks_dev_split_does_not_decide_flat():
    """TwitterPara has no dev split: its cells are followed on STS-B dev. A flat STS-B curve says nothing
    about TwitterPara, so the loss decides (reduced: not assessable; at chance: flat); a move there
    still shows the encoder moved, and the reason says where it was measured."""
    flat = _curve([40.0, 40.5, 39.2, 41.0, 40.9, 40.3])
    fell_loss = _curve([2.5, 1.9, 1.2, 0.8, 0.5, 0.3])
    at_chance = _curve([2.77, 2.76, 2.77, 2.76, 2.77, 2.76])
    v = learning_verdict(flat, fell_loss, LN16, tolerance=1.0, dev_on_task=False)
    assert v.verdict == NOT_ASSESSABLE and "another task's dev split" in v.reason
    assert learning_verdict(flat, at_chance, LN16, tolerance=1.0, dev_on_task=False).verdict == FLAT
    assert learning_verdict(flat, None, None, tolerance=1.0, dev_on_task=False).verdict == NOT_ASSESSABLE
    rose = _curve([40.0, 42.0, 45.0, 45.5, 46.0, 46.0])
    up = learning_verdict(rose, at_chance, LN16, tolerance=1.0, dev_on_task=False)
    assert up.verdict == MOVED_UP and "another task's dev split" in up.reason


def test_the_chance_ratio_boundary():
    chance = 2.0
    just_at = [(0, 2.2), (100, 0.95 * chance)]
    just_below = [(0, 2.2), (100, 0.95 * chance - 1e-6)]
    assert learning_verdict(None, just_at, chance, tolerance=1.0).verdict == FLAT
    assert learning_verdict(None, just_below, chance, tolerance=1.0).verdict == NOT_ASSESSABLE


def test_a_rising_loss_is_flagged_esimcse():
    rising = _curve([3.7, 3.9, 4.2, 4.5, 4.7, 4.8])  # 4.8 / ln 176 = 0.93: below the chance ratio
    v = learning_verdict(None, rising, ESIMCSE_CHANCE, tolerance=1.0)
    assert v.flags == ("loss rose 3.7 -> 4.8",)
    assert v.verdict == FLAT  # a loss that rose was not reduced by training
    # the flag stays when the dev curve rose (and the verdict follows the dev curve)
    up = learning_verdict(_curve([40, 42, 43, 44, 44, 45]), rising, ESIMCSE_CHANCE, tolerance=1.0)
    assert up.verdict == MOVED_UP and up.flags == ("loss rose 3.7 -> 4.8",)
    # a loss that wobbles up by less than 5% is not flagged
    assert not learning_verdict(None, [(0, 2.0), (100, 2.09)], 5.0, tolerance=1.0).flags


def test_a_falling_dev_curve_moved_down_whatever_the_loss():
    fell = _curve([74.5, 72.0, 70.1, 69.0, 68.2, 67.5])
    low_loss = _curve([0.08, 0.02, 0.005, 0.001, 0.0008, 0.0005])
    v = learning_verdict(fell, low_loss, LN16, tolerance=1.0)
    assert v.verdict == MOVED_DOWN and "74.50 -> 67.50 (-7.00)" in v.reason
    at_chance = _curve([2.8] * 6)
    assert learning_verdict(fell, at_chance, LN16, tolerance=1.0).verdict == MOVED_DOWN


def test_bad_tolerance_is_refused():
    with pytest.raises(ValueError, match="tolerance"):
        learning_verdict(None, None, None, tolerance=float("nan"))


def _rec(seed, dev=None, loss=None, chance=None, **train):
    t = dict(train)
    if dev is not None:
        t["monitor"] = [[s, {"stsb:dev/spearman": v}] for s, v in dev]
    if loss is not None:
        t["loss_curve"] = [list(p) for p in loss]
    if chance is not None:
        t["loss_chance"] = chance
    return {"seed": seed, "task": "sts12", "train": t}


def test_from_records_step0_rows_and_seeds_that_disagree():
    flat = _curve([40.0, 40.1, 40.2, 40.0, 39.9, 40.1])
    up = _curve([40.0, 42.0, 43.0, 44.0, 44.0, 45.0])
    assert dev_curve_of(_rec(1, flat))[0] == (0.0, 40.0)
    several = {"train": {"monitor": [[0, {"a": 1.0, "b": 2.0}], [5, {"a": 3.0, "b": 4.0}]]}}
    assert dev_curve_of(several) == [] and dev_curve_of(several, "b") == [(0.0, 2.0), (5.0, 4.0)]
    step0 = _rec(1, [(0, 40.0)], steps=0, step0_row=True)
    assert record_verdict(step0, tolerance=1.0).verdict == NOT_ASSESSABLE
    both = cell_verdict([_rec(1, flat), _rec(2, flat)], tolerance=1.0)
    assert both.verdict == FLAT and both.reason.startswith("all 2 seeds")
    split = cell_verdict([_rec(1, flat), _rec(2, up), _rec(3, up)], tolerance=1.0)
    assert split.verdict == NOT_ASSESSABLE and "1 flat" in split.reason and "2 moved up" in split.reason
    assert cell_verdict([], tolerance=1.0).verdict == NOT_ASSESSABLE


def test_plot_text_escapes_dollars_only():
    assert plot_text(r"$\oops$") == r"\$\oops\$"
    assert plot_text("a\u202eb") == "a\\u202eb"


@pytest.mark.parametrize("parse_math", [True, False])
def test_curves_figure_renders_a_mathtext_name_literally(parse_math):
    import matplotlib

    name = r"$\oops$"
    records = {
        name: [_rec(1, _curve([40, 41, 42, 43, 44, 45]), _curve([2.7, 2.5, 2.2, 2.0, 1.9, 1.8]), LN16)],
        "simcse": [_rec(s, _curve([40, 40.2, 40.1, 40, 40, 40.1])) for s in (1, 2)],  # no loss: footnoted
    }
    with matplotlib.rc_context({"text.parse_math": parse_math}):  # the caller's setting does not matter
        fig = curves_figure(records, "sts12 $x$", verdicts={name: "moved up"})
    buf = io.StringIO()
    fig.savefig(buf, format="svg")  # a formula parse of \oops would raise here
    svg = buf.getvalue()
    assert r"$\oops$ (moved up)" in svg and "sts12 $x$: dev curve" in svg
    assert "no loss/chance: simcse" in svg
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert labels == [r"\$\oops\$ (moved up)", "chance"]
