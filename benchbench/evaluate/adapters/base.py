"""The adapter contract: an evaluation protocol that turns an encoder into scores for one task."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from benchbench.core.errors import ConfigError, DataError
from benchbench.core.tasks import TaskSpec, data_path_problem
from benchbench.encode.encoding import Embedder
from benchbench.store.data import DataStore, FileEntry, read_lines


@dataclass
class TaskResult:
    """Scores of one task on one split. Correlations, accuracies, AP/MAP/nDCG/AUC/recall are x100;
    names ending in ``_mse`` or ``_medr`` are in their natural units."""

    main_metric: str
    scores: dict[str, float]
    subsets: dict[str, dict[str, float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    partial: bool = False  # some of the task's data was missing: the number is not comparable
    details: dict[str, Any] = field(default_factory=dict)
    # per-item scores for a paired bootstrap (benchbench.store.items); stored beside the record only with
    # --store-items, never inside it
    items: dict[str, Any] | None = None

    @property
    def main_score(self) -> float:
        return self.scores[self.main_metric]

    def to_dict(self) -> dict[str, Any]:
        """The split's entry in a result record (JSON-safe; per-item scores are stored apart)."""
        return {
            "main_metric": self.main_metric,
            "main_score": self.scores.get(self.main_metric),
            "scores": self.scores,
            "subsets": self.subsets,
            "notes": self.notes,
            "partial": self.partial,
            "details": self.details,
        }


class TaskAdapter:
    """Subclass per evaluation protocol (``kind``). Built from a ``TaskSpec`` and a ``DataStore``.

    ``evaluate(model, split)`` must only read vectors through ``model`` (an ``Embedder``) so the
    harness's batching and cache apply. ``train_sentences()`` returns the unlabelled in-domain
    sentences a method trains on in the unsupervised setup (never gold labels)."""

    kind: ClassVar[str] = ""
    spec_defaults: ClassVar[dict[str, Any]] = {}

    def __init__(self, spec: TaskSpec, data: DataStore):
        self.spec = spec
        self.data = data

    @property
    def name(self) -> str:
        return self.spec.name

    def param(self, key: str, default: Any = None) -> Any:
        """The spec's ``[task.params]`` value for ``key``, or ``default``."""
        return self.spec.params.get(key, default)

    def file(self, rel: str) -> Path:
        """Path of a data file declared in the spec, verified against its sha256 (or downloaded). Every
        file handed out is named in ``files_read``: the record stores each one's sha256, declared or not,
        so a stored result is reused only while the files it was computed from are unchanged."""
        entry = self.spec.files.get(rel, FileEntry(self._inside(rel)))
        path = self.data.fetch(entry)
        self.__dict__.setdefault("files_read", set()).add(entry.path)
        return path

    def _inside(self, rel: str) -> str:
        """``rel``, a path an adapter built from the spec's params (``dir``, ``input``...), if it stays
        in the data dir; the spec's own file paths were checked when it loaded, params cannot be."""
        why = data_path_problem(rel)
        if why:
            raise ConfigError(
                f"Task {self.name!r} (spec {self.spec.source or '?'}): data path {rel!r}, built from its params, is "
                f"refused: {why}. Fix the params."
            )
        return rel

    def files_for(self, split: str) -> list[str]:
        """The spec files this split needs (default: all). Override to be split-specific."""
        return list(self.spec.files)

    def missing_files(self, split: str) -> list[str]:
        """The files ``split`` needs that are not on disk (nothing is verified or downloaded)."""
        return [rel for rel in self.files_for(split) if not self.data.exists(self._inside(rel))]

    def check_split(self, split: str) -> None:
        """Raise a ``ConfigError`` naming the task's splits when it has no ``split``: a split is never
        replaced by another."""
        if split not in self.spec.splits:
            raise ConfigError(
                f"Task {self.name!r} has no {split!r} split (it has {self.spec.splits}). "
                + self.spec.params.get("split_note", "")
            )

    def evaluate(self, model: Embedder, split: str) -> TaskResult:
        """Score ``model`` on ``split`` with this protocol, reading vectors only through ``model``.
        The same model and split give the same, finite, JSON-safe scores."""
        raise NotImplementedError

    def train_sentences(self) -> list[str]:
        """Unlabelled training sentences. Default: the spec's ``train`` table: ``source = "self"``
        (the adapter's own ``own_sentences()``) or ``source = "file"`` with ``path`` (one per line)."""
        src = self.spec.train.get("source", "self")
        if src == "file":
            path = self.file(self.spec.train["path"])
            sentences = [ln.strip() for ln in read_lines(path) if ln.strip()]
            if not sentences:
                raise DataError(f"{path}: the training corpus of task {self.name!r} has no non-empty lines.")
            return sentences
        if src == "self":
            return self.own_sentences()
        raise ConfigError(f"Task {self.name!r} (spec {self.spec.source}): unknown train source {src!r}.")

    def own_sentences(self) -> list[str]:
        """The task's own unlabelled sentences (never its labels); the base class has none and raises
        a ``DataError``."""
        raise DataError(f"Task {self.name!r} does not define its own training sentences.")

    def train_pairs(self) -> list[tuple[str, str]] | None:
        """Unlabelled sentence pairs of the task (for transductive methods such as Trans-Encoder), or None."""
        return None
