"""Datasets named by a Hugging Face id and a pinned revision, read through ``datasets``.

Where from, in order: a local copy in the repository layout (``README.md`` with a ``configs`` block
and the data files, as ``huggingface-cli download --repo-type dataset`` writes it) at
``hf/<id>/<revision>/`` under the data dir or the data cache, the only way it can load offline; else the
hub at that revision when downloads are allowed. A local copy's files are hashed into one fingerprint
(like a file task's sha256s) that is checked against the spec's and recorded in ``DataStore.used``; a
hub load records the revision, itself an immutable commit id. A missing config, split or column is a
``DataError`` naming the task, the dataset and what it has."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from benchbench.core.errors import ConfigError, DataError
from benchbench.store.data import DataStore, check_folder, sha256_file

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
    """sha256 over every file of the copy (relative path and its sha256, in path order): the same rows
    in the same files give the same fingerprint wherever the folder lies."""
    h = hashlib.sha256()
    for p in sorted(q for q in folder.rglob("*") if q.is_file() and ".cache" not in q.relative_to(folder).parts):
        h.update(f"{p.relative_to(folder).as_posix()}\0{sha256_file(p)}\n".encode())
    return h.hexdigest()


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

    def where(self) -> str:
        return " or ".join(str(p) for p in self.data.candidates(f"hf/{self.dataset}/{self.revision}"))

    def _source(self) -> str:
        """The path ``datasets.load_dataset`` reads: the local copy (fingerprint checked once), else the hub id."""
        if self.folder is not None:
            if not self._checked:
                got = folder_fingerprint(self.folder)
                if self.expected and got != self.expected:
                    raise DataError(
                        f"Task {self.task!r}: local copy {self.folder} of {self.dataset}@{self.revision} has fingerprint "
                        f"{got}, the spec expects {self.expected}: a different or modified copy. Replace it with "
                        f"the pinned revision's files."
                    )
                self.data.used[f"hf:{self.dataset}@{self.revision}"] = got
                self._checked = True
            return str(self.folder)
        if not self.data.allow_download:
            raise DataError(
                f"Task {self.task!r}: dataset {self.dataset} at revision {self.revision} has no local copy and "
                f"downloads are off. Put the repository's files at {self.where()} (for MTEB tasks built from "
                f"the offline data: python bench/build_mteb_copies.py)."
            )
        self.data.used[f"hf:{self.dataset}@{self.revision}"] = self.revision
        return self.dataset

    def _cache_dir(self) -> str | None:
        """A local copy's own ``datasets`` cache, named by its fingerprint: ``datasets`` keys its cache of a
        local folder by the folder's name (here the revision), so two copies of one revision (a fixture,
        a rebuilt copy) would otherwise read each other's stale rows or fail its split-size check."""
        if self.folder is None:
            return None
        import datasets

        got = self.data.used[f"hf:{self.dataset}@{self.revision}"]
        return str(Path(datasets.config.HF_DATASETS_CACHE) / "benchbench-copies" / got[:24])

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
            dd = datasets.load_dataset(src, config, revision=self._rev(), cache_dir=self._cache_dir())
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
