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

Data paths (the keys of ``[task.files]``, ``train.path``) are relative to the data dir and stay
inside it: ``..``, an absolute path or a backslash is refused when the spec loads, as is a
``url_base``/``url`` that is not ``http(s)://`` (a download must never write outside the data cache
nor read a local file). ``score_range = [lo, hi]`` bounds the gold scores of adapters that read them
(STS: a score outside is a ``DataError`` naming the file and line; each format has a default).

A file that is not valid TOML raises ``SpecParseError`` (file and line): the registry then
disables that file's tasks with a warning instead of failing every command.

``higher_is_better`` and ``aliases`` are not task keys: a main metric is always higher-is-better
here, and a task has one name (a spec using them is an error, never silently ignored).
"""

from __future__ import annotations

import math
import re
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
    size: int | None = None  # bytes of its contents as read (decompressed): readers stop there (store.data)


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
    "score_range",
    "domain",
    "sources",
}
_TOP_KEYS = {"task", "suite", "defaults", "include", "variant"}
_MERGED_KEYS = ("params", "train")  # dict-valued keys that merge key by key with the defaults


@dataclass
class TaskSpec:
    """One task as its TOML spec declares it: the adapter ``kind`` that evaluates it, its data ``files``
    with their sha256, its splits, main metric and training text. ``name`` and ``version`` enter every
    result key, so a record is never shown as current for a changed definition."""

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
    # the interval gold scores lie in ([0, 5] for STS); None: the adapter's default for its format
    score_range: tuple[float, float] | None = None
    # where the task's text comes from, for the zero-shot check (benchbench.encode.cards): ``domain``
    # in words, ``sources`` as source ids (``"stackexchange:askubuntu.com"``). Not part of any key.
    domain: str = ""
    sources: list[str] = field(default_factory=list)


@dataclass
class Suite:
    name: str
    tasks: list[str]
    description: str = ""
    aggregate: str = "mean"  # how the suite average is formed from each task's main score
    notes: list[str] = field(default_factory=list)
    source: str = ""


class SpecParseError(ConfigError):
    """A spec file that cannot be read as TOML (syntax, encoding, unreadable). Nothing of it is known,
    not even its task names, so the registry disables it and goes on (see ``registry``); a spec that
    parses but says something wrong stays a plain ``ConfigError``."""

    def __init__(self, path: Path, line: int | None, why: str):
        self.path, self.line, self.why = Path(path), line, why
        where = f"{path}:{line}" if line else f"{path}"
        super().__init__(f"Task spec {where}: {why}")


def _toml_error_line(text: str, e: tomllib.TOMLDecodeError) -> int | None:
    """The line tomllib reports (``at line N``; ``at end of document``: the last line)."""
    m = re.search(r"at line (\d+)", str(e))
    if m:
        return int(m.group(1))
    return max(1, len(text.splitlines())) if "end of document" in str(e) else None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise SpecParseError(path, None, f"cannot read ({e.strerror or e})") from e
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise SpecParseError(path, line, f"byte {raw[e.start : e.start + 1]!r} is not UTF-8") from e
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecParseError(path, _toml_error_line(text, e), f"TOML syntax error: {e}") from e


_NAME_LINE = re.compile(r"""^\s*name\s*=\s*["']([^"'{}]+)["']""", re.MULTILINE)


def guess_names(path: Path) -> list[str]:
    """Task and suite names a spec that does not parse seems to define (its ``name = "..."`` lines),
    so that asking for one of them names the broken file; best effort, never raises."""
    try:
        return list(dict.fromkeys(_NAME_LINE.findall(Path(path).read_text(encoding="utf-8", errors="replace"))))
    except OSError:
        return []


def data_path_problem(rel: Any) -> str | None:
    """Why ``rel`` is not a data path that stays inside the data and cache roots (None: it is fine).
    Checked lexically, before any file is touched: a spec must not make a download write, or a
    reader read, outside those roots."""
    from pathlib import PurePosixPath, PureWindowsPath

    if not isinstance(rel, str) or not rel.strip():
        return "a data path must be a non-empty string"
    if "\0" in rel:
        return "a data path must not contain a NUL character"
    if "\\" in rel:
        return "a data path uses '/' separators, never '\\'"
    if PurePosixPath(rel).is_absolute() or PureWindowsPath(rel).drive:
        return "a data path is relative to the data dir, never absolute"
    if ".." in PurePosixPath(rel).parts:
        return "a data path must not contain '..' (it would leave the data dir)"
    return None


def url_problem(url: Any) -> str | None:
    """Why ``url`` is not a download address (None: it is): only ``http://`` and ``https://`` with a
    host; ``file://``, ``ftp://`` and ``data:`` would read local files or bypass the checks."""
    from urllib.parse import urlsplit

    if not isinstance(url, str):
        return "a URL must be a string"
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return "downloads come only from http:// or https:// addresses"
    return None


def _check_path(rel: Any, where: str, key: str) -> None:
    why = data_path_problem(rel)
    if why:
        raise ConfigError(f"{where}: {key} = {rel!r} is refused: {why}. Name the file relative to the data dir.")


def _check_url(url: Any, where: str, key: str) -> None:
    why = url_problem(url)
    if why:
        raise ConfigError(f"{where}: {key} = {url!r} is refused: {why}.")


def _score_range(v: Any, where: str) -> tuple[float, float] | None:
    """``score_range = [lo, hi]``: two finite numbers, lo < hi."""
    if v is None:
        return None
    ok = (
        isinstance(v, list)
        and len(v) == 2
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v)
        and v[0] < v[1]
    )
    if not ok:
        raise ConfigError(
            f"{where}: score_range must be [lowest, highest], two finite numbers, lowest first (got {v!r}); "
            f"e.g. score_range = [0, 5]."
        )
    return float(v[0]), float(v[1])


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
        files = _files(t, where)
        train = t.get("train", {})
        if isinstance(train, dict) and train.get("path") is not None:
            _check_path(train["path"], where, "train.path")
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
                score_range=_score_range(t.get("score_range"), where),
                domain=_text(t.get("domain", ""), where, "domain"),
                sources=_sources(t.get("sources", []), where),
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


def _files(t: dict[str, Any], where: str) -> dict[str, FileEntry]:
    """``[task.files]`` as entries; every path must stay in the data dir and every URL be http(s)."""
    url_base = t.get("url_base", "")
    if url_base:
        _check_url(url_base, where, "url_base")
    url_base = url_base.rstrip("/")
    if not isinstance(t.get("files", {}), dict):
        raise ConfigError(f"{where}: [task.files] must be a table of data paths.")
    files = {}
    for rel, meta in t.get("files", {}).items():
        _check_path(rel, where, f"files.{rel!r}")
        meta = meta if isinstance(meta, dict) else {"sha256": meta}
        remote = meta.get("remote", rel.rsplit("/", 1)[-1])  # omitted: the file's own name
        url = meta.get("url") or (f"{url_base}/{remote}" if url_base and remote else None)
        if url is not None:
            _check_url(url, where, f"files.{rel!r}.url" if meta.get("url") else f"url_base + remote of {rel!r}")
        size = meta.get("size")
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size <= 0):
            raise ConfigError(f"{where}: files.{rel!r}.size must be a positive number of bytes, not {size!r}.")
        files[rel] = FileEntry(rel, meta.get("sha256"), url, size)
    return files


def _text(v: Any, where: str, key: str) -> str:
    if not isinstance(v, str):
        raise ConfigError(f"{where}: {key} must be a string (got {v!r}).")
    return v


def _sources(v: Any, where: str) -> list[str]:
    """``sources = ["stackexchange:askubuntu.com", ...]``: ids of where the task's text comes from
    (the ids ``benchbench.encode.cards.SOURCES`` knows; a test checks every built-in spec)."""
    if not isinstance(v, list) or not all(isinstance(x, str) and x.strip() for x in v):
        raise ConfigError(
            f'{where}: sources must be a list of source ids, e.g. sources = ["stackexchange"] (got {v!r}).'
        )
    return list(v)


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
