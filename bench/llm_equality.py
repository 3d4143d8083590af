"""Equality of the three training-free LLM readouts (PromptEOL, echo, token prepending) with their reference
code, re-implemented from the fetched sources in tests/plugins/llm_reference.py, on tiny random Llama and
Qwen2 decoders; writes leaderboards/new_methods/llm_equality.md.

    python bench/llm_equality.py --out leaderboards/new_methods

tests/plugins/test_llm_readouts.py asserts the same comparisons (each under its tolerance) in CI.
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "plugins"))

import llm_reference as ref


def table(rows: list[ref.Row]) -> str:
    import torch
    import transformers

    lines = [
        "# Training-free LLM readouts: equality with the reference code",
        "",
        "`python bench/llm_equality.py --out leaderboards/new_methods`",
        "",
        "Each reference function is re-implemented line by line from the fetched repository (they pin transformers",
        "4.37-4.46 and are not installed) in `tests/plugins/llm_reference.py`, run on the same tiny random",
        "decoder (3 layers; 8 for token prepending) and the same six sentences as the plugin, float32 on the CPU.",
        "The control is the readout with its mechanism removed: it must differ by far more than the tolerance.",
        f"Tolerance: max |difference| < `{ref.TOLERANCE:g}`. transformers `{transformers.__version__}`, torch",
        f"`{torch.__version__}`, Python `{platform.python_version()}`.",
        "",
        "| method | decoder | reference (repo@commit) | function | setting | max \\|diff\\| | control | control max \\|diff\\| |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.method} | tiny {r.arch} | {r.reference} | {r.function} | {r.setting} | `{r.max_diff:.1e}` "
            f"| {r.control} | `{r.control_diff:.2g}` |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None, help="folder for llm_equality.md (default: print it)")
    a = ap.parse_args()
    rows = ref.all_rows()
    body = table(rows)
    bad = [r for r in rows if not r.max_diff < ref.TOLERANCE]
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / "llm_equality.md").write_text(body)
    print(body)
    if bad:
        sys.exit(f"over the tolerance: {[(r.method, r.arch, r.max_diff) for r in bad]}")


if __name__ == "__main__":
    main()
