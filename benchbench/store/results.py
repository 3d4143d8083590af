"""Result records: one JSON file per (method, config hash, base model, setup, seed, task, task version).

Schema (``schema_version`` 2), stable keys:
    method, config, config_hash, model, setup, seed, task, task_version, splits: {split: TaskResult.to_dict()},
    evaluated: {split: {created_at, eval_seconds, encoder_fingerprint, git_sha}},
    train: {seconds, steps, examples, tokens, device, ...} | null, eval_seconds, data: {path: sha256},
    versions: {package: version}, git_sha, device, created_at, notes, transductive
A record holds every split evaluated so far: evaluating another split merges it in (``merge``), and
``--force`` replaces only the splits it re-evaluates.

Migration from schema 1 (read on the fly, files are not rewritten): a schema-1 record has no
``task_version`` and no ``evaluated``; it is read as ``task_version`` 1 (the version every spec had
then) with ``evaluated`` rebuilt from its ``created_at``/``eval_seconds``. Its path is unchanged: a
key with task version 1 keeps the old file name, a later version adds ``@v<N>`` to it, so editing a
spec (and bumping its ``version``) never passes old records off as current.
Files are written to a temp file in the same folder and renamed, so a record is either whole or absent;
writers of one key are serialised by a lock (``benchbench.store.locks``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from benchbench.core.errors import DataError

SCHEMA_VERSION = 2
READABLE_SCHEMAS = (1, 2)
_SAFE = re.compile(r"[^A-Za-z0-9._=-]+")


@dataclass(frozen=True)
class ResultKey:
    method: str
    config_hash: str
    model: str
    setup: str
    seed: int
    task: str
    task_version: int = 1

    def relpath(self) -> Path:
        name = _slug(self.task) if self.task_version == 1 else f"{_slug(self.task)}@v{self.task_version}"
        return Path(
            _slug(self.method),
            _slug(self.model),
            _slug(self.setup),
            self.config_hash,
            f"seed{self.seed}",
            f"{name}.json",
        )


def key_of(record: dict[str, Any]) -> ResultKey:
    return ResultKey(
        record["method"],
        record["config_hash"],
        record["model"],
        record["setup"],
        record["seed"],
        record["task"],
        int(record.get("task_version", 1)),
    )


def migrate(record: dict[str, Any]) -> dict[str, Any]:
    """A record of any readable schema in the current one (see the module docstring)."""
    if record.get("schema_version") == 1:
        record = {**record, "schema_version": SCHEMA_VERSION, "task_version": 1, "migrated_from_schema": 1}
        record.setdefault(
            "evaluated",
            {
                s: {
                    "created_at": record.get("created_at"),
                    "eval_seconds": record.get("eval_seconds"),
                    "encoder_fingerprint": record.get("encoder_fingerprint"),
                    "git_sha": record.get("git_sha"),
                }
                for s in record.get("splits", {})
            },
        )
    return record


def merge(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """``new`` (fresh provenance, the splits just evaluated) over ``old``: splits ``new`` did not evaluate
    are kept with their own ``evaluated`` entries, so no stored score is ever dropped."""
    if not old:
        return new
    old = migrate(old)
    out = dict(new)
    out["splits"] = {**old.get("splits", {}), **new.get("splits", {})}
    out["evaluated"] = {**old.get("evaluated", {}), **new.get("evaluated", {})}
    # per-item files: a split evaluated again without them no longer has any (the old file scored
    # another encoder); splits not evaluated keep theirs
    kept = {s: f for s, f in (old.get("items") or {}).items() if s not in new.get("splits", {})}
    out["items"] = {**kept, **(new.get("items") or {})}
    if not out["items"]:
        out.pop("items")
    return out


def _slug(s: str) -> str:
    return _SAFE.sub("_", s.replace("/", "__")).strip("_") or "_"


class ResultStore:
    def __init__(self, root: str | Path = "results"):
        self.root = Path(root)

    def path(self, key: ResultKey) -> Path:
        return self.root / key.relpath()

    def exists(self, key: ResultKey) -> bool:
        return self.path(key).is_file()

    def load(self, key: ResultKey) -> dict[str, Any]:
        return migrate(json.loads(self.path(key).read_text()))

    def lock(self, key: ResultKey):
        """The advisory lock of one result key (held while its record is read, evaluated and written)."""
        from benchbench.store.locks import hold

        return hold(self.root / ".locks" / key.relpath().with_suffix(".lock"), f"result {key.relpath()}")

    def clean_stale(self, key: ResultKey) -> None:
        """Remove temp files a killed writer of ``key`` left behind. Call only while holding
        ``lock(key)``: then no live writer of this key exists."""
        path = self.path(key)
        if path.parent.is_dir():
            for tmp in path.parent.glob(f".{path.name}.*.tmp"):
                tmp.unlink(missing_ok=True)

    def write(self, record: dict[str, Any], items: dict[str, dict[str, Any]] | None = None) -> Path:
        """Write ``record`` atomically. ``items`` (split -> per-item scores, ``benchbench.store.items``) are
        written first, each to its own file beside the record, and the record names them under
        ``items``; a split the record has but ``items`` lacks keeps a file only if it was not
        re-evaluated (see :func:`merge`)."""
        key = key_of(record)
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        if items:
            from benchbench.store.items import items_filename, write_items

            names = {s: items_filename(path.stem, _slug(s)) for s in items}
            for s, it in items.items():
                write_items(path.parent / names[s], it)
            record["items"] = {**(record.get("items") or {}), **names}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(
                    record, f, indent=1, sort_keys=True, default=_json_default, allow_nan=False
                )  # NaN is not JSON
                f.flush()
                os.fsync(f.fileno())
            umask = os.umask(0o022)
            os.umask(umask)  # mkstemp makes 0600: records are as readable as any file the user writes
            os.chmod(tmp, 0o666 & ~umask)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return path

    def records(self) -> Iterator[dict[str, Any]]:
        if not self.root.is_dir():
            return
        for p in sorted(self.root.rglob("*.json")):
            try:
                r = json.loads(p.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            if isinstance(r, dict) and r.get("schema_version") in READABLE_SCHEMAS:
                yield migrate(r)


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


_VERSIONS: dict[str, str] | None = None


def package_versions() -> dict[str, str]:
    global _VERSIONS
    if _VERSIONS is None:
        _VERSIONS = {}
        for pkg in (
            "benchbench",
            "torch",
            "transformers",
            "sentence-transformers",
            "numpy",
            "scipy",
            "scikit-learn",
            "faiss-cpu",
            "rank-bm25",
        ):
            try:
                _VERSIONS[pkg] = metadata.version(pkg)
            except metadata.PackageNotFoundError:
                pass
    return dict(_VERSIONS)


def git_sha() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def to_mteb(record: dict[str, Any]) -> dict[str, Any]:
    """The record in MTEB's per-task results layout (scores in 0..1, one entry per split and subset)."""
    out: dict[str, Any] = {
        "task_name": record["task"],
        "mteb_version": None,
        "dataset_revision": None,
        "evaluation_time": record.get("eval_seconds"),
        "kg_co2_emissions": None,
        "scores": {},
    }
    for split, res in record["splits"].items():
        entries = []
        main = res["scores"].get(res["main_metric"])
        base = {k: (v / 100 if not k.endswith(("_mse", "_medr")) else v) for k, v in res["scores"].items()}
        entries.append(
            {
                "hf_subset": "default",
                "languages": ["eng-Latn"],
                "main_score": None if main is None else main / 100,
                **base,
            }
        )
        for subset, sc in res.get("subsets", {}).items():
            entries.append(
                {
                    "hf_subset": subset,
                    "languages": ["eng-Latn"],
                    **{k: (v / 100 if not k.endswith(("_mse", "_medr")) else v) for k, v in sc.items()},
                }
            )
        out["scores"][split] = entries
    return out


def record_items(record: dict[str, Any], root: str | Path, split: str = "test") -> dict[str, Any]:
    """The per-item scores stored with ``record`` (a record from a ``ResultStore`` under ``root``)."""
    name = (record.get("items") or {}).get(split)
    if not name:
        raise DataError(
            f"Record {record.get('method')}/{record.get('task')} seed {record.get('seed')} has no per-item "
            f"scores for split {split!r}: re-run it with `benchbench run --store-items --force`."
        )
    from benchbench.store.items import read_items

    return read_items(ResultStore(root).path(key_of(record)).parent / name)
