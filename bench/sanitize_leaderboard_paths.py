"""Replace the machine paths that early session runs wrote into committed leaderboard files with
names anyone can resolve (a published row must name a model and files a reader can get).

    python bench/sanitize_leaderboard_paths.py leaderboards

Only labels and provenance strings change, never a score. The BSL rows' base model, a local folder
``/work/runs/tiny-mlm-nli`` built by ``bench/pretrain_tiny_mlm.py``, becomes ``tiny-mlm-nli`` (its
record folders are renamed to match); Trans-Encoder's reused pool folders become relative to their
results folder; the data root becomes ``$BENCHBENCH_DATA``; bench outputs become repo-relative.
Run ``benchbench leaderboard`` afterwards to regenerate the tables.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

RULES = [
    (re.compile(r"/work/runs/tiny-mlm-nli"), "tiny-mlm-nli"),
    (re.compile(r"/tmp/tenc-results/"), ""),
    (re.compile(r"/work/shared/data"), "$BENCHBENCH_DATA"),
    (re.compile(r"/work/main/"), ""),
    (re.compile(r"/tmp/qtp/"), ""),
    (re.compile(r"/tmp/bb/"), ""),
    (re.compile(r"/[^'\"]*/site-packages/"), "site-packages/"),
]
TEXT = {".json", ".jsonl", ".md", ".html", ".tex", ".csv", ".toml", ".txt", ".svg"}


def main(root: str) -> int:
    changed = 0
    for p in sorted(Path(root).rglob("*")):
        if not p.is_file() or p.suffix not in TEXT:
            continue
        text = p.read_text(encoding="utf-8")
        new = text
        for pat, rep in RULES:
            new = pat.sub(rep, new)
        if new != text:
            p.write_text(new, encoding="utf-8")
            changed += 1
    for d in sorted(Path(root).rglob("work__runs__tiny-mlm-nli"), reverse=True):
        subprocess.run(["git", "mv", str(d), str(d.with_name("tiny-mlm-nli"))], check=True)
    print(f"{changed} files rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "leaderboards"))
