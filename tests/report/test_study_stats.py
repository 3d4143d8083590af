"""A study column's statistics (report.stats' hierarchical bootstrap, Holm, TOST through
report.study_view.column_stats) on fixtures where each rule shows."""

from __future__ import annotations

import numpy as np
import pytest

from benchbench.evaluate.item_scores import pair_items
from benchbench.report import stats
from benchbench.report.aggregate import Cell
from benchbench.report.study_view import TIE_P, column_stats

N_ITEMS = 600


def _spearman(pred: np.ndarray, gold: np.ndarray) -> float:
    from scipy.stats import spearmanr

    return 100 * float(spearmanr(pred, gold).statistic)


def _cell(gold: np.ndarray, noises: list[float], rng: np.random.Generator) -> Cell:
    """One method's cell: seed s predicts gold plus noise of sd ``noises[s-1]`` (more noise, lower score)."""
    scores, items = {}, {}
    for s, sd in enumerate(noises, start=1):
        pred = gold + rng.normal(0, sd, gold.size)
        items[s] = pair_items({"all": (pred, gold)}, "spearman")
        scores[s] = _spearman(pred, gold)
    return Cell(scores, items=items)


@pytest.fixture(scope="module")
def gold():
    return np.random.default_rng(0).uniform(0, 5, N_ITEMS)


def test_seed_variance_not_item_noise_decides_the_tie_group(gold):
    """b's seeds scatter widely (noise sd 0.4 to 1.6) around a mean below a's steady seeds. The items-only
    bootstrap of the seed-averaged difference (the old test) separates them: 600 items pin the average of
    these three seeds down. With the seeds resampled too, three scattered seeds cannot: b joins the tie group."""
    rng = np.random.default_rng(1)
    a = _cell(gold, [0.7, 0.7, 0.7], rng)
    b = _cell(gold, [0.4, 1.6, 0.9], rng)
    old = stats.paired_bootstrap_items([a.items[s] for s in (1, 2, 3)], [b.items[s] for s in (1, 2, 3)], 2000, 0)
    assert old.p_value < TIE_P, old  # items alone: separated
    col = column_stats("stsb", {"a": a, "b": b}, n_resamples=4000)
    assert col.test == stats.HIERARCHICAL and col.best == "a"
    assert col.tied == {"a", "b"} and col.p["b"] >= TIE_P, col  # seeds x items: not separable
    # steady seeds with the same gap are separated by the same test: it is the seed scatter that decides
    c = _cell(gold, [1.0, 1.0, 1.0], rng)
    apart = column_stats("stsb", {"a": a, "c": c}, n_resamples=4000)
    assert apart.tied == {"a"} and apart.p["c"] < TIE_P, apart


def test_membership_is_stable_across_bootstrap_seeds():
    """Six methods at graded distances from the best: the tie group is the same for bootstrap seeds 0-2
    at the default 10,000 resamples, and the (Holm-adjusted) p-values near alpha (below 0.1) move by less
    than 0.02."""
    rng = np.random.default_rng(2)
    gold = rng.uniform(0, 5, 200)  # fewer items than the other fixtures: four full 10,000-resample columns
    cells = {
        "best": _cell(gold, [0.6, 0.62, 0.64, 0.61, 0.63], rng),  # five seeds, as a published study has
        "near": _cell(gold, [0.6, 0.66, 0.62, 0.64, 0.61], rng),
        "mid": _cell(gold, [0.75, 0.8, 0.7, 0.72, 0.78], rng),
        "far": _cell(gold, [1.2, 1.3, 1.25, 1.22, 1.28], rng),
        "wide": _cell(gold, [0.5, 1.4, 0.8, 0.6, 1.1], rng),
        "edge": _cell(gold, [0.8, 0.82, 0.84, 0.81, 0.83], rng),
    }
    cols = [column_stats("stsb", cells, n_resamples=10_000, seed=s) for s in range(3)]
    groups = {frozenset(c.tied) for c in cols}
    assert len(groups) == 1, [sorted(c.tied) for c in cols]
    assert {"best", "near", "mid", "wide", "edge"} == cols[0].tied, cols[0]  # far alone is separated
    for m in cols[0].p:
        ps = [c.p[m] for c in cols]
        if min(ps) < 0.1:  # near alpha: Monte-Carlo error +-0.003 at 10,000 resamples
            assert max(ps) - min(ps) < 0.02, (m, ps)
    assert min(abs(p - TIE_P) for p in cols[0].p.values()) > 0.01  # none borderline at this precision


def _start_cells(gold: np.ndarray, rng: np.random.Generator, shifts: dict[str, list[float]]) -> dict[str, Cell]:
    """A training-free start (every seed the same items) and trained cells whose seeds add ``shift`` points
    of noise-free change: each seed's predictions are the start's mixed with fresh noise by ``shift``."""
    base_pred = gold + rng.normal(0, 0.8, gold.size)
    base = pair_items({"all": (base_pred, gold)}, "spearman")
    out = {"start": Cell(dict.fromkeys((1, 2, 3), _spearman(base_pred, gold)), items=dict.fromkeys((1, 2, 3), base))}
    for name, noise in shifts.items():
        scores, items = {}, {}
        for s, sd in enumerate(noise, start=1):
            pred = base_pred + rng.normal(0, sd, gold.size)
            items[s] = pair_items({"all": (pred, gold)}, "spearman")
            scores[s] = _spearman(pred, gold)
        out[name] = Cell(scores, items=items)
    return out


def test_every_seed_on_one_side_within_the_margin_is_equivalent_tost_alone_decides(gold):
    """``consistent``: every seed a little below the start, well inside a 5-point margin: TOST passes and
    nothing vetoes it (issue 47: a consistent shift inside the margin is what the margin allows).
    ``mixed``: seeds on both sides, within the margin: ≈. ``far``: every seed many points below: not ≈
    (TOST fails by itself), and separably below."""
    rng = np.random.default_rng(3)
    cells = _start_cells(gold, rng, {"consistent": [0.15, 0.2, 0.18], "far": [1.5, 1.6, 1.4]})
    mixed_scores = {1: cells["start"].scores[1] + 0.3, 2: cells["start"].scores[1] - 0.3, 3: cells["start"].scores[1]}
    cells["mixed"] = Cell(mixed_scores)  # no items: the column falls back to the seeds test
    col = column_stats(
        "stsb", {k: v for k, v in cells.items() if k != "mixed"}, start="start", margin=5.0, n_resamples=4000
    )
    assert all(v < cells["start"].scores[1] for v in cells["consistent"].scores.values())
    assert col.start["consistent"].p_tost < TIE_P
    assert col.start["consistent"].equivalent and col.start["consistent"].verdict == "≈"
    assert col.start["far"].p_tost >= TIE_P and not col.start["far"].equivalent and col.start["far"].verdict == "↓"
    seeds_only = column_stats("stsb", cells, start="start", margin=5.0, n_resamples=4000)
    assert seeds_only.test == stats.SEEDS_ONLY and "mixed" in seeds_only.why
    assert seeds_only.start["mixed"].equivalent and seeds_only.start["mixed"].verdict == "≈"
    # a margin smaller than the seeds' spread: the same mixed cell is no longer shown equivalent
    narrow = column_stats("stsb", cells, start="start", margin=0.2, n_resamples=4000)
    assert not narrow.start["mixed"].equivalent and narrow.start["mixed"].verdict == "?"


BIT = 53.24665654229489  # plain-start's SICK-R, bit-identical to plm-mean's in all five seeds


def test_a_bit_identical_row_is_equivalent():
    """Five copies of one score against a reference of the same five copies: the seed-means are equal,
    yet numpy's mean of the five lands one ulp above each copy, so every seed lies "below" the reference's
    mean. The one-side veto refused ≈ here; TOST alone gives it (seeds alone and seeds x items)."""
    five = dict.fromkeys(range(1, 6), BIT)
    assert all(v < np.mean(list(five.values())) for v in five.values())  # the ulp the veto tripped on
    col = column_stats("sickr", {"ref": Cell(dict(five)), "row": Cell(dict(five))}, start="ref", margin=1.0)
    assert col.test == stats.SEEDS_ONLY and col.start["row"].equivalent and col.start["row"].verdict == "≈"
    pred = np.random.default_rng(9).normal(size=200)
    items = pair_items({"all": (pred, np.arange(200.0))}, "spearman")
    with_items = {m: Cell(dict(five), items=dict.fromkeys(five, items)) for m in ("ref", "row")}
    col = column_stats("sickr", with_items, start="ref", margin=1.0, n_resamples=2000)
    assert col.test == stats.HIERARCHICAL and col.start["row"].verdict == "≈"


@pytest.mark.parametrize("sign", [1, -1])
def test_tost_is_two_sided_seeds_on_both_sides_with_the_mean_beyond_the_margin(sign):
    """Seeds on both sides of the reference (so no one-side rule could decide), their mean 1.5 points away
    on either side of a 1-point margin: not ≈, whichever side. A TOST that tested one bound only would
    pass one of the two directions."""
    ref = Cell(dict.fromkeys(range(1, 6), 50.0))
    vals = [50.0 + sign * d for d in (-0.2, 1.9, 1.8, 2.0, 2.0)]  # one seed on the far side; mean 50 + 1.5
    row = Cell(dict(zip(range(1, 6), vals)))
    assert min(vals) < 50.0 < max(vals)
    col = column_stats("t", {"ref": ref, "row": row}, start="ref", margin=1.0, n_resamples=4000)
    st = col.start["row"]
    assert st.diff == pytest.approx(sign * 1.5) and st.p_tost >= TIE_P and not st.equivalent
    # the same seeds centred on the reference: ≈ (the test can pass, so the refusal above is the direction's)
    centred = Cell({s: v - sign * 1.5 for s, v in row.scores.items()})
    assert (
        column_stats("t", {"ref": ref, "row": centred}, start="ref", margin=1.0, n_resamples=4000)
        .start["row"]
        .equivalent
    )


def test_the_best_is_chosen_among_ranked_rows_when_a_context_row_scores_above_all_of_them():
    """A step-0 row (or a random init) above every ranked row: the column's best is still the highest
    ranked row, the context row is in no tie group and gets no p against the best."""
    cells = {
        "start": Cell({1: 50.0, 2: 50.2, 3: 49.9}),
        "m (step 0)": Cell({1: 80.0, 2: 80.1, 3: 79.9}),  # context: far above every ranked row
        "m": Cell({1: 60.0, 2: 60.3, 3: 59.8}),
        "n": Cell({1: 55.0, 2: 55.1, 3: 54.8}),
    }
    for test_cells in (cells, {k: Cell({1: v.scores[1]}) for k, v in cells.items()}):  # seeds test; no test
        col = column_stats(
            "t",
            test_cells,
            start={"m": "m (step 0)", "n": "start"},
            context={"m (step 0)": "start"},
            ranked={"start", "m", "n"},
            n_resamples=2000,
        )
        assert col.best == "m" and "m (step 0)" not in col.tied and "m (step 0)" not in col.p


def test_a_column_with_one_ranked_row_makes_no_rank_claim():
    """Only one ranked row stored (the rest context rows or empty): no tie group, no rank claim; the
    row's own test against its reference still stands."""
    cells = {
        "start": Cell({1: 50.0, 2: 50.2, 3: 49.9}),
        "start (random init)": Cell({1: 10.0, 2: 10.2, 3: 9.9}),
        "m": Cell({}),
    }
    col = column_stats("t", cells, context={"start (random init)": "start"}, ranked={"start", "m"}, n_resamples=2000)
    assert col.best == "start" and col.n_ranked == 1 and col.tied == set() and col.p == {}
    assert col.start["start (random init)"].verdict == "↓"
    two = column_stats("t", {**cells, "m": Cell({1: 40.0, 2: 40.1, 3: 39.9})}, ranked={"start", "m"})
    assert two.n_ranked == 2 and two.tied == {"start"}


def test_not_separated_is_not_equivalent():
    """A noisy cell the difference test cannot separate from the start is not ≈ either: inconclusive."""
    cells = {"start": Cell({1: 50.0, 2: 50.0, 3: 50.0}), "noisy": Cell({1: 46.0, 2: 54.5, 3: 50.5})}
    col = column_stats("t", cells, start="start", margin=1.0, n_resamples=4000)
    assert col.start["noisy"].p >= TIE_P and col.start["noisy"].p_tost >= TIE_P
    assert col.start["noisy"].verdict == "?" and not col.start["noisy"].equivalent


def test_holm_is_step_down_and_monotone():
    adj = stats.holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.5})
    assert adj == pytest.approx({"a": 0.04, "c": 0.09, "b": 0.09, "d": 0.5})
    assert stats.holm({"x": 0.3}) == {"x": 0.3} and stats.holm({"x": 0.6, "y": 0.7}) == {"x": 1.0, "y": 1.0}


def test_holm_makes_a_column_with_many_rivals_harder_to_separate():
    """One rival at raw p ~ 0.02 is separated alone; among eleven other (far) rivals Holm keeps it tied."""
    near = {1: 49.0, 2: 49.3, 3: 48.8, 4: 49.1, 5: 48.9}
    best = {1: 50.0, 2: 50.4, 3: 49.6, 4: 50.2, 5: 49.8}
    col1 = column_stats("t", {"best": Cell(best), "near": Cell(near)}, n_resamples=10_000)
    assert col1.p_raw["near"] < TIE_P and col1.tied == {"best"}
    many = {"best": Cell(best), "near": Cell(near)}
    many |= {f"far{i}": Cell({s: v - 10 - i for s, v in best.items()}) for i in range(11)}
    col = column_stats("t", many, n_resamples=10_000)
    assert col.p_raw["near"] == pytest.approx(col1.p_raw["near"], abs=0.01)
    assert (col.p["near"] >= TIE_P) == (12 * col.p_raw["near"] >= TIE_P)


def test_a_methods_seed_draws_do_not_depend_on_the_other_methods():
    a, b = Cell({1: 1.0, 2: 2.0, 3: 4.0}), Cell({1: 0.0, 2: 0.5, 3: 1.0})
    r1 = stats.hierarchical_bootstrap({"a": a.scores}, None, 500, 7)
    r2 = stats.hierarchical_bootstrap({"a": a.scores, "b": b.scores}, None, 500, 7)
    assert np.array_equal(r1.draws["a"], r2.draws["a"])
    # the seed level is a Student t with k-1 degrees of freedom around the seed-mean, scaled by std/sqrt(k):
    # its 97.5% point is the t-test's (4.303 for 3 seeds), not a resample of the three values (which can
    # never leave their range, so three seeds on one side of a rival put p at the floor)
    vals = [1.0, 2.0, 4.0]
    big = stats.hierarchical_bootstrap({"a": dict(zip((1, 2, 3), vals))}, None, 200_000, 1)
    se = np.std(vals, ddof=1) / np.sqrt(3)
    assert np.mean(big.draws["a"] > np.mean(vals) + 4.303 * se) == pytest.approx(0.025, abs=0.002)
    assert big.draws["a"].max() > max(vals)  # beyond the seeds' range: a bootstrap of seeds cannot get there


def test_three_seeds_on_one_side_give_the_t_tests_p_value():
    """A training-free start (every seed the same) and a cell whose three seeds all lie above it: the
    seeds-only p is the two-sided one-sample t-test's (df 2), not the bootstrap floor."""
    from scipy import stats as sps

    start, moved = {1: 82.03, 2: 82.03, 3: 82.03}, {1: 82.4, 2: 82.6, 3: 82.85}
    col = column_stats("t", {"start": Cell(start), "m": Cell(moved)}, start="start", n_resamples=10_000)
    t = sps.ttest_1samp(list(moved.values()), 82.03)
    assert col.start["m"].p == pytest.approx(t.pvalue, abs=0.008), (col.start["m"].p, t.pvalue)


def test_significance_uses_the_studies_test_and_names_why_seeds_alone(tmp_path):
    """`benchbench significance` prints the hierarchical bootstrap with Holm over the rivals; records
    without per-item scores fall back to seeds alone and the page says why."""
    from benchbench.report.significance import hierarchical_lines

    def rec(m, s, v):
        return {"method": m, "task": "stsb", "seed": s, "splits": {"test": {"main_score": v}}}

    chosen = {
        "a": {s: rec("a", s, 70.0 + 0.1 * s) for s in (1, 2, 3, 4, 5)},
        "b": {s: rec("b", s, 60.0 + 0.1 * s) for s in (1, 2, 3, 4, 5)},
        "c": {s: rec("c", s, v) for s, v in zip((1, 2, 3, 4, 5), (66.0, 74.0, 69.0, 73.0, 69.0))},
    }
    text = "\n".join(hierarchical_lines(chosen, "a", ["b", "c"], tmp_path, resamples=4000))
    b_line = next(ln for ln in text.splitlines() if ln.startswith("| b |"))
    c_line = next(ln for ln in text.splitlines() if ln.startswith("| c |"))
    assert b_line.startswith("| b | +10.00 |") and float(b_line.split("|")[4]) < 0.05
    assert c_line.startswith("| c | +0.10 |") and float(c_line.split("|")[4]) >= 0.05
    assert "seeds resampled alone" in text and "no per-item scores" in text and "Holm's correction over the 2" in text


def test_only_p_values_near_a_threshold_are_refined_to_the_full_resamples(monkeypatch):
    """The first pass (2,000 resamples) settles clear comparisons; the methods with a p-value between its
    floor and 3 x alpha, the best and the start are resampled 10,000 times on the same item draws."""
    from benchbench.report import study_view

    calls = []
    real = stats.hierarchical_bootstrap

    def spy(scores, items, n, seed):
        calls.append((n, set(scores)))
        return real(scores, items, n, seed)

    monkeypatch.setattr(stats, "hierarchical_bootstrap", spy)
    cells = {
        "best": Cell({1: 70.0, 2: 70.1, 3: 69.9}),
        "start": Cell({1: 60.0, 2: 60.0, 3: 60.0}),
        "far": Cell({1: 10.0, 2: 10.01, 3: 9.99}),
        "near": Cell({1: 69.0, 2: 69.3, 3: 68.7}),  # 1 point below the best, about 5 standard errors
    }
    col = study_view.column_stats("t", cells, start="start", margin=1.0, n_resamples=10_000)
    assert calls[0] == (study_view.SCREEN, set(cells))
    assert len(calls) == 2 and calls[1][0] == 10_000 and {"best", "start", "near"} <= calls[1][1]
    assert "far" not in calls[1][1]  # separated from everything on every first-pass resample
    assert "best" in col.tied and "far" not in col.tied and col.start["far"].verdict == "↓"
    assert 0.001 < col.p_raw["near"] < 3 * TIE_P  # near a threshold: from the second pass
    # the column says which counts its p-values came from, and the legend states them, not the full count alone
    assert (col.resamples, col.refined_resamples) == (study_view.SCREEN, 10_000) and "near" in col.refined
    assert "far" not in col.refined
    text = stats.resamples_text([col])
    assert text.startswith("2,000 resamples, rising to 10,000 for the p-values near a threshold (t: ")
    clear = study_view.column_stats("t", {k: cells[k] for k in ("best", "far")}, n_resamples=10_000)
    assert clear.refined == [] and stats.resamples_text([clear]).startswith("2,000 resamples (no p-value")
    assert "10,000" not in stats.resamples_text([clear])


def test_each_method_can_be_read_against_its_own_reference_row():
    """Step-0 rows: a mapping method -> its own reference; a reference row is never tested
    against itself, and a method whose reference has no cell gets no verdict."""
    cells = {
        "plm-mean": Cell({1: 60.0, 2: 60.0, 3: 60.0}),
        "plm-cls": Cell({1: 50.0, 2: 50.0, 3: 50.0}),
        "simcse": Cell({1: 55.0, 2: 55.2, 3: 54.9}),  # below the mean start, above its own CLS start
    }
    one = column_stats("t", cells, start="plm-mean", n_resamples=2000)
    own = column_stats("t", cells, start={"simcse": "plm-cls", "ct": "plm-step0"}, n_resamples=2000)
    assert one.start["simcse"].verdict == "↓" and own.start["simcse"].verdict == "↑"
    assert set(own.start) == {"simcse"} and own.start["simcse"].diff == pytest.approx(55.0333 - 50.0, abs=1e-3)
