"""Which way did training move a study cell? A verdict from its curves, stated as a rule and never
silently absent.

A trained cell can match its start because the method does nothing at this budget, or because it
moved the encoder in a way the task does not reward; the two read alike in a table of final scores.
The records hold what tells them apart: the dev curve (``train.monitor``, scored every
``--eval-every`` steps on a held-out split, its step-0 point the start as the method built it) and the
training loss against the level an encoder that cannot tell its candidates apart scores
(``train.loss_curve``, ``train.loss_chance``; ``Method.loss_chance``).

The verdict names a direction, never "learned": a fall is a move, and calling it learning is how a
page said "7 learned" of cells whose dev score went down (BSL's STS-B dev 86.7 -> 85.3). The rule
(:func:`learning_verdict`), with ``tol`` the tolerance in the dev score's units and ``r`` the chance
ratio (default 0.95):

* a dev curve of >= 2 points decides, by its LAST point against its first (the step-0 point when the
  curve has one; the study keeps the encoder at the end of its budget): more than ``tol`` above ->
  "moved up"; more than ``tol`` below -> "moved down"; otherwise "flat" (the reason says when the
  curve left the margin in between and came back).
* a dev curve on another task than the cell's (``dev_on_task`` False) that stays flat says nothing
  about the cell's task: read as no dev curve.
* no dev curve: a loss that stayed at its chance level (last >= ``r`` x chance) or rose (last > 1.05 x
  first) -> "flat" (the objective did not move the encoder); a loss below chance -> "not assessable"
  (the objective was fit, but nothing says which way the score moved); no loss against a chance
  level either -> "not assessable". A rising loss is flagged in any case (ESimCSE's 3.7 -> 4.8: its
  chance level itself grows from ln b to ln(b + queue) while the queue fills, so read its reason).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MOVED_UP = "moved up"
MOVED_DOWN = "moved down"
FLAT = "flat"
NOT_ASSESSABLE = "not assessable"
VERDICTS = (MOVED_UP, MOVED_DOWN, FLAT, NOT_ASSESSABLE)
CHANCE_RATIO = 0.95  # a final loss within 5% of chance has fit (almost) nothing of its objective
RISE_RATIO = 1.05  # a final loss 5% above the first point: the loss rose

Curve = Sequence[tuple[float, float]]


@dataclass(frozen=True)
class Verdict:
    verdict: str  # one of VERDICTS
    reason: str
    flags: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")


def curve_points(curve: Iterable[Any] | None) -> list[tuple[float, float]]:
    """(step, value) pairs with finite numbers, in step order; malformed points dropped."""
    out = []
    for p in curve or ():
        if isinstance(p, list | tuple) and len(p) == 2 and all(_finite(x) for x in p):
            out.append((float(p[0]), float(p[1])))
    return sorted(out)


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _dev_state(dev: list[tuple[float, float]], tol: float) -> tuple[str, str]:
    """(MOVED_UP | MOVED_DOWN | FLAT | "none", what the curve did, in words): its last point against its
    first, the extremes named when the curve left the margin on the way."""
    if len(dev) < 2:
        return "none", "no dev curve" if not dev else "one dev point, no curve"
    (s0, v0), later = dev[0], [v for _, v in dev[1:]]
    start = "step-0" if s0 == 0 else f"first (step {s0:g})"
    hi, lo, last = max(later), min(later), later[-1]
    way = f"dev went {v0:.2f} -> {last:.2f} ({last - v0:+.2f}) from its {start} point over {len(dev)} points"
    if last - v0 > tol:
        return MOVED_UP, way
    if v0 - last > tol:
        return MOVED_DOWN, way
    swings = [f"{x - v0:+.2f}" for x in (hi, lo) if abs(x - v0) > tol]
    return FLAT, way + (f", within {tol:g} at the end" + (f" after reaching {' and '.join(swings)}" if swings else ""))


def _loss_state(loss: list[tuple[float, float]], chance: float | None, ratio: float) -> tuple[str, str, tuple]:
    """("reduced" | "not reduced" | "none", words, flags)."""
    if not loss:
        return "none", "no loss curve", ()
    first, last = loss[0][1], loss[-1][1]
    rose = len(loss) >= 2 and last > RISE_RATIO * first
    flags = (f"loss rose {first:.3g} -> {last:.3g}",) if rose else ()
    if chance is None or not _finite(chance) or chance <= 0:
        if rose:
            return "not reduced", f"loss rose {first:.3g} -> {last:.3g} (no chance level stated)", flags
        return "none", f"loss {first:.3g} -> {last:.3g}, no chance level to read it against", flags
    words = f"loss {first:.3g} -> {last:.3g}, {last / chance:.2f} x chance {chance:.3g}"
    if last >= ratio * chance or rose:
        return "not reduced", words, flags
    return "reduced", words, flags


def learning_verdict(
    dev_curve: Curve | None,
    loss_curve: Curve | None,
    loss_chance: float | None,
    *,
    tolerance: float,
    chance_ratio: float = CHANCE_RATIO,
    dev_on_task: bool = True,
) -> Verdict:
    """The cell's verdict by the module's rule. ``dev_curve``: (step, score) points, the step-0 point
    first when there is one; ``loss_curve``: (step, mean loss) points; ``loss_chance``: the loss at
    chance (None: none stated); ``tolerance``: how far the dev score must move to count, in its units
    (a study's equivalence margin, e.g. 1.0 point x100). ``dev_on_task`` False: the dev curve scores
    another task than the one the cell trained for (TwitterPara has no dev split: its cells are
    followed on STS-B dev); a move there still shows the encoder moved (the reason says where), but a
    flat curve says nothing about the cell's own task, so the loss decides."""
    if not _finite(tolerance) or tolerance < 0:
        raise ValueError(f"tolerance must be a finite number >= 0 (got {tolerance!r})")
    dev, what = _dev_state(curve_points(dev_curve), float(tolerance))
    if not dev_on_task and dev != "none":
        what += " (on another task's dev split)"
        if dev == FLAT:
            dev = "none"
    loss, said, flags = _loss_state(curve_points(loss_curve), loss_chance, chance_ratio)
    reason = f"{what}; {said}"
    if dev != "none":
        return Verdict(dev, reason, flags)
    if loss == "not reduced":
        return Verdict(FLAT, f"{reason}: the objective did not move the encoder", flags)
    if loss == "reduced":
        return Verdict(NOT_ASSESSABLE, f"{reason}: the objective was fit, but no dev curve says which way", flags)
    return Verdict(NOT_ASSESSABLE, reason, flags)


# ---- from records --------------------------------------------------------------------------------------
def dev_curve_of(record: Mapping[str, Any], key: str | None = None) -> list[tuple[float, float]]:
    """The record's dev curve from ``train.monitor`` ([step, {name: score}] points): the series ``key``,
    or the only series there is; [] when there is none or several and no ``key`` says which."""
    mon = (record.get("train") or {}).get("monitor") or []
    series: dict[str, list[tuple[Any, Any]]] = {}
    for p in mon:
        if isinstance(p, list | tuple) and len(p) == 2 and isinstance(p[1], Mapping):
            for name, v in p[1].items():
                series.setdefault(str(name), []).append((p[0], v))
    if key is None:
        if len(series) != 1:
            return []
        key = next(iter(series))
    return curve_points(series.get(key))


def record_verdict(
    record: Mapping[str, Any], *, tolerance: float, dev_key: str | None = None, dev_on_task: bool = True
) -> Verdict:
    """:func:`learning_verdict` on one record's stored curves. A step-0 record (``train.step0_row``)
    is the start itself: "not assessable", with that reason."""
    train = record.get("train") or {}
    if train.get("step0_row") or train.get("steps") == 0:
        return Verdict(NOT_ASSESSABLE, "the step-0 row: the start as the method builds it, not trained")
    chance = train.get("loss_chance")
    return learning_verdict(
        dev_curve_of(record, dev_key),
        train.get("loss_curve"),
        chance if _finite(chance) else None,
        tolerance=tolerance,
        dev_on_task=dev_on_task,
    )


def cell_verdict(
    records: Sequence[Mapping[str, Any]], *, tolerance: float, dev_key: str | None = None, dev_on_task: bool = True
) -> Verdict:
    """One verdict for a cell's seeds: the seeds' verdict when they agree; when they disagree, "not
    assessable" naming the split (a majority would hide the seeds that went the other way)."""
    if not records:
        return Verdict(NOT_ASSESSABLE, "no records in this cell")
    per = [record_verdict(r, tolerance=tolerance, dev_key=dev_key, dev_on_task=dev_on_task) for r in records]
    flags = tuple(dict.fromkeys(f"seed {r.get('seed')}: {f}" for r, v in zip(records, per) for f in v.flags))
    kinds = sorted({v.verdict for v in per})
    if len(kinds) == 1:
        return Verdict(kinds[0], f"all {len(per)} seeds: {per[0].reason}" if len(per) > 1 else per[0].reason, flags)
    counts = ", ".join(f"{sum(v.verdict == k for v in per)} {k}" for k in kinds)
    return Verdict(NOT_ASSESSABLE, f"the seeds disagree ({counts})", flags)
