"""The file primitives every writer in benchbench uses: a file's sha256, an atomic write that never
follows a symlink, the ``.complete`` marker of a finished folder, and the one slug rule for file names.

Why one module: these were written by hand in ten places with three slug rules, and a hand-written
write followed a symlinked ``.lock.owner`` or record out of its folder. Here a write goes to a temp
file opened ``O_CREAT|O_EXCL|O_NOFOLLOW`` in the target's folder, is fsynced, then renamed over the
target, so a reader sees the old file or the new one, never half of one; a target that is a symlink
(or, given ``root``, one reached through a symlinked folder or outside ``root``) is refused with
:class:`UnsafePathError` naming it, and nothing is written.
"""

from __future__ import annotations

import contextlib
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


def check_inside(path: str | Path, root: str | Path | None) -> Path:
    """``path``, after checking a write there stays where it belongs: ``path`` is not a symlink and,
    given ``root``, lies under ``root`` with no symlinked folder between them (``root`` itself may be
    a link: the user chose it). Raises :class:`UnsafePathError` naming the offending path."""
    path = Path(path)
    if root is not None:
        top = Path(os.path.abspath(root))
        full = Path(os.path.abspath(path))  # lexical: '..' is resolved before the containment test
        if not full.is_relative_to(top):
            raise UnsafePathError(
                f"{path} is outside {root}, the folder it must be written in; refusing to write it (a name with "
                "'..' or an absolute path in a key, spec or option would put it there)."
            )
        here = top
        for part in full.relative_to(top).parts[:-1]:
            here = here / part
            _refuse_link(here, f" (a folder on the way to {path})")
    _refuse_link(path)
    return path


def _open_new(path: str, flags: int) -> int:
    return os.open(path, _OPEN_FLAGS, 0o666)  # not ``flags``: never follow a link, never reuse a file


@contextlib.contextmanager
def atomic_writer(path: str | Path, mode: str = "wb", *, root: str | Path | None = None) -> Iterator[IO[Any]]:
    """A file opened for writing (``mode`` "wb" or "w", UTF-8) whose content replaces ``path`` only when
    the block ends without an exception; for writers that stream (numpy, gzip, safetensors) rather
    than hand over bytes. The temp file is ``.<name>.<random>.tmp`` beside ``path`` (removed on any
    failure; ``f.name`` is its path, so a caller can verify the bytes before they replace ``path``) and
    gets the permissions of any file the user creates (umask applies)."""
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_writer mode must be 'wb' or 'w', not {mode!r}")
    path = check_inside(path, root)
    tmp = path.parent / f".{path.name[:200]}.{secrets.token_hex(4)}.tmp"  # 200: the temp name stays under NAME_MAX
    f = open(tmp, mode, encoding="utf-8" if mode == "w" else None, opener=_open_new)  # O_EXCL: opened only by us
    try:
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # a rename replaces a link put there meanwhile; it never writes the link's target
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


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


def mark_complete(folder: str | Path, content: str = "") -> None:
    """Write ``folder/.complete`` (``content``: what a reader of the finished folder needs, e.g. a
    hash or a JSON note), atomically and never through a symlink: written last, it says every other
    file in ``folder`` is whole."""
    atomic_write_text(Path(folder) / MARKER, content, root=folder)


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
