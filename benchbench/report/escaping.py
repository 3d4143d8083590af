"""Escaping text for the table formats benchbench prints, in one place so every renderer uses it.

Method, model and task names, footnotes and provenance come from records and plugins, so they are
data, never markup: in HTML every piece is escaped (``html.escape``, quotes included); in Markdown a
``|`` or a line break inside a cell would end the cell or the row, and ``[text](url)`` would be a link
(``javascript:`` included); in LaTeX the ten special characters are commands. In every format a bidi
control character (U+202E, right-to-left override, and its kin) is shown as its ``\\uXXXX`` code, so a
name cannot reorder the text around it (make a row read as another method's, a number read reversed).
"""

from __future__ import annotations

import html
import re

HTML_FORMATS = frozenset({"html", "unsafehtml"})
MARKDOWN_FORMATS = frozenset({"github", "pipe"})
# Unicode's explicit bidi formatting characters (UAX #9: embeddings, overrides, isolates, marks)
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_BIDI = re.compile(f"[{BIDI_CONTROLS}]")
_LATEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "±": r"$\pm$",
    "†": r"$^\dagger$",
}


def escape_bidi(text: object) -> str:
    """``text`` with each bidi control character written as its code (``\\u202e``): visible, and inert."""
    return _BIDI.sub(lambda m: f"\\u{ord(m.group()):04x}", str(text))


def escape_html(text: object) -> str:
    """``text`` as HTML text: ``& < > " '`` become entities (safe in element content and attributes)."""
    return html.escape(escape_bidi(text), quote=True)


def escape_md(text: object) -> str:
    """``text`` as one Markdown table cell: backslashes, ``|``, ``[`` and ``]`` are backslash-escaped
    (GitHub Flavored Markdown's rule for a pipe inside a cell; escaped brackets make no link or image),
    line breaks become spaces (a newline ends the row) and ``<``/``>`` become entities (GitHub renders
    raw HTML in Markdown). Backticks stay: notes quote the commands to run as code spans."""
    s = escape_bidi(text).replace("\\", "\\\\")
    for c in "|[]":
        s = s.replace(c, "\\" + c)
    s = s.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    return s.replace("<", "&lt;").replace(">", "&gt;")


def escape_latex(text: object) -> str:
    """LaTeX text: the ten special characters (and ``<``/``>``, ``±``, ``†``) as commands."""
    return "".join(_LATEX.get(c, c) for c in escape_bidi(text))


def escape_cells(rows: list[list[object]], fmt: str) -> list[list[object]]:
    """Table cells escaped for ``fmt`` where the table library does not do it: Markdown formats
    (tabulate writes a ``|`` in a cell verbatim). HTML cells are escaped by tabulate's ``html``
    format itself; ``unsafehtml`` is never used (see ``table_format``). Bidi controls are shown
    escaped in every format (a terminal reorders text too)."""
    if fmt in MARKDOWN_FORMATS:
        return [[escape_md(c) for c in row] for row in rows]
    return [[c if isinstance(c, int | float) else escape_bidi(c) for c in row] for row in rows]


def table_format(fmt: str) -> str:
    """The tabulate format to use: ``unsafehtml`` (cells unescaped) is mapped to ``html``."""
    return "html" if fmt in HTML_FORMATS else fmt


def escape_text(text: object, fmt: str) -> str:
    """Free text printed around a table (title, footnotes, provenance) for ``fmt``: HTML-escaped in a
    paragraph for HTML output, unchanged for plain-text formats."""
    if fmt in HTML_FORMATS:
        return f"<p>{escape_html(text)}</p>"
    if fmt in MARKDOWN_FORMATS:
        s = escape_bidi(text).replace("[", "\\[").replace("]", "\\]")
        return s.replace("<", "&lt;").replace(">", "&gt;")
    return escape_bidi(text)
