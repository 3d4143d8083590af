"""mkdocs hook: docstrings name other objects with Sphinx roles (``:func:`train_loop```), which
Markdown renders as a literal ":func:" before the code span. The role goes; the code span stays."""

from __future__ import annotations

import re

ROLE = re.compile(r":(?:func|meth|class|mod|attr|data|exc|obj):(?=<code>)")


def on_page_content(html: str, **_kwargs) -> str:
    return ROLE.sub("", html)
