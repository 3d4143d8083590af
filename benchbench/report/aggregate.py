"""The one aggregation behind every table: ``run``'s printed table, ``benchbench table`` and the
generated leaderboards/site all read records through here, so the same records print the same cells.

* a record counts once however many folders hold it: its identity is its key (method, config hash,
  base model, setup, seed, task, task version; ``imported_from`` for imported rows), never its path.
  Two copies whose scores disagree are an error naming both paths (:class:`RecordConflict`);
* a cell is the mean over DISTINCT seeds, with ``± sample std`` (ddof=1) only when it has >= 2 seeds;
* a suite average is over a COMPLETE row only (every task present, none partial); the tasks that
  keep rows from an average are named once per table, in a footnote;
* flags, pure functions of one record (:func:`did_not_learn`, :func:`selects_on_labels`,
  :func:`distilled_from`), mark cells whose encoder did not learn (``!``), rows that select checkpoints on
  task labels (``[S]``) and rows distilled from teacher methods trained first (``[D]``, RankCSE).

Public API: :func:`load_records`, :func:`dedupe`, :func:`identity`, :class:`RecordConflict`,
:func:`build_rows`, :class:`Row`, :func:`table_rows` (-> :class:`TableRow` with :class:`Cell`\\ s),
:func:`table_notes`, :func:`cell_text`, :func:`seeds_text`, :func:`did_not_learn`,
:func:`selects_on_labels`, :func:`distilled_from`, :func:`method_defaults`, :func:`row_label`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from statistics import mean
from typing import Any

from benchbench.core.errors import DataError
from benchbench.report.stats import dagger, mean_std

log = logging.getLogger(__name__)

SPLIT = "test"

# Two copies of one key may differ by float noise: the same weights re-evaluated by a later harness
# revision moved plm-mean sts17-ar-ar by 0.009 (x100) in the committed records (git 41eafce vs cdc152f,
# same encoder fingerprint and data). Seed-to-seed spread of trained methods is >= 0.1, so copies further
# apart than 0.05 are not the same result: they are a conflict, never silently averaged or picked.
CONFLICT_TOLERANCE = 0.05

# "Did not move" band for dev/monitor scores (x100 points). The smallest seed std among the committed
# multi-seed trained cells is ~0.1 (QT prototype tasks; the median is ~0.6): a curve that never leaves a
# band narrower than that is indistinguishable from an untrained encoder. Kept small on purpose so that a
# slow learner is not flagged; a no-op trainer's curve has spread 0.
DEV_NOISE = 0.1

# Chance level of the dev metrics Trans-Encoder selects on (its dev scores are x100): Spearman of an
# encoder that ranks pairs at random is 0; AUC (pair-classification dev tasks, e.g. qnli) is 50.
CHANCE_SPEARMAN = 0.0
CHANCE_AUC = 50.0

DAGGER_RIVALS = ("ct", "simcse")  # TSDAE paper, Table 2: dagger = better than both CT and SimCSE in every seed
NO_LEARN_MARK = "!"
NOT_ZERO_SHOT_MARK = "‡"  # the base model (or the run's own training) saw this task's data or its source
SELECTS_MARK = " [S]"
TRANSDUCTIVE_MARK = " [T]"
DISTILLED_MARK = " [D]"  # distilled from teacher methods trained here (RankCSE): the teachers' training is in it


class RecordConflict(DataError):
    """Two copies of one record (same identity, different folders) disagree on a score."""

    def __init__(self, first: str, second: str, why: str):
        super().__init__(
            f"Result records {first} and {second} hold the same key but disagree: {why}. Keep the right one "
            f"(git restore, or delete the stale copy) or rerun the key with `benchbench run --force`."
        )
        self.paths = (first, second)


# ----------------------------------------------------------------------------------------------- records
def num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def field(record: Mapping[str, Any], dotted: str) -> Any:
    cur: Any = record
    for part in dotted.split("."):
        cur = cur.get(part) if isinstance(cur, Mapping) else None
    return cur


def main_score(record: Mapping[str, Any], split: str = SPLIT) -> tuple[float | None, bool]:
    res = (record.get("splits") or {}).get(split) or {}
    return num(res.get("main_score")), bool(res.get("partial"))


def record_path(record: Mapping[str, Any]) -> str:
    return str(record.get("_path") or "<record without a path>")


def identity(record: Mapping[str, Any]) -> tuple[Any, ...]:
    """What makes two records the same result: the key fields (``benchbench.store.results.key_of``,
    with the schema's defaults for fields an old or hand-built record lacks), plus ``imported_from``
    (imported rows have their own layout), and the kind of device (a CUDA run trains and encodes in bf16,
    a CPU run in fp32: two measurements of one key, never one record's copies, so they must not be
    held to one score). Not the path: a copy in another folder is the same record."""
    return (
        str(record.get("method")),
        str(record.get("config_hash") or ""),
        str(record.get("model") or "-"),
        str(record.get("setup") or "unsupervised"),
        record.get("seed"),
        str(record.get("task")),
        int(record.get("task_version") or 1),
        str(record.get("imported_from") or ""),
        "cuda" if str(record.get("device") or "").startswith("cuda") else "cpu",
    )


def _n_items(record: Mapping[str, Any]) -> int:
    """How many splits of ``record`` store per-item scores."""
    return sum(1 for v in (record.get("items") or {}).values() if v)


def dedupe(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each identity once: the first copy in the given order (``load_records`` sorts by path), unless a
    later copy stores per-item scores for more splits (a study re-run that attached items to a record
    also kept elsewhere: the tie tests need them). :class:`RecordConflict` when two copies' main scores
    on a split both hold differ by more than :data:`CONFLICT_TOLERANCE`."""
    first: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in records:
        k = identity(r)
        if k not in first:
            first[k] = r
            continue
        kept = first[k]
        for split in sorted(set(kept.get("splits") or {}) & set(r.get("splits") or {})):
            a, b = main_score(kept, split)[0], main_score(r, split)[0]
            if a is not None and b is not None and abs(a - b) > CONFLICT_TOLERANCE:
                raise RecordConflict(
                    record_path(kept),
                    record_path(r),
                    f"{split} main score {a:.4f} vs {b:.4f} (tolerance {CONFLICT_TOLERANCE})",
                )
        if _n_items(r) > _n_items(kept):
            first[k] = r  # same scores, more stored: keeps its place in the order
    return list(first.values())


def load_records(
    root: str | Path, damaged: list[Any] | None = None, *, store_layout: bool = False
) -> list[dict[str, Any]]:
    """Every result record under ``root`` (recursively, sorted by path), each identity once
    (:func:`dedupe`; the record's path relative to ``root`` is in ``_path``). A file is a record when
    it is a JSON object with a readable ``schema_version``, ``method``, ``task`` and ``splits`` (other
    JSON, e.g. bench logs, is ignored). A damaged record (``benchbench.store.results.read_record``; with
    ``store_layout`` also one at a path its key does not name) is left out and never silently: added
    to ``damaged`` when given, else named in a warning. Without ``store_layout`` (a leaderboards folder)
    the generated ``site/`` and ``latex/`` folders are skipped."""
    from benchbench.store.results import NOT_RECORDS, DamagedRecord, misplaced, read_record

    root = Path(root)
    out = []
    tasks: dict[str, str | None] = {}  # task name -> why no table can show it (None: it can)
    for p in sorted(root.rglob("*.json")) if root.is_dir() else []:
        rel = p.relative_to(root)
        if (not store_layout and rel.parts[0] in ("site", "latex")) or set(NOT_RECORDS) & set(rel.parts[:-1]):
            continue
        try:
            r = read_record(p)
            why = misplaced(r, rel) if store_layout and r is not None else None
            if not why and isinstance(r, dict) and "task" in r:
                name = str(r["task"])
                why = tasks[name] if name in tasks else tasks.setdefault(name, unresolvable_task(name))
            if why:
                raise DamagedRecord(p, why)
        except DamagedRecord as e:
            if damaged is None:
                log.warning("%s. It is left out of this table.", e)
            else:
                damaged.append(e)
            continue
        if r is None or not {"method", "task", "splits"} <= r.keys():
            continue
        r["_path"] = (p if store_layout else rel).as_posix()
        out.append(r)
    return dedupe(out)


def unresolvable_task(name: str) -> str | None:
    """Why no table can show a record of task ``name`` (None: it can). A task this install does not
    have is shown (an imported record: never flagged); a prefixed name whose adapter refuses it
    (``mteb:<name>`` the installed mteb does not know) raised deep inside a table, and one such record
    failed every table, leaderboard and site page: it is left out and named instead."""
    if ":" not in name:  # only a prefixed name runs adapter code to resolve; a plain one is listed or unknown
        return None
    from benchbench.core.errors import BenchbenchError, UnknownNameError
    from benchbench.core.registry import get_registry

    try:
        get_registry().task(name)
    except UnknownNameError:
        return None
    except BenchbenchError as e:
        return f"its task cannot be shown ({str(e).rstrip('.')}); remove the file or install what resolves the task"
    return None


# ----------------------------------------------------------------------------------------------- flags
def _dev_chance(train: Mapping[str, Any], record: Mapping[str, Any]) -> tuple[str, float]:
    """(dev task, chance level of its metric) of a Trans-Encoder record's checkpoint selection."""
    dev = str(train.get("dev_selection") or "").split(":", 1)[0].split(" ", 1)[0] or str(record.get("task"))
    sts = dev.startswith(("sts", "sick")) or (dev == record.get("task") and record.get("task_kind") == "sts")
    return dev, CHANCE_SPEARMAN if sts else CHANCE_AUC


def did_not_learn(record: Mapping[str, Any]) -> str | None:
    """Why this record's trained encoder did not learn, or None (also None for a training-free
    method, and when the record stores nothing to tell). From what the record stores:

    * Trans-Encoder (``train.selection``: the dev score of every checkpoint, x100): the encoder that
      scores this record (``scored_by``) selected at or below chance on its dev task (a cross-encoder
      that learned nothing from the bi-encoder's labels), or its dev scores never moved more than
      :data:`DEV_NOISE` over all checkpoints (collapsed or frozen);
    * any method with a training monitor (``train.monitor``: ``--eval-every``, or SimCSE's STS-B dev
      selection): every monitored score stayed within :data:`DEV_NOISE` of its first point. The loop
      does not score step 0, so the first point stands in for the start.
    """
    train = record.get("train")
    if not isinstance(train, Mapping):
        return None
    sel = train.get("selection")
    if isinstance(sel, Mapping) and sel:
        start = train.get("start") if isinstance(train.get("start"), Mapping) else {}
        name = start.get("model") or (start.get("models") or [None])[0]
        hist = sel.get(name) if name in sel else next(iter(sel.values()))
        kind = "cross" if record.get("scored_by") == "cross" else "bi"
        if isinstance(hist, list):
            dev_task, chance = _dev_chance(train, record)
            chosen = [num(h.get("dev")) for h in hist if isinstance(h, Mapping) and h.get("selected") == kind]
            if kind == "cross" and chosen and chosen[0] is not None and chosen[0] <= chance:
                return f"cross-encoder at or below chance on {dev_task} dev (best {chosen[0]:.2f}, chance {chance:g})"
            devs = [num(h.get("dev")) for h in hist if isinstance(h, Mapping) and h.get("kind") == kind]
            devs = [d for d in devs if d is not None]
            if len(devs) >= 2 and max(devs) - min(devs) <= DEV_NOISE:
                return f"{kind} dev score never moved over {len(devs)} checkpoints (spread {max(devs) - min(devs):.2f})"
    series: dict[str, list[tuple[float, float]]] = {}
    for item in train.get("monitor") or []:
        if isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[1], Mapping):
            for k, v in item[1].items():
                if num(v) is not None and num(item[0]) is not None:
                    series.setdefault(str(k), []).append((float(item[0]), float(v)))
    series = {k: v for k, v in series.items() if len(v) >= 2}
    if series and all(max(y for _, y in s) - min(y for _, y in s) <= DEV_NOISE for s in series.values()):
        k, s = sorted(series.items())[0]
        return (
            f"{k} did not move beyond its first point (steps {s[0][0]:g}-{s[-1][0]:g}: "
            f"spread {max(y for _, y in s) - min(y for _, y in s):.2f}, noise band {DEV_NOISE})"
        )
    return None


def selects_on_labels(record: Mapping[str, Any]) -> str | None:
    """Which task labels this record's method read to pick its checkpoint, or None. Trans-Encoder
    records say it in ``train.dev_selection`` (always on unless ``select=false``; a record without
    accounting is judged by its config); SimCSE by ``select_on_stsb_dev`` / ``train.stsb_dev_selected_step``;
    any method (e.g. BSL's reference recipe) by a ``train.checkpoint_selection`` or ``train.selected_on``."""
    train = record.get("train") if isinstance(record.get("train"), Mapping) else {}
    cfg = record.get("config") if isinstance(record.get("config"), Mapping) else {}
    ds = train.get("dev_selection")
    if isinstance(ds, str):
        return None if ds.startswith("none") else f"checkpoint selected on {ds.split(' ', 1)[0]} labels"
    if train.get("stsb_dev_selected_step") is not None or cfg.get("select_on_stsb_dev") is True:
        return "checkpoint selected on stsb:dev labels (select_on_stsb_dev)"
    for k in ("checkpoint_selection", "selected_on"):
        v = train.get(k)
        if v and not (isinstance(v, str) and v.startswith("none")):
            return f"checkpoint selected on {v} labels"
    if str(record.get("method", "")).startswith("trans-encoder") and cfg.get("select", True) is not False:
        return "checkpoint selected on dev labels (Trans-Encoder's default)"
    return None


def distilled_from(record: Mapping[str, Any]) -> str | None:
    """The teacher methods this record's encoder was distilled from (``train.teachers``, each a
    ``TrainedMethod.describe()``: RankCSE), "simcse [a1b2c3d4e5f6], diffcse [...]"; None without any."""
    train = record.get("train") if isinstance(record.get("train"), Mapping) else {}
    teachers = [t for t in train.get("teachers") or [] if isinstance(t, Mapping)]
    if not teachers:
        return None
    return ", ".join(f"{t.get('method', '?')} [{t.get('config_hash', '?')}]" for t in teachers)


# ----------------------------------------------------------------------------------------------- rows
def contamination(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The record's ``contamination`` (``benchbench.encode.cards``); a record written before those
    fields existed is judged the same way from its base model's card and its task's sources (its own
    training corpus is then not counted, so an old record is never flagged for more than its model).
    A record whose status was unknown when written (``zero_shot: null``: its base model had no card
    then) is judged from its base model's card when one exists now."""
    if "zero_shot" in record:
        stored = list(record.get("contamination") or [])
        if stored or record.get("zero_shot") is not None:
            return stored
    from benchbench.core.errors import UnknownNameError
    from benchbench.core.registry import get_registry
    from benchbench.encode.cards import zero_shot

    try:
        spec = get_registry().task(str(record.get("task")))
    except UnknownNameError:  # a task this install does not have (an imported record): unknown, never flagged
        return []
    sources = getattr(spec, "sources", None) or []
    return list(zero_shot(str(record.get("model")), str(record.get("task")), sources).get("contamination") or [])


def method_defaults(method: str) -> dict[str, Any] | None:
    """The method's default config (its ``Config`` dataclass) as JSON values, model-relative defaults at
    the paper's BERT-base values (WhitenedCSE's 128 groups, InfoCSE's 6 frozen layers: a label names an
    option where it differs from the paper's), or None when the method's plugin is not installed (the row
    is then labelled with its config hash)."""
    try:
        from benchbench.core.methods import resolve_model_defaults
        from benchbench.core.registry import get_registry
        from benchbench.encode.sizes import BERT_BASE

        m = get_registry().methods.get(method)
        if m is None:
            return None
        config = resolve_model_defaults(m, m.Config(), BERT_BASE)
        return json.loads(json.dumps(dataclasses.asdict(config), default=str))
    except Exception:  # a broken plugin must not break a table: fall back to the hash label
        return None


def _fmt_val(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return json.dumps(v) if not isinstance(v, str) else v


def row_label(record: Mapping[str, Any], defaults: Mapping[str, Any] | None) -> str:
    """``tsdae steps=2000``: the method plus the config fields that differ from its defaults."""
    label = str(record["method"])
    cfg = record.get("config") or {}
    if defaults is None:
        if cfg:
            label += f" [{record.get('config_hash', '')}]"
    else:
        diffs = [f"{k}={_fmt_val(v)}" for k, v in sorted(cfg.items()) if k in defaults and defaults[k] != v]
        diffs += [f"{k}={_fmt_val(v)}" for k, v in sorted(cfg.items()) if k not in defaults]
        if diffs:
            label += " " + " ".join(diffs)
    if record.get("corpus_path") or record.get("corpus"):
        c = record.get("corpus_path") or record.get("corpus")
        if isinstance(c, str):
            label += f" corpus={Path(c).name}"
    setup = str(record.get("setup") or "unsupervised")
    if setup != "unsupervised":  # supervised, domain adaptation, corpus/labelled sizes: other rows
        label += f" [{setup}]"
    if record.get("scored_by") == "cross":
        label += " (cross-encoder)"
    if record.get("imported_from"):
        label += f" (imported: {record['imported_from']})"
    return label


@dataclasses.dataclass
class Row:
    """One table row: one method configuration on one base model (all its seeds)."""

    key: tuple[str, ...]
    label: str
    method: str
    model: str
    records: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def transductive(self) -> bool:
        return any(r.get("transductive") for r in self.records)

    @property
    def selects(self) -> str | None:
        """Why this row's checkpoints were selected on task labels (its first record that says so)."""
        return next((s for r in self.records if (s := selects_on_labels(r))), None)

    @property
    def teachers(self) -> str | None:
        """The teachers this row was distilled from (``train.teachers`` of its first record that names
        some): "simcse [hash], diffcse [hash]"."""
        return next((t for r in self.records if (t := distilled_from(r))), None)

    @property
    def display_label(self) -> str:
        return (
            self.label
            + (TRANSDUCTIVE_MARK if self.transductive else "")
            + (SELECTS_MARK if self.selects else "")
            + (DISTILLED_MARK if self.teachers else "")
        )

    def task_records(self, task: str, split: str = SPLIT) -> list[dict[str, Any]]:
        """This task's scored records, one per seed: the latest task version only (an older version
        is another task definition, never averaged in)."""
        recs = [r for r in self.records if r["task"] == task and main_score(r, split)[0] is not None]
        if not recs:
            return []
        latest = max(int(r.get("task_version") or 1) for r in recs)
        return sorted(
            (r for r in recs if int(r.get("task_version") or 1) == latest), key=lambda r: _seed_key(r.get("seed"))
        )

    def seed_scores(self, task: str, split: str = SPLIT) -> dict[Any, float]:
        return {r.get("seed"): main_score(r, split)[0] for r in self.task_records(task, split)}  # type: ignore[misc]

    def scores(self, task: str, split: str = SPLIT) -> list[float]:
        return list(self.seed_scores(task, split).values())

    def partial(self, task: str, split: str = SPLIT) -> bool:
        return any(main_score(r, split)[1] for r in self.task_records(task, split))

    def mark(self, task: str, split: str = SPLIT) -> str:
        """Marks a record carries for this task (``splits.<split>.marks``), kept verbatim."""
        marks = []
        for r in self.task_records(task, split):
            m = (r["splits"].get(split) or {}).get("marks") or r.get("marks") or []
            marks.extend(str(x) for x in (m if isinstance(m, list) else [m]))
        return "".join(dict.fromkeys(marks))

    def no_learn(self, task: str, split: str = SPLIT) -> str | None:
        return next((w for r in self.task_records(task, split) if (w := did_not_learn(r))), None)

    def contamination(self, task: str, split: str = SPLIT) -> list[dict[str, Any]]:
        """What made this cell not zero-shot (empty: zero-shot or unknown)."""
        for r in self.task_records(task, split):
            found = contamination(r)
            if found:
                return found
        return []

    def cost(self, dotted: str) -> float | None:
        vals = [num(field(r, dotted)) for r in self.records if not field(r, "train.reused_from_task")]
        vals = [v for v in vals if v is not None]
        return mean(vals) if vals else None

    def seeds(self) -> list[Any]:
        return sorted({r.get("seed") for r in self.records}, key=_seed_key)


def build_rows(
    records: Iterable[dict[str, Any]], defaults: Callable[[str], Mapping[str, Any] | None] | None = None
) -> list[Row]:
    """Records (deduplicated here too, :func:`dedupe`) grouped into rows, sorted by label."""
    defaults = defaults or method_defaults
    rows: dict[tuple[str, ...], Row] = {}
    known: dict[str, Mapping[str, Any] | None] = {}
    for r in dedupe(records):
        m = str(r["method"])
        if m not in known:
            known[m] = defaults(m)
        key = (
            m,
            str(r.get("model") or "-"),
            str(r.get("setup") or "unsupervised"),
            str(r.get("config_hash") or ""),
            str(r.get("scored_by") or "bi"),
            str(r.get("corpus_path") or ""),
            str(r.get("imported_from") or ""),
        )
        if key not in rows:
            rows[key] = Row(key, row_label(r, known[m]), m, key[1])
        rows[key].records.append(r)
    # two configurations that differ only in fields the defaults do not name would print the same
    # label: the config hash tells them apart
    same: dict[tuple[str, str], list[Row]] = {}
    for row in rows.values():
        same.setdefault((row.label, row.model), []).append(row)
    for group in same.values():
        if len({row.key[3] for row in group}) > 1:
            for row in group:
                row.label += f" [{row.key[3]}]"
    return sorted(rows.values(), key=lambda row: (row.label, row.model, row.key))


# ----------------------------------------------------------------------------------------------- cells
def _seed_key(seed: Any) -> tuple[bool, float, str]:
    return (not isinstance(seed, (int, float)), seed if isinstance(seed, (int, float)) else 0.0, str(seed))


def seeds_text(seeds: Iterable[Any]) -> str:
    """``seeds [1, 2, 3]`` for >= 2 distinct seeds, ``seed 1`` for one."""
    s = sorted(set(seeds), key=_seed_key)
    return f"seeds {s}" if len(s) > 1 else f"seed {s[0] if s else '-'}"


@dataclasses.dataclass
class Cell:
    """One row x task: the score of each distinct seed and what marks it carries."""

    scores: dict[Any, float]
    partial: bool = False
    marks: str = ""
    no_learn: str | None = None
    contamination: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # what a study's statistics read (``report.study_view.collect``): seed -> record, seed -> verified
    # per-item scores, and why an items file could not be used (named on the page, never skipped in silence)
    records: dict[Any, dict[str, Any]] = dataclasses.field(default_factory=dict)
    items: dict[Any, dict[str, Any]] = dataclasses.field(default_factory=dict)
    damaged: list[str] = dataclasses.field(default_factory=list)
    # seed -> why a stored record of this cell was left out: it is of an older definition of the task or
    # the row (a study's cell is of the task and row as defined now; ``report.study_view.collect``)
    superseded: dict[Any, str] = dataclasses.field(default_factory=dict)

    @property
    def mean(self) -> float:
        return mean_std(list(self.scores.values()))[0]

    @property
    def std(self) -> float | None:
        """Sample std (ddof=1) over seeds; None for one seed (nothing to print)."""
        return mean_std(list(self.scores.values()))[1] if len(self.scores) > 1 else None


def cell_text(cell: Cell | None) -> str:
    """``71.00 ± 1.41†*!``: mean, ``± sample std`` only for >= 2 seeds, then the stored/dagger marks,
    ``*`` partial, ``!`` did not learn."""
    if cell is None:
        return ""
    sd = cell.std
    return (
        f"{cell.mean:.2f}"
        + (f" ± {sd:.2f}" if sd is not None else "")
        + cell.marks
        + ("*" if cell.partial else "")
        + (NO_LEARN_MARK if cell.no_learn else "")
        + (NOT_ZERO_SHOT_MARK if cell.contamination else "")
    )


@dataclasses.dataclass
class TableRow:
    row: Row
    cells: dict[str, Cell | None]
    averages: dict[str, float | None]  # suite -> average over the complete row, None otherwise


def _dagger(row: Row, task: str, rows: list[Row], split: str) -> str:
    """``†`` when ``stats.dagger`` says the row beats every configuration of each rival method (same
    base model) in every shared seed (at least two seeds)."""
    if row.method in DAGGER_RIVALS:
        return ""
    rivals = {}
    for m in DAGGER_RIVALS:
        cands = [r for r in rows if r.method == m and r.model == row.model and r.seed_scores(task, split)]
        if not cands:
            return ""
        for c in cands:
            rivals[c.label] = c.seed_scores(task, split)
    return "†" if dagger(row.seed_scores(task, split), rivals) else ""


def suite_average(cells: Mapping[str, Cell | None], members: list[str]) -> float | None:
    """The mean of the members' cell means when every member has a complete (not partial) cell;
    None otherwise (an average over a different task set is not comparable)."""
    got = [cells.get(t) for t in members]
    if not members or any(c is None or c.partial for c in got):
        return None
    return mean(c.mean for c in got if c is not None)


def table_rows(
    rows: list[Row], tasks: list[str], suites: Mapping[str, list[str]], split: str = SPLIT
) -> list[TableRow]:
    """The rows with a score on one of ``tasks``: their cells and each suite's average."""
    out = []
    for row in rows:
        if not any(row.seed_scores(t, split) for t in tasks):
            continue
        cells: dict[str, Cell | None] = {}
        for t in tasks:
            sc = row.seed_scores(t, split)
            cells[t] = (
                Cell(
                    sc,
                    row.partial(t, split),
                    row.mark(t, split) + _dagger(row, t, rows, split),
                    row.no_learn(t, split),
                    row.contamination(t, split),
                )
                if sc
                else None
            )
        out.append(TableRow(row, cells, {s: suite_average(cells, m) for s, m in suites.items()}))
    return out


def _distilled_notes(trs: list[TableRow]) -> list[str]:
    """The ``[D]`` lines: each teacher-distilled row and the teachers it names."""
    dist = [(tr.row, tr.row.teachers) for tr in trs if tr.row.teachers]
    if not dist:
        return []
    head = "[D] teacher-distilled: trained on the rankings of teacher methods benchbench trained first:"
    return [head, *(f"[D] {row.label} / {row.model}: {who}" for row, who in dist)]


def table_notes(trs: list[TableRow], suites: Mapping[str, list[str]], split: str = SPLIT) -> list[str]:
    """The footnotes every table prints under the same cells (in this order, each once)."""
    notes: list[str] = []
    for s, members in suites.items():
        lacking: dict[str, int] = {}
        partial: dict[str, int] = {}
        short = 0
        for tr in trs:
            if tr.averages.get(s) is not None:
                continue
            short += 1
            for t in members:
                c = tr.cells.get(t)
                if c is None:
                    lacking[t] = lacking.get(t, 0) + 1
                elif c.partial:
                    partial[t] = partial.get(t, 0) + 1
        if short:
            rows_of = lambda n: f"{n} row{'s' if n > 1 else ''}"  # noqa: E731
            what = []
            if lacking:
                what.append("missing " + ", ".join(f"{t} (in {rows_of(n)})" for t, n in lacking.items()))
            if partial:
                what.append("partial " + ", ".join(f"{t} (in {rows_of(n)})" for t, n in partial.items()))
            notes.append(
                f"{s} avg: only over rows with all {len(members)} tasks complete; {short} of {len(trs)} rows "
                f"have none: {'; '.join(what)}"
            )
    if any(c is not None and c.partial for tr in trs for c in tr.cells.values()):
        notes.append("* partial: fewer subsets than the task has (see the task notes)")
    if any(tr.row.transductive for tr in trs):
        notes.append(
            "[T] transductive: trained on the evaluated tasks' own unlabelled text (test included, labels "
            "never read); not comparable with inductive rows"
        )
    notes.extend(_distilled_notes(trs))
    sel = [(tr.row, tr.row.selects) for tr in trs if tr.row.selects]
    if sel:
        notes.append("[S] selects its checkpoint on task labels, which the other rows never read:")
        notes.extend(f"[S] {row.label} / {row.model}: {why}" for row, why in sel)
    nl: dict[tuple[str, str, str], list[str]] = {}  # (row, model, why) -> tasks: one line per row and reason
    for tr in trs:
        for t, c in tr.cells.items():
            if c is not None and c.no_learn:
                nl.setdefault((tr.row.label, tr.row.model, c.no_learn), []).append(t)
    if nl:
        notes.append(f"{NO_LEARN_MARK} did not learn (from the record's training accounting):")
        notes.extend(f"{NO_LEARN_MARK} {lb} / {m} on {', '.join(ts)}: {why}" for (lb, m, why), ts in nl.items())
    nz: dict[tuple[str, str], tuple[list[str], list[str]]] = {}  # (model, source) -> (datasets, tasks)
    for tr in trs:
        for t, c in tr.cells.items():
            for d in c.contamination if c is not None else []:
                ov = d.get("overlap") or d.get("source") or "?"
                for src in [ov] if isinstance(ov, str) else list(ov):
                    ds, ts = nz.setdefault((tr.row.model, f"{src} (via {d.get('via')})"), ([], []))
                    ds.append(str(d.get("dataset"))) if d.get("dataset") not in ds else None
                    ts.append(t) if t not in ts else None
    if nz:
        notes.append(
            f"{NOT_ZERO_SHOT_MARK} not zero-shot: the model was trained on the task's data or source (model cards):"
        )
        notes.extend(
            f"{NOT_ZERO_SHOT_MARK} {', '.join(ts)}: {m} saw {src}, in "
            f"{', '.join(ds[:3])}{f' (+{len(ds) - 3} more)' if len(ds) > 3 else ''}"
            for (m, src), (ds, ts) in nz.items()
        )
    if any(c is not None and c.std is not None for tr in trs for c in tr.cells.values()):
        notes.append("cells are mean ± std over distinct seeds (sample std, ddof=1); one seed: its value alone")
    if any("†" in c.marks for tr in trs for c in tr.cells.values() if c is not None):
        notes.append(
            "† better than every ct and simcse configuration on the same base model in every shared "
            "seed (TSDAE's dagger; benchbench.report.stats.dagger)"
        )
    for tr in trs:
        for t in tr.cells:
            for r in tr.row.task_records(t, split):
                notes.extend(f"{t}: {n}" for n in (r["splits"].get(split) or {}).get("notes", []))
    return list(dict.fromkeys(notes))
