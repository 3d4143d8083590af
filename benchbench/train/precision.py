"""``--train-precision``: the number format training runs in, set by the runner around a method's
training and read by ``train_loop``'s accelerator (``benchbench.train.loop.make_accelerator``).

"auto" (bf16 autocast on a bf16-capable CUDA device, full precision on the CPU: every stored result's),
"fp32" (no autocast anywhere, the GPU too) or "bf16" (bf16 autocast on the CPU too: ~2x faster on a CPU
with AVX512-BF16; other weights than fp32's). Every loop of a training (a method's teacher, its phases)
runs in it unless the method fixes its own (``train_loop(..., mixed_precision="no")``). Not "auto": part
of the result key (``benchbench.run.runner.with_train_precision``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from benchbench.core.errors import ConfigError

TRAIN_PRECISIONS = ("auto", "fp32", "bf16")
_TRAIN_PRECISION: ContextVar[str] = ContextVar("benchbench_train_precision", default="auto")


def check_train_precision(precision: str) -> str:
    """``precision`` if it is one of :data:`TRAIN_PRECISIONS`, else a ConfigError."""
    if precision not in TRAIN_PRECISIONS:
        raise ConfigError(f"--train-precision {precision!r}: expected one of {', '.join(TRAIN_PRECISIONS)}.")
    return precision


def train_precision() -> str:
    """The training precision in force (:func:`training_precision`; "auto" outside one)."""
    return _TRAIN_PRECISION.get()


@contextmanager
def training_precision(precision: str) -> Iterator[None]:
    """Train in ``precision`` (one of :data:`TRAIN_PRECISIONS`) inside the block."""
    token = _TRAIN_PRECISION.set(check_train_precision(precision))
    try:
        yield
    finally:
        _TRAIN_PRECISION.reset(token)
