"""Errors a user can act on: each names the file, option or plugin at fault."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class BenchbenchError(Exception):
    """Base class: the CLI prints these without a traceback."""


class UnknownNameError(BenchbenchError, KeyError):
    """An unknown method, task, suite or adapter kind."""

    def __init__(self, what: str, name: str, known: Iterable[str]):
        known = sorted(known)
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        listing = ", ".join(known) if len(known) <= 40 else f"{len(known)} names; see `benchbench list`"
        super().__init__(f"Unknown {what} {name!r}.{hint} Known: {listing}.")
        self.what, self.name, self.suggestions = what, name, close

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return self.args[0]


class DataError(BenchbenchError):
    """A data file is missing, corrupt or malformed."""


class PluginError(BenchbenchError):
    """A plugin failed to load, registered something invalid, or raised."""


class ConfigError(BenchbenchError):
    """A bad option value or task spec."""


class UnsafePathError(BenchbenchError):
    """A write refused because its path is a symlink, or resolves outside the folder it belongs to:
    benchbench never writes through a link (it could overwrite any file the user can write)."""
