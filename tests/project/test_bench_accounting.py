"""The FLOP accounting behind the benches' "% of peak" and MFU claims (bench/encode_throughput.py,
used by gpu_mfu.py and useb_fidelity.py): the per-token formula is pinned by hand on a tiny BERT, and
a pipeline that de-duplicates is counted over its distinct texts only (the count that once inflated
benchbench's % of peak 1.35x on the STS texts)."""

from __future__ import annotations

import sys

import pytest
from conftest import REPO

from benchbench.encode.models import load_encoder

sys.path.insert(0, str(REPO / "bench"))
import encode_throughput  # a bench script, not a package: importable once bench/ is on the path


@pytest.fixture(scope="module")
def enc():
    return load_encoder("tiny-bert:32:2:2:64", pooling="mean")  # h=32, 2 layers, i=64


def _by_hand(n: int, h: int = 32, i: int = 64, layers: int = 2) -> float:
    return layers * (2 * n * (4 * h * h + 2 * h * i) + 4 * n * n * h)


def test_useful_flops_formula_pinned_by_hand(enc):
    texts = ["a cat sat", "the quick brown fox jumps over"]
    lengths = enc.lengths(texts)
    assert lengths[0] != lengths[1]  # two lengths, so a per-text mistake (n vs n^2, sum vs max) shows
    got = encode_throughput.useful_flops(enc, texts)
    assert got == pytest.approx(sum(_by_hand(n) for n in lengths), rel=1e-12)


def test_distinct_counts_each_repeat_once(enc):
    texts = ["a cat sat", "a cat sat", "a cat sat", "the quick brown fox jumps over"]
    n_cat, n_fox = enc.lengths(["a cat sat", "the quick brown fox jumps over"])
    every = encode_throughput.useful_flops(enc, texts)
    distinct = encode_throughput.useful_flops(enc, texts, distinct=True)
    assert every == pytest.approx(3 * _by_hand(n_cat) + _by_hand(n_fox), rel=1e-12)
    assert distinct == pytest.approx(_by_hand(n_cat) + _by_hand(n_fox), rel=1e-12)
    assert encode_throughput.useful_flops(enc, texts[2:], distinct=True) == pytest.approx(distinct, rel=1e-12)
