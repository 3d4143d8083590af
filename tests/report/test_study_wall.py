"""A study page states the wall time its cells took, read from the records it publishes."""

from __future__ import annotations

import pytest

from benchbench.report.study_view import wall_span


def _rec(created: str, train: float = 0.0, ev: float = 0.0, device: str = "cpu:x86_64x2") -> dict:
    return {"created_at": created, "train": {"seconds": train}, "eval_seconds": ev, "device": device}


def test_the_span_runs_from_the_earliest_cells_start_to_the_latest_record():
    # the earliest start is the second record's (10:00:00 less 100 s training and 20 s evaluation), not the
    # earliest created_at; the latest end is the third record's creation
    recs = [
        _rec("2026-12-07T10:01:00+0000", ev=5),
        _rec("2026-12-07T10:00:00+0000", 100, 20),
        _rec("2026-12-07T11:02:03+0000"),
    ]
    w = wall_span(recs)
    assert w is not None and w.cells == 3
    assert w.seconds == pytest.approx(3600 + 2 * 60 + 3 + 120)
    assert w.first == "2026-12-07 09:58 UTC" and w.last == "2026-12-07 11:02 UTC"
    assert "span 1:04:03 of wall time" in w.text() and "cpu:x86_64x2" in w.text()


def test_records_without_a_readable_time_are_left_out_and_none_gives_no_span():
    assert wall_span([{"created_at": "yesterday"}, {}]) is None
    w = wall_span(
        [_rec("2026-12-07T10:00:00+0100", 60), {"created_at": None}, _rec("2026-12-07T09:30:00+0000", device="cuda")]
    )
    assert w is not None and w.cells == 2 and w.devices == ("cpu:x86_64x2", "cuda")
    assert w.seconds == pytest.approx(31 * 60)  # the +0100 offset is honoured: 08:59 UTC to 09:30 UTC
