"""No figure on a hand-written page under leaderboards/ (DESIGN.md, Studies: "A number on a results page is
produced by a command that re-derives it; hand-written pages explain and link"). A number typed by hand goes
stale silently, as ``contamination_flags.md`` did when the plain start changed.

A page is *generated* when ``benchbench leaderboard`` wrote it (its manifest; ``leaderboard --check`` rebuilds
and compares every one) or when it is the output file of a named command (``COMMAND_PAGES``: rerun that command
to re-derive it). Every other Markdown or HTML page under leaderboards/ (the records folders aside) is
hand-written and holds no figure outside code.

A *figure* (``FIGURE``): a decimal number (``12.34``, ``53.2``, ``+7.7``, ``-0.5``, ``.5`` is not one) or a number
with thousands separators (``1,400``, ``389,015``). Not figures: integers without separators (counts, steps,
seeds, section numbers, years), dates (``2026-11-24``), dotted versions of three or more parts (``2.13.0``), a
number glued to letters or ``/``/``#``/``§`` (commit shas, ``v2.1``, ``s6``, ``§7.2``, paths), and anything in
code (inline code spans, fenced or indented blocks) or in a link target: a command's arguments, a version
pinned in a command, a constant quoted from the source are code, written as code."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import REPO

BOARD = REPO / "leaderboards"
RECORDS = {"results", "studies", "records"}  # record folders: JSON the commands read, never pages
MANIFEST = BOARD / ".benchbench-manifest.json"

# page (glob, relative to leaderboards/) -> the command that writes it; rerunning it re-derives the page
COMMAND_PAGES = {
    "mteb_equality.md": "bench/mteb_equality.py",
    "new_methods/diffcse_generator.md": "bench/diffcse_generator.py",
    "new_methods/llm_equality.md": "bench/llm_equality.py",
    "qt/efficiency.md": "bench/qt_efficiency.py",
    "useb_lite/tau.md": "bench/useb_lite_tau.py",
    "mutation/issue40_run1.md": "bench/mutation_tool.py",
    "mutation/llm_methods_run*.md": "bench/mutation_tool.py",
    "reproduce/tsdae-table2.md": "benchbench reproduce",
    "speed/study_train_throughput.md": "bench/study_train_throughput.py",
    "setups/pos*/pos.md": "benchbench analyze pos",
    "tenc/table.md": "benchbench table",
}

_FENCED = re.compile(r"^ {0,3}(`{3,}|~{3,})[^\n]*\n.*?^ {0,3}\1[ \t]*$", re.M | re.S)
_INDENTED = re.compile(r"^(?: {4}|\t)(?! *[-*+] |\d+\. ).*$", re.M)  # an indented code line, not a nested list
_INLINE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
_LINK_TARGET = re.compile(r"\]\([^)]*\)|\bhref=\"[^\"]*\"|\bsrc=\"[^\"]*\"")
_HTML_CODE = re.compile(r"<(code|pre)\b.*?</\1>", re.S | re.I)
FIGURE = re.compile(
    r"(?<![\w.,/#§-])[+\-−±]?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+)(?![\w]|[.,]\d)",
)


def prose(text: str) -> str:
    """``text`` without its code (fenced and indented blocks, inline spans, HTML ``<code>``/``<pre>``) and
    link targets: what a reader takes as the page's own statements."""
    for pattern in (_FENCED, _HTML_CODE, _INDENTED, _INLINE, _LINK_TARGET):
        text = pattern.sub(" ", text)
    return text


def figures(text: str) -> list[str]:
    return FIGURE.findall(prose(text))


def generated() -> set[Path]:
    listed = json.loads(MANIFEST.read_text(encoding="utf-8"))["files"]
    out = {BOARD / f for f in listed}
    for glob in COMMAND_PAGES:
        out |= set(BOARD.glob(glob))
    return out


def hand_written() -> list[Path]:
    gen = generated()
    pages = [p for ext in ("*.md", "*.html") for p in BOARD.rglob(ext)]
    return sorted(
        p
        for p in pages
        if p not in gen
        and not RECORDS & set(p.relative_to(BOARD).parts[:-1])
        and not any(part.startswith(".") for part in p.relative_to(BOARD).parts)
    )


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("TwitterPara 62.84 for TSDAE, +7.7 AP, -0.5 weights, ±1.0 margin", ["62.84", "+7.7", "-0.5", "±1.0"]),
        ("70 of 1,400 cells; 389,015 titles; 22,713,216 tokens", ["1,400", "389,015", "22,713,216"]),
        ("53.2.", ["53.2"]),  # a sentence's full stop is not part of a version
        ("on 2026-11-24 at commit 1c3a982 (torch 2.13.0+cpu), seeds 1,2,3, 200 steps, §7.2, v2.1, s6", []),
        ("run `benchbench sweep --corpus-sizes 32,128,8192 --lr 0.001` here", []),
        ("```\nbest 48.94, chance 50\n```\nand\n\n    indented 12.5\n", []),
        ("see [the table](results/v1.5/x.md) and <code>0.05</code>", []),
        ("sts12-16, 5 seeds, 92% of 1400", []),  # integers without separators are counts, not figures
    ],
)
def test_the_figure_rule(text: str, want: list[str]) -> None:
    assert figures(text) == want


def test_every_command_page_names_an_existing_command() -> None:
    for glob, command in COMMAND_PAGES.items():
        assert list(BOARD.glob(glob)), f"leaderboards/{glob}: no such page (drop it from COMMAND_PAGES)"
        script = command.split()[0]
        assert script == "benchbench" or (REPO / script).is_file(), f"{glob}: {script} does not exist"


def test_leaderboard_check_covers_every_generated_page() -> None:
    """Every page the build writes is in its manifest, which ``leaderboard --check`` compares with a rebuild."""
    listed = set(json.loads(MANIFEST.read_text(encoding="utf-8"))["files"])
    assert {"README.md", "site/index.html", "site/all.html"} <= listed
    on_disk = {p.relative_to(BOARD).as_posix() for p in (BOARD / "site").rglob("*") if p.is_file()}
    assert on_disk <= listed | {"site/screenshot.png"}, sorted(on_disk - listed)


def test_no_hand_written_page_under_leaderboards_holds_a_figure() -> None:
    pages = hand_written()
    assert pages, "no hand-written page found: the test would check nothing"
    bad = {p.relative_to(BOARD).as_posix(): f[:5] for p in pages if (f := figures(p.read_text(encoding="utf-8")))}
    assert not bad, (
        "hand-written pages under leaderboards/ hold figures (a number no command re-derives; make a command "
        f"write the page and list it in COMMAND_PAGES, or explain and link without it): {bad}"
    )
