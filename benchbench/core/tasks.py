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

Without repetition (as lm-evaluation-harness's ``include``):

* ``[defaults]``: any task key, applied to every ``[[task]]`` of the file (a task's own keys win;
  ``params`` and ``train`` merge key by key);
* ``include = "_base.toml"`` (or a list), relative to the including file: the included file's
  ``[defaults]`` (and its own includes) come first, this file's ``[defaults]`` override them. Files
  whose name starts with ``_`` hold shared defaults only and are not registered as task files;
* ``remote`` of a file is its file name when omitted and the task has a ``url_base``
  (``remote = ""`` turns the download off for one file);
* ``description`` may name params in braces (``"SentEval MR ({setting} setting)"``);
* ``[[variant]]`` makes copies of tasks of the file with some keys changed, without copying them:
  ``of = ["mr", "cr"]``, ``name = "{name}-proto"``, and the keys to override
  (``params = { setting = "prototyping" }``).

``higher_is_better`` and ``aliases`` are not task keys: a main metric is always higher-is-better
here, and a task has one name (a spec using them is an error, never silently ignored).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchbench.core.errors import ConfigError


@dataclass(frozen=True)
class FileEntry:
    """One data file of a task spec (``[task.files]``)."""

    path: str  # relative to the data root, e.g. "sts/STS12/STS.gs.MSRpar.txt"
    sha256: str | None = None
    url: str | None = None


_TASK_KEYS = {
    "name",
    "kind",
    "description",
    "splits",
    "default_splits",
    "main_metric",
    "params",
    "files",
    "url_base",
    "train",
    "citation",
    "notes",
    "version",
}
_TOP_KEYS = {"task", "suite", "defaults", "include", "variant"}
_MERGED_KEYS = ("params", "train")  # dict-valued keys that merge key by key with the defaults


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
    # part of every result key: bump it when an edit changes what the task measures (data, metric,
    # protocol), so records of the old definition are never shown as current
    version: int = 1


@dataclass
class Suite:
    name: str
    tasks: list[str]
    description: str = ""
    aggregate: str = "mean"  # how the suite average is formed from each task's main score
    notes: list[str] = field(default_factory=list)
    source: str = ""


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"Task spec {path}: {e}") from e


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if k in _MERGED_KEYS and isinstance(out.get(k), dict) and isinstance(v, dict):
            out[k] = {**out[k], **v}
        else:
            out[k] = v
    return out


def _defaults(path: Path, raw: dict[str, Any], seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The file's effective defaults: its includes' defaults, in order, then its own ``[defaults]``."""
    path = Path(path).resolve()
    if path in seen:
        raise ConfigError(f"Task spec {path}: include cycle {' -> '.join(str(p) for p in (*seen, path))}.")
    includes = raw.get("include", [])
    includes = [includes] if isinstance(includes, str) else includes
    if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
        raise ConfigError(f"Task spec {path}: include must be a file name or a list of them (got {includes!r}).")
    out: dict[str, Any] = {}
    for inc in includes:
        inc_path = (path.parent / inc).resolve()
        if not inc_path.is_file():
            raise ConfigError(f"Task spec {path}: included file {inc!r} not found (looked at {inc_path}).")
        inc_raw = _read_toml(inc_path)
        stray = set(inc_raw) - {"defaults", "include"}
        if stray:
            raise ConfigError(
                f"Task spec {inc_path} (included by {path}): an included file holds only [defaults] and "
                f"include; found {sorted(stray)}."
            )
        out = _merge(out, _defaults(inc_path, inc_raw, (*seen, path)))
    own = raw.get("defaults", {})
    if not isinstance(own, dict):
        raise ConfigError(f"Task spec {path}: [defaults] must be a table.")
    bad = set(own) - (_TASK_KEYS - {"name"})
    if bad:
        raise ConfigError(f"Task spec {path}: unknown keys in [defaults]: {sorted(bad)}.")
    return _merge(out, own)


def _expand_variants(
    path: Path, raw_tasks: list[dict[str, Any]], variants: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    by_name = {t.get("name"): t for t in raw_tasks}
    out = list(raw_tasks)
    for i, v in enumerate(variants):
        where = f"Task spec {path}, variant #{i + 1}"
        of, pattern = v.get("of"), v.get("name")
        if not isinstance(of, list) or not of or not isinstance(pattern, str) or "{name}" not in pattern:
            raise ConfigError(f"{where}: needs of = [task names] and name = a pattern containing '{{name}}'.")
        bad = set(v) - (_TASK_KEYS | {"of"})
        if bad:
            raise ConfigError(f"{where}: unknown keys {sorted(bad)}.")
        for base in of:
            if base not in by_name:
                raise ConfigError(f"{where}: task {base!r} is not defined in this file.")
            over = {k: val for k, val in v.items() if k not in ("of", "name")}
            out.append(_merge(by_name[base], {**over, "name": pattern.format(name=base)}))
    return out


def _describe(text: str, params: dict[str, Any]) -> str:
    """``{param}`` placeholders filled from the task's params; other braces left as they are."""
    import re

    return re.sub(r"\{(\w+)\}", lambda m: str(params[m.group(1)]) if m.group(1) in params else m.group(0), text)


def load_spec_file(path: Path, registry=None) -> tuple[list[TaskSpec], list[Suite]]:
    """Parse a spec file; errors name the file and the entry at fault."""
    raw = _read_toml(path)
    unknown_top = set(raw) - _TOP_KEYS
    if unknown_top:
        raise ConfigError(
            f"Task spec {path}: unknown top-level keys {sorted(unknown_top)} (expected [[task]], [[suite]], "
            f"[defaults], include, [[variant]])."
        )
    defaults = _defaults(Path(path), raw)
    raw_tasks = [_merge(defaults, t) for t in raw.get("task", [])]
    raw["task"] = _expand_variants(Path(path), raw_tasks, raw.get("variant", []))
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
            from benchbench.core.errors import UnknownNameError

            raise ConfigError(f"{where}: {UnknownNameError('adapter kind', t['kind'], registry.adapters)}")
        url_base = t.get("url_base", "").rstrip("/")
        files = {}
        for rel, meta in t.get("files", {}).items():
            meta = meta if isinstance(meta, dict) else {"sha256": meta}
            remote = meta.get("remote", rel.rsplit("/", 1)[-1])  # omitted: the file's own name
            url = meta.get("url") or (f"{url_base}/{remote}" if url_base and remote else None)
            files[rel] = FileEntry(rel, meta.get("sha256"), url)
        splits = list(t.get("splits", ["test"]))
        default_splits = list(t.get("default_splits", [s for s in ("dev", "test") if s in splits] or splits[:1]))
        bad = [s for s in default_splits if s not in splits]
        if bad:
            raise ConfigError(f"{where}: default_splits {bad} are not in splits {splits}.")
        tasks.append(
            TaskSpec(
                name=t["name"],
                kind=t["kind"],
                description=_describe(t.get("description", ""), t.get("params", {})),
                splits=splits,
                default_splits=default_splits,
                main_metric=t.get("main_metric", "score"),
                params=dict(t.get("params", {})),
                files=files,
                train=dict(t.get("train", {"source": "self"})),
                citation=t.get("citation", ""),
                notes=list(t.get("notes", [])),
                source=str(path),
                version=_version(t.get("version", 1), where),
            )
        )
    suites = []
    for i, s in enumerate(raw.get("suite", [])):
        if "name" not in s or "tasks" not in s:
            raise ConfigError(f"Task spec {path}, suite #{i + 1}: needs 'name' and 'tasks'.")
        suites.append(
            Suite(
                name=s["name"],
                tasks=list(s["tasks"]),
                description=s.get("description", ""),
                aggregate=s.get("aggregate", "mean"),
                notes=list(s.get("notes", [])),
                source=str(path),
            )
        )
    return tasks, suites


def _version(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ConfigError(
            f"{where}: version must be an integer >= 1 (got {v!r}); bump it when an edit changes results."
        )
    return v


def spec_for_adapter_class(name: str, cls: type) -> TaskSpec:
    """A spec for a task registered as a TaskAdapter subclass (no TOML): the class supplies defaults."""
    d = dict(getattr(cls, "spec_defaults", {}))
    return TaskSpec(name=name, kind=getattr(cls, "kind", name), **d)
