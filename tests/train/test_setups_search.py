"""Equivalent labelling work: binary search on a synthetic monotone curve."""

import math

import pytest

from benchbench.core.errors import ConfigError
from benchbench.train.setups import equivalent_labelling_work


def curve(n):  # a saturating learning curve: 60 + 8 log2(n), capped at 90
    return min(90.0, 60.0 + 8 * math.log2(n))


@pytest.mark.parametrize("target", [61.0, 70.0, 80.5, 89.9])
def test_smallest_n_reaching_target(target):
    n, seen = equivalent_labelling_work(curve, target, 1, 65536)
    assert curve(n) >= target and curve(n - 1) < target  # the smallest such n
    assert len(seen) <= 2 + math.ceil(math.log2(65536)) + 1  # a binary search, not a scan


def test_edges_and_tolerance():
    assert equivalent_labelling_work(curve, 50.0, 4, 100)[0] == 4  # the first point already matches
    assert equivalent_labelling_work(curve, 95.0, 1, 1000)[0] is None  # never reached
    n, _ = equivalent_labelling_work(curve, 80.5, 1, 65536, tolerance=64)
    exact, _ = equivalent_labelling_work(curve, 80.5, 1, 65536)
    assert exact <= n < exact + 64 and curve(n) >= 80.5
    with pytest.raises(ConfigError):
        equivalent_labelling_work(curve, 1.0, 10, 5)
