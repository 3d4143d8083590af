"""benchbench: a benchmark harness with pluggable trainers for unsupervised sentence embeddings.

This module is the public API: everything a method or task plugin needs is importable from
``benchbench`` itself, and a built-in plugin imports nothing else (``tests/test_public_api.py``
fails when one does). Names resolve lazily (PEP 562), so ``import benchbench`` and the command
line's ``--help``/``list`` do not pay for torch and transformers until a name that needs them is
used.

Method authors: ``Method``, ``TrainContext``, ``Objective``, ``train_loop``, ``LoopConfig``,
``resolve_steps``, ``seed_everything``, ``adamw``, ``method_fingerprint``, ``load_encoder``,
``TransformerEncoder``, ``tiny_bert``, ``hookimpl``.
Task authors: ``TaskAdapter``, ``TaskResult``, ``TaskSpec``, ``Embedder``, ``metrics``.
Encoder protocols: ``Encoder`` (``encode``), ``PairScorer`` (``score_pairs``), ``Searcher``
(``search``).
Errors: ``BenchbenchError``, ``ConfigError``, ``DataError``, ``PluginError``, ``UnknownNameError``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it (relative to this package)
_EXPORTS: dict[str, str] = {
    "hookimpl": ".hookspecs",
    "Token": ".analysis.pos",  # POS taggers (plugins/taggers.py) return these
    "hookspec": ".hookspecs",
    "Method": ".methods",
    "TrainContext": ".methods",
    "build_config": ".methods",
    "config_hash": ".methods",
    "Objective": ".training",
    "LoopConfig": ".training",
    "LoopState": ".training",
    "train_loop": ".training",
    "resolve_steps": ".training",
    "seed_everything": ".training",
    "adamw": ".training",
    "length_groups": ".training",
    "method_fingerprint": ".training",
    "Encoder": ".encoding",
    "PairScorer": ".encoding",
    "Searcher": ".encoding",
    "Embedder": ".encoding",
    "embed": ".encoding",
    "TransformerEncoder": ".models",
    "load_encoder": ".models",
    "register_encoder_loader": ".models",
    "get_registry": ".registry",
    "make_adapter": ".runner",
    "train_method": ".chain",  # another method's trained encoder as a start (Trans-Encoder start=simcse)
    "resolve_model_path": ".models",
    "load_pretrained_head": ".models",
    "DataStore": ".data",
    "checkpoint_source": ".models",
    "tiny_bert": ".models",
    "TaskAdapter": ".adapters.base",
    "TaskResult": ".adapters.base",
    "TaskSpec": ".tasks",
    "NOISE_KINDS": ".noise",
    "WordNoise": ".noise",
    "register_noise": ".noise",
    "ViewCache": ".views",
    "entailment_pairs": ".nli",
    "BenchbenchError": ".errors",
    "ConfigError": ".errors",
    "DataError": ".errors",
    "PluginError": ".errors",
    "UnknownNameError": ".errors",
}
_SUBMODULES = {"metrics"}

__all__ = sorted([*_EXPORTS, *_SUBMODULES, "__version__"])


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
        globals()[name] = value  # resolve once
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'benchbench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # static type checkers and IDEs see the real names
    from . import metrics
    from .adapters.base import TaskAdapter, TaskResult
    from .chain import train_method
    from .encoding import Embedder, Encoder, PairScorer, Searcher, embed
    from .errors import BenchbenchError, ConfigError, DataError, PluginError, UnknownNameError
    from .hookspecs import hookimpl, hookspec
    from .methods import Method, TrainContext, build_config, config_hash
    from .models import TransformerEncoder, load_encoder, resolve_model_path, tiny_bert
    from .noise import NOISE_KINDS, WordNoise, register_noise
    from .runner import make_adapter
    from .tasks import TaskSpec
    from .training import (
        LoopConfig,
        LoopState,
        Objective,
        adamw,
        length_groups,
        method_fingerprint,
        resolve_steps,
        seed_everything,
        train_loop,
    )
