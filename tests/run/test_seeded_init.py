"""``seeded_init`` (a study's random-init row): a random-init start drawn from each cell's seed, so the row's
seeds are draws of the init, not one init repeated; a pretrained model refuses it."""

from __future__ import annotations

import json

import pytest

from benchbench.core.errors import ConfigError
from benchbench.run.runner import RunOptions, run
from benchbench.train.context import TrainContext


def _scores(tmp_path, name, seeded, seeds=(1, 2)):
    opts = RunOptions(
        method="plm-mean",
        tasks="stsb",
        model="tiny-bert:16:1:2:32",
        seeds=list(seeds),
        output=str(tmp_path / name),
        no_cache=True,
        progress=False,
        seeded_init=seeded,
    )
    report = run(opts)
    return {r["seed"]: r for r in report.records}


@pytest.mark.usefixtures("real_data")
def test_each_seed_draws_its_own_init_and_the_record_says_which(tmp_path):
    plain = _scores(tmp_path, "plain", False)
    seeded = _scores(tmp_path, "seeded", True)
    # without it: one init (seed 0) repeated, the same encoder and score for every seed
    assert plain[1]["encoder_fingerprint"] == plain[2]["encoder_fingerprint"]
    assert plain[1]["splits"]["test"]["main_score"] == plain[2]["splits"]["test"]["main_score"]
    assert "init_seed" not in plain[1]
    # with it: one draw per seed, named in the record
    assert seeded[1]["encoder_fingerprint"] != seeded[2]["encoder_fingerprint"]
    assert seeded[1]["splits"]["test"]["main_score"] != seeded[2]["splits"]["test"]["main_score"]
    assert (seeded[1]["init_seed"], seeded[2]["init_seed"]) == (1, 2)
    # the draw is the seed's: run again, the same encoder
    again = _scores(tmp_path, "again", True, seeds=(2,))
    assert again[2]["encoder_fingerprint"] == seeded[2]["encoder_fingerprint"]
    stored = json.loads(next((tmp_path / "seeded").rglob("stsb.json")).read_text())
    assert stored["init_seed"] in (1, 2)


def test_a_pretrained_model_refuses_a_seeded_init(tmp_path):
    ctx = TrainContext(model="all-MiniLM-L6-v2", seed=3, output_dir=tmp_path, init_seed=3)
    with pytest.raises(ConfigError, match="seeded_init: base model 'all-MiniLM-L6-v2' is pretrained"):
        ctx.load_encoder()
    enc = TrainContext(model="tiny-bert:16:1:2:32", seed=3, output_dir=tmp_path, init_seed=3).load_encoder()
    ref = TrainContext(model="tiny-bert:16:1:2:32", seed=3, output_dir=tmp_path).load_encoder()
    assert enc.fingerprint != ref.fingerprint  # seed 3's draw, not seed 0's


def test_the_command_line_passes_seeded_init(monkeypatch, tmp_path):
    import importlib

    from benchbench.run import runner

    cli = importlib.import_module("benchbench.cli.main")
    seen = []

    def fake_run(opts, reg=None):
        seen.append(opts)
        raise SystemExit(0)

    monkeypatch.setattr(runner, "run", fake_run)
    for flag, want in (([], False), (["--seeded-init"], True)):
        with pytest.raises(SystemExit):
            cli.main(
                [
                    "run",
                    "--method",
                    "plm-mean",
                    "--model",
                    "tiny-bert",
                    "--tasks",
                    "stsb",
                    *flag,
                    "--output",
                    str(tmp_path),
                ]
            )
        assert seen[-1].seeded_init is want
