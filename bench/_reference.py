"""Pieces the reference-code benches share: the source of one function in a fetched reference file,
and real STS-B sentences to run both sides on."""

from __future__ import annotations

import ast
import os
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def function_source(path: Path, name: str) -> str:
    """The source of the (possibly nested or method) function ``name`` in ``path``, dedented."""
    src = path.read_text()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return textwrap.dedent(ast.get_source_segment(src, node))
    raise LookupError(f"{name} not in {path}")


def sts_sentences(limit: int) -> list[str]:
    """The first ``limit`` sentences of STS-B's train split (both sides of each pair, in file order)."""
    data = Path(os.environ.get("BENCHBENCH_DATA", REPO.parent / "shared" / "data"))
    f = data / "sts" / "STSBenchmark" / "sts-train.csv"
    if not f.is_file():
        sys.exit(f"{f} missing: set BENCHBENCH_DATA to the offline data folder")
    out: list[str] = []
    for line in f.read_text().splitlines():
        out += line.split("\t")[5:7]
    return out[:limit]
