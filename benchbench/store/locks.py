"""Advisory file locks: one per training run folder and one per result key.

Why: two runs that share a run folder (two identical commands, or two tasks that train on the same
corpus, e.g. TSDAE on STSb and SICK-R, which share the wiki corpus) or a result record used to write
the same checkpoint and record files at once and crashed or lost data.

Policy (documented in the README): a run that finds a lock held **waits** for it (logging once
"waiting: another run holds X since T (pid P)"), then re-reads what the other run left (a finished
encoder is reused, a stored split is not evaluated again). With ``BENCHBENCH_LOCK_TIMEOUT=SECONDS``
it waits at most that long and then fails with :class:`LockedError` naming the holder. The locks are
``fcntl``/``flock`` locks (the ``filelock`` library), so the kernel releases them when the holder dies,
even by ``kill -9``: a stale lock file never blocks anyone.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from benchbench.core.errors import BenchbenchError
from benchbench.store.files import atomic_write_json, check_inside, pinned_folder

log = logging.getLogger(__name__)


class LockedError(BenchbenchError):
    """Another run holds a lock and BENCHBENCH_LOCK_TIMEOUT ran out."""


def _timeout() -> float:
    """Seconds to wait for a held lock; -1 (unset): forever. A negative value (which filelock reads as
    "forever"), ``nan`` or ``inf`` is a ``ConfigError`` naming the variable."""
    from benchbench.core.env import env_float

    limit = env_float("BENCHBENCH_LOCK_TIMEOUT", None, minimum=0, unit="seconds to wait; unset: wait forever")
    return -1.0 if limit is None else limit


def holder(lock_path: Path) -> str:
    """'pid P on HOST since T' from the holder's note next to the lock (best effort: the note of a
    holder that just started may not be written yet)."""
    try:
        info = json.loads(Path(f"{lock_path}.owner").read_text())
        return f"pid {info['pid']} on {info['host']} since {info['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "an unknown process"


@contextmanager
def hold(lock_path: str | Path, what: str, *, root: str | Path | None = None) -> Iterator[None]:
    """Hold the advisory lock ``lock_path`` (created with its folder) while the block runs.
    ``what`` names the protected thing in messages ("run folder ...", "result ..."). A symlinked lock
    or owner note (or, given ``root``, a symlinked folder between ``root`` and them) is refused with
    ``UnsafePathError`` before anything is created or opened: the lock file is opened for writing and
    the note rewritten, and either would otherwise reach the link's target. The lock's folder is made
    and held through ``pinned_folder`` (folder descriptors from ``root``), and the lock and its note
    are opened in that very folder, so a folder swapped for a link meanwhile cannot move them out."""
    lock_path = Path(lock_path)
    owner = Path(f"{lock_path}.owner")
    check_inside(lock_path, root)
    check_inside(owner, root)
    with pinned_folder(lock_path.parent, lock_path.parent if root is None else root) as folder:
        lock = FileLock(str(folder / lock_path.name), thread_local=False)
        try:
            _acquire(lock, lock_path, what, 0)
        except Timeout:
            limit = _timeout()
            log.warning(
                "waiting: another run holds %s (%s)%s",
                what,
                holder(lock_path),
                f"; giving up after {limit:g}s" if limit >= 0 else "",
            )
            try:
                _acquire(lock, lock_path, what, limit)
            except Timeout:
                raise LockedError(
                    f"another run holds {what} ({holder(lock_path)}; lock file {lock_path}). Wait for it to "
                    f"finish, or raise BENCHBENCH_LOCK_TIMEOUT (now {limit:g}s)."
                ) from None
        try:
            with contextlib.suppress(OSError):  # the note is only for messages; the lock itself is what protects
                atomic_write_json(
                    folder / owner.name,  # in the held folder: never a link (refused above, O_NOFOLLOW here)
                    {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
                )
            yield
        finally:
            lock.release()


def _acquire(lock: FileLock, lock_path: Path, what: str, timeout: float) -> None:
    """``lock.acquire``, with an OSError (a link put in place after the check, a read-only folder)
    turned into an error naming the lock file instead of filelock's traceback."""
    try:
        lock.acquire(timeout=timeout)
    except Timeout:  # a subclass of OSError: the caller reports who holds the lock
        raise
    except OSError as e:
        raise BenchbenchError(
            f"cannot take the lock of {what}: {lock_path}: {e.strerror or e}. The folder must be writable and "
            "the lock a regular file (remove it if it is a link; no run holds a lock file that is not one)."
        ) from e
