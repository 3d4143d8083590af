"""Result records: one JSON file per (method, config hash, base model, setup, seed, task).

Schema (``schema_version`` 1), stable keys:
    method, config, config_hash, model, setup, seed, task, splits: {split: TaskResult.to_dict()},
    train: {seconds, steps, examples, tokens, device, ...} | null, eval_seconds, data: {path: sha256},
    versions: {package: version}, git_sha, device, created_at, notes, transductive
Files are written to a temp file in the same folder and renamed, so a record is either whole or absent.
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

SCHEMA_VERSION = 1
_SAFE = re.compile(r"[^A-Za-z0-9._=-]+")


@dataclass(frozen=True)
class ResultKey:
    method: str
    config_hash: str
    model: str
    setup: str
    seed: int
    task: str

    def relpath(self) -> Path:
        return Path(_slug(self.method), _slug(self.model), _slug(self.setup), self.config_hash, f"seed{self.seed}", f"{_slug(self.task)}.json")


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
        return json.loads(self.path(key).read_text())

    def write(self, record: dict[str, Any]) -> Path:
        key = ResultKey(record["method"], record["config_hash"], record["model"], record["setup"], record["seed"], record["task"])
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(record, f, indent=1, sort_keys=True, default=_json_default)
                f.flush()
                os.fsync(f.fileno())
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
            if isinstance(r, dict) and r.get("schema_version") == SCHEMA_VERSION:
                yield r


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
        for pkg in ("benchbench", "torch", "transformers", "sentence-transformers", "numpy", "scipy", "scikit-learn", "faiss-cpu", "rank-bm25"):
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
    out: dict[str, Any] = {"task_name": record["task"], "mteb_version": None, "dataset_revision": None,
                           "evaluation_time": record.get("eval_seconds"), "kg_co2_emissions": None, "scores": {}}
    for split, res in record["splits"].items():
        entries = []
        main = res["scores"].get(res["main_metric"])
        base = {k: (v / 100 if not k.endswith(("_mse", "_medr")) else v) for k, v in res["scores"].items()}
        entries.append({"hf_subset": "default", "languages": ["eng-Latn"], "main_score": None if main is None else main / 100, **base})
        for subset, sc in res.get("subsets", {}).items():
            entries.append({"hf_subset": subset, "languages": ["eng-Latn"],
                            **{k: (v / 100 if not k.endswith(("_mse", "_medr")) else v) for k, v in sc.items()}})
        out["scores"][split] = entries
    return out
