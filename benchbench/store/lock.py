"""The dependency lock a record ran under: ``constraints.txt`` at the checkout's root pins every package
the tests passed with (torch apart: it is installed first, on its own pin). A score can depend on a
library's version (transformers 5.x changed what a BERT forward does with jumps in ``position_ids``), so
a record names the lock's sha256 and every package whose installed version differs from it."""

from __future__ import annotations

import functools
import hashlib
import re
from importlib import metadata
from pathlib import Path
from typing import Any

LOCK_FILE = "constraints.txt"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)")


def canonical(name: str) -> str:
    """PEP 503's normal form of a distribution name (``Sentence_Transformers`` -> ``sentence-transformers``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(path: Path) -> dict[str, str]:
    """``{canonical name: version}`` of every ``name==version`` line of a constraints file. A line that
    is neither a pin, a comment nor blank is refused: a lock that says less than it seems to is no lock."""
    pins: dict[str, str] = {}
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        m = _PIN.match(text)
        if not m:
            raise ValueError(f"{path}:{i}: {line!r} is not a 'name==version' pin; the lock holds only exact pins.")
        pins[canonical(m.group(1))] = m.group(2)
    return pins


def drift(pins: dict[str, str]) -> dict[str, list[str | None]]:
    """``{name: [locked, installed]}`` for every pinned package whose installed version differs (None:
    not installed)."""
    out: dict[str, list[str | None]] = {}
    for name, want in sorted(pins.items()):
        try:
            have: str | None = metadata.version(name)
        except metadata.PackageNotFoundError:
            have = None
        if have != want:
            out[name] = [want, have]
    return out


def lock_state(root: Path | None = None) -> dict[str, Any]:
    """``{"lock": {"file", "sha256", "drift"}}`` for the checkout at ``root`` (the one holding this
    package, by default), or ``{"lock": None}`` when no lock is there (an installed wheel)."""
    root = root or Path(__file__).resolve().parents[2]
    return _lock_state(str(root))


@functools.cache
def _lock_state(root: str) -> dict[str, Any]:
    path = Path(root) / LOCK_FILE
    if not path.is_file():
        return {"lock": None}
    return {
        "lock": {
            "file": LOCK_FILE,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "drift": drift(read_pins(path)),
        }
    }
