"""Docs that run: every fenced code block of README.md and docs/*.md is executed (Python, in order,
one namespace per file, as a reader follows the page), parsed (TOML), or marked as something else.

Info strings: ``python`` runs; ``python fragment`` (a piece of a larger file) is only compiled;
``toml`` is parsed with tomllib; ``text`` is shown as is. A block with no info string fails: say
what it is."""

from __future__ import annotations

import re
import sys
import tomllib
import types
from pathlib import Path

import pytest
from conftest import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.M | re.S)


def blocks(path: Path) -> list[tuple[int, str, str]]:
    text = path.read_text()
    return [(text[: m.start()].count("\n") + 1, m.group(1).strip(), m.group(2)) for m in FENCE.finditer(text)]


def test_the_fence_parser_finds_every_block():
    n_fences = sum(
        1 for p in DOCS for line in p.read_text().splitlines() if line.startswith("```") and line.strip() != "```"
    )
    assert sum(len(blocks(p)) for p in DOCS) == n_fences  # every opening fence belongs to a parsed block
    assert n_fences >= 12


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_code_blocks_run(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a block that writes files writes them here
    module = types.ModuleType(f"doc_{path.stem.replace('-', '_').lower()}")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # dataclasses resolve annotations there
    namespace = module.__dict__
    for line, info, code in blocks(path):
        where = f"{path.relative_to(REPO)}:{line}"
        lang, _, mark = info.partition(" ")
        if lang == "python" and mark == "fragment":
            compile(code, where, "exec")
        elif lang == "python":
            exec(compile(code, where, "exec"), namespace)  # trusted: the repository's own docs
        elif lang == "toml":
            try:
                tomllib.loads(code)
            except tomllib.TOMLDecodeError as e:
                pytest.fail(f"{where}: invalid TOML: {e}")
        elif lang not in ("text", "console", "bash"):
            pytest.fail(f"{where}: code block with info string {info!r}: mark it python, toml or text")
