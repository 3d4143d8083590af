"""Conformance kit for plugin authors: run these in your own tests.

    from benchbench.run.conformance import check_method, check_task
    check_method(MyMethod, overrides={"steps": 4, "batch_size": 4})
    check_task(spec, data_dir="path/to/data")

``check_method`` checks that a method's ``Config`` is a dataclass whose options hash, that training
(or building) under a seed is deterministic, the encoder contract (``encode(list[str])`` gives a
finite float array of shape (n, d), or ``score_pairs`` finite scores of shape (n,)), the save/load
round trip through :func:`benchbench.load_encoder`, and, for trainers built on :func:`train_loop`,
that a run interrupted after a checkpoint and resumed gives the uninterrupted run's encoder.
``check_task`` checks that a task spec loads, evaluates twice to the same finite, JSON-safe scores
with a deterministic stand-in encoder, and hands out string training sentences.

Each returns a report ``{"passed": [...], "skipped": {check: reason}}``; a failed check raises
:class:`ConformanceError` naming the plugin and the check. The default budgets use a tiny random BERT
(``tiny-bert:16:1:2:32``) so the kit runs in seconds on a CPU.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchbench.core.errors import BenchbenchError

__all__ = ["TINY_MODEL", "ConformanceError", "check_method", "check_task"]

TINY_MODEL = "tiny-bert:16:1:2:32"
"""The kit's default base model: a random BERT small enough that every check runs in seconds on a CPU."""
PROBES = [
    "A man is playing a guitar.",
    "Ein Mann spielt Gitarre — ünïcödé.",
    "a",
    " ".join(["long"] * 600),
    "Two dogs run across a snowy field.",
    "The stock market fell sharply today.",
]
CORPUS = [
    f"sentence {i} says that the {w} {v} near the {o} ."
    for i, (w, v, o) in enumerate(
        (w, v, o)
        for w in ("cat", "dog", "bird", "man")
        for v in ("sits", "runs", "sleeps")
        for o in ("door", "tree", "car")
    )
]


class ConformanceError(BenchbenchError):
    """A plugin broke the contract the harness relies on."""


class _Interrupt(Exception):
    pass


def _fail(who: str, check: str, why: str) -> ConformanceError:
    return ConformanceError(f"{who}: conformance check {check!r} failed: {why}")


def _vectors(enc: Any, texts: Sequence[str], who: str) -> np.ndarray:
    from benchbench.core.errors import PluginError

    v = None
    if callable(getattr(enc, "encode", None)):
        try:
            v = enc.encode(list(texts))
        except PluginError:  # a pair scorer without vectors (BM25) says so; it is checked through score_pairs
            if not callable(getattr(enc, "score_pairs", None)):
                raise
    if v is not None:
        if hasattr(v, "detach"):
            v = v.detach().cpu().numpy()
        v = np.asarray(v)
        if v.ndim != 2 or v.shape[0] != len(texts) or v.shape[1] < 1:
            raise _fail(
                who,
                "encoder contract",
                f"encode({len(texts)} texts) returned shape {v.shape}, expected ({len(texts)}, d)",
            )
        if not np.issubdtype(v.dtype, np.floating):
            raise _fail(who, "encoder contract", f"encode returned dtype {v.dtype}, expected a float type")
    elif callable(getattr(enc, "score_pairs", None)):
        v = np.asarray(enc.score_pairs(list(texts), list(reversed(texts))), dtype=float)
        if v.shape != (len(texts),):
            raise _fail(who, "encoder contract", f"score_pairs({len(texts)} pairs) returned shape {v.shape}")
    else:
        raise _fail(who, "encoder contract", f"{type(enc).__name__} has neither encode nor score_pairs")
    if not np.isfinite(v).all():
        bad = int(np.argwhere(~np.isfinite(v))[0][0])
        raise _fail(who, "finiteness", f"non-finite output for text #{bad} {texts[bad][:60]!r}")
    return v


def check_method(
    method_cls: type,
    overrides: dict[str, Any] | None = None,
    model: str | None = TINY_MODEL,
    corpus: Sequence[str] | None = None,
    seed: int = 1,
    tmp_dir: str | Path | None = None,
    resume: bool = True,
) -> dict[str, Any]:
    """Check ``method_cls`` (see the module docstring). ``overrides`` set tiny budgets (options by
    name, as ``--set`` does); ``model`` is the base model (None: the method's own default)."""
    from benchbench.core.methods import build_config, config_hash
    from benchbench.train.context import TrainContext

    who = f"method {getattr(method_cls, 'name', method_cls.__name__)!r}"
    report: dict[str, Any] = {"passed": [], "skipped": {}}
    cfg_cls = getattr(method_cls, "Config", None)
    if cfg_cls is None or not dataclasses.is_dataclass(cfg_cls):
        raise _fail(who, "Config dataclass", "Method.Config must be a dataclass of its options")
    try:
        cfg = build_config(method_cls, dict(overrides or {}))
        config_hash(cfg)
        json.dumps(dataclasses.asdict(cfg), default=str)
    except BenchbenchError:
        raise
    except Exception as e:
        raise _fail(who, "Config dataclass", f"{type(e).__name__}: {e}") from e
    report["passed"].append("Config dataclass")
    corpus = list(corpus or CORPUS)
    if getattr(method_cls, "fixed_model", None):
        model = ""
    elif model is None:
        model = getattr(method_cls, "default_model", None) or ""
    tmp = Path(tmp_dir or tempfile.mkdtemp(prefix="benchbench-check-"))

    def train(folder: str, config: Any = cfg):
        from benchbench.core.registry import get_registry

        ctx = TrainContext(
            model=model, seed=seed, output_dir=tmp / folder, progress=False, device="cpu", registry=get_registry()
        )  # augmenters, noise kinds
        ctx.pairs = list(zip(corpus[::2], corpus[1::2], strict=False))
        return method_cls(config).train(corpus if method_cls.trains else [], ctx)

    enc_a = train("a")
    va = _vectors(enc_a, PROBES, who)
    report["passed"] += ["encoder contract", "finiteness"]
    vb = _vectors(train("b"), PROBES, who)
    if not np.array_equal(va, vb):
        raise _fail(who, "determinism", f"two runs with seed {seed} differ (max |diff| {np.abs(va - vb).max():.3g})")
    report["passed"].append("determinism")
    _check_round_trip(enc_a, va, tmp, who, report)
    if not (resume and method_cls.trains):
        report["skipped"]["resume equality"] = "not a trainer" if resume else "not asked"
    elif "checkpoint_every" not in {f.name for f in dataclasses.fields(cfg)}:
        report["skipped"]["resume equality"] = "its Config has no checkpoint_every"
    else:
        _check_resume(lambda folder: train(folder, dataclasses.replace(cfg, checkpoint_every=1)), va, tmp, who, report)
    return report


def _check_round_trip(enc: Any, va: np.ndarray, tmp: Path, who: str, report: dict[str, Any]) -> None:
    if not callable(getattr(enc, "save", None)):
        report["skipped"]["save/load round trip"] = "the encoder has no save()"
        return
    from benchbench.encode.models import load_encoder

    enc.save(tmp / "saved")
    back = _vectors(load_encoder(str(tmp / "saved")), PROBES, who)
    if back.shape != va.shape or not np.allclose(back, va, atol=1e-5, rtol=1e-4):
        raise _fail(
            who, "save/load round trip", f"the loaded encoder differs (max |diff| {np.abs(back - va).max():.3g})"
        )
    report["passed"].append("save/load round trip")


def _check_resume(train: Any, va: np.ndarray, tmp: Path, who: str, report: dict[str, Any]) -> None:
    """Train with a checkpoint every step, "kill" right after the second one, train again in the
    same folder: the resumed encoder must equal the uninterrupted one exactly."""
    import benchbench.train.checkpoint as T

    real, saves = T.save_checkpoint, []

    def interrupting(*a, **k):
        real(*a, **k)
        saves.append(1)
        if len(saves) == 2:
            raise _Interrupt  # "killed" right after the second checkpoint

    T.save_checkpoint = interrupting
    try:
        train("r")
        report["skipped"]["resume equality"] = "training finished before a second checkpoint (budget under 3 steps?)"
        return
    except _Interrupt:
        pass
    finally:
        T.save_checkpoint = real
    vr = _vectors(train("r"), PROBES, who)
    if not np.array_equal(vr, va):
        raise _fail(
            who,
            "resume equality",
            f"interrupted at a checkpoint and resumed (in {tmp / 'r'}), the encoder differs "
            f"from the uninterrupted run (max |diff| {np.abs(vr - va).max():.3g})",
        )
    report["passed"].append("resume equality")


class HashEncoder:
    """A deterministic stand-in encoder: a text's vector is drawn from a generator seeded by its hash."""

    fingerprint = "benchbench-testing-hash-v1"
    batch_size = 64

    def encode(self, texts: list[str]) -> np.ndarray:
        out = [
            np.random.default_rng(
                int.from_bytes(hashlib.sha256(t.encode("utf-8")).digest()[:8], "little")
            ).standard_normal(16)
            for t in texts
        ]
        return np.asarray(out, dtype=np.float32).reshape(len(texts), 16)


def check_task(spec: Any, data_dir: str | Path | None = None, registry: Any = None) -> dict[str, Any]:
    """Check one task spec (a ``TaskSpec``, or a task name of the registry) against the data under
    ``data_dir``: every split whose files are present evaluates twice to the same finite, JSON-safe
    scores holding the main metric; splits without data are reported as skipped."""
    from benchbench.core.registry import get_registry
    from benchbench.encode.encoding import Embedder
    from benchbench.store.data import DataStore

    reg = registry or get_registry()
    if isinstance(spec, str):
        spec = reg.task(spec)
    who = f"task {getattr(spec, 'name', spec)!r}"
    report: dict[str, Any] = {"passed": [], "skipped": {}}
    if not isinstance(getattr(spec, "version", None), int) or spec.version < 1:
        raise _fail(who, "spec", f"version must be an integer >= 1 (got {getattr(spec, 'version', None)!r})")
    if spec.main_metric is None or not spec.splits or any(s not in spec.splits for s in spec.default_splits):
        raise _fail(who, "spec", "needs a main_metric, splits, and default_splits among its splits")
    data = DataStore(data_dir, allow_download=False)
    adapter = reg.adapter(spec.kind)(spec, data)
    report["passed"].append("spec")
    for split in spec.splits:
        missing = adapter.missing_files(split)
        if missing:
            report["skipped"][f"evaluate {split}"] = f"missing {missing[:3]}"
            continue
        r1 = adapter.evaluate(Embedder(HashEncoder(), cache=None, progress=False), split).to_dict()
        r2 = adapter.evaluate(Embedder(HashEncoder(), cache=None, progress=False), split).to_dict()
        if r1["scores"] != r2["scores"]:
            raise _fail(who, "determinism", f"split {split!r}: two evaluations of one encoder differ")
        if spec.main_metric not in r1["scores"]:
            raise _fail(who, "main metric", f"split {split!r}: scores {sorted(r1['scores'])} lack {spec.main_metric!r}")
        bad = [k for k, v in r1["scores"].items() if not (isinstance(v, (int, float)) and math.isfinite(v))]
        if bad:
            raise _fail(who, "finiteness", f"split {split!r}: non-finite scores {bad}")
        json.dumps(r1, allow_nan=False, default=str)
        report["passed"].append(f"evaluate {split}")
    try:
        sents = adapter.train_sentences()
    except BenchbenchError as e:
        report["skipped"]["train sentences"] = str(e)[:200]
    else:
        if not isinstance(sents, list) or not all(isinstance(s, str) for s in sents):
            raise _fail(who, "train sentences", "train_sentences() must return a list of str")
        report["passed"].append("train sentences")
    return report
