"""Result records: one JSON file per (method, config hash, base model, setup, seed, task, task version).

Schema (``schema_version`` 2), stable keys:
    method, config, config_hash, model, setup, seed, task, task_version, splits: {split: TaskResult.to_dict()},
    evaluated: {split: {created_at, eval_seconds, encoder_fingerprint, git_sha, git_dirty[, git_diff_sha256]}},
    train: {seconds, steps, examples, tokens, device, ...} | null, eval_seconds, data: {path: sha256},
    versions: {package: version}, git_sha, git_dirty, git_diff_sha256 (when dirty), device, created_at, notes,
    transductive
A record holds every split evaluated so far: evaluating another split merges it in (``merge``), and
``--force`` replaces only the splits it re-evaluates.

Migration from schema 1 (read on the fly, files are not rewritten): a schema-1 record has no
``task_version`` and no ``evaluated``; it is read as ``task_version`` 1 (the version every spec had
then) with ``evaluated`` rebuilt from its ``created_at``/``eval_seconds``. Its path is unchanged: a
key with task version 1 keeps the old file name, a later version adds ``@v<N>`` to it, so editing a
spec (and bumping its ``version``) never passes old records off as current.
Files are written to a temp file in the same folder and renamed, so a record is either whole or absent;
writers of one key are serialised by a lock (``benchbench.store.locks``).

File names are an injective encoding of the key (``benchbench.store.files.slug``): a field made only
of ``[A-Za-z0-9._=-]`` is its own name (so every record written before keeps its path), any other field
is its old slug plus ``~`` and a short hash of the field (``~`` is never in a plain name, so ``coll a``
and ``coll_a`` no longer share ``coll_a.json``); a field over 80 characters is cut, with the hash, so a
long task or method name never exceeds the file system's name limit (the record holds it whole). A
record written under the old slug is still found there (``ResultStore.path``) as long as it holds that key.

Damage is detected on read (``read_record``): a file that is not JSON (truncated, flipped bytes,
merge-conflict markers), lacks key fields, has a ``checksum`` that does not match its contents, has
none though its dates say it was written after checksums began (``CHECKSUMS_SINCE``: only schema 1
and the first day of schema 2 predate them), or sits at a path its key fields do not name. ``run`` moves such a record aside (``ResultStore.quarantine``:
``<root>/.quarantine/<relative path>.<time>``, never deleted) and recomputes it; tables leave it
out with a warning naming it. A record from before checksums that was edited without touching its key
fields cannot be told from a genuine one. Per-item files are held to their record the same way
(``record_items``: the sha256 in the checksummed record, then their subsets); a damaged one is
``DamagedItems``, naming the file.
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import os
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from benchbench.core.errors import DataError
from benchbench.store.files import atomic_write_text, atomic_writer, check_inside, safe_mkdirs, sha256_file, slug
from benchbench.store.space import naming_full_disk

SCHEMA_VERSION = 2
READABLE_SCHEMAS = (1, 2)
# when records began to carry a ``checksum`` (commit 2211999): a schema-2 record without one must say
# it was written before this (``_predates_checksums``)
CHECKSUMS_SINCE = "2026-11-23T17:16:45+0000"
QUARANTINE = ".quarantine"  # damaged records are moved here (under the store's root), never deleted
# records another code version wrote, set aside by ``study run --supersede`` (kept, never read as cells)
SUPERSEDED = ".superseded"
# the most bytes a file read as a record may hold: a record is a few KB (the largest committed ~15 KB; a JSON
# file the scan reads, such as a POS tag list, 115 KB). A larger one, or one that is not a regular file (a link
# to /dev/zero), is damaged and named; it is never read whole (BENCHBENCH_MAX_READ_BYTES overrides, as for data)
RECORD_BYTES = 64 << 20
STATS_CACHE = ".stats-cache"  # a study's cached column statistics, kept beside its records (JSON, not records)
# folders of a store that hold no records (runs: trained encoders)
NOT_RECORDS = (".locks", QUARANTINE, SUPERSEDED, "runs", STATS_CACHE)
_CONFLICT = re.compile(r"^(<{7}|={7}|>{7})( |$)", re.MULTILINE)
_KEY_FIELDS = ("method", "config_hash", "model", "setup", "seed", "task")

log = logging.getLogger(__name__)


class DamagedRecord(DataError):
    """A stored result record that cannot be trusted: ``path`` and ``why`` name the file and what is
    wrong. ``recoverable``: moving it aside and recomputing it is the cure (False for a record of a
    newer schema, which is not damaged but must not be overwritten by this version)."""

    def __init__(self, path: Path, why: str, recoverable: bool = True):
        super().__init__(f"Result record {path}: {why}")
        self.path, self.why, self.recoverable = Path(path), why, recoverable


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
        """The record's path under a store: one name per key (``slug`` is injective)."""
        return self._layout(slug, slug)

    def legacy_relpath(self) -> Path:
        """The path the key had before names were injective (``_legacy_name``; the config hash as it
        was): records written then are still found there (``ResultStore.path``)."""
        return self._layout(_legacy_name, str)

    def _layout(self, name, hash_name) -> Path:
        task = name(self.task) if self.task_version == 1 else f"{name(self.task)}@v{self.task_version}"
        return Path(
            name(self.method),
            name(self.model),
            name(self.setup),
            hash_name(self.config_hash),
            f"seed{self.seed}",
            f"{task}.json",
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
    for field in ("items", "items_sha256"):
        kept = {s: f for s, f in (old.get(field) or {}).items() if s not in new.get("splits", {})}
        out[field] = {**kept, **(new.get(field) or {})}
        if not out[field]:
            out.pop(field)
    return out


def _legacy_name(s: str) -> str:
    """The pre-injective file name of a key field: the readable part of its ``slug`` (before the
    ``~hash``), which many fields share; used only to find records written before names were injective.
    One over 236 characters was never written (its temp file's name exceeded the file system's 255):
    it has no legacy path, only its bounded ``slug``, so a lookup never fails with "File name too long"."""
    old = slug(s, max_len=4096).partition("~")[0]
    return old if len(old) <= 236 else slug(s)


def checksum(record: dict[str, Any]) -> str:
    """sha256 of the record's canonical JSON without its ``checksum`` field. Computed on the record as
    JSON gives it back (a write/read round trip), so int keys or numpy floats hash the same on both
    sides; any later edit of a score (or of anything else) changes it."""
    body = json.loads(json.dumps({k: v for k, v in record.items() if k != "checksum"}, default=_json_default))
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return "sha256:" + hashlib.sha256(canon.encode()).hexdigest()


def read_record(path: Path) -> dict[str, Any] | None:
    """The record in ``path``, migrated to the current schema; None for a JSON file that is not a
    record (bench logs, encoder configs). A damaged one raises ``DamagedRecord`` saying what is wrong,
    so no caller ever skips it silently or shows a traceback that names no file."""
    from benchbench.store.data import read_bytes

    path = Path(path)
    try:
        text = read_bytes(path, default=(RECORD_BYTES, "a result record's limit")).decode("utf-8")
    except OSError as e:
        raise DamagedRecord(path, f"cannot be read ({e.strerror or e})") from e
    except DataError as e:  # over the limit, or not a regular file: named, left out, never read whole
        raise DamagedRecord(path, str(e).removeprefix(f"{path}: ")) from e
    except UnicodeDecodeError as e:
        raise DamagedRecord(path, f"is not UTF-8 text (bad byte at offset {e.start}): the file is damaged") from e
    try:
        record = json.loads(text)
    except json.JSONDecodeError as e:
        raise DamagedRecord(path, _why_not_json(text, e)) from e
    if not isinstance(record, dict) or not ({"method", "splits"} <= record.keys() or "schema_version" in record):
        return None
    return _checked(path, record)


def _why_not_json(text: str, e: json.JSONDecodeError) -> str:
    if not text.strip():
        return "is empty (a write was cut off, or the file was emptied)"
    if _CONFLICT.search(text):
        return "contains git merge-conflict markers (<<<<<<< ======= >>>>>>>): resolve the merge or take one side"
    where = f"{e.msg}: line {e.lineno}, column {e.colno}"
    if text.lstrip().startswith("{") and not text.rstrip().endswith("}"):
        return f"is truncated: its JSON ends early ({where})"
    return f"is not valid JSON ({where}): the file is damaged"


def _checked(path: Path, record: dict[str, Any]) -> dict[str, Any]:
    """``record`` migrated, after the checks a record read from disk must pass (schema, key fields,
    checksum); ``DamagedRecord`` otherwise."""
    version = record.get("schema_version")
    if version not in READABLE_SCHEMAS:
        raise DamagedRecord(
            path,
            f"has schema_version {version!r}; this benchbench reads {list(READABLE_SCHEMAS)}: upgrade benchbench "
            "(a newer version wrote it) or move the file out of the results folder",
            recoverable=version is None or not isinstance(version, int) or version < SCHEMA_VERSION,
        )
    types = {"splits": dict, "seed": int, "task_version": int, **{k: str for k in _KEY_FIELDS if k != "seed"}}
    bad = [k for k, t in types.items() if not isinstance(record.get(k, 1 if k == "task_version" else None), t)]
    if bad:
        raise DamagedRecord(path, f"is not a whole record (missing or malformed: {', '.join(bad)})")
    # only schema 2 writes checksums: a schema-1 record predates them (one that carries a checksum was
    # downgraded by hand, as tests do to fake an old record), so its checksum is not checked
    if version == SCHEMA_VERSION and "checksum" in record and record["checksum"] != checksum(record):
        raise DamagedRecord(
            path, "does not match its checksum: it was edited or damaged after it was written (a score may be wrong)"
        )
    if version == SCHEMA_VERSION and "checksum" not in record and not _predates_checksums(record):
        raise DamagedRecord(
            path,
            f"has no checksum, yet says it was written after checksums began ({CHECKSUMS_SINCE}): its checksum "
            "was deleted, so an edit of any score cannot be ruled out",
        )
    return migrate(record)


def _predates_checksums(record: dict[str, Any]) -> bool:
    """Whether a schema-2 record says it was written before this benchbench wrote checksums: every
    ``created_at`` in it (the record's and each split's) is earlier than :data:`CHECKSUMS_SINCE`.
    Schema 2 began a day before checksums did, and 683 committed records come from that day, so the
    schema number alone cannot tell a genuine old record from one whose checksum was deleted; the
    dates can, short of a deliberate forgery (which could as well recompute the unkeyed checksum)."""
    if record.get("created_at") is None:  # every writer of schema 2 stamped it
        return False
    stamps = [record["created_at"]]
    stamps += [e.get("created_at") for e in (record.get("evaluated") or {}).values() if isinstance(e, dict)]
    try:
        times = [datetime.strptime(s, "%Y-%m-%dT%H:%M:%S%z") for s in stamps if s is not None]
    except (TypeError, ValueError):
        return False
    since = datetime.strptime(CHECKSUMS_SINCE, "%Y-%m-%dT%H:%M:%S%z")
    return all(t < since for t in times)


def misplaced(record: dict[str, Any], relpath: Path) -> str | None:
    """Why ``record`` cannot be the record stored at ``relpath`` (relative to a store's root, or to a
    folder holding a store), or None when the path is its key's. Imported records (MTEB) have their
    own layout and are not checked."""
    if record.get("imported_from"):
        return None
    key = key_of(record)
    parts = Path(relpath).parts
    for own in (key.relpath().parts, key.legacy_relpath().parts):
        if parts[-len(own) :] == own:
            return None
    return _belongs_elsewhere(record)


def _belongs_elsewhere(record: dict[str, Any]) -> str:
    fields = ", ".join(f"{k} {record.get(k)!r}" for k in (*_KEY_FIELDS, "task_version"))
    return (
        f"holds another key ({fields}; its path is {key_of(record).relpath().as_posix()}): the file was "
        "edited, another key's record was copied over it, or two keys shared this name before names were injective"
    )


def _size(record: dict[str, Any], items: dict[str, Any] | None) -> int | None:
    """About the bytes a record and its per-item files take (the JSON text; the items are gzipped)."""
    try:
        n = len(json.dumps(record, indent=1, default=_json_default))
        return n + (len(json.dumps(items)) // 3 if items else 0)
    except (TypeError, ValueError):
        return None


class ResultStore:
    def __init__(self, root: str | Path = "results"):
        self.root = Path(root)
        self.damaged: list[DamagedRecord] = []  # what the last ``records()`` left out, and why

    def path(self, key: ResultKey) -> Path:
        """Where ``key``'s record is: its own path, or its legacy (pre-injective) path when only that
        exists and holds this key, or a record too damaged to say whose it is (``load`` then reports
        it, and ``run`` moves it aside)."""
        own = self.root / key.relpath()
        legacy = self.root / key.legacy_relpath()
        if own.exists() or legacy == own or not legacy.is_file():
            return own
        try:
            record = read_record(legacy)
        except DamagedRecord:
            return legacy
        return legacy if record is not None and key_of(record) == key else own

    def exists(self, key: ResultKey) -> bool:
        return self.path(key).is_file()

    def load(self, key: ResultKey) -> dict[str, Any]:
        """The stored record of ``key``; ``DamagedRecord`` when the file is damaged or holds another key."""
        path = self.path(key)
        record = read_record(path)
        if record is None:
            raise DamagedRecord(path, "is JSON but not a result record (no schema_version, method and splits)")
        if key_of(record) != key:
            raise DamagedRecord(path, _belongs_elsewhere(record))
        return record

    def quarantine(self, path: Path, why: str) -> Path:
        """Move a damaged record, and the per-item files named after it, to
        ``<root>/.quarantine/<relative path>.<time>`` with a ``.why`` note beside it: nothing stored is
        ever deleted, and the record's own path is free for a recomputed one."""
        return self.set_aside(path, QUARANTINE, why)

    def set_aside(self, path: Path, folder: str, why: str) -> Path:
        """Move the record at ``path`` and its per-item files to ``<root>/<folder>/<relative path>.<time>``
        (``folder``: one of the store's non-record folders, ``QUARANTINE`` or ``SUPERSEDED``) with a
        ``.why`` note beside it; the record's own path is then free for a new one."""
        if folder not in (QUARANTINE, SUPERSEDED):
            raise ValueError(f"set_aside: {folder!r} is not a folder records are set aside in")
        path = Path(path)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        rel = path.relative_to(self.root) if path.is_relative_to(self.root) else Path(path.name)
        dest = self.root / folder / f"{rel}.{stamp}"
        n = 1
        while dest.exists():
            dest, n = self.root / folder / f"{rel}.{stamp}-{n}", n + 1
        safe_mkdirs(dest.parent, self.root)  # a symlinked .quarantine must not carry records out of the store
        for item in sorted(path.parent.glob(f"{glob.escape(path.stem)}.items.*.json.gz")):
            os.replace(item, dest.parent / f"{item.name}{dest.name.removeprefix(path.name)}")
        os.replace(path, dest)
        atomic_write_text(dest.with_name(dest.name + ".why"), f"{path}: {why}\n", root=self.root)
        return dest

    def lock(self, key: ResultKey):
        """The advisory lock of one result key (held while its record is read, evaluated and written)."""
        from benchbench.store.locks import hold

        return hold(
            self.root / ".locks" / key.relpath().with_suffix(".lock"), f"result {key.relpath()}", root=self.root
        )

    def clean_stale(self, key: ResultKey) -> None:
        """Remove temp files a killed writer of ``key`` left behind. Call only while holding
        ``lock(key)``: then no live writer of this key exists."""
        path = self.path(key)
        if path.parent.is_dir():
            for tmp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
                tmp.unlink(missing_ok=True)

    def write(self, record: dict[str, Any], items: dict[str, dict[str, Any]] | None = None) -> Path:
        """Write ``record`` atomically, with a ``checksum`` verified on every read. ``items`` (split ->
        per-item scores, ``benchbench.store.items``) are written first, each to its own file beside the
        record, and the record names them under ``items`` with their sha256 under ``items_sha256``; a
        split the record has but ``items`` lacks keeps a file only if it was not re-evaluated (see
        :func:`merge`). A damaged record in the way is moved to quarantine, never overwritten."""
        key = key_of(record)
        path = check_inside(self._free_path(key), self.root)
        safe_mkdirs(path.parent, self.root)  # checked first: no folder made outside the store before a refusal
        with naming_full_disk(path, "writing this result record and its per-item scores", lambda: _size(record, items)):
            if items:
                from benchbench.store.items import items_filename, write_items

                names = {s: items_filename(path.stem, slug(s)) for s in items}
                for s, it in items.items():
                    write_items(path.parent / names[s], it, root=self.root)
                record["items"] = {**(record.get("items") or {}), **names}
                record["items_sha256"] = {
                    **(record.get("items_sha256") or {}),
                    **{s: sha256_file(path.parent / n) for s, n in names.items()},
                }
            record["checksum"] = checksum(record)
            with atomic_writer(path, "w", root=self.root) as f:
                json.dump(record, f, indent=1, sort_keys=True, default=_json_default, allow_nan=False)  # no NaN
        return path

    def _free_path(self, key: ResultKey) -> Path:
        """``path(key)``, after moving a damaged file there to quarantine (a writer that did not
        ``load`` first must not destroy it)."""
        path = self.path(key)
        if path.is_file():
            try:
                read_record(path)
            except DamagedRecord as e:
                moved = self.quarantine(path, e.why)
                log.warning("%s; moved to %s before writing a new record of its key", e, moved)
                path = self.path(key)
        return path

    def items_problems(self, record: dict[str, Any]) -> dict[str, str]:
        """{split: what is wrong} for the per-item files ``record`` names: missing, or not the bytes
        written with it (``items_sha256``; records from before it, which have no checksum either, are
        checked only for presence)."""
        folder = self.path(key_of(record)).parent
        problems = {}
        for split, name in (record.get("items") or {}).items():
            problem = items_problem(folder / name, _items_sha256(record, split))
            if problem:
                problems[split] = problem
        return problems

    def records(self) -> Iterator[dict[str, Any]]:
        """Every record under the root. A damaged one (see ``read_record``, or at a path its key does
        not name) is left out with a warning naming it, and kept in ``self.damaged``: a table never
        loses a cell silently, and never shows a number from a damaged file."""
        self.damaged = []
        if not self.root.is_dir():
            return
        for p in sorted(self.root.rglob("*.json")):
            rel = p.relative_to(self.root)
            if set(rel.parts[:-1]) & set(NOT_RECORDS):
                continue
            try:
                r = read_record(p)
                why = misplaced(r, rel) if r is not None else None
                if why:
                    raise DamagedRecord(p, why)
            except DamagedRecord as e:
                self.damaged.append(e)
                log.warning(
                    "%s. Left out of this table; `benchbench run` of its key moves it aside and recomputes it.", e
                )
                continue
            if r is not None:
                yield r


class DamagedItems(DataError):
    """A per-item scores file that cannot be used for its record: ``path`` names it, ``why`` says
    what is wrong. Readers must report it, never fall back to another test in silence."""

    def __init__(self, path: Path, message: str, why: str):
        super().__init__(message)
        self.path, self.why = Path(path), why


_NO_SHA = object()  # a checksummed record that names an items file without its sha256


def _items_sha256(record: dict[str, Any], split: str) -> str | object | None:
    """The sha256 the record holds for ``split``'s items file; ``_NO_SHA`` when the record has a
    checksum (so it was written when every items file got its sha256) yet lacks it: it was edited."""
    sha = (record.get("items_sha256") or {}).get(split)
    if sha is None and "checksum" in record:
        return _NO_SHA
    return sha


def items_problem(path: Path, sha256: str | object | None) -> str | None:
    """What is wrong with the per-item file ``path`` (None: present and, when ``sha256`` is known, the
    very bytes written). Truncation, flipped bytes and another task's file all change the sha256."""
    if not path.is_file():
        return f"{path} is missing"
    if sha256 is _NO_SHA:
        return f"{path} has no sha256 in its record (items_sha256), which every checksummed record holds: the record was edited"
    if sha256 and sha256_file(path) != sha256:
        return f"{path} is not the file written with its record (sha256 differs: damaged, or replaced by another file)"
    return None


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


# The source a run executes: an uncommitted change here makes the commit alone unable to reproduce it.
# Docs, tests, benches and generated leaderboards do not change a score, so editing them is not dirty.
CODE_PATHS = ("benchbench", "plugins", "tasks", "pyproject.toml")


def _git(args: list[str], cwd: Path) -> bytes | None:
    try:
        out = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def git_state(root: Path | None = None) -> dict[str, Any]:
    """The code version a record stores: ``git_sha`` (HEAD), ``git_dirty`` (True when ``CODE_PATHS``
    hold uncommitted changes, untracked files included; None when not a git checkout) and, when dirty,
    ``git_diff_sha256``: sha256 of ``git diff HEAD --binary`` over those paths plus each untracked file's
    name and bytes, so two runs from differently edited trees at one commit are told apart."""
    root = root or Path(__file__).resolve().parents[2]  # the checkout holding benchbench/ (editable install)
    head = _git(["rev-parse", "HEAD"], root)
    sha = head.decode().strip() or None if head else None
    status = _git(["status", "--porcelain", "-z", "--", *CODE_PATHS], root) if sha else None
    if status is None:
        return {"git_sha": sha, "git_dirty": None}
    tree = code_tree(root)
    if not status:
        return {"git_sha": sha, "git_dirty": False, **tree}
    h = hashlib.sha256(_git(["diff", "HEAD", "--binary", "--", *CODE_PATHS], root) or b"")
    untracked = _git(["ls-files", "--others", "--exclude-standard", "-z", "--", *CODE_PATHS], root) or b""
    for name in sorted(n for n in untracked.split(b"\0") if n):
        h.update(b"\0untracked\0" + name + b"\0")
        try:
            h.update((root / os.fsdecode(name)).read_bytes())
        except OSError:
            h.update(b"<unreadable>")
    return {"git_sha": sha, "git_dirty": True, "git_diff_sha256": h.hexdigest(), **tree}


def code_tree(root: Path, rev: str = "HEAD") -> dict[str, str]:
    """``{"git_code_tree": sha256}`` of ``rev``'s git tree entries for ``CODE_PATHS`` (``git ls-tree``:
    each path's object id), {} when git cannot say. Why: the commit names the whole repository, so a
    commit that only adds results or docs would split one study's records into two "code versions";
    the tree of the code paths is the same exactly when the code that computes a result is, and lets a
    study resumed on a later lent GPU (after a results-only commit) stay one version."""
    out = _git(["ls-tree", rev, "--", *CODE_PATHS], root)
    return {"git_code_tree": hashlib.sha256(out).hexdigest()} if out else {}


def code_version(record: dict[str, Any]) -> str:
    """One label per code version behind a record, for grouping and printing: ``code.<tree[:12]>`` (the
    committed code paths' tree, :func:`code_tree`: commits that change no code share it), else, for a
    record from before the tree was stored, ``<sha[:12]>``; ``+dirty.<diff sha256[:8]>`` for a run from
    uncommitted changes (``git_dirty``); ``unknown`` without a sha. Records from before ``git_dirty`` was
    stored print their sha alone (not known clean)."""
    tree = record.get("git_code_tree")
    sha = f"code.{str(tree)[:12]}" if tree else str(record.get("git_sha") or "unknown")[:12]
    if record.get("git_dirty"):
        return f"{sha}+dirty.{str(record.get('git_diff_sha256') or '?')[:8]}"
    return sha


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def to_mteb(record: dict[str, Any]) -> dict[str, Any]:
    """The record in MTEB's per-task results layout (scores in 0..1, one entry per split and subset)."""
    out: dict[str, Any] = {
        "task_name": record["task"],
        "mteb_version": None,
        "dataset_revision": None,
        "evaluation_time": record.get("eval_seconds"),
        "kg_co2_emissions": record.get("kg_co2_emissions"),  # codecarbon, when it measured (run/energy.py)
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
    """The per-item scores stored with ``record`` (a record from a ``ResultStore`` under ``root``),
    verified against it: the file's sha256 is the one the (checksummed) record holds, it reads as
    per-item scores, and its subsets are the record's. ``DamagedItems`` naming the file otherwise: a
    caller reports it (a table's tie test must not switch to another test in silence)."""
    name = (record.get("items") or {}).get(split)
    if not name:
        raise DataError(
            f"Record {record.get('method')}/{record.get('task')} seed {record.get('seed')} has no per-item "
            f"scores for split {split!r}: re-run it with `benchbench run --store-items --force`."
        )
    from benchbench.store.items import read_items

    path = ResultStore(root).path(key_of(record)).parent / name
    what = f"Per-item scores of {record.get('method')}/{record.get('task')} seed {record.get('seed')}, split {split!r}"
    cure = "Nothing was computed from it; recompute it with `benchbench run --store-items` (the damaged file is moved aside first)."
    problem = items_problem(path, _items_sha256(record, split))
    if problem is None:
        try:
            items = read_items(path)
        except DataError as e:
            problem = str(e)
        else:
            problem = _items_mismatch(path, items, record, split)
    if problem:
        raise DamagedItems(path, f"{what}: {problem}. {cure}", problem)
    return items


def _items_mismatch(path: Path, items: dict[str, Any], record: dict[str, Any], split: str) -> str | None:
    """Why ``items`` cannot be ``record``'s (its subsets are not the record's), for records too old to
    hold a sha256 of their items: another task's file copied over this one is told apart this way."""
    want = sorted(((record.get("splits") or {}).get(split) or {}).get("subsets") or {})
    have = sorted(items.get("subsets") or {})
    if (want and have != want) or (not want and len(have) != 1):
        return f"{path} holds subsets {have}, but its record's split {split!r} has {want or 'one (no subsets)'}: it is another task's file"
    return None
