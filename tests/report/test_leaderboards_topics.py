"""leaderboards/TOPICS.md is how a reader tells hand-written pages from generated output: every entry of
leaderboards/ that the build does not write and that is not a records folder must have a line there, so a
new topic folder or page cannot appear without saying what it is."""

from __future__ import annotations

import re

from conftest import REPO

from benchbench.report.site import GENERATED

BOARD = REPO / "leaderboards"
RECORDS = {"results", "studies"}


def _paths() -> set[str]:
    """Every `code` span of the page column of TOPICS.md's table (paths under leaderboards/, globs allowed)."""
    text = (BOARD / "TOPICS.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    return {span for row in rows for span in re.findall(r"`([^`]+)`", row.split("|")[1])}


def _listed() -> set[str]:
    return {p.split("/")[0] for p in _paths()}


def test_every_hand_written_entry_has_a_line_in_topics():
    entries = {p.name for p in BOARD.iterdir() if not p.name.startswith(".")}
    hand = entries - set(GENERATED) - RECORDS
    assert hand, "leaderboards/ holds no hand-written entry: the test would check nothing"
    missing = sorted(hand - _listed())
    assert not missing, f"leaderboards/TOPICS.md has no line for {missing}: add one saying what each is"


def test_topics_lists_no_generated_or_missing_entry():
    listed = _listed()
    assert not listed & set(GENERATED), "TOPICS.md lists a generated entry as hand-written"
    gone = sorted(p for p in _paths() if not any(BOARD.glob(p.rstrip("/"))))
    assert not gone, f"leaderboards/TOPICS.md names {gone}, which leaderboards/ does not hold"
