"""Reading a ``BENCHBENCH_*`` environment knob, validated where it is read.

Why: a knob read with a bare ``float()``/``int()`` either accepted nonsense silently
(``BENCHBENCH_LOCK_TIMEOUT=-5`` waited forever, ``BENCHBENCH_CO2_COUNTRY=../../x`` was recorded as a
country) or failed far from its cause (``=nan`` as a raw ``ValueError`` once a lock was contended,
``BENCHBENCH_MAX_READ_BYTES=1e400`` as an ``OverflowError`` blamed on a task). Every reader goes
through these helpers: an unset or blank variable is the default, anything else is checked now and a
bad value is a :class:`ConfigError` naming the variable, its value and what is allowed."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable

from benchbench.core.errors import ConfigError

__all__ = ["env_bytes", "env_choice", "env_flag", "env_float", "env_pattern", "knob_error", "parse_bytes"]

_TRUE = ("1", "on", "true", "yes")
_FALSE = ("0", "off", "false", "no")


def knob_error(name: str, raw: str, allowed: str, why: str = "") -> ConfigError:
    """The one message of a bad knob: variable, value, what it may be, how to fix it."""
    because = f" ({why})" if why else ""
    return ConfigError(f"{name}={raw!r} is not allowed{because}: it must be {allowed}. Fix or unset {name}.")


def _raw(name: str) -> str | None:
    raw = os.environ.get(name)
    return raw.strip() if raw is not None and raw.strip() else None


def env_float(
    name: str,
    default: float | None,
    *,
    minimum: float | None = None,
    allow_min: bool = True,
    unit: str = "",
) -> float | None:
    """A finite number (``nan``/``inf`` refused) not under ``minimum`` (nor equal to it when
    ``allow_min`` is False); ``default`` when the variable is unset or blank."""
    raw = _raw(name)
    if raw is None:
        return default
    bound = ""
    if minimum is not None:
        bound = f" {'>=' if allow_min else '>'} {minimum:g}"
    allowed = f"a finite number{bound}{f' ({unit})' if unit else ''}"
    try:
        v = float(raw)
    except ValueError:
        raise knob_error(name, raw, allowed) from None
    if not math.isfinite(v):
        raise knob_error(name, raw, allowed, "not finite")
    if minimum is not None and (v < minimum or (v == minimum and not allow_min)):
        raise knob_error(name, raw, allowed, "out of range")
    return v


_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_BYTES = re.compile(r"^((?:\d+(?:\.\d*)?|\.\d+)(?:E[+-]?\d+)?)([KMGT]?)$")
MAX_BYTES = 1 << 60  # beyond any disk: a larger "limit" is a typo, not a setting


def parse_bytes(text: str) -> int:
    """``2000000``, ``512K``, ``64M``, ``2G`` (a trailing B allowed) -> a positive whole byte count;
    ``ValueError`` saying why otherwise (never an ``OverflowError``: ``1e400`` is not a byte count)."""
    t = text.strip().upper().removesuffix("B")
    m = _BYTES.match(t)
    if not m:
        raise ValueError("not a byte count")
    n = float(m.group(1)) * _UNITS.get(m.group(2), 1)
    if not math.isfinite(n) or n > MAX_BYTES:
        raise ValueError(f"over {MAX_BYTES:,} bytes")
    if int(n) <= 0:
        raise ValueError("must be positive")
    return int(n)


def env_bytes(name: str, default: int | None) -> int | None:
    """A positive byte count (``500M``, ``2G``, ``1048576``); ``default`` when unset or blank."""
    raw = _raw(name)
    if raw is None:
        return default
    try:
        return parse_bytes(raw)
    except ValueError as e:
        raise knob_error(name, raw, f"a positive byte count up to {MAX_BYTES:,} (e.g. 500M, 2G)", str(e)) from None


def env_flag(name: str, default: bool) -> bool:
    """On (``1/on/true/yes``) or off (``0/off/false/no``), any case."""
    raw = _raw(name)
    if raw is None:
        return default
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise knob_error(name, raw, f"one of {', '.join(_TRUE + _FALSE)}")


def env_choice(name: str, default: str | None, choices: Iterable[str]) -> str | None:
    """One of ``choices`` (exact)."""
    raw = _raw(name)
    if raw is None:
        return default
    options = sorted(choices)
    if raw not in options:
        listing = ", ".join(options) if len(options) <= 20 else f"one of {len(options)} names"
        raise knob_error(name, raw, f"one of {listing}")
    return raw


def env_pattern(name: str, default: str | None, pattern: str, allowed: str) -> str | None:
    """A value matching ``pattern`` (whole string); ``allowed`` says in words what that is."""
    raw = _raw(name)
    if raw is None:
        return default
    if not re.fullmatch(pattern, raw):
        raise knob_error(name, raw, allowed)
    return raw
