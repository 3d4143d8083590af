"""A full disk, named: one line with the path being written, the space it needed and the space free.

Why: ENOSPC reached the user in as many shapes as there are writers: a raw ``SafetensorError`` ("I/O
error: No space left on device (os error 28)") with no path when an encoder was saved, a plugin's
traceback, a half-written record. Every write that can be large (an encoder, a checkpoint, a result
record and its per-item scores) runs inside :func:`naming_full_disk`, which turns any of those into
one :class:`NoSpaceError`."""

from __future__ import annotations

import errno
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchbench.core.errors import DataError

FULL = (errno.ENOSPC, errno.EDQUOT)
ADVICE = (
    "Free space there (old run folders under the results' runs/, embedding caches under $BENCHBENCH_CACHE "
    "or ~/.cache/benchbench) or choose another --output, then run the same command to resume."
)


class NoSpaceError(DataError):
    """A write failed because the disk (or the user's quota) is full."""


def os_errno(e: BaseException) -> int | None:
    """The OS error number of a failed write: an ``OSError``'s, or the one safetensors' ``SafetensorError``
    (not an ``OSError``) carries only in its text ("... (os error 28)")."""
    if isinstance(e, OSError) and e.errno:
        return e.errno
    m = re.search(r"os error (\d+)", str(e))
    return int(m.group(1)) if m else None


def is_full(e: BaseException) -> bool:
    return os_errno(e) in FULL


def tensor_bytes(obj: Any, depth: int = 3) -> int | None:
    """Bytes of the tensors reachable from ``obj`` (a module's state, an encoder's attributes, a list
    of them), each storage once: what saving it writes, give or take the small JSON beside it. None
    when none is found (or torch is not loaded)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    seen: set[int] = set()
    total = 0

    def add(t: Any) -> None:
        nonlocal total
        key = t.untyped_storage().data_ptr() if t.device.type != "meta" else id(t)
        if key not in seen:
            seen.add(key)
            total += t.numel() * t.element_size()

    def visit(o: Any, d: int) -> None:
        if isinstance(o, torch.Tensor):
            add(o)
        elif isinstance(o, torch.nn.Module):
            for t in o.state_dict().values():
                add(t)
        elif d > 0 and isinstance(o, (list, tuple)):
            for v in o:
                visit(v, d - 1)
        elif d > 0 and isinstance(o, dict):
            for v in o.values():
                visit(v, d - 1)
        elif d > 0 and hasattr(o, "__dict__") and not isinstance(o, type):
            for v in vars(o).values():
                visit(v, d - 1)

    try:
        visit(obj, depth)
    except Exception:  # an estimate only: never let it hide the disk-full error
        return None
    return total or None


def free_bytes(path: str | Path) -> int | None:
    """Free bytes on the device holding ``path`` (its nearest existing folder)."""
    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
    except OSError:
        return None


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def no_space(path: str | Path, what: str, needed: int | None = None) -> NoSpaceError:
    """The one message: path, what was being written, space needed (estimated) and free, what to do."""
    free = free_bytes(path)
    need = f"needs about {_mb(needed)}" if needed else "needs more space"
    have = f", {_mb(free)} free there" if free is not None else ""
    return NoSpaceError(f"{Path(path).absolute()}: no space left on the device while {what} ({need}{have}). {ADVICE}")


@contextmanager
def naming_full_disk(
    path: str | Path, what: str, needed: int | Callable[[], int | None] | None = None
) -> Iterator[None]:
    """Run a write; a full disk in it (``OSError`` ENOSPC/EDQUOT, ``SafetensorError`` "os error 28",
    also wrapped by a plugin error) becomes :func:`no_space` naming ``path``. ``needed``: bytes, or a
    function computing them (called only on failure)."""
    try:
        yield
    except NoSpaceError:
        raise
    except Exception as e:
        cause: BaseException | None = e
        while cause is not None and not is_full(cause):  # a plugin error wrapping the OS error
            cause = cause.__cause__
        if cause is None:
            raise
        n = needed() if callable(needed) else needed
        raise no_space(path, what, n) from e
