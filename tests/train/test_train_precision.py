"""``--train-precision`` (benchbench.train.precision, loop.make_accelerator, runner._config_hashes).

"auto" is what every stored result was trained in (full precision on a CPU, bf16 autocast on a
bf16-capable GPU) and keeps its key; "bf16" autocasts on the CPU too (~2x faster training on an
AVX512-BF16 CPU, other weights) and "fp32" never autocasts: both are other results, with keys of their
own. Every record's train section says which was asked (``train_precision``) and what the loop ran in
(``mixed_precision``)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from benchbench.core.errors import ConfigError

TINY = "tiny-bert:16:1:2:32"
RUN = ["run", "--method", "simcse", "--model", TINY, "--tasks", "sts-mini", "--device", "cpu", "--json"]
RUN += ["--steps", "3", "--batch-size", "4", "--lr", "5e-2"]


def _linear_dtypes() -> tuple[set, object]:
    """The output dtypes of every ``nn.Linear`` called while the returned hook is held: training's
    (evaluation encodes in fp32 on the CPU, ``--encode-dtype auto``)."""
    seen: set = set()

    def hook(module, _inputs, output):
        if isinstance(module, torch.nn.Linear) and isinstance(output, torch.Tensor):
            seen.add(output.dtype)

    return seen, torch.nn.modules.module.register_module_forward_hook(hook)


def _run(env, capsys, *extra: str) -> tuple[dict, set]:
    from benchbench.cli.main import main

    seen, handle = _linear_dtypes()
    try:
        assert main([*RUN, "--output", str(env / "out"), *extra]) == 0
    finally:
        handle.remove()
    [rec] = json.loads(capsys.readouterr().out)
    return rec, seen


def _run_api(env) -> tuple[dict, set]:
    """The same run through ``runner.run`` with RunOptions' defaults (as ``study rederive``, the estimate
    probe and ``reproduce`` build theirs)."""
    from benchbench.run.runner import RunOptions, run

    seen, handle = _linear_dtypes()
    try:
        opts = RunOptions("simcse", "sts-mini", model=TINY, overrides=dict(OVERRIDES), output=str(env / "out"))
        [rec] = run(dataclasses.replace(opts, device="cpu", progress=False)).records
    finally:
        handle.remove()
    return rec, seen


def _plain_hash(overrides: dict[str, str]) -> str:
    """The config hash of simcse with ``overrides`` on TINY, as every record stored before the option has it."""
    from benchbench.core.methods import build_config, config_hash
    from benchbench.core.registry import get_registry
    from benchbench.encode.sizes import resolve_for_model

    cls = get_registry().method("simcse")
    return config_hash(resolve_for_model(cls, build_config(cls, overrides), TINY))


OVERRIDES = {"steps": "3", "batch_size": "4", "lr": "5e-2"}


def test_auto_is_the_default_and_trains_in_fp32_on_the_cpu_under_the_key_records_always_had(env, monkeypatch, capsys):
    monkeypatch.chdir(env)
    rec, seen = _run_api(env)  # RunOptions' default
    assert rec["train"]["train_precision"] == "auto"
    assert rec["train"]["mixed_precision"] == "no"  # the loop's own word: no autocast
    assert seen == {torch.float32}  # no layer of the objective's forward ran in bf16
    assert rec["config_hash"] == _plain_hash(OVERRIDES)  # the key of every record stored before the option
    # the command line's default, and auto asked by name: the same run, resumed (not trained again)
    for extra in ((), ("--train-precision", "auto")):
        again, seen = _run(env, capsys, *extra)
        assert again["train"]["train_precision"] == "auto" and again["config_hash"] == rec["config_hash"]
        assert again["encoder_fingerprint"] == rec["encoder_fingerprint"] and seen <= {torch.float32}


def test_bf16_autocasts_on_the_cpu_and_fp32_never_each_under_a_key_of_its_own(env, monkeypatch, capsys):
    monkeypatch.chdir(env)
    auto, _ = _run(env, capsys)
    bf16, seen = _run(env, capsys, "--train-precision", "bf16")
    assert torch.bfloat16 in seen  # the objective's Linear layers ran under torch.autocast("cpu", bfloat16)
    assert bf16["train"]["train_precision"] == "bf16" and bf16["train"]["mixed_precision"] == "bf16"
    assert bf16["encoder_fingerprint"] != auto["encoder_fingerprint"]  # other weights
    fp32, seen = _run(env, capsys, "--train-precision", "fp32")
    assert seen == {torch.float32}
    assert fp32["train"]["train_precision"] == "fp32" and fp32["train"]["mixed_precision"] == "no"
    assert fp32["encoder_fingerprint"] == auto["encoder_fingerprint"]  # on a CPU fp32 is what auto trains
    # three trainings, three keys: none of the precisions stands in for another's stored result
    assert len({auto["config_hash"], bf16["config_hash"], fp32["config_hash"]}) == 3
    assert bf16["splits"]["test"]["main_score"] != auto["splits"]["test"]["main_score"]


def test_the_precision_folds_into_the_result_key_and_training_folder_only_when_not_auto():
    from benchbench.core.methods import build_config
    from benchbench.core.registry import get_registry
    from benchbench.run.runner import RunOptions, _config_hashes, with_train_precision

    cfg = build_config(get_registry().method("simcse"), OVERRIDES)
    plain = _config_hashes(cfg, RunOptions("simcse", "sts-mini"))
    assert plain == _config_hashes(cfg, RunOptions("simcse", "sts-mini", train_precision="auto"))
    assert with_train_precision("abc", "auto") == "abc"
    for p in ("fp32", "bf16"):
        chash, train_chash = _config_hashes(cfg, RunOptions("simcse", "sts-mini", train_precision=p))
        assert chash != plain[0] and train_chash != plain[1]  # another key AND another trained encoder's folder
        assert chash == with_train_precision(plain[0], p)
        # a training-free run is not changed by a training precision: its key stays
        assert _config_hashes(cfg, RunOptions("simcse", "sts-mini", train_precision=p), trains=False) == plain


def test_an_unknown_precision_is_refused_before_anything_runs(env, monkeypatch, capsys):
    from benchbench.cli.main import main
    from benchbench.run.runner import RunOptions, run

    monkeypatch.chdir(env)
    with pytest.raises(SystemExit):
        main([*RUN, "--train-precision", "fp16"])
    assert "--train-precision" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="--train-precision 'fp16'"):
        run(RunOptions("simcse", "sts-mini", model=TINY, output=str(env / "o"), train_precision="fp16"))


def test_make_accelerator_reads_the_precision_in_force_and_a_method_fixed_precision_wins():
    from benchbench.train.loop import make_accelerator
    from benchbench.train.precision import train_precision, training_precision

    lin = torch.nn.Linear(4, 4)
    assert train_precision() == "auto" and make_accelerator("cpu").mixed_precision == "no"
    with training_precision("bf16"):
        acc = make_accelerator("cpu")
        with acc.autocast():
            assert lin(torch.ones(1, 4)).dtype == torch.bfloat16
        assert make_accelerator("cpu", "no").mixed_precision == "no"  # e.g. Trans-Encoder's phases
    with training_precision("fp32"):
        assert make_accelerator("cpu").mixed_precision == "no"
    assert train_precision() == "auto"
    with pytest.raises(ConfigError, match="--train-precision"), training_precision("fp8"):
        pass


STUDY = """name = "p"
version = 1
model = "{model}"
tasks = ["sts-mini"]
methods = ["plm-mean", "simcse"]
start = "plm-mean"
seeds = [1, 2, 3]
[budget]
steps = 3
batch_size = 4
{precision}"""


def _study(precision: str = ""):
    import tomllib

    from benchbench.run import study

    text = STUDY.format(model=TINY, precision=precision)
    return study.parse(tomllib.loads(text), "p.toml")


def test_a_study_may_state_its_precision_and_one_without_it_plans_and_keys_as_before():
    from benchbench.run import study
    from benchbench.run.runner import with_train_precision

    plain, bf16 = _study(), _study('precision = "bf16"')
    assert plain.train_precision == "auto" and bf16.train_precision == "bf16"
    assert all("train_precision" not in c.options for c in study.plan(plain, ["sts-mini"]))
    assert all(c.options["train_precision"] == "bf16" for c in study.plan(bf16, ["sts-mini"]))
    rows = {r.name: r for r in plain.rows()}
    # the trained row's key moves as the runner's does; the training-free start's does not
    assert plain.record_hash(rows["simcse"]) == _plain_hash({"steps": "3", "batch_size": "4"})
    assert bf16.record_hash(rows["simcse"]) == with_train_precision(plain.record_hash(rows["simcse"]), "bf16")
    assert bf16.record_hash(rows["plm-mean"]) == plain.record_hash(rows["plm-mean"])
    with pytest.raises(ConfigError, match="budget.precision"):
        _study('precision = "fp16"')


def test_study_run_refuses_another_precision_than_its_file_states_and_a_training_free_key_stays(
    env, monkeypatch, capsys
):
    from benchbench.cli.main import main

    monkeypatch.chdir(env)
    f = env / "p.toml"
    f.write_text(STUDY.format(model=TINY, precision='precision = "bf16"'))
    assert main(["study", "run", str(f), "--train-precision", "fp32", "--output", str(env / "s")]) == 2
    assert "trains in bf16 ([budget] precision)" in capsys.readouterr().err
    # the start row trains nothing: a training precision leaves its key as it was
    start = ["run", "--method", "plm-mean", "--model", TINY, "--tasks", "sts-mini", "--device", "cpu", "--json"]
    assert main([*start, "--output", str(env / "a")]) == 0
    [plain] = json.loads(capsys.readouterr().out)
    assert main([*start, "--output", str(env / "b"), "--train-precision", "bf16"]) == 0
    [bf16] = json.loads(capsys.readouterr().out)
    assert bf16["config_hash"] == plain["config_hash"] and bf16["train"] is None
