"""Datasets named by a Hugging Face id and a pinned revision, read through ``datasets``.

Where from, in order: a local copy in the repository layout (``README.md`` with a ``configs`` block
and the data files, as ``huggingface-cli download --repo-type dataset`` writes it) at
``hf/<id>/<revision>/`` under the data dir or the data cache, the only way it can load offline; else the
hub at that revision when downloads are allowed. A local copy's files are hashed into one fingerprint
(like a file task's sha256s), computed whether or not the spec gives one, checked against the spec's
when it does, and recorded in ``DataStore.used`` (hence in the record: a stored result is reused only
while it matches, ``benchbench.run.runner``); a hub load records the revision, itself an immutable
commit id. The ``datasets`` cache built from a copy is verified before each process reads it, and
rebuilt when it was modified. A missing config, split or column is a ``DataError`` naming the task,
the dataset and what it has."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

from benchbench.core.errors import ConfigError, DataError
from benchbench.store.data import DataStore, check_folder, entries_under, sha256_file
from benchbench.store.files import atomic_write_json

log = logging.getLogger(__name__)

_REVISION = re.compile(r"^[0-9a-f]{40}$")


def revision_problem(revision: Any) -> str | None:
    """Why ``revision`` is not a pin (None: it is): a branch or tag moves, a 40-hex commit id does not."""
    if not isinstance(revision, str) or not _REVISION.match(revision):
        return f"revision must be a 40-hex commit id (got {revision!r}); a branch or tag name is not a pin"
    return None


def copy_folder(data: DataStore, dataset: str, revision: str) -> Path | None:
    """The local copy of ``dataset`` at ``revision`` (``hf/<id>/<revision>``), or None."""
    rel = f"hf/{dataset}/{revision}"
    return next((p for p in data.candidates(rel) if p.is_dir()), None)


def folder_fingerprint(folder: Path) -> str:
    """sha256 over every file of the copy (relative path and its sha256, in the order of the relative
    paths, whatever order the file system lists them in): the same rows in the same files give the
    same fingerprint wherever the folder lies. Files under a symlinked subfolder count, by their path
    through the link (``datasets`` reads them there)."""
    h = hashlib.sha256()
    files = {q.relative_to(folder).as_posix(): q for q in entries_under(folder) if q.is_file()}
    for rel in sorted(r for r in files if ".cache" not in r.split("/")):
        h.update(f"{rel}\0{sha256_file(files[rel])}\n".encode())
    return h.hexdigest()


VERIFIED = "verified.json"  # in a copy's cache folder: the build read now, and its files' sha256s


def _build_files(build: Path) -> dict[str, Path]:
    """The files of a ``datasets`` cache build that hold rows or metadata (not its lock files)."""
    return {
        p.relative_to(build).as_posix(): p
        for p in build.rglob("*")
        if p.is_file() and not p.name.endswith(".lock") and ".incomplete" not in p.as_posix()
    }


def verified_build(base: Path, what: str) -> Path:
    """The ``datasets`` cache folder to read a copy through: the build named in ``base/verified.json``
    when every file it lists has the recorded sha256 and it holds no file the record lacks; else a new,
    empty build folder (``datasets`` rebuilds from the copy), the modified one removed. ``datasets``
    reads its Arrow cache without any check, so an edited or truncated cache was scored as the copy
    (-3.44 -> -3.52; "Found array with 0 sample(s)")."""
    manifest = base / VERIFIED
    try:
        rec = json.loads(manifest.read_text())
        build = base / str(rec["build"])
        files = dict(rec["files"])
    except (OSError, ValueError, KeyError, TypeError):
        rec = None
    if rec is not None and build.parent == base and build.is_dir():
        have = _build_files(build)
        wrong = sorted(set(have) ^ set(files)) or [r for r in sorted(files) if sha256_file(have[r]) != files[r]]
        if not wrong:
            return build
        log.warning(
            "%s: its datasets cache %s was modified since it was built (%s); rebuilding it from the copy.",
            what,
            build,
            ", ".join(wrong[:3]),
        )
        shutil.rmtree(build, ignore_errors=True)
    return base / uuid.uuid4().hex[:16]


def seal_build(build: Path) -> None:
    """Record ``build``'s files and their sha256s as the verified build of its copy (after ``datasets``
    wrote to it); files already recorded keep their recorded sums (re-checked on the next process's
    first read)."""
    base = build.parent
    try:
        rec = json.loads((base / VERIFIED).read_text())
        known = dict(rec["files"]) if rec.get("build") == build.name else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        known = {}
    files = {r: known.get(r) or sha256_file(p) for r, p in sorted(_build_files(build).items())}
    try:
        os.makedirs(base, exist_ok=True)
        atomic_write_json(base / VERIFIED, {"build": build.name, "files": files}, indent=1)
    except OSError as e:  # unrecorded, the build is rebuilt by the next process: a cost, never a wrong row
        log.warning("datasets cache %s: could not record its checksums (%s); it will be rebuilt next time.", build, e)


class HFData:
    """One pinned dataset of one task: ``split(config, split, columns)`` gives a ``datasets.Dataset``."""

    def __init__(self, data: DataStore, task: str, dataset: str, revision: str, fingerprint: str | None = None):
        why = revision_problem(revision)
        if why:
            raise ConfigError(f"Task {task!r}: dataset {dataset!r}: {why}.")
        self.data, self.task, self.dataset, self.revision = data, task, dataset, revision
        self.expected = fingerprint
        self.folder = copy_folder(data, dataset, revision)
        self._checked = False
        self._build: Path | None = None

    def where(self) -> str:
        return " or ".join(str(p) for p in self.data.candidates(f"hf/{self.dataset}/{self.revision}"))

    @property
    def key(self) -> str:
        """This dataset's entry in ``DataStore.used`` and in a record's ``data``."""
        return f"hf:{self.dataset}@{self.revision}"

    def fingerprint(self) -> str:
        """The local copy's fingerprint, computed from its files (once per instance), checked against the
        spec's when it gives one, and recorded in ``DataStore.used``; without a local copy, the revision."""
        if self.folder is None:
            return self.revision
        if not self._checked:
            got = folder_fingerprint(self.folder)
            if self.expected and got != self.expected:
                raise DataError(
                    f"Task {self.task!r}: local copy {self.folder} of {self.dataset}@{self.revision} has fingerprint "
                    f"{got}, the spec expects {self.expected}: a different or modified copy. Replace it with "
                    f"the pinned revision's files."
                )
            self.data.used[self.key] = got
            self._checked = True
        return self.data.used[self.key]

    def _source(self) -> str:
        """The path ``datasets.load_dataset`` reads: the local copy (fingerprint checked once), else the hub id."""
        if self.folder is not None:
            self.fingerprint()
            return str(self.folder)
        if not self.data.allow_download:
            raise DataError(
                f"Task {self.task!r}: dataset {self.dataset} at revision {self.revision} has no local copy and "
                f"downloads are off. Put the repository's files at {self.where()} (for MTEB tasks built from "
                f"the offline data: python bench/build_mteb_copies.py)."
            )
        self.data.used[self.key] = self.revision
        return self.dataset

    def _cache_dir(self) -> str | None:
        """A local copy's own ``datasets`` cache, named by its fingerprint: ``datasets`` keys its cache of a
        local folder by the folder's name (here the revision), so two copies of one revision (a fixture,
        a rebuilt copy) would otherwise read each other's stale rows or fail its split-size check. Inside
        it, the build verified once per instance (``verified_build``)."""
        if self.folder is None:
            return None
        if self._build is None:
            import datasets

            base = Path(datasets.config.HF_DATASETS_CACHE) / "benchbench-copies" / self.fingerprint()[:24]
            self._build = verified_build(base, f"Task {self.task!r}: local copy {self.folder}")
        return str(self._build)

    def configs(self) -> list[str]:
        import datasets

        return list(datasets.get_dataset_config_names(self._source(), revision=self._rev()))

    def _rev(self) -> str | None:
        return None if self.folder is not None else self.revision

    def split(self, config: str | None, split: str, columns: list[str] = ()) -> Any:
        """One config's split with the named columns present (errors name what exists)."""
        import datasets

        src = self._source()
        name = f"{self.dataset}@{self.revision}" + (f" config {config!r}" if config else "")
        if self.folder is not None:  # datasets reads each file whole: its size as read is proven first
            check_folder(self.folder)
        try:
            configs = self.configs()
            if config is not None and config not in configs:
                raise DataError(
                    f"Task {self.task!r}: dataset {self.dataset} has no config {config!r} (it has {configs})."
                )
            cache = self._cache_dir()
            dd = datasets.load_dataset(src, config, revision=self._rev(), cache_dir=cache)
            if cache is not None:
                seal_build(Path(cache))
        except (ValueError, FileNotFoundError, OSError) as e:  # OSError: ConnectionError, offline hub
            local = "" if self.folder is not None else f" No local copy at {self.where()}."
            raise DataError(f"Task {self.task!r}: dataset {name} does not load from {src} ({e}).{local}") from e
        if split not in dd:
            raise DataError(f"Task {self.task!r}: dataset {name} has no split {split!r} (it has {sorted(dd)}).")
        ds = dd[split]
        missing = [c for c in columns if c not in ds.column_names]
        if missing:
            raise DataError(
                f"Task {self.task!r}: dataset {name} split {split!r} has no column(s) {missing} "
                f"(it has {ds.column_names}); fix the spec's column mapping."
            )
        return ds
