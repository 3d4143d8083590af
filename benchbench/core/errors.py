"""Errors a user can act on: each names the file, option or plugin at fault."""

from __future__ import annotations

import difflib
import errno
import os
from collections.abc import Callable, Iterable
from typing import Any


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


def call_plugin(plugin: str, method: str, what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, a plugin's exception becoming a PluginError that names it. A full disk or a
    folder it may not write (an OSError naming its path) is not the plugin's fault: that error names
    the path, the cause and what to do."""
    try:
        return fn(*args)
    except BenchbenchError:
        raise
    except Exception as e:
        environment = (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS)
        if not isinstance(e, OSError) or e.filename is None or e.errno not in environment:
            raise PluginError(
                f"Method {method!r} (plugin {plugin!r}) raised while {what}: {type(e).__name__}: {e}"
            ) from e
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            fix = (
                "free space there (old run folders, embedding caches under $BENCHBENCH_CACHE or "
                "~/.cache/benchbench) or choose another --output"
            )
        else:
            fix = "make it writable or choose another --output"
        raise DataError(
            f"{os.path.abspath(os.fsdecode(e.filename))}: {e.strerror} (while {what}, method {method!r}); "
            f"{fix}, then run the same command to resume."
        ) from e
