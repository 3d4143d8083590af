"""Seed lists (benchbench.core.seeds.parse_seeds): the one grammar of `run`, `sweep` and `study run`."""

from __future__ import annotations

import pytest

from benchbench.cli.main import build_parser
from benchbench.core.errors import ConfigError
from benchbench.core.seeds import parse_seeds


@pytest.mark.parametrize(
    ("text", "seeds"),
    [
        ("1", [1]),
        ("1-5", [1, 2, 3, 4, 5]),
        ("1,3,5-7", [1, 3, 5, 6, 7]),
        (" 2 - 3 , 0 ", [2, 3, 0]),
        ("1,1,1-2", [1, 2]),
        ("7-7", [7]),
    ],
)
def test_ranges_and_lists(text, seeds):
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "at least one seed"),
        ("a", "'a' in 'a' is not a seed"),
        ("1.5", "not a seed"),
        ("-1", "not a seed"),
        ("5-1", "runs backwards; write 1-5"),
        ("1-2-3", "not a seed"),
        ("4294967296", "2\\*\\*32-1"),
        ("0-99999999", "more than 10000 seeds"),
    ],
)
def test_bad_seed_lists_are_named(text, match):
    with pytest.raises(ConfigError, match=match) as e:
        parse_seeds(text, "--seeds")
    assert "--seeds" in str(e.value)


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--method", "plm-mean", "--tasks", "stsb", "--seeds", "1-3"],
        ["sweep", "--methods", "plm-mean", "--tasks", "stsb", "--seeds", "1-3"],
        ["study", "run", "post-training-minilm", "--seeds", "1-3"],
        ["reproduce", "tsdae-table2", "--seeds", "1-3"],
    ],
)
def test_run_sweep_and_study_parse_ranges_the_same_way(argv):
    """The README's `sweep ... --seeds 1-5` used to crash with a raw argparse.ArgumentTypeError (and
    `reproduce --seeds 1-5` with a ValueError)."""
    args = build_parser().parse_args(argv)
    assert args.seeds == [1, 2, 3]


def test_a_bad_range_is_a_usage_error_not_a_traceback(capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["sweep", "--methods", "plm-mean", "--tasks", "stsb", "--seeds", "3-1"])
    assert e.value.code == 2 and "runs backwards" in capsys.readouterr().err
