"""A new record (``benchbench.store.records``): non-finite numbers never reach the store, and every
split carries its own evaluation provenance."""

from __future__ import annotations

import math
import time

import pytest

from benchbench.core.errors import DataError
from benchbench.store.records import new_record, refuse_non_finite
from benchbench.store.results import SCHEMA_VERSION


def test_a_non_finite_secondary_metric_is_nulled_at_any_depth_and_named():
    splits = {
        "test": {
            "main_score": 0.5,
            "main_metric": "spearman",
            "metrics": {"pearson": math.nan, "ok": 1.0},
            "per": [1.0, math.inf, {"x": -math.inf}],
        }
    }
    refuse_non_finite(splits, "t", "m", "p")
    r = splits["test"]
    assert r["metrics"] == {"pearson": None, "ok": 1.0}
    assert r["per"] == [1.0, None, {"x": None}]
    assert r["notes"] == [
        "undefined (non-finite) metrics stored as null: test.metrics.pearson, test.per[1], test.per[2].x"
    ]


@pytest.mark.parametrize("main", [math.nan, None])
def test_a_non_finite_main_score_is_refused_naming_task_split_and_metric(main):
    with pytest.raises(DataError, match=r"Task 'sts' .* method 'm' \(plugin 'p'\): main score \['dev.spearman'\]"):
        refuse_non_finite(
            {"test": {"main_score": 0.1}, "dev": {"main_score": main, "main_metric": "spearman"}}, "sts", "m", "p"
        )


def test_every_split_gets_the_records_provenance():
    rec = new_record({"method": "m", "encoder_fingerprint": "abc"}, {"dev": {}, "test": {}}, time.perf_counter(), "cpu")
    assert rec["schema_version"] == SCHEMA_VERSION and rec["method"] == "m" and rec["device"].startswith("cpu:")
    assert rec["eval_seconds"] >= 0 and rec["created_at"]
    assert set(rec["evaluated"]) == {"dev", "test"}
    for s in ("dev", "test"):
        assert rec["evaluated"][s] == {
            "created_at": rec["created_at"],
            "eval_seconds": rec["eval_seconds"],
            "encoder_fingerprint": "abc",
            "git_sha": rec["git_sha"],
            "git_dirty": rec["git_dirty"],
            **({"git_diff_sha256": rec["git_diff_sha256"]} if rec["git_dirty"] else {}),
            **({"git_code_tree": rec["git_code_tree"]} if "git_code_tree" in rec else {}),
        }
