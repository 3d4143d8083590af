"""The method contract: a class with a ``name``, a typed ``Config`` dataclass holding the paper's
defaults, and ``train(corpus, ctx) -> Encoder``."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from benchbench.core.errors import ConfigError, PluginError

if TYPE_CHECKING:
    from benchbench.train.context import TrainContext


@dataclass
class NoConfig:
    """Config of a method without options."""


class Method:
    """Base class for methods. Subclasses set ``name``, ``Config`` and implement ``train``.

    ``trains = False`` marks a training-free baseline: ``train`` ignores the corpus and the
    harness builds its encoder once and reuses it for every task."""

    name: ClassVar[str] = ""
    Config: ClassVar[type] = NoConfig
    trains: ClassVar[bool] = True
    transductive: ClassVar[bool] = False  # trains on the evaluation task's own unlabelled pairs
    # what it trains on (see corpora.py): "task" sentences, "ordered" text, a "general" corpus, task "pairs"
    corpus: ClassVar[str] = "task"
    default_model: ClassVar[str | None] = "all-MiniLM-L6-v2"
    # methods that use no base model (GloVe, BM25) name what they use instead; --model is then ignored
    fixed_model: ClassVar[str | None] = None
    description: ClassVar[str] = ""
    # the options that stop training at step 0, for the method's step-0 row (the start through its own
    # pooling, head and template, which a study reads each trained row against); None: {"steps": "0"}
    # when its Config has ``steps``. A method whose step 0 reads nothing says why in ``step0_unsupported``.
    step0_options: ClassVar[Mapping[str, str] | None] = None
    step0_unsupported: ClassVar[str] = ""

    def __init__(self, config: Any | None = None):
        self.config = config if config is not None else self.Config()

    def train(self, corpus: list[str], ctx: TrainContext):
        """Train on ``corpus`` (the text the class attribute ``corpus`` asks for) within ``ctx``'s budget, seed and
        device, and return the encoder: anything with ``fingerprint`` and ``encode(texts)``, or also
        ``score_pairs(a, b)``. The same config, corpus and seed give the same encoder."""
        raise NotImplementedError

    def loss_chance(self, objective: Any) -> float | None:
        """The training loss of an encoder that cannot tell its candidates apart (every score equal),
        for the trained ``objective``: InfoNCE over K candidates ln K, a binary cross-entropy ln 2, a
        token cross-entropy over a vocabulary of V ln V (an upper reference: unigram frequencies beat
        it), a weighted sum of terms the same sum of their levels. ``fit`` stores it as the record's
        ``train.loss_chance``, so a loss curve that stays near it reads as "learned nothing" (a study's
        verdict, ``benchbench.report.learning``). None (the default): no meaningful level (a
        regression or likelihood loss)."""
        return None

    @classmethod
    def model_defaults(cls, config: Any, shape: Any) -> dict[str, Any]:
        """The values, for a base model of ``shape`` (``hidden`` size and ``layers``, 0 when unknown), of
        the options ``config`` leaves at a default that is relative to the model (None in the Config:
        InfoCSE's frozen layers, half the start's as the paper's 6 of BERT-base's 12). The runner sets
        them before it hashes the config, so the result key and the record name the value that trained,
        and a default run shares its key with an explicit run of the same value. ``train`` resolves the
        same rule against the loaded model (the shape of a hub model not on disk is not known before).
        {} (the default): no model-relative option."""
        return {}

    def provenance(self) -> dict[str, Any]:
        """What the options name by path or name that their text cannot pin: the labels of external
        weights (a generator, a start folder), each under the key and in the form ``train`` puts it
        into the record's training accounting (``ctx.accounting``).

        Results are keyed by the options' text, so new weights under the same path would meet the old
        result. Before reusing a stored record or a stored encoder, the runner compares these labels
        with the stored ones and refuses on a difference. Empty (the default): nothing to compare."""
        return {}


def loss_chance_of(method: Any, objective: Any) -> float | None:
    """``method.loss_chance(objective)`` (see ``Method.loss_chance``) as a finite float; None for a
    plugin class that defines none. A non-finite or negative level is the plugin's error, named."""
    stated = getattr(method, "loss_chance", None)
    value = stated(objective) if callable(stated) else None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise PluginError(
            f"method {getattr(method, 'name', method)!r}: loss_chance() returned {value!r}; it must be a "
            f"finite number >= 0 (the loss at chance) or None."
        )
    return float(value)


def step0_options_of(method_cls: Any) -> dict[str, str]:
    """The options that give ``method_cls``'s step-0 row (see ``Method.step0_options``); a ConfigError
    naming the method and why when it has none (a training-free method is its own row)."""
    name = getattr(method_cls, "name", method_cls)
    if not getattr(method_cls, "trains", True):
        raise ConfigError(f"method {name!r} does not train: it has no step-0 row (its one row is untrained).")
    why = getattr(method_cls, "step0_unsupported", "")
    if why:
        raise ConfigError(f"method {name!r} has no meaningful step-0 row: {why}")
    stated = getattr(method_cls, "step0_options", None)
    if stated is not None:
        return {str(k): str(v) for k, v in stated.items()}
    config = getattr(method_cls, "Config", None)
    if dataclasses.is_dataclass(config) and "steps" in {f.name for f in dataclasses.fields(config)}:
        return {"steps": "0"}
    raise ConfigError(
        f"method {name!r} has no 'steps' option and states no step0_options: its plugin must say which "
        f"options stop it at step 0 (or why it has no step-0 row, step0_unsupported)."
    )


def resolve_model_defaults(method_cls: Any, config: Any, shape: Any) -> Any:
    """``config`` with each model-relative default (``Method.model_defaults``) set to its value for a
    base model of ``shape``; ``config`` itself when ``shape`` is None or the method has none. A value
    the method returns for an option the user set, or for an option it does not have, is the plugin's
    error, named: an explicit value always wins."""
    stated = getattr(method_cls, "model_defaults", None)
    if shape is None or not callable(stated):
        return config
    values = dict(stated(config, shape) or {})
    fields = {f.name for f in dataclasses.fields(config)}
    wrong = sorted(k for k in values if k not in fields or getattr(config, k) is not None)
    if wrong:
        raise PluginError(
            f"method {getattr(method_cls, 'name', method_cls)!r}: model_defaults() returned {wrong}, options "
            "that are not left at their model-relative default (None); it may only fill those."
        )
    return dataclasses.replace(config, **values) if values else config


def provenance_of(method: Any) -> dict[str, Any]:
    """``method.provenance()`` (see ``Method.provenance``); {} for a plugin class that does not derive
    from ``Method`` and defines none."""
    stated = getattr(method, "provenance", None)
    return dict(stated() or {}) if callable(stated) else {}


def validate_method_class(obj: Any, name: str, plugin: str) -> None:
    if not isinstance(obj, type) or not callable(getattr(obj, "train", None)):
        raise PluginError(
            f"Plugin {plugin!r} registered method {name!r} as {obj!r}; expected a class with train(corpus, ctx)."
        )
    if not dataclasses.is_dataclass(getattr(obj, "Config", None)):
        raise PluginError(
            f"Plugin {plugin!r}: method {name!r} needs a dataclass ``Config`` (got {getattr(obj, 'Config', None)!r})."
        )


def _coerce(value: str, typ: Any, where: str) -> Any:
    origin = typing.get_origin(typ)
    if origin is typing.Union or origin is types.UnionType:  # Optional[X] and X | None
        args = [a for a in typing.get_args(typ) if a is not type(None)]
        if value.lower() in ("none", "null"):
            return None
        typ = args[0]
    if typ is bool:
        if value.lower() in ("1", "true", "yes", "on"):
            return True
        if value.lower() in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{where}: expected true/false, got {value!r}")
    if typ in (int, float, str):
        try:
            return _finite(typ(value), where)
        except ValueError as e:
            raise ConfigError(f"{where}: expected {typ.__name__}, got {value!r}") from e
    if typing.get_origin(typ) in (list, tuple):
        inner = typing.get_args(typ)[0] if typing.get_args(typ) else str
        return [_coerce(v, inner, where) for v in value.split(",") if v]
    return value


_SCALARS = {"bool": bool, "int": int, "float": float, "str": str}


def type_token(typ: Any) -> str:
    """A JSON-able name of an option's type, for the plugin manifest: ``float``, ``int?`` (int | None),
    ``list:int``; ``any`` for a type :func:`_coerce` passes through as a string."""
    optional = ""
    if typing.get_origin(typ) is typing.Union or typing.get_origin(typ) is types.UnionType:
        args = [a for a in typing.get_args(typ) if a is not type(None)]
        optional, typ = ("?" if len(args) < len(typing.get_args(typ)) else ""), args[0]
    if typing.get_origin(typ) in (list, tuple):
        inner = typing.get_args(typ)[0] if typing.get_args(typ) else str
        return f"list:{inner.__name__ if inner in _SCALARS.values() else 'str'}{optional}"
    name = getattr(typ, "__name__", "")
    return f"{name}{optional}" if name in _SCALARS else "any"


def coerce_token(value: str, token: str, where: str) -> Any:
    """``value`` converted as :func:`build_options` would for a field of type ``token``
    (:func:`type_token`): the same errors, from a manifest, without importing the plugin."""
    base = token.rstrip("?")
    if base.startswith("list:"):
        typ: Any = list[_SCALARS.get(base[5:], str)]
    else:
        typ = _SCALARS.get(base)
        if typ is None:
            return value
    return _coerce(value, typ | None if token.endswith("?") else typ, where)


def _finite(value: Any, where: str) -> Any:
    """``value``, unless it is a NaN or infinite float (``float("nan")`` parses, and every comparison
    with it is False, so ``temperature=nan`` would pass a plugin's ``<= 0`` check and train on NaN);
    lists are checked item by item."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}: {value!r} is not a finite number; give a finite value such as 0.05.")
    if isinstance(value, (list, tuple)):
        for v in value:
            _finite(v, where)
    return value


def build_config(method_cls: type, overrides: dict[str, Any]) -> Any:
    """The method's Config with CLI overrides applied; an option the method does not have is an
    error naming the method and its options."""
    return build_options(method_cls.Config, overrides, f"Method {method_cls.name!r}", f"method {method_cls.name!r}")


def build_options(cfg_cls: type, overrides: dict[str, Any], owner: str, of: str) -> Any:
    """``cfg_cls`` (a dataclass) with ``overrides`` (strings from the command line are coerced to the
    field's type; NaN/inf refused). ``owner`` starts the unknown-option error ("Method 'x'"), ``of``
    names the owner inside a value error ("method 'x'")."""
    fields = {f.name: f for f in dataclasses.fields(cfg_cls)}
    hints = typing.get_type_hints(cfg_cls)
    kwargs = {}
    for key, value in overrides.items():
        if value is None:
            continue
        k = key.replace("-", "_")
        if k not in fields:
            raise ConfigError(f"{owner} has no option {key!r}. Its options: {', '.join(fields) or '(none)'}.")
        where = f"option {key!r} of {of}"
        kwargs[k] = _coerce(value, hints[k], where) if isinstance(value, str) else _finite(value, where)
    try:
        return cfg_cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{owner}: invalid options {overrides}: {e}") from e


def hashed_options(config: Any) -> dict[str, Any]:
    """The options of a dataclass config that name its run (``config_hash``'s and the resume
    fingerprint's payload): all fields but ``hash: False`` ones and ``hash: "unless_default"`` ones
    at their default."""
    d = dataclasses.asdict(config)
    for f in dataclasses.fields(config):
        if f.metadata.get("hash") is False or (f.metadata.get("hash") == "unless_default" and d[f.name] == f.default):
            d.pop(f.name, None)
    return d


def config_hash(config: Any) -> str:
    """Hash of the method's options, except fields declared ``field(metadata={"hash": False})``:
    options that change only speed, never a number (so adding one keeps stored results' keys); and
    fields declared ``field(metadata={"hash": "unless_default"})`` while they hold their default: an
    option added to an existing method later, whose default leaves the training as it was, so results
    stored before it existed keep their keys and a run that sets it gets a new one."""
    payload = json.dumps(hashed_options(config), sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]
