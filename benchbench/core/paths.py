"""Where benchbench keeps its caches when nothing else is said (``BENCHBENCH_CACHE``, else
``$XDG_CACHE_HOME/benchbench``). In ``core`` because the registry's manifest and the data store both
live under it."""

from __future__ import annotations

import os
from pathlib import Path


def default_data_cache() -> Path:
    base = os.environ.get("BENCHBENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "benchbench"
    )
    return Path(base) / "data"
