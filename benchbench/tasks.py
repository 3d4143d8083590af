"""Task specs: declarative TOML files naming an adapter kind, data files, splits, metric and
how subsets aggregate. One file may define several tasks (``[[task]]``) and suites (``[[suite]]``).

    [[task]]
    name = "stsb"
    kind = "sts"                       # an adapter kind registered by a plugin
    splits = ["test", "dev"]           # splits the data has; the first ones in default_splits run by default
    default_splits = ["test"]
    main_metric = "spearman"
    url_base = "https://raw.githubusercontent.com/..."   # optional: files download from url_base/<remote>
    train = { source = "self" }        # where a method's unlabelled sentences come from
    [task.params]                      # adapter-specific
    [task.files]                       # data files, relative to the data dir
    "sts/STSBenchmark/sts-test.csv" = { sha256 = "...", remote = "sts-test.csv" }

    [[suite]]
    name = "sts"
    tasks = ["sts12", "stsb"]
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .data import FileEntry
from .errors import ConfigError

_TASK_KEYS = {"name", "kind", "description", "splits", "default_splits", "main_metric", "params", "files", "url_base",
              "train", "citation", "notes", "higher_is_better", "aliases"}


@dataclass
class TaskSpec:
    name: str
    kind: str
    description: str = ""
    splits: list[str] = field(default_factory=lambda: ["test"])
    default_splits: list[str] = field(default_factory=lambda: ["test"])
    main_metric: str = "score"
    params: dict[str, Any] = field(default_factory=dict)
    files: dict[str, FileEntry] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=lambda: {"source": "self"})
    citation: str = ""
    notes: list[str] = field(default_factory=list)
    source: str = ""  # the spec file it came from


@dataclass
class Suite:
    name: str
    tasks: list[str]
    description: str = ""
    aggregate: str = "mean"  # how the suite average is formed from each task's main score
    notes: list[str] = field(default_factory=list)
    source: str = ""


def load_spec_file(path: Path, registry=None) -> tuple[list[TaskSpec], list[Suite]]:
    """Parse a spec file; errors name the file and the entry at fault."""
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"Task spec {path}: {e}") from e
    unknown_top = set(raw) - {"task", "suite"}
    if unknown_top:
        raise ConfigError(f"Task spec {path}: unknown top-level keys {sorted(unknown_top)} (expected [[task]] and [[suite]]).")
    tasks = []
    for i, t in enumerate(raw.get("task", [])):
        where = f"Task spec {path}, task #{i + 1} ({t.get('name', '?')})"
        extra = set(t) - _TASK_KEYS
        if extra:
            raise ConfigError(f"{where}: unknown keys {sorted(extra)}.")
        for req in ("name", "kind"):
            if req not in t:
                raise ConfigError(f"{where}: missing {req!r}.")
        if registry is not None and t["kind"] not in registry.adapters:
            from .errors import UnknownNameError

            raise ConfigError(f"{where}: {UnknownNameError('adapter kind', t['kind'], registry.adapters)}")
        url_base = t.get("url_base", "").rstrip("/")
        files = {}
        for rel, meta in t.get("files", {}).items():
            meta = meta if isinstance(meta, dict) else {"sha256": meta}
            url = meta.get("url") or (f"{url_base}/{meta['remote']}" if url_base and meta.get("remote") else None)
            files[rel] = FileEntry(rel, meta.get("sha256"), url)
        splits = list(t.get("splits", ["test"]))
        default_splits = list(t.get("default_splits", [s for s in ("dev", "test") if s in splits] or splits[:1]))
        bad = [s for s in default_splits if s not in splits]
        if bad:
            raise ConfigError(f"{where}: default_splits {bad} are not in splits {splits}.")
        tasks.append(TaskSpec(name=t["name"], kind=t["kind"], description=t.get("description", ""), splits=splits,
                              default_splits=default_splits, main_metric=t.get("main_metric", "score"),
                              params=dict(t.get("params", {})), files=files, train=dict(t.get("train", {"source": "self"})),
                              citation=t.get("citation", ""), notes=list(t.get("notes", [])), source=str(path)))
    suites = []
    for i, s in enumerate(raw.get("suite", [])):
        if "name" not in s or "tasks" not in s:
            raise ConfigError(f"Task spec {path}, suite #{i + 1}: needs 'name' and 'tasks'.")
        suites.append(Suite(name=s["name"], tasks=list(s["tasks"]), description=s.get("description", ""),
                            aggregate=s.get("aggregate", "mean"), notes=list(s.get("notes", [])), source=str(path)))
    return tasks, suites


def spec_for_adapter_class(name: str, cls: type) -> TaskSpec:
    """A spec for a task registered as a TaskAdapter subclass (no TOML): the class supplies defaults."""
    d = dict(getattr(cls, "spec_defaults", {}))
    return TaskSpec(name=name, kind=getattr(cls, "kind", name), **d)
