"""A new result record: the fields a run knows, plus the provenance every record carries (schema
version, package versions, git commit and whether the code had uncommitted changes, device, when) and
per split when it was evaluated and by which encoder, so that merging into an older record keeps each
split's own provenance. Non-finite scores are refused or nulled here, before the store sees them.
The schema is in docs/results.md; reading, keying, merging and writing records is ``results.py``."""

from __future__ import annotations

import functools
import math
import os
import platform
import time
from typing import Any

from benchbench.core.errors import DataError
from benchbench.store.lock import lock_state
from benchbench.store.results import SCHEMA_VERSION, git_state, now, package_versions


def new_record(fields: dict[str, Any], split_results: dict[str, dict], started: float, device: str | None) -> dict:
    """The record of ``split_results`` (evaluation began at ``time.perf_counter() == started`` on
    ``device``, the run's --device or None for its default) with the run's own ``fields`` (method,
    config, task, train accounting, encoder fingerprint...)."""
    code = loaded_code()  # git_sha, git_dirty and (dirty) git_diff_sha256: the commit alone may not be the code
    record = {
        "schema_version": SCHEMA_VERSION,
        **fields,
        "splits": split_results,
        "eval_seconds": round(time.perf_counter() - started, 3),
        "versions": package_versions(),
        **lock_state(),  # constraints.txt's sha256 and every installed package that differs from it
        **code,
        "device": device_label(device),
        "created_at": now(),
    }
    record["evaluated"] = {
        s: {
            "created_at": record["created_at"],
            "eval_seconds": record["eval_seconds"],
            "encoder_fingerprint": record.get("encoder_fingerprint"),
            **code,
        }
        for s in split_results
    }
    return record


@functools.cache
def loaded_code() -> dict[str, Any]:
    """The code version of this process, read once: the modules were imported from the tree as it was
    then, so an edit or a commit during a long run must not relabel its later records."""
    return git_state()


def device_label(device: str | None) -> str:
    """``cuda:<GPU name>`` or ``cpu:<processor>x<cores>``: what a record's timings were measured on."""
    import torch

    if (device or "").startswith("cuda") or (device is None and torch.cuda.is_available()):
        return f"cuda:{torch.cuda.get_device_name(0)}"
    return f"cpu:{platform.processor() or platform.machine()}x{os.cpu_count()}"


def _bad_float(v: Any) -> bool:
    return isinstance(v, float) and not math.isfinite(v)


def _scrub(obj: Any, path: str, found: list[str]) -> None:
    """Non-finite floats inside ``obj`` become None; their paths are appended to ``found``."""
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in list(items):
        where = f"{path}.{k}" if isinstance(obj, dict) else f"{path}[{k}]"
        if _bad_float(v):
            obj[k] = None
            found.append(where)
        else:
            _scrub(v, where, found)


def refuse_non_finite(split_results: dict, task: str, method: str, plugin: str) -> None:
    """A non-finite MAIN score (constant vectors make a correlation undefined) is an error naming the
    task, split and metric, never a record (JSON has no NaN; the store refuses it too). A non-finite
    secondary metric (e.g. PIT's Spearman on a tiny split where one scorer ties everything) is stored
    as null and named in the split's notes, so the defined numbers are not thrown away."""
    bad_main = [
        f"{s}.{r.get('main_metric')}"
        for s, r in split_results.items()
        if r.get("main_score") is None or _bad_float(r.get("main_score"))
    ]
    if bad_main:
        raise DataError(
            f"Task {task!r} gave non-finite scores for method {method!r} (plugin {plugin!r}): main score {bad_main}. "
            "Nothing was stored. Usually the encoder gives (nearly) the same vector for every text."
        )
    for s, r in split_results.items():
        found: list[str] = []
        _scrub(r, s, found)
        if found:
            r.setdefault("notes", []).append(f"undefined (non-finite) metrics stored as null: {', '.join(found[:10])}")
