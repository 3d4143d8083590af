"""Escaping text for the table formats benchbench prints, in one place so every renderer uses it.

Method, model and task names, footnotes and provenance come from records and plugins, so they are
data, never markup: in HTML every piece is escaped (``html.escape``, quotes included), and in a
Markdown table a ``|`` or a line break inside a cell would end the cell or the row.
"""

from __future__ import annotations

import html

HTML_FORMATS = frozenset({"html", "unsafehtml"})
MARKDOWN_FORMATS = frozenset({"github", "pipe"})


def escape_html(text: object) -> str:
    """``text`` as HTML text: ``& < > " '`` become entities (safe in element content and attributes)."""
    return html.escape(str(text), quote=True)


def escape_md(text: object) -> str:
    """``text`` as one Markdown table cell: backslashes and ``|`` are backslash-escaped (GitHub
    Flavored Markdown's rule for a pipe inside a cell), line breaks become spaces (a newline ends
    the row) and ``<``/``>`` become entities (GitHub renders raw HTML in Markdown)."""
    s = str(text).replace("\\", "\\\\").replace("|", "\\|")
    s = s.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    return s.replace("<", "&lt;").replace(">", "&gt;")


def escape_cells(rows: list[list[object]], fmt: str) -> list[list[object]]:
    """Table cells escaped for ``fmt`` where the table library does not do it: Markdown formats
    (tabulate writes a ``|`` in a cell verbatim). HTML cells are escaped by tabulate's ``html``
    format itself; ``unsafehtml`` is never used (see ``table_format``)."""
    if fmt in MARKDOWN_FORMATS:
        return [[escape_md(c) for c in row] for row in rows]
    return rows


def table_format(fmt: str) -> str:
    """The tabulate format to use: ``unsafehtml`` (cells unescaped) is mapped to ``html``."""
    return "html" if fmt in HTML_FORMATS else fmt


def escape_text(text: object, fmt: str) -> str:
    """Free text printed around a table (title, footnotes, provenance) for ``fmt``: HTML-escaped in a
    paragraph for HTML output, unchanged for plain-text formats."""
    if fmt in HTML_FORMATS:
        return f"<p>{escape_html(text)}</p>"
    if fmt in MARKDOWN_FORMATS:
        return str(text).replace("<", "&lt;").replace(">", "&gt;")
    return str(text)
