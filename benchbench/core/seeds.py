"""Seed lists as people type them (``1-5``, ``1,3,5-7``): the one parser behind ``run --seeds``,
``sweep --seeds`` and ``study run --seeds``, so the README's ``--seeds 1-5`` means the same everywhere.

Written by hand: argparse has no range type and a range grammar this small is clearer than a dependency.
"""

from __future__ import annotations

import re

from benchbench.core.errors import ConfigError

SEED_MAX = 2**32 - 1  # numpy's seed range (accelerate seeds numpy too)
_PART = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")
MAX_SEEDS = 10_000  # a typo such as 1-100000000 would otherwise plan a hundred million runs


def parse_seeds(text: str, what: str = "--seeds") -> list[int]:
    """``"1-3,7"`` -> ``[1, 2, 3, 7]``: comma-separated seeds or inclusive ranges ``a-b`` (a <= b), in
    the order given, each seed once. A ConfigError naming ``what`` and the offending part otherwise
    (negative seeds, reversed ranges, anything that is not an integer)."""
    parts = [p for p in str(text).split(",") if p.strip()]
    if not parts:
        raise ConfigError(f"{what} needs at least one seed, e.g. {what} 1,2,3 or {what} 1-5 (got {text!r}).")
    seeds: list[int] = []
    for part in parts:
        m = _PART.fullmatch(part)
        if m is None:
            raise ConfigError(
                f"{what}: {part.strip()!r} in {text!r} is not a seed (an integer >= 0) or a range such as 1-5."
            )
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise ConfigError(f"{what}: the range {part.strip()!r} in {text!r} runs backwards; write {hi}-{lo}.")
        if hi > SEED_MAX:
            raise ConfigError(f"{what}: seeds must be integers from 0 to 2**32-1, got {hi} in {text!r}.")
        if hi - lo + 1 + len(seeds) > MAX_SEEDS:
            raise ConfigError(f"{what}: {text!r} names more than {MAX_SEEDS} seeds; is a range mistyped?")
        seeds.extend(range(lo, hi + 1))
    return list(dict.fromkeys(seeds))  # 1,1 is one seed
