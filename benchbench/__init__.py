"""benchbench: a benchmark harness with pluggable trainers for unsupervised sentence embeddings.

This module is the public API: everything a method or task plugin needs is importable from
``benchbench`` itself, and a built-in plugin imports nothing else (``tests/project/test_public_api.py``
fails when one does). Names resolve lazily (PEP 562), so ``import benchbench`` and the command
line's ``--help``/``list`` do not pay for torch and transformers until a name that needs them is
used.

Method authors: ``Method``, ``TrainContext``, ``Objective``, ``fit`` (the usual call), ``train_loop``, ``LoopConfig``,
``resolve_steps``, ``seed_everything``, ``adamw``, ``method_fingerprint``, ``load_encoder``,
``TransformerEncoder``, ``CrossEncoderScorer`` and ``CrossEncoderObjective`` (a cross-encoder and its training),
``hash_weights`` (an encoder's fingerprint), ``model_label_of`` (a base model's label in
records: a local folder is ``<name>@<weights hash>``, never its path), ``tiny_bert``, ``hookimpl``.
Task authors: ``TaskAdapter``, ``TaskResult``, ``TaskSpec``, ``Embedder``, ``metrics``.
Encoder protocols: ``Encoder`` (``encode``), ``PairScorer`` (``score_pairs``), ``Searcher``
(``search``).
Errors: ``BenchbenchError``, ``ConfigError``, ``DataError``, ``PluginError``, ``UnknownNameError``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it (relative to this package)
_EXPORTS: dict[str, str] = {
    "hookimpl": ".core.hookspecs",
    "Token": ".evaluate.analysis.pos",  # POS taggers (plugins/taggers.py) return these
    "hookspec": ".core.hookspecs",
    "Method": ".core.methods",
    "TrainContext": ".train.context",
    "build_config": ".core.methods",
    "config_hash": ".core.methods",
    "Objective": ".train.loop",
    "LoopConfig": ".train.loop",
    "LoopState": ".train.loop",
    "train_loop": ".train.loop",
    "fit": ".train.fit",
    "resolve_steps": ".train.loop",
    "seed_everything": ".train.loop",
    "adamw": ".train.loop",
    "linear_decay": ".train.loop",
    "trainer_defaults": ".train.loop",  # adamw + linear_decay as SimCSE's family's reference trainers run them
    "length_groups": ".train.loop",
    "method_fingerprint": ".train.loop",
    "CrossEncoderScorer": ".encode.cross_encoder",  # a cross-encoder: pair model, save/load, batch scoring
    "CrossEncoderObjective": ".train.cross_encoder",  # training one on soft pair labels through the loop
    "soft_bce": ".train.cross_encoder",
    "Encoder": ".encode.encoding",
    "PairScorer": ".encode.encoding",
    "Searcher": ".encode.encoding",
    "Embedder": ".encode.encoding",
    "embed": ".encode.encoding",
    "TransformerEncoder": ".encode.models",
    "load_encoder": ".encode.models",
    "model_label_of": ".encode.models",  # a base model's label in records: never a machine path
    "register_encoder_loader": ".encode.models",
    "get_registry": ".core.registry",
    "make_adapter": ".core.registry",
    "train_method": ".run.chain",  # another method's trained encoder as a start (Trans-Encoder start=simcse)
    "resolve_model_path": ".encode.models",
    "load_pretrained_head": ".encode.models",
    "DataStore": ".store.data",
    "checkpoint_source": ".encode.models",
    "tiny_bert": ".encode.models",
    "DecoderEncoder": ".encode.decoder",  # a decoder-only LLM as an encoder (pooling, template, attention)
    "load_decoder": ".encode.decoder",  # (model, tokenizer) of a decoder name, causal or bidirectional
    "is_decoder_name": ".encode.decoder",  # does a --model name a decoder-only LLM
    "make_bidirectional": ".encode.decoder",
    "tiny_decoder": ".encode.decoder",
    "hash_weights": ".encode.models",
    "TaskAdapter": ".evaluate.adapters.base",
    "TaskResult": ".evaluate.adapters.base",
    "TaskSpec": ".core.tasks",
    "NOISE_KINDS": ".train.noise",
    "WordNoise": ".train.noise",
    "register_noise": ".train.noise",
    "ViewCache": ".train.views",
    "entailment_pairs": ".train.nli",
    "BenchbenchError": ".core.errors",
    "ConfigError": ".core.errors",
    "DataError": ".core.errors",
    "PluginError": ".core.errors",
    "UnknownNameError": ".core.errors",
    "UnsafePathError": ".core.errors",
    "mark_complete": ".store.files",  # a folder a plugin trains once and reuses (never a symlinked marker)
    "is_complete": ".store.files",
    "pinned_folder": ".store.files",  # the folder an encoder is saved into: made under a root, never through a link
}
_SUBMODULES = {"metrics": ".evaluate.metrics"}

__all__ = sorted([*_EXPORTS, *_SUBMODULES, "__version__"])


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
        globals()[name] = value  # resolve once
        return value
    if name in _SUBMODULES:
        return importlib.import_module(_SUBMODULES[name], __name__)
    raise AttributeError(f"module 'benchbench' has no attribute {name!r}")


# Module paths from before the layered layout (0.1: ``benchbench/registry.py`` and 46 more flat
# modules), kept importable for third-party code with a DeprecationWarning naming the new path. The
# alias is a separate module object that reads through to the new one (never a second copy of it).
_MOVED: dict[str, str] = {
    **{m: f"core.{m}" for m in ("errors", "hookspecs", "registry", "methods", "tasks")},
    **{m: f"store.{m}" for m in ("data", "results", "items", "locks")},
    **{m: f"encode.{m}" for m in ("models", "encoding")},
    **{m: f"train.{m}" for m in ("corpora", "noise", "views", "nli", "ordered", "setups")},
    "training": "train.loop",
    "chain": "run.chain",
    "runner": "run.runner",
    "sweep": "run.sweep",
    **{m: f"report.{m}" for m in ("leaderboard", "site", "stats", "significance", "reproduce", "mteb_io", "escaping")},
    "board_cli": "cli.board",
    "adapters": "evaluate.adapters",
    "analysis": "evaluate.analysis",
}


class _MovedFinder:
    """``import benchbench.registry`` -> ``benchbench.core.registry`` (and ``benchbench.adapters.sts``
    -> ``benchbench.evaluate.adapters.sts``), warning once per old name."""

    @staticmethod
    def _target(fullname: str) -> str | None:
        head, _, rest = fullname.partition(".")
        if head != __name__:
            return None
        first, _, tail = rest.partition(".")
        new = _MOVED.get(first)
        return None if new is None else f"{__name__}.{new}{'.' + tail if tail else ''}"

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        new = self._target(fullname)
        if new is None or importlib.util.find_spec(new) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        import warnings

        new = self._target(module.__name__)
        warnings.warn(
            f"{module.__name__} moved to {new} (benchbench's layered layout); import it from there, or the "
            "public name from `benchbench`.",
            DeprecationWarning,
            stacklevel=2,
        )
        real = importlib.import_module(new)
        module.__dict__.update({k: v for k, v in vars(real).items() if not k.startswith("__")})
        if hasattr(real, "__path__"):
            module.__path__ = []  # a package whose submodules come through this finder, never loaded twice

        def late(name: str) -> Any:  # names the real module binds later
            if name.startswith("__"):
                raise AttributeError(name)
            return getattr(real, name)

        module.__getattr__ = late


if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
    sys.meta_path.append(_MovedFinder())


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # static type checkers and IDEs see the real names
    from .core.errors import BenchbenchError, ConfigError, DataError, PluginError, UnknownNameError
    from .core.hookspecs import hookimpl, hookspec
    from .core.methods import Method, build_config, config_hash
    from .core.registry import make_adapter
    from .core.tasks import TaskSpec
    from .encode.cross_encoder import CrossEncoderScorer
    from .encode.decoder import DecoderEncoder, is_decoder_name, load_decoder, make_bidirectional, tiny_decoder
    from .encode.encoding import Embedder, Encoder, PairScorer, Searcher, embed
    from .encode.models import (
        TransformerEncoder,
        hash_weights,
        load_encoder,
        model_label_of,
        resolve_model_path,
        tiny_bert,
    )
    from .evaluate import metrics
    from .evaluate.adapters.base import TaskAdapter, TaskResult
    from .run.chain import train_method
    from .train.context import TrainContext
    from .train.cross_encoder import CrossEncoderObjective, soft_bce
    from .train.fit import fit
    from .train.loop import (
        LoopConfig,
        LoopState,
        Objective,
        adamw,
        length_groups,
        linear_decay,
        method_fingerprint,
        resolve_steps,
        seed_everything,
        train_loop,
    )
    from .train.noise import NOISE_KINDS, WordNoise, register_noise
