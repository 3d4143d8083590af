"""What a method gets besides its corpus: the base model, seed, run folder, device, data, registry and
accounting. The runner builds one per training; ``load_encoder`` resolves the base model."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchbench.core.errors import ConfigError, UnknownNameError


@dataclass
class TrainContext:
    """What a method gets besides its corpus."""

    model: str  # base model name (see models.py)
    seed: int
    output_dir: Path  # this run's folder (checkpoints, the saved encoder)
    task: str | None = None
    device: str | None = None  # None: CUDA when present, else CPU
    data: Any = None  # DataStore
    registry: Any = None  # plugin Registry (augmenters, taggers)
    pairs: list[tuple[str, str]] | None = None  # the task's unlabelled pairs (transductive methods)
    corpus: Any = None  # the corpora.Corpus being trained on (name, sha256, sentences)
    progress: bool = True
    # a random-init base model (``tiny-bert:...``) drawn from this seed instead of seed 0 (RunOptions.seeded_init)
    init_seed: int | None = None
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("benchbench.train"))
    accounting: dict[str, Any] = field(default_factory=dict)  # filled by training: steps, seconds, examples, tokens
    # optional learning curve: every ``monitor_every`` optimizer steps (and at the last one) the loop
    # calls ``monitor(step, encoder) -> {name: score}`` on the encoder as it stands; the scores go
    # to ``accounting["monitor"]``
    monitor: Callable[[int, Any], dict[str, float]] | None = None
    monitor_every: int = 0
    # the curve's step-0 point (the start before any update), scored once by the loop when ``monitor``
    # is set; apart from ``monitor`` because methods wrap that one for their own dev selection
    monitor_start: Callable[[int, Any], dict[str, float]] | None = None
    # the folder every write of this training must stay under (the run's --output, set by the runner):
    # the loop's checkpoints are made, renamed and pruned only through folders checked against it
    # (no link on the way); None: the run folder (``output_dir``) itself
    write_root: Path | None = None

    @property
    def checkpoint_dir(self) -> Path:
        return self.output_dir / "checkpoints"

    def load_encoder(self, pooling: str | None = None, train_max_seq_length: int | None = None, **kw):
        """The base model (``ctx.model``) as a ``TransformerEncoder``; ``train_max_seq_length`` cuts
        its inputs while it trains only (``TransformerEncoder.seq_length``): the trained encoder
        evaluates, saves and fingerprints at the start's ``max_seq_length`` (or ``max_seq_length=``)."""
        from benchbench.encode.models import is_random_init, load_encoder

        if self.init_seed is not None:
            if not is_random_init(self.model):
                raise ConfigError(
                    f"seeded_init: base model {self.model!r} is pretrained; only a random init (tiny-bert:H:L:A:I) "
                    "is drawn from the run's seed."
                )
            kw.setdefault("seed", self.init_seed)
        encoder = load_encoder(self.model, pooling=pooling, **kw)
        if train_max_seq_length:
            encoder.train_max_seq_length = int(train_max_seq_length)
        return encoder

    def budget_items(self, n_items: int, steps: int, batch_size: int, grad_accum: int = 1) -> list[int]:
        """The corpus items (ascending, distinct indices) that ``train_loop`` draws in ``steps`` optimizer
        steps of ``batch_size`` x ``grad_accum`` items on each of ``WORLD_SIZE`` processes: all of them
        once the budget reaches an epoch. Per-sentence preprocessing (views, negations) made for these
        alone costs what the budget uses rather than what the corpus holds (20 steps of 64 need 1,280
        sentences, not the whole NLI corpus), and training is unchanged: the loop's order is a pure
        function of the seed (``ItemStream``), so these are exactly the items it will draw."""
        import os

        from benchbench.train.loop import ItemStream

        world = max(1, int(os.environ.get("WORLD_SIZE") or 1))  # set by torchrun / accelerate launch
        total = int(steps) * int(batch_size) * int(grad_accum) * world
        if total >= n_items:
            return list(range(n_items))
        return sorted(set(ItemStream(n_items, self.seed).take(0, total)))

    def augmenter(self, name: str):
        """The augmenter a plugin registered under ``name``; an unknown name is an ``UnknownNameError``
        that lists the registered ones."""
        if self.registry is None or name not in self.registry.augmenters:
            raise UnknownNameError("augmenter", name, self.registry.augmenters if self.registry else [])
        return self.registry.augmenters[name]
