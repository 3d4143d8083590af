"""``fit``: the one call a transformer method makes to train its objective.

Every built-in method used to repeat the same five lines around ``train_loop``: the loop settings
from its config, a fingerprint of (method, config, base model, corpus) for exact resume, and a
progress label. ``fit`` is those lines once; a method passes only what is its own (objective,
optimizer, schedule)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from benchbench.core.methods import loss_chance_of
from benchbench.train.loop import LoopConfig, LoopState, method_fingerprint, train_loop


def fit(
    method: Any,
    objective: torch.nn.Module,
    items: Sequence[Any],
    ctx: Any,
    *,
    make_optimizer: Callable[[torch.nn.Module], torch.optim.Optimizer],
    make_scheduler: Callable[[torch.optim.Optimizer], Any] | None = None,
    loop: LoopConfig | None = None,
    fingerprint_items: Sequence[Any] | None = None,
    on_step: Callable[[LoopState], None] | None = None,
) -> torch.nn.Module:
    """Train ``objective`` on ``items`` under ``method``'s config (``LoopConfig.from_config`` unless
    ``loop`` is given) and return it unwrapped. The resume fingerprint covers the method's name and
    full config, the base model, the seed and ``fingerprint_items`` (default: ``items``; a method
    that trains on derived items, e.g. cached vectors, names the sentences they came from)."""
    trained = train_loop(
        objective,
        items,
        ctx,
        loop if loop is not None else LoopConfig.from_config(method.config),
        make_optimizer=make_optimizer,
        make_scheduler=make_scheduler,
        fingerprint=method_fingerprint(method, ctx, items if fingerprint_items is None else fingerprint_items),
        on_step=on_step,
        desc=f"{method.name} {ctx.task or ''}".strip(),
    )
    chance = loss_chance_of(method, trained)
    accounting = getattr(ctx, "accounting", None)
    if chance is not None and accounting is not None:
        accounting["loss_chance"] = round(chance, 5)  # the level its loss curve is read against
    return trained
