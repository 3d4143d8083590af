"""Stage options: the supervised stages of a setup take their budget from the command line
(``--set supervised.steps=20``, ``general.X``, ``in-domain.X``) and the options are part of the key."""

from __future__ import annotations

import dataclasses

import pytest
from test_setups import _tp_with_leak

from benchbench.core.errors import ConfigError
from benchbench.core.methods import build_config, config_hash
from benchbench.train.setups import (
    SupervisedConfig,
    parse_setup,
    split_stage_options,
    stage_configs,
    stage_configs_hash,
)


def test_budget_flags_go_to_the_stage_only_when_the_method_lacks_them():
    sup = parse_setup("supervised")
    # sbert has no 'steps': --setup supervised --steps 20 caps the supervised stage
    m, st = split_stage_options({"steps": 20, "batch_size": 8}, set(), sup)
    assert m == {} and st == {"supervised": {"steps": 20, "batch_size": 8}}
    # a method with its own 'steps' keeps it; the stage is set only by a dotted option
    m, st = split_stage_options({"steps": 20, "supervised.steps": "7"}, {"steps"}, parse_setup("da-general-target"))
    assert m == {"steps": 20} and st == {"supervised": {"steps": "7"}}
    # no supervised stage: the flag stays the method's (and build_config names the method if it lacks it)
    m, st = split_stage_options({"steps": 20}, set(), parse_setup("unsupervised"))
    assert m == {"steps": 20} and st == {}
    # an explicit supervised.steps wins over the routed --steps
    _, st = split_stage_options({"steps": 20, "supervised.steps": "3"}, set(), sup)
    assert st == {"supervised": {"steps": "3"}}


@pytest.mark.parametrize(
    ("key", "setup", "says"),
    [
        ("supervised.steps", "unsupervised", "has no supervised stage"),
        ("general.steps", "supervised", "has no general stage"),
        ("in-domain.steps", "da-general-target", "has no in-domain stage"),
        ("target.steps", "supervised", "'target' is none of these"),
        ("supervised.", "supervised", "is none of these"),
    ],
)
def test_a_dotted_option_for_a_stage_the_setup_lacks_is_an_error(key, setup, says):
    with pytest.raises(ConfigError, match=says):
        split_stage_options({key: "3"}, set(), parse_setup(setup))


def test_stage_configs_merge_in_order_and_check_values():
    setup = parse_setup("da-general-target")
    cfgs = stage_configs(setup, {"supervised": {"steps": "9", "lr": "1e-4"}, "general": {"steps": "4"}})
    assert list(cfgs) == ["general"]
    assert cfgs["general"] == SupervisedConfig(steps=4, lr=1e-4)
    two = stage_configs(parse_setup("pretrain-supervised"), {"supervised": {"batch_size": "16"}})
    assert two["in-domain"].batch_size == 16 and two["in-domain"].steps == SupervisedConfig().steps
    with pytest.raises(ConfigError, match="The in-domain stage has no option 'epochs'. Its options: batch_size"):
        stage_configs(parse_setup("supervised"), {"supervised": {"epochs": "1"}})
    with pytest.raises(ConfigError, match="option 'steps' of the in-domain stage: expected int"):
        stage_configs(parse_setup("supervised"), {"in-domain": {"steps": "many"}})
    for bad in ({"steps": "0"}, {"batch_size": "-1"}, {"lr": "0"}, {"eval_every": "0"}):
        with pytest.raises(ConfigError, match="of the in-domain stage must be"):
            stage_configs(parse_setup("supervised"), {"supervised": bad})


def test_default_stage_options_keep_old_keys_and_others_change_them():
    assert stage_configs_hash(stage_configs(parse_setup("supervised"), {})) == ""
    a = stage_configs_hash(stage_configs(parse_setup("supervised"), {"supervised": {"steps": "20"}}))
    b = stage_configs_hash(stage_configs(parse_setup("supervised"), {"supervised": {"steps": "21"}}))
    assert a and b and a != b


def test_run_supervised_setup_with_stage_options(registry, tmp_path, monkeypatch):
    """Through the runner, as ``benchbench run --method sbert --setup supervised --steps 2 --set
    supervised.batch_size=4`` runs it: the stage trains exactly 2 steps of 4, the record says so, and
    the key's config hash differs from the default-stage one (and from another budget's)."""
    from benchbench.run.runner import RunOptions, run

    monkeypatch.setenv("BENCHBENCH_CACHE", str(tmp_path / "cache"))
    registry.tasks["twitterpara"] = dataclasses.replace(registry.task("twitterpara"), files={})
    data = str(_tp_with_leak(tmp_path))

    def go(overrides, out):
        return run(
            RunOptions(
                method="sbert",
                model="tiny-bert:16:1:2:32",
                tasks="twitterpara",
                setup="supervised@labelled=8",
                overrides=overrides,
                data_dir=data,
                output=str(tmp_path / out),
                progress=False,
            ),
            registry,
        ).records[0]

    rec = go({"steps": 2, "supervised.batch_size": "4", "supervised.eval_every": "1"}, "o1")
    stage = rec["train"]["stages"][0]
    assert stage["config"]["steps"] == 2 and stage["config"]["batch_size"] == 4
    assert stage["steps"] == {"mse": 2}
    other = go({"steps": 3, "supervised.batch_size": "4", "supervised.eval_every": "1"}, "o2")
    assert other["train"]["stages"][0]["steps"] == {"mse": 3}
    default_hash = config_hash(build_config(registry.method("sbert"), {}))
    assert len({rec["config_hash"], other["config_hash"], default_hash}) == 3


def test_cli_set_supervised_steps(tmp_path):
    """The command line a user types: a bad stage option fails with the stage named, exit 2."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "benchbench.cli", "run", "--method", "sbert", "--model", "tiny-bert", "--tasks",
         "twitterpara", "--setup", "unsupervised", "--set", "supervised.steps=20", "--output", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert "--setup unsupervised has no supervised stage" in out.stderr
