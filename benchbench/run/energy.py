"""Energy and emissions of a training or an evaluation, measured by codecarbon's offline tracker, as
sentence-transformers' model cards and MTEB's results record them. Offline: no network call, the
grid's carbon intensity comes from codecarbon's bundled table for a country (``BENCHBENCH_CO2_COUNTRY``,
an ISO 3166 alpha-3 code, default USA, recorded with the number). Without codecarbon, or with
``BENCHBENCH_ENERGY=0``, the numbers are None and the record says why; a tracker that fails never fails
the run (its error is the reason recorded)."""

from __future__ import annotations

import os
from typing import Any

COUNTRY_ENV = "BENCHBENCH_CO2_COUNTRY"
SWITCH_ENV = "BENCHBENCH_ENERGY"  # "0": do not measure (tests: codecarbon's start costs seconds)


class Meter:
    """``with Meter() as m: ...`` then ``m.result``: ``energy_kwh``, ``kg_co2_emissions``, ``country``,
    ``tracker``, or both numbers None and ``why``."""

    def __init__(self, country: str | None = None):
        from benchbench.core.env import env_flag, env_pattern

        # a value that is not a country code (``../../x``) would be recorded as the run's country, next
        # to a kg CO2 computed from codecarbon's world-average fallback: refused here, naming the variable
        code = country or env_pattern(
            COUNTRY_ENV, "USA", r"[A-Za-z]{3}", "an ISO 3166 alpha-3 country code, three letters (e.g. USA, FRA)"
        )
        self.country = str(code).upper()
        self.measure = env_flag(SWITCH_ENV, True)
        self.result: dict[str, Any] = {"energy_kwh": None, "kg_co2_emissions": None}
        self._tracker: Any = None

    def __enter__(self) -> Meter:
        if not self.measure:
            self.result["why"] = f"not measured: {SWITCH_ENV}={os.environ[SWITCH_ENV].strip()}"
            return self
        try:
            import codecarbon
            from codecarbon import OfflineEmissionsTracker
        except ImportError:
            self.result["why"] = "not measured: codecarbon is not installed (pip install 'benchbench[hf]')"
            return self
        try:
            self._tracker = OfflineEmissionsTracker(
                country_iso_code=self.country,
                save_to_file=False,
                log_level="error",
                allow_multiple_runs=True,
            )
            self._tracker.start()
            self.result["tracker"] = f"codecarbon {codecarbon.__version__} (offline)"
        except Exception as e:  # a tracker must never cost the run; say why there is no number
            self._tracker = None
            self.result["why"] = f"not measured: codecarbon failed to start ({type(e).__name__}: {e})"
        return self

    def __exit__(self, *_: Any) -> None:
        if self._tracker is None:
            return
        try:
            kg = self._tracker.stop()
            data = self._tracker.final_emissions_data
            self.result.update(energy_kwh=float(data.energy_consumed), kg_co2_emissions=float(kg), country=self.country)
        except Exception as e:  # as in __enter__
            self.result["why"] = f"not measured: codecarbon failed to stop ({type(e).__name__}: {e})"


def total(*parts: dict[str, Any] | None) -> dict[str, Any]:
    """Training plus evaluation: a sum only when every part was measured (else None and the reasons)."""
    parts_ = [p for p in parts if p is not None]
    if parts_ and all(p.get("energy_kwh") is not None for p in parts_):
        return {
            "energy_kwh": sum(p["energy_kwh"] for p in parts_),
            "kg_co2_emissions": sum(p["kg_co2_emissions"] for p in parts_),
        }
    why = "; ".join(dict.fromkeys(p["why"] for p in parts_ if p.get("why"))) or "not measured"
    return {"energy_kwh": None, "kg_co2_emissions": None, "why": why}
