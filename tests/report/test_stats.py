"""Seeds and significance on hand-made numbers (benchbench.report.stats)."""

import numpy as np
import pytest

from benchbench.core.errors import ConfigError
from benchbench.report.stats import dagger, format_mean_std, mean_std, paired_bootstrap, paired_test


def test_mean_std_is_sample_std():
    m, s = mean_std({1: 1.0, 2: 2.0, 3: 3.0})
    assert m == 2.0 and s == pytest.approx(1.0)  # ddof=1 (population std would be 0.816)
    assert mean_std([5.0]) == (5.0, 0.0)
    assert format_mean_std([1.0, 2.0, 3.0]) == "2.00 ± 1.00"
    assert format_mean_std([1.234]) == "1.23"


def test_dagger_needs_every_seed_and_every_rival():
    me = {1: 80.0, 2: 81.0, 3: 79.0}
    x = {1: 79.0, 2: 80.5, 3: 78.9}
    y = {1: 70.0, 2: 70.0, 3: 70.0}
    assert dagger(me, {"x": x, "y": y})
    assert not dagger(me, {"x": {**x, 3: 79.0}, "y": y})  # a tie in one seed is not a win
    assert not dagger(me, {"x": {**x, 2: 82.0}})  # loses one seed
    assert not dagger(me, {})
    assert not dagger(me, {"x": {1: 0.0}})  # one shared seed proves nothing
    assert dagger({1: 1.0, 2: 1.0}, {"x": {1: 2.0, 2: 3.0}}, higher_is_better=False)
    # seeds paired by number, not position: rival's seed 4 is ignored
    assert dagger(me, {"x": {3: 78.0, 1: 79.0, 4: 99.0}})


def test_paired_ttest_hand_numbers():
    a = {1: 10.0, 2: 12.0, 3: 11.0, 4: 13.0}
    b = {1: 9.0, 2: 10.0, 3: 10.5, 4: 11.0}
    r = paired_test(a, b)
    # d = 1, 2, .5, 2: mean 1.375, sd 0.75, t = 1.375 / (0.75/2) = 3.6667, df 3
    assert r.mean_diff == pytest.approx(1.375)
    assert r.statistic == pytest.approx(3.6667, abs=1e-3)
    assert r.p_value == pytest.approx(0.03500, abs=2e-3)
    assert r.n == 4 and r.significant()
    assert paired_test(a, a).p_value == 1.0
    w = paired_test(a, b, test="wilcoxon")
    assert w.p_value == pytest.approx(0.125)  # all 4 differences positive: exact two-sided p = 2/16
    with pytest.raises(ConfigError):
        paired_test({1: 1.0}, {1: 2.0})


def test_paired_bootstrap():
    rng = np.random.default_rng(0)
    base = rng.normal(size=400)
    better = base + 0.3
    r = paired_bootstrap(better, base, n_resamples=500)
    assert r.mean_diff == pytest.approx(0.3) and r.p_value < 0.01
    same = paired_bootstrap(base, base + rng.normal(scale=1e-3, size=400) * 0, n_resamples=200)
    assert same.p_value == 1.0
    noisy = paired_bootstrap(base + rng.normal(scale=1.0, size=400) * 0.01 - 0.0005, base, n_resamples=500)
    assert noisy.p_value > 0.05
    # a metric over labels (AP-like): the resampled labels follow the resampled items
    labels = (base > 0).astype(int)
    acc = lambda s, y: float(((s > 0).astype(int) == y).mean())  # noqa: E731
    r2 = paired_bootstrap(base, -base, metric=acc, labels=labels, n_resamples=200)
    assert r2.mean_diff == pytest.approx(1.0) and r2.p_value < 0.01
