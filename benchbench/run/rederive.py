"""Re-derive a study's committed cell from scratch and compare (``benchbench study rederive``; CI runs it).

What "one code version" means for a project that keeps growing: a commit that adds a method or edits a
docstring changes the code tree, yet leaves every stored cell's number as it was. So a study is current
at HEAD when HEAD, from a clean clone, re-computes its sampled cell to the number stored: the trained
cell of the primary endpoint with the least stored training time (the cheapest to re-run), first seed.
A change that alters that number fails CI until the study is re-run; a change that does not, keeps it.

The comparison is exact when the re-run's weights come out bit-identical (same encoder fingerprint) and
otherwise within ``TOLERANCE`` points of the metric (x100). Why a tolerance at all: CPU fp32 training is
deterministic for one machine, thread count and library build, but another CPU's kernels may round
differently; ``TOLERANCE`` is 0.005 points, below the 0.01 a reported table's second decimal shows, so a
change that moves a published digit always fails.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchbench.core.errors import ConfigError
from benchbench.run.study import STUDY_ROW_TRAINED, Study, StudyRow, plan, record_key_rows
from benchbench.run.sweep import base_options, run_one
from benchbench.store.results import ResultStore, code_version

TOLERANCE = 0.005  # points of the metric (x100)


@dataclass
class Rederived:
    cell: str  # row/task/seed
    split: str
    stored: float  # main score (points, as records store it) as committed
    fresh: float  # main score re-computed now
    same_weights: bool  # the re-run's encoder fingerprint equals the stored one
    stored_code: str  # the code version the stored record names

    @property
    def diff(self) -> float:
        return abs(self.fresh - self.stored)

    @property
    def ok(self) -> bool:
        return math.isfinite(self.fresh) and self.diff <= TOLERANCE

    def line(self) -> str:
        how = "bit-identical weights" if self.same_weights else "other weights (another CPU's rounding?)"
        verdict = "OK" if self.ok else f"DIFFERS by more than {TOLERANCE} points"
        return (
            f"{self.cell} {self.split}: stored {self.stored:.6f} (code {self.stored_code}), re-derived "
            f"{self.fresh:.6f}, |diff| {self.diff:.2e}; {how}: {verdict}"
        )


def _sample(study: Study, records: Sequence[Mapping[str, Any]]) -> tuple[StudyRow, Mapping[str, Any]]:
    """(row, its stored record) of the cell to re-derive: among the trained rows' stored records of the
    primary endpoint's task at the study's first seed, the one with the least training time. A row, not a
    method: a method's step-0 row shares its name in the records and must never stand in for its trained row."""
    if not study.primary:
        raise ConfigError(f"study {study.name!r} declares no primary endpoint: nothing to re-derive.")
    task, seed = study.primary["task"], study.seeds[0]
    rows = {k: r for k, r in record_key_rows(study).items() if r.kind == STUDY_ROW_TRAINED}
    found = [
        (float((rec.get("train") or {}).get("seconds") or math.inf), i, rows[key], rec)
        for i, rec in enumerate(records)
        if (key := (rec.get("method"), rec.get("config_hash"))) in rows
        and rec.get("task") == task
        and rec.get("seed") == seed
    ]
    if not found:
        raise ConfigError(
            f"study {study.name!r}: no stored trained cell of {task} at seed {seed}; run the study first "
            f"({study.command()})."
        )
    _, _, row, rec = min(found, key=lambda x: x[:2])
    return row, rec


def sampled_cell(study: Study, records: Sequence[Mapping[str, Any]]) -> tuple[str, str, int]:
    """(row, task, seed) of the cell to re-derive (:func:`_sample`)."""
    row, rec = _sample(study, records)
    return row.name, str(rec["task"]), int(rec["seed"])


def rederive(study: Study, records: Sequence[Mapping[str, Any]], **base: Any) -> Rederived:
    """Re-run the sampled cell into a scratch folder (embedding cache off) and compare it with its stored
    record. ``base``: RunOptions fields for the re-run (e.g. ``data_dir``)."""
    row, stored = _sample(study, records)
    task, seed = str(stored["task"]), int(stored["seed"])
    cell = next(
        c
        for c in plan(study, [task], [seed])
        if c.method == row.method and c.options["overrides"] == study.row_overrides(row) and not c.options.get("model")
    )
    with tempfile.TemporaryDirectory(prefix="benchbench-rederive-") as tmp:
        outcome = run_one(cell, base_options(model=study.model, output=tmp, progress=False, no_cache=True, **base))
        if outcome.status != "done":
            raise ConfigError(f"re-deriving {cell.label} failed: {(outcome.error or outcome.status).splitlines()[0]}")
        fresh = next(iter(ResultStore(tmp).records()))
    if fresh.get("config_hash") != stored.get("config_hash"):  # another config is another cell, not this one
        raise ConfigError(
            f"re-deriving {cell.label}: the re-run's config hash {fresh.get('config_hash')} is not the stored "
            f"record's {stored.get('config_hash')}; the method's options changed since the study ran. Re-run the "
            f"study ({study.command()})."
        )
    split = study.primary["split"]
    return Rederived(
        cell=f"{row.name}/{task}/seed{seed}",
        split=split,
        stored=float(stored["splits"][split]["main_score"]),
        fresh=float(fresh["splits"][split]["main_score"]),
        same_weights=fresh.get("encoder_fingerprint") == stored.get("encoder_fingerprint"),
        stored_code=code_version(stored),
    )
