"""Prose counts of Markdown pages: lines, words, words per sentence, parentheses per 100 words.

The README and the docs pages are held to short sentences and few asides (issue 49: the peers'
READMEs read at 11-16 words a sentence and 1.3-3.7 parentheses per 100 words). This script makes
those counts re-derivable for any page, at any commit.

    python bench/prose_stats.py README.md docs/*.md
    git show HEAD~3:README.md > /tmp/old.md && python bench/prose_stats.py /tmp/old.md

What counts as prose: every line except fenced and indented code blocks, table rows, headings,
image lines, HTML and mkdocstrings directives (``::: name``). Inside prose, a link keeps its text and loses its target; a bare URL is
dropped; an inline code span counts as one word (it is read as one name) and its parentheses are
not asides. A word is a whitespace token holding a letter or digit. A sentence ends at ".", "!" or
"?" followed by a space and a capital, a digit, a backtick or a quote, and at the end of every
paragraph and list item (a bullet without a full stop is still one sentence).
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path

LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
URL = re.compile(r"<?https?://\S+>?")
CODE_SPAN = re.compile(r"`+[^`]+`+")
SENTENCE_END = re.compile(r"[.!?]\)?\s+(?=[A-Z0-9`\"'*])")
WORD = re.compile(r"[A-Za-z0-9]")
ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+")


@dataclass
class Stats:
    lines: int
    words: int
    sentences: int
    parens: int

    @property
    def words_per_sentence(self) -> float:
        return self.words / self.sentences if self.sentences else 0.0

    @property
    def parens_per_100_words(self) -> float:
        return 100 * self.parens / self.words if self.words else 0.0


def prose_blocks(text: str) -> list[str]:
    """The page's paragraphs and list items as single strings, code, tables and headings left out."""
    blocks: list[str] = []
    current: list[str] = []
    in_fence = False
    in_indented = False
    prev_blank = True

    def flush() -> None:
        if current:
            blocks.append(" ".join(current))
            current.clear()

    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            flush()
            in_fence = not in_fence
            prev_blank = False
            continue
        if in_fence:
            continue
        if not stripped:
            flush()
            in_indented = False
            prev_blank = True
            continue
        indent = len(line) - len(line.lstrip(" "))
        if stripped.startswith(":::"):
            flush()
            in_indented = True  # an mkdocstrings directive and its indented options: rendered from code
            continue
        if indent >= 4 and (prev_blank or in_indented) and not ITEM.match(line):
            flush()
            in_indented = True  # an indented code block (Markdown's, or one nested in a list item)
            continue
        prev_blank = False
        if stripped.startswith(("|", "#", "<", "![")):
            flush()
            continue
        if ITEM.match(line):
            flush()
            line = ITEM.sub("", line)
        current.append(line.strip())
    flush()
    return blocks


def measure(text: str) -> Stats:
    """Counts for one page; ``lines`` is every line of the file, the rest are prose only."""
    words = sentences = parens = 0
    for block in prose_blocks(text):
        block = LINK.sub(r"\1", block)
        block = URL.sub("", block)
        block = CODE_SPAN.sub("CODE", block)
        n = sum(1 for tok in block.split() if WORD.search(tok))
        if not n:
            continue
        words += n
        sentences += len(SENTENCE_END.findall(block)) + 1
        parens += block.count("(")
    return Stats(len(text.splitlines()), words, sentences, parens)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="+", type=Path)
    args = ap.parse_args()
    print("| page | lines | words | words/sentence | parentheses/100 words |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for page in args.pages:
        s = measure(page.read_text())
        print(f"| {page} | {s.lines} | {s.words:,} | {s.words_per_sentence:.1f} | {s.parens_per_100_words:.1f} |")


if __name__ == "__main__":
    main()
