"""Energy and emissions in every record: codecarbon's offline tracker around training and evaluation
(here a stand-in module with codecarbon's interface, so the test is fast and exact), None with the
reason without it."""

from __future__ import annotations

import sys
import types

import pytest
from test_runner import (
    PLUGIN,  # noqa: F401 (the fixture plugin: methods fixed and trained, task mini)
    workdir,  # noqa: F401
)

from benchbench.cli.main import main
from benchbench.run import energy
from benchbench.store.results import ResultStore, to_mteb


class _Tracker:
    made: list[dict] = []
    kwh = iter([0.5, 0.25, 0.125, 0.0625])

    def __init__(self, **kw):
        _Tracker.made.append(kw)
        self.final_emissions_data = None

    def start(self):
        pass

    def stop(self):
        e = next(_Tracker.kwh)
        self.final_emissions_data = types.SimpleNamespace(energy_consumed=e)
        return e * 0.4  # kg CO2 per kWh


@pytest.fixture
def fake_codecarbon(monkeypatch):
    mod = types.ModuleType("codecarbon")
    mod.__version__ = "9.9"
    mod.OfflineEmissionsTracker = _Tracker
    monkeypatch.setitem(sys.modules, "codecarbon", mod)
    monkeypatch.setenv("BENCHBENCH_ENERGY", "1")
    monkeypatch.setenv("BENCHBENCH_CO2_COUNTRY", "fra")
    _Tracker.made.clear()
    _Tracker.kwh = iter([0.5, 0.25, 0.125, 0.0625])


def test_training_and_evaluation_energy_in_the_record(workdir, fake_codecarbon, capsys):  # noqa: F811
    assert main(["run", "--method", "trained", "--tasks", "mini"]) == 0
    (r,) = ResultStore("results").records()
    # training measured first (0.5 kWh), evaluation second (0.25 kWh); offline, the country recorded
    assert r["train"]["energy"]["energy_kwh"] == 0.5 and r["energy"]["eval"]["energy_kwh"] == 0.25
    assert r["energy"]["total"]["energy_kwh"] == 0.75
    assert r["kg_co2_emissions"] == pytest.approx(0.3)
    assert r["energy"]["eval"]["country"] == "FRA" and r["energy"]["eval"]["tracker"].startswith("codecarbon 9.9")
    assert all(kw["country_iso_code"] == "FRA" and kw["save_to_file"] is False for kw in _Tracker.made)
    assert to_mteb(r)["kg_co2_emissions"] == pytest.approx(0.3)


def test_without_codecarbon_the_numbers_are_none_with_why(workdir, monkeypatch, capsys):  # noqa: F811
    monkeypatch.setitem(sys.modules, "codecarbon", None)  # import fails
    monkeypatch.setenv("BENCHBENCH_ENERGY", "1")
    assert main(["run", "--method", "fixed", "--tasks", "mini"]) == 0
    (r,) = ResultStore("results").records()
    assert r["kg_co2_emissions"] is None
    assert "codecarbon is not installed" in r["energy"]["eval"]["why"]
    assert r["energy"]["total"]["energy_kwh"] is None


def test_a_failing_tracker_never_fails_the_run(monkeypatch):
    class Broken(_Tracker):
        def start(self):
            raise RuntimeError("no power sensor")

    mod = types.ModuleType("codecarbon")
    mod.__version__ = "9.9"
    mod.OfflineEmissionsTracker = Broken
    monkeypatch.setitem(sys.modules, "codecarbon", mod)
    monkeypatch.setenv("BENCHBENCH_ENERGY", "1")
    with energy.Meter() as m:
        pass
    assert m.result["energy_kwh"] is None and "no power sensor" in m.result["why"]


def test_total_is_a_sum_only_when_every_part_was_measured():
    a = {"energy_kwh": 1.0, "kg_co2_emissions": 0.5}
    assert energy.total(a, {"energy_kwh": 2.0, "kg_co2_emissions": 1.0}) == {"energy_kwh": 3.0, "kg_co2_emissions": 1.5}
    part = energy.total(a, {"energy_kwh": None, "kg_co2_emissions": None, "why": "off"})
    assert part["energy_kwh"] is None and part["why"] == "off"
    assert energy.total(a, None) == a  # a reused (untrained) encoder: evaluation only


@pytest.mark.slow
def test_real_codecarbon_measures_offline(monkeypatch):
    pytest.importorskip("codecarbon")
    monkeypatch.setenv("BENCHBENCH_ENERGY", "1")
    with energy.Meter("USA") as m:
        sum(i * i for i in range(2_000_000))
    assert m.result["energy_kwh"] > 0 and m.result["kg_co2_emissions"] > 0, m.result


@pytest.mark.parametrize("value", ["../../x", "U", "USA1", "fr a"])
def test_a_country_that_is_not_a_code_is_refused_naming_the_variable(
    workdir,  # noqa: F811
    fake_codecarbon,
    monkeypatch,
    capsys,
    value,
):
    """Before: ``BENCHBENCH_CO2_COUNTRY=../../x`` was stored as the record's country ("../../X") next to a
    kg CO2 value. Now the run stops before training with the variable's error, and no record is stored."""
    monkeypatch.setenv("BENCHBENCH_CO2_COUNTRY", value)
    assert main(["run", "--method", "trained", "--tasks", "mini"]) == 2
    err = capsys.readouterr().err
    assert f"BENCHBENCH_CO2_COUNTRY={value!r} is not allowed" in err and "alpha-3" in err, err
    assert list(ResultStore("results").records()) == []
    assert _Tracker.made == []


def test_a_bad_energy_switch_is_refused_naming_the_variable(monkeypatch):
    from benchbench.core.errors import ConfigError

    monkeypatch.setenv("BENCHBENCH_ENERGY", "maybe")
    with pytest.raises(ConfigError, match="BENCHBENCH_ENERGY='maybe' is not allowed"):
        energy.Meter()
