"""The file primitives every writer in benchbench uses: a file's sha256, the one root-checked way to
create folders and files, an atomic write that never follows a symlink, the ``.complete`` marker of a
finished folder, and the one slug rule for file names.

Why one module: these were written by hand in ten places with three slug rules, and a hand-written
write followed a symlinked ``.lock.owner``, record or parent folder out of its folder. Here every folder
is made by :func:`open_folder`: the path is checked against its root (lexically, then no link on the
way) BEFORE anything is created, then walked from the root one name at a time, each folder opened
``O_DIRECTORY|O_NOFOLLOW`` relative to its parent's descriptor (and created there with ``mkdir(dir_fd=)``
when missing), so a folder swapped for a link between the check and the write is refused, never
followed. A file goes to a temp file opened ``O_CREAT|O_EXCL|O_NOFOLLOW`` relative to that descriptor,
is fsynced, then renamed over the target within it, so a reader sees the old file or the new one,
never half of one. A writer that only takes a path (``save_pretrained``, a lock library) gets
:func:`pinned_folder`: the path of the very folder that walk opened. A refusal is an
:class:`UnsafePathError` naming the path at fault, and nothing is written.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from benchbench.core.errors import UnsafePathError

MARKER = ".complete"
_SAFE = re.compile(r"[^A-Za-z0-9._=-]+")
_HASH_LEN = 10  # hex digits of sha256 in a slug: 40 bits, enough that two names of one store never meet
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
# openat-style creation: every call the walk and the atomic write make relative to a folder descriptor
DIR_FD = (
    hasattr(os, "O_NOFOLLOW")
    and hasattr(os, "O_DIRECTORY")
    and {os.open, os.mkdir, os.rename, os.unlink} <= os.supports_dir_fd
)
_PROC_FD = Path("/proc/self/fd")  # Linux: /proc/self/fd/N names the folder descriptor N holds, whatever its path does


def sha256_file(path: str | Path) -> str:
    """The hex sha256 of ``path``'s bytes, streamed (``hashlib.file_digest``): a data file or a
    checkpoint shard of gigabytes is never read into memory whole."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _refuse_link(path: Path, what: str = "") -> None:
    if path.is_symlink():
        raise UnsafePathError(
            f"{path}{what} is a symbolic link (to {os.readlink(path)}); benchbench never writes through a link, "
            "which could overwrite a file outside its folder. Remove the link (or put a regular file or folder "
            "in its place) and run again."
        )


def _within(path: Path, root: str | Path) -> tuple[Path, tuple[str, ...]]:
    """(``root`` made absolute, the names from it to ``path``), both lexical ('..' resolved first), or
    an UnsafePathError when ``path`` is not under ``root``."""
    top = Path(os.path.abspath(root))
    full = Path(os.path.abspath(path))
    if not full.is_relative_to(top):
        raise UnsafePathError(
            f"{path} is outside {root}, the folder it must be written in; refusing to write it (a name with "
            "'..' or an absolute path in a key, spec, archive or option would put it there)."
        )
    return top, full.relative_to(top).parts


def check_inside(path: str | Path, root: str | Path | None) -> Path:
    """``path``, after checking a write there stays where it belongs: ``path`` is not a symlink and,
    given ``root``, lies under ``root`` with no symlinked folder between them (``root`` itself may be
    a link: the user chose it). Raises :class:`UnsafePathError` naming the offending path. A check
    only: the writers below also create through folder descriptors, so a later swap cannot escape."""
    path = Path(path)
    if root is not None:
        top, parts = _within(path, root)
        here = top
        for part in parts[:-1]:
            here = here / part
            _refuse_link(here, f" (a folder on the way to {path})")
    _refuse_link(path)
    return path


def _not_a_folder(path: Path, e: OSError) -> BaseException:
    """The error for a name on the walk that could not be opened as a folder without following a link."""
    if path.is_symlink():
        return UnsafePathError(
            f"{path} (a folder benchbench writes in) is a symbolic link (to {os.readlink(path)}); benchbench "
            "never writes through a link, which could put its files outside their folder. Remove the link (or "
            "put a real folder in its place) and run again."
        )
    if e.errno == errno.ENOTDIR:
        return UnsafePathError(
            f"{path} is not a folder (a file is in the way of a folder benchbench writes in); move it away and "
            "run again."
        )
    return e


@contextlib.contextmanager
def open_folder(path: str | Path, root: str | Path | None = None, *, create: bool = True) -> Iterator[int | None]:
    """A descriptor of folder ``path``, held while the block runs: ``path`` is checked against
    ``root`` (default: ``path`` itself) before anything is created, then reached from ``root`` one
    name at a time, each folder opened ``O_DIRECTORY|O_NOFOLLOW`` relative to the one before and, with
    ``create``, made there (``mkdir(dir_fd=)``) when missing. So no folder is made outside ``root``
    before a refusal (the check runs first), and a folder swapped for a link after the check is
    refused when the walk reaches it, not followed. ``root`` itself is opened as named (the user
    chose it, and it may be a link) and made when missing. Yields None where the platform has no
    ``*at`` calls (the check then stands alone)."""
    path = Path(path)
    root = path if root is None else root
    top, parts = _within(path, root)
    here = top
    for i, part in enumerate(parts):  # the check first: nothing is created before a refusal
        here = here / part
        _refuse_link(here, "" if i == len(parts) - 1 else f" (a folder on the way to {path})")
        if not os.path.lexists(here):
            break
    if not DIR_FD:
        if create:
            os.makedirs(path, exist_ok=True)
        yield None
        return
    if create:
        os.makedirs(top, exist_ok=True)
    fd = os.open(top, _DIR_FLAGS)
    try:
        here = top
        for part in parts:
            here = here / part
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
            try:
                nxt = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                    raise _not_a_folder(here, e) from None
                raise
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def safe_mkdirs(path: str | Path, root: str | Path) -> Path:
    """Make folder ``path`` and its missing parents under ``root`` through :func:`open_folder` (checked
    first, created one ``mkdir(dir_fd=)`` at a time, never through a link); returns ``path``. The one
    way benchbench makes a folder it will write in."""
    with open_folder(path, root):
        pass
    return Path(path)


@contextlib.contextmanager
def pinned_folder(path: str | Path, root: str | Path | None = None) -> Iterator[Path]:
    """Folder ``path`` made and held as :func:`open_folder` does, and a path naming exactly the folder
    that walk opened, for writers that only take a path (``save_pretrained``, a plugin's
    ``Encoder.save``, the lock library): on Linux ``/proc/self/fd/N``, which keeps naming that folder
    whatever is done to ``path`` meanwhile (a swap for a link cannot redirect the writes); elsewhere
    ``path`` itself, checked. Use it inside this process only, while the block runs."""
    with open_folder(path, root) as fd:
        yield _pinned(fd) or Path(path)


def _pinned(fd: int | None) -> Path | None:
    """``/proc/self/fd/<fd>`` when it names the folder ``fd`` holds (Linux), else None."""
    if fd is None:
        return None
    pinned = _PROC_FD / str(fd)
    try:
        same = os.stat(pinned).st_ino == os.fstat(fd).st_ino and os.stat(pinned).st_dev == os.fstat(fd).st_dev
    except OSError:
        return None
    return pinned if same else None


@contextlib.contextmanager
def atomic_writer(path: str | Path, mode: str = "wb", *, root: str | Path | None = None) -> Iterator[IO[Any]]:
    """A file opened for writing (``mode`` "wb" or "w", UTF-8) whose content replaces ``path`` only when
    the block ends without an exception; for writers that stream (numpy, gzip, safetensors) rather
    than hand over bytes. Given ``root``, ``path``'s missing folders are made under it first
    (:func:`open_folder`: checked, then created through folder descriptors). The temp file is
    ``.<name>.<random>.tmp`` beside ``path``, opened and renamed relative to the folder's descriptor
    (removed on any failure; ``f.name`` is its path, so a caller can verify the bytes before they
    replace ``path``) and gets the permissions of any file the user creates (umask applies)."""
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_writer mode must be 'wb' or 'w', not {mode!r}")
    path = check_inside(path, root)
    name = path.name
    tmp_name = f".{name[:200]}.{secrets.token_hex(4)}.tmp"  # 200: the temp name stays under NAME_MAX
    tmp = path.parent / tmp_name
    with open_folder(path.parent, path.parent if root is None else root, create=root is not None) as dfd:
        at = {} if dfd is None else {"dir_fd": dfd}

        def opener(_path: str, _flags: int) -> int:  # O_EXCL|O_NOFOLLOW, in the folder checked: opened only by us
            return os.open(tmp_name if dfd is not None else tmp, _OPEN_FLAGS, 0o666, **at)

        f = open(tmp, mode, encoding="utf-8" if mode == "w" else None, opener=opener)
        try:
            with f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            if dfd is None:
                os.replace(tmp, path)
            else:  # a rename replaces a link put there meanwhile; it never writes the link's target
                os.replace(tmp_name, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name if dfd is not None else tmp, **at)
            raise


def move_into(src: str | Path, dst: str | Path, root: str | Path) -> Path:
    """Rename ``src`` (a file or folder this process made, e.g. in a temp folder) to ``dst`` under
    ``root``: ``dst`` is checked and its folder made as :func:`open_folder` does, and the rename is made
    relative to that folder's descriptor, so a folder swapped for a link meanwhile cannot take ``src``
    outside ``root``. An existing file at ``dst`` is replaced (``os.replace``); returns ``dst``."""
    dst = check_inside(dst, root)
    with open_folder(dst.parent, root) as dfd:
        if dfd is None:
            os.replace(src, dst)
        else:
            os.replace(os.path.abspath(src), dst.name, dst_dir_fd=dfd)
    return dst


def atomic_write_bytes(path: str | Path, data: bytes, *, root: str | Path | None = None) -> None:
    """Replace ``path`` with ``data`` atomically, never through a symlink (see :func:`atomic_writer`)."""
    with atomic_writer(path, "wb", root=root) as f:
        f.write(data)


def atomic_write_text(path: str | Path, text: str, *, root: str | Path | None = None) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically, never through a symlink."""
    atomic_write_bytes(path, text.encode("utf-8"), root=root)


def atomic_write_json(path: str | Path, obj: Any, *, root: str | Path | None = None, **json_kw: Any) -> None:
    """Replace ``path`` with ``json.dumps(obj, **json_kw)`` atomically, never through a symlink."""
    atomic_write_text(path, json.dumps(obj, **json_kw), root=root)


def mark_complete(folder: str | Path, content: str = "", *, root: str | Path | None = None) -> None:
    """Write ``folder/.complete`` (``content``: what a reader of the finished folder needs, e.g. a
    hash or a JSON note), atomically and never through a symlink (nor, given ``root``, through a
    linked folder between ``root`` and ``folder``): written last, it says every other file in
    ``folder`` is whole."""
    atomic_write_text(Path(folder) / MARKER, content, root=folder if root is None else root)


def is_complete(folder: str | Path) -> bool:
    """Whether ``folder`` holds a ``.complete`` marker that is a regular file: a symlinked marker
    (which anyone could point at any file) does not make a folder complete."""
    marker = Path(folder) / MARKER
    return marker.is_file() and not marker.is_symlink()


def slug(name: str, max_len: int = 80) -> str:
    """The file name of ``name``: ``name`` itself when it is plain (letters, digits, ``._=-``, no
    leading dot) and at most ``max_len`` long; else its readable part (``/`` -> ``__``, other unsafe runs
    -> ``_``), cut to fit, + ``~`` + 10 hex of its sha256, so two names never share a slug (``~`` is in
    no plain name) and a long task or method name never hits the file system's name limit. The
    result store names its record folders with this rule (records written since names became
    injective keep their paths); the full name stays in the record."""
    if max_len < _HASH_LEN + 2:
        raise ValueError(f"slug max_len must be at least {_HASH_LEN + 2} (got {max_len})")
    readable = _SAFE.sub("_", name.replace("/", "__")).strip("_") or "_"
    if readable == name and not name.startswith(".") and len(name) <= max_len:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LEN]
    return f"{readable[: max_len - _HASH_LEN - 1]}~{digest}"
