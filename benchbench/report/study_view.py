"""A study's table (``benchbench study report NAME``, the leaderboard README and the site's front page):
the stored records that match its conditions, the column statistics, the provenance and the page.

Cells are ``aggregate.Cell``\\ s (the one aggregation: mean ± sample std over distinct seeds), built from
the records of the study's exact conditions (``collect``). Per column, ``stats.hierarchical_bootstrap``
resamples each method's seeds and the task's items (one item draw shared by every method: paired);
then

* **tie group (bold, rank 1)**: the column's best and every method whose difference from it is not
  significant after Holm's correction over the column's comparisons (two-sided, alpha ``TIE_P``);
* **≈ start**: equivalence with the start row within ± the study's margin (TOST on the same bootstrap,
  Holm-corrected over the column's trained cells), never just "not separated"; TOST alone decides (a
  shift inside the margin is what the margin allows, one beyond it fails TOST);
* **↑ / ↓ start**: different from the start after Holm (the page's summary counts them);
* no rank claim (no bold, no "rank 1" sentence) in a column with fewer than two ranked rows.

Provenance: each row's records name their code version (``git_sha``, ``versions``) and encoder
(``encoder_fingerprint``); a row mixing code versions, or two encoders for one (method, seed, training
corpus), is marked and named. Papers' numbers are context in their own table (base model, budget), never
in a cell or a delta. Column statistics are cached by the checksums of the records they read
(``cache``), so a rebuild whose records did not change recomputes nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchbench.core.errors import BenchbenchError, DataError
from benchbench.report import aggregate, stats
from benchbench.report.escaping import escape_html, escape_md
from benchbench.report.learning import FLAT, MOVED_DOWN, MOVED_UP, NOT_ASSESSABLE
from benchbench.report.published import PUBLISHED_NOTE, PublishedRow, published_context, published_rows
from benchbench.report.study_provenance import (
    ROW_MIXED_CODE,
    ROW_MIXED_ENCODER,
    Provenance,
    is_local,
    provenance,
    provenance_notes,
    row_cost,
)
from benchbench.run.study import (
    PUBLISHED_MIN_SEEDS,
    STUDY_ROW_RANDOM,
    STUDY_ROW_START,
    STUDY_ROW_STEP0,
    STUDY_ROW_TRAINED,
    Study,
    StudyRow,
    random_init_row,
)

TIE_P = stats.TIE_P  # the family-wise level of the tie groups and of the equivalence (≈) claims
BOOTSTRAP_SEED = 0
STATS_VERSION = 5  # bump when the column statistics change: cached columns of another version are ignored
STUDY_AVG = "study"  # the average column's name in ``aggregate``'s footnotes ("study avg: only over ...")
NO_CELL = "–"
AT_START_MARK = "≈"  # equivalent to the study's start row within the margin (TOST)
FLAG_MARK = " ⚑"  # a text-overlap flag (``overlap_flags``) on the cell
FLAT_MARK = "!"  # benchbench.report.learning: "flat", training left the cell's dev score (or loss) where it was
DOWN_MARK = "▾"  # ... "moved down": the dev curve ended below its step-0 point by more than the margin
NOT_ASSESSED = "∅"  # ... "not assessable": nothing in the records can tell, said, never silently absent
LEARNING_MARKS = {FLAT: FLAT_MARK, MOVED_DOWN: DOWN_MARK, NOT_ASSESSABLE: NOT_ASSESSED}  # moved up: no mark


# ---- collecting --------------------------------------------------------------------------------------
def collect(
    study: Study,
    records: Sequence[dict[str, Any]],
    root: str | Path,
    task_names: Sequence[str],
    model_label: str | None = None,
) -> dict[str, dict[str, aggregate.Cell]]:
    """``{task: {row: aggregate.Cell}}`` (rows: ``Study.rows``: the start, its random init, each method's
    step-0 row and trained row) from the stored records that match each row's conditions exactly (model,
    config = the row's options, setup, seeds); anything else is left out. Each cell
    keeps its records and verified per-item scores by seed; an items file that fails verification is
    named in ``cell.damaged`` (the column then says it fell back to the seeds test, and why).
    ``model_label``: the base model's label in the records (default: ``model_label_of(study.model)``)."""
    from benchbench.core.registry import get_registry
    from benchbench.encode.models import model_label_of
    from benchbench.store.results import record_items

    reg = get_registry()
    base = model_label or model_label_of(study.model)
    rows = study.rows()
    # (method, config hash, model label) -> the row whose cells such a record fills
    want = {
        (
            row.method,
            study.record_hash(row),
            model_label_of(row.model) if row.model else base,
        ): row.name
        for row in rows
    }
    out = {t: {row.name: aggregate.Cell({}) for row in rows} for t in task_names}
    current = {t: _task_version(reg, t) for t in task_names}
    drawn = {row.name for row in rows if row.kind == STUDY_ROW_RANDOM}  # their inits are drawn per seed
    for r in records:
        t, s = r.get("task"), r.get("seed")
        name = want.get((r.get("method"), r.get("config_hash"), r.get("model")))
        if name is None or t not in out or s not in study.seeds:
            continue
        if r.get("setup", "unsupervised") != "unsupervised":
            continue
        score = aggregate.main_score(r)[0]
        if score is None:
            continue
        cell = out[t][name]
        version = int(r.get("task_version") or 1)
        if current[t] is not None and version != current[t]:  # another definition of the task: not this cell
            cell.superseded[s] = f"of task version {version} (the task is at version {current[t]})"
            continue
        if name in drawn and r.get("init_seed") != s:  # before seeded_init: seed 0's init for every seed
            cell.superseded[s] = "of one seed-0 init repeated for every seed (the row now draws one init per seed)"
            continue
        cell.scores[s] = score
        cell.records[s] = r
        if (r.get("items") or {}).get("test"):
            try:
                cell.items[s] = record_items(r, _store_root(r, root), "test")
            except DataError as e:  # never silent: the column names the file and which test it used instead
                cell.damaged.append(str(e).splitlines()[0])
    return out


def _task_version(reg: Any, task: str) -> int | None:
    try:
        return int(reg.task(task).version)
    except BenchbenchError:  # no longer registered: every stored version is taken as it is
        return None


def _store_root(record: Mapping[str, Any], root: str | Path) -> Path:
    """The store a record was read from: ``root`` for a ``ResultStore`` record; for one read by
    ``aggregate.load_records`` (``_path`` relative to ``root``) the folder its key's path hangs from."""
    rel = record.get("_path")
    if not rel:
        return Path(root)
    from benchbench.store.results import key_of

    return (Path(root) / str(rel)).parents[len(key_of(dict(record)).relpath().parts) - 1]


# ---- column statistics ------------------------------------------------------------------------------
# one implementation for every table (studies, ``table``, ``significance``): benchbench.report.stats
Column, StartTest, column_stats, SCREEN = stats.Column, stats.StartTest, stats.column_stats, stats.SCREEN


def tie_column(task: str, cells: Mapping[str, aggregate.Cell], n_resamples: int = 10_000, seed: int = 0) -> Column:
    """The column's best and the methods not separable from it (Holm-corrected hierarchical bootstrap)."""
    return column_stats(task, cells, n_resamples=n_resamples, seed=seed)


def study_references(study: Study) -> tuple[dict[str, str], dict[str, str], set[str]]:
    """(trained row -> the row it is read against, context row -> its reference, the ranked rows): a
    trained method against its own step-0 row when the study has one, else the start; the step-0 and
    random-init rows against the start, in their own Holm family and outside the tie groups."""
    refs, context, ranked = {}, {}, set()
    for row in study.rows():
        if row.context:
            context[row.name] = row.reference
        else:
            ranked.add(row.name)
            if row.reference:
                refs[row.name] = row.reference
    return refs, context, ranked


def _cache_key(task: str, cells: Mapping[str, aggregate.Cell], study: Study, seed: int) -> str:
    """Exactly what a column's statistics depend on, each field changing the key on its own: every
    cell's scores by seed, the identity of the per-item scores used (the record's ``items_sha256``, which
    ``record_items`` verified; their content without one), the damaged files named, the references,
    context and ranked rows, the margin, the resamples, the bootstrap seed and the statistics' version.
    Nothing else of a record (its checksum, timings, commit) enters: a re-stamped record with the same
    scores and items reuses its column."""
    parts = []
    for m, c in sorted(cells.items()):
        for s, score in sorted(c.scores.items(), key=lambda kv: str(kv[0])):
            items = None
            if s in c.items:
                items = (c.records.get(s) or {}).get("items_sha256") or _items_digest(c.items[s])
            parts.append([m, s, score, items])
        parts.append([m, "damaged", sorted(c.damaged)])
    refs, context, ranked = study_references(study)
    blob = json.dumps(
        [STATS_VERSION, task, refs, context, sorted(ranked), study.margin, study.resamples, seed, parts], default=str
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _items_digest(items: Any) -> str:
    """A content hash of per-item scores held in memory without a record's ``items_sha256``."""
    import numpy as np

    def plain(x: Any) -> Any:
        return np.asarray(x).tolist() if isinstance(x, np.ndarray | np.generic) else str(x)

    return hashlib.sha256(json.dumps(items, default=plain, sort_keys=True).encode("utf-8")).hexdigest()


def _from_cache(doc: Mapping[str, Any]) -> Column:
    return Column(
        **{k: v for k, v in doc.items() if k not in ("tied", "start")},
        tied=set(doc["tied"]),
        start={m: StartTest(**t) for m, t in doc["start"].items()},
    )


def cached_column(
    task: str, cells: Mapping[str, aggregate.Cell], study: Study, cache: str | Path | None, seed: int = BOOTSTRAP_SEED
) -> Column:
    """:func:`column_stats` with the study's settings, read from ``cache`` (a folder of JSON files named by
    :func:`_cache_key`) when the same records were tested before; written there otherwise. A cache
    entry that does not read is recomputed (it is only a cache). JSON only: nothing is unpickled."""
    path = Path(cache) / f"{_cache_key(task, cells, study, seed)}.json" if cache else None
    if path is not None and path.is_file():
        try:
            return _from_cache(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, KeyError):
            pass
    refs, context, ranked = study_references(study)
    col = column_stats(task, cells, refs, study.margin, study.resamples, seed, context, ranked)
    if path is not None:
        from benchbench.store.files import atomic_write_json

        doc = asdict(col)
        doc["tied"] = sorted(col.tied)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(path, doc)
        except OSError:
            pass  # a read-only cache costs time, never a result
    return col


def default_cache() -> Path:
    from benchbench.core.paths import default_data_cache

    return default_data_cache().parent / "study-stats"


# ---- the view --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ShownCell:
    text: str  # aggregate.cell_text (mean ± sample std, then the marks) and "(n)"; NO_CELL when empty
    tied: bool  # in the column's tie group (rank 1)
    sort: float | None
    at_start: bool = False  # ≈: equivalent to the start row within the margin (AT_START_MARK in ``text``)
    p: float | None = None  # Holm-adjusted p against the column's best (None: the best, or no cell)
    start: str = ""  # the verdict against the start: ≈, ↑, ↓, ? (inconclusive) or "" (the start, no cell)
    flags: tuple[str, ...] = ()  # text-overlap flags (``overlap_flags``), FLAG_MARK in ``text``
    learning: str = ""  # moved up / moved down / flat / not assessable ("" for an untrained row)
    learning_reason: str = ""
    reference: str = ""  # the row the cell was tested against
    records: tuple[tuple[Any, str], ...] = ()  # (seed, record path relative to the results folder)


@dataclass(frozen=True)
class ShownRow:
    method: str
    label: str  # the method, with aggregate's row marks ([T], [S]) and the provenance marks ([≠code], [≠enc])
    cells: tuple[ShownCell, ...]
    avg: float | None  # aggregate.suite_average: only a row with every task (none partial)
    cost: str = ""  # what the row's records cost: time and energy (:func:`row_cost`)
    setting: str = ""  # pooling or template, head, lr and budget (:func:`row_setting`)


@dataclass
class StudyView:
    """Everything one study's table shows, computed once; :func:`view_markdown` and the site render it."""

    study: Study
    model_label: str
    tasks: list[str]
    columns: dict[str, Column]
    rows: list[ShownRow]
    notes: list[str]
    published: list[PublishedRow]
    stored: int  # (method, task, seed) cells with a record
    missing: list[str]  # per method: what is not stored
    provenance: Provenance
    summary: str = ""
    results: str = ""  # the folder the records were read from (the resume command's --output)
    learning: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # learning_verdicts
    # {column: {trained row: its records}} for one column per distinct set of training corpora (the
    # STS columns of a row share one trained encoder, so one of them stands for all): the curves to draw
    curves: dict[str, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)
    # {row: {task: the seeds stored}}: what an extended study's collapsed view (:func:`completion`) counts
    present: dict[str, dict[str, frozenset[Any]]] = field(default_factory=dict)
    # {task: {row: {seed: score}}}: the cells' seed scores (the core figure's intervals are paired by seed)
    seed_scores: dict[str, dict[str, dict[Any, float]]] = field(default_factory=dict)
    wall: WallSpan | None = None  # how long the stored cells took, read from their records (:func:`wall_span`)

    @property
    def extended(self) -> bool:
        """GPU-sized (``tier = "extended"``): shown collapsed below the core studies, its table on its own page."""
        return self.study.tier != "core"

    @property
    def total(self) -> int:
        return len(self.study.rows()) * len(self.tasks) * len(self.study.seeds)

    @property
    def command(self) -> str:
        return self.study.command(self.results or None)

    @property
    def status(self) -> str:
        rebuild = "benchbench leaderboard --results leaderboards --out leaderboards"
        pre = (
            f"Preliminary: {len(self.study.seeds)} seeds (a published study needs >= {PUBLISHED_MIN_SEEDS}). "
            if self.study.preliminary
            else ""
        )
        if self.study.exploratory:
            pre = f"Exploratory: {self.study.exploratory} " + pre
        if self.stored == 0:
            return (
                f"{pre}Not run yet: no stored record matches this study's conditions. Run it with "
                f"`{self.command}`, then rebuild with `{rebuild}`."
            )
        if self.stored < self.total:
            return (
                f"{pre}Partly run: {self.stored} of {self.total} (method, task, seed) cells stored; the missing "
                f"ones are listed under the table. Resume with `{self.command}` (stored cells are skipped)."
            )
        took = f" {self.wall.text()}" if self.wall else ""
        return (
            f"{pre}Complete: all {self.total} (method, task, seed) cells stored.{took} Re-run it with `{self.command}`."
        )

    @property
    def conditions(self) -> str:
        st = self.study
        model = f"local folder {Path(st.model).name}" if is_local(st.model) else st.model
        lr = "each method's default" if st.lr == "method" else f"{st.lr:g}"
        per = "; ".join(
            f"{m}: " + ", ".join(f"{k}={v}" for k, v in sorted(o.items())) for m, o in sorted(st.per_method.items())
        )
        return (
            f"Conditions: base model {model} (records: {self.model_label}); budget {st.steps} steps, batch size "
            f"{st.batch_size}, learning rate {lr}, checkpoint selection {st.selection!r} (the encoder at the end "
            f"of the budget); seeds {list(st.seeds)}; study version {st.version} ({st.path}, sha256 "
            f"{st.sha256[:12] or '-'})" + (f"; per-method options: {per}" if per else "") + "." + self.obtain
        )

    @property
    def obtain(self) -> str:
        """How a fresh clone gets the local folders the study names (its ``[obtain]`` table), or ""."""
        built = "; ".join(f"{Path(p).name} by `{cmd}`" for p, cmd in sorted(self.study.obtain.items()))
        return f" Local weights a fresh clone builds: {built}." if built else ""


@dataclass(frozen=True)
class Completion:
    """An extended study's state without its table: a GPU-sized design is mostly empty here, and a wall of
    dashes says less than what is stored, what is missing (by method and by task) and how to resume."""

    stored: int  # (row, task, seed) cells with a record
    planned: int
    seeds: tuple[Any, ...]
    seeds_complete: tuple[Any, ...]  # the seeds whose every (row, task) cell is stored
    code_versions: dict[str, int]  # code version -> records (``Provenance.commits``)
    by_task: tuple[tuple[str, int, int], ...]  # (task, cells missing, cells planned)
    empty_methods: tuple[str, ...]  # methods none of whose rows has a stored cell
    partial_methods: tuple[tuple[str, int, int, tuple[str, ...]], ...]  # (method, missing, planned, tasks lacking)


def completion(v: StudyView) -> Completion:
    """What :func:`view` stored for each (row, task), counted by seed, by method (a method's rows: its
    step-0 row, its trained row, the random init) and by task."""
    rows = v.study.rows()
    seeds = tuple(v.study.seeds)
    have = {r.name: v.present.get(r.name, {}) for r in rows}
    got = {(r.name, t): set(have[r.name].get(t, ())) & set(seeds) for r in rows for t in v.tasks}
    complete = tuple(s for s in seeds if all(s in g for g in got.values()))
    by_task = tuple((t, sum(len(seeds) - len(got[(r.name, t)]) for r in rows), len(rows) * len(seeds)) for t in v.tasks)
    methods: dict[str, list[StudyRow]] = {}
    for r in rows:
        methods.setdefault(r.method, []).append(r)
    empty, partial = [], []
    for m, rs in methods.items():
        planned = len(rs) * len(v.tasks) * len(seeds)
        missing = planned - sum(len(got[(r.name, t)]) for r in rs for t in v.tasks)
        if missing == planned:
            empty.append(m)
        elif missing:
            lacking = tuple(t for t in v.tasks if any(len(got[(r.name, t)]) < len(seeds) for r in rs))
            partial.append((m, missing, planned, lacking))
    return Completion(
        sum(len(g) for g in got.values()),
        len(rows) * len(v.tasks) * len(seeds),
        seeds,
        complete,
        dict(v.provenance.commits),
        by_task,
        tuple(empty),
        tuple(partial),
    )


def completion_lines(v: StudyView) -> list[str]:
    """The collapsed view's lines (plain text; each format escapes them): the exploratory note, the
    counts, the code versions, the missing cells by method and by task, the resume command."""
    c = completion(v)
    st = v.study
    pct = f" ({100 * c.stored / c.planned:.0f}%)" if c.planned else ""
    out = [f"Exploratory: {st.exploratory}"] if st.exploratory else []
    out.append(f"Cells stored (row x task x seed): {c.stored:,} of {c.planned:,}{pct}.")
    done = ", ".join(map(str, c.seeds_complete))
    out.append(
        f"Seeds complete (every row and task stored): {len(c.seeds_complete)} of {len(c.seeds)}"
        + (f" (seed {done})." if done else ".")
    )
    out.append(
        "Code versions: "
        + (", ".join(f"{k} ({n} records)" for k, n in c.code_versions.items()) or "none (nothing stored)")
        + "."
    )
    if c.stored < c.planned:
        parts = []
        if c.empty_methods:
            parts.append(f"nothing stored for {len(c.empty_methods)} methods ({', '.join(c.empty_methods)})")
        parts += [f"{m}: {n:,} of {p:,} missing ({', '.join(ts)})" for m, n, p, ts in c.partial_methods]
        out.append("Missing by method: " + "; ".join(parts) + ".")
        out.append(
            "Missing by task: "
            + "; ".join(
                f"{t}: {'all ' + format(p, ',') if n == p else f'{n:,} of {p:,}'}" for t, n, p in c.by_task if n
            )
            + "."
        )
    verb = "Resume" if c.stored else "Run"
    out.append(
        f"{verb} with `{v.command}` (stored cells are skipped; on a lent GPU through `bench/device_studies.sh`, "
        "see `bench/README.md`)."
    )
    return out


def _missing(study: Study, table: Mapping[str, Mapping[str, aggregate.Cell]], tasks: Sequence[str]) -> list[str]:
    """Per row, the (task, seed) cells with no record: ``ct: sts12, stsb (seed 3)``; first, per task, the
    stored records ``collect`` left out as of an older definition (``Cell.superseded``: another task
    version, or a random-init row's repeated seed-0 init), and why."""
    missing = []
    for t in tasks:
        why = Counter(v for c in table[t].values() for v in c.superseded.values())
        for reason, n in sorted(why.items()):
            missing.append(f"{t}: {n} stored record{'s' if n > 1 else ''} {reason} left out: not this study's cells")
    for m in (row.name for row in study.rows()):
        lack = {t: [s for s in study.seeds if s not in table[t][m].scores] for t in tasks}
        lack = {t: s for t, s in lack.items() if s}
        if len(lack) == len(tasks) and all(len(s) == len(study.seeds) for s in lack.values()):
            missing.append(f"{m}: nothing stored")
        elif lack:
            missing.append(
                f"{m}: "
                + ", ".join(
                    t
                    + (
                        ""
                        if len(s) == len(study.seeds)
                        else f" (seed{'s' if len(s) > 1 else ''} {', '.join(map(str, s))})"
                    )
                    for t, s in lack.items()
                )
            )
    return missing


def legend(study: Study, columns: Mapping[str, Column]) -> list[str]:
    """The tests, stated: what bold, ≈ and the p-values mean, and which test decided each column."""
    k = len(study.seeds)
    notes = [
        f"Cells: mean ± sample std over the seeds stored, (n) = how many; {NO_CELL} none stored. Statistics per "
        f"column: a hierarchical bootstrap ({stats.resamples_text(columns.values())}; bootstrap seed "
        f"{BOOTSTRAP_SEED}): each "
        "resample draws the task's items (stratified by subset; one draw shared by every method and seed, so "
        "comparisons are paired on items) and, on that draw, each method's seed-mean varies by its seed std / "
        f"sqrt(k) times a Student t with k-1 degrees of freedom (k = {k} seeds: heavy tails, as a t-test over "
        "the seeds would have). Bold ¹: the column's best and every method whose two-sided "
        f"difference from it has a Holm-adjusted p >= {TIE_P} over the column's comparisons (they share rank 1; "
        "a lone bold cell is separated from every other method); none in a column with fewer than two ranked rows "
        "(one row ranks against nothing).",
        "Test per column: "
        + ", ".join(f"{t}: {c.test}" + (f" ({c.why})" if c.why else "") for t, c in columns.items())
        + f" ({stats.HIERARCHICAL} = seeds x items as above; {stats.SEEDS_ONLY} = seeds resampled alone, used when "
        "a cell has no verified per-item scores; - = no cell).",
        "avg: the mean over the study's tasks, only for a row with every task stored (none partial).",
    ]
    if study.start:
        own = (
            "its own step-0 row (`<method> (step 0)`: the start encoded exactly as that method's encoder is at step 0, "
            "with its pooling, head and template; a method without one, such as BERT-flow, against the start row "
            f"{study.start})"
            if study.step0_rows
            else f"the start row ({study.start}: the base model itself, no training)"
        )
        notes.append(
            f"{AT_START_MARK}: equivalent to {own} within "
            f"±{study.margin:g} points: two one-sided tests (TOST) on the same bootstrap, Holm-adjusted over the "
            f"column's trained cells at {TIE_P}; TOST alone decides (seeds all on one side of the reference, "
            "within the margin, are equivalent; a difference beyond it fails TOST). No mark: the cell moved (separable from the start) or the data cannot tell (see the summary). The "
            f"margin is the study's statistics.margin (default 1.0: below the gains papers report, at the seed "
            "spread of trained cells)."
        )
    if study.step0_rows or study.random_init:
        notes.append(
            "Context rows (step-0 rows, the random init): tested against the start row in a Holm family of their "
            "own (what a method's pooling, head or template does before any update; whether the start learned "
            "anything its random init of the same shape lacks); never bold, never counted in the summary's tallies."
        )
    notes.append(
        f"Dev-curve verdict (from each cell's stored curves, benchbench.report.learning; the last dev point "
        f"against the step-0 point): no mark: moved up (by more than ±{study.margin:g}); {DOWN_MARK} moved down (by "
        f"more than {study.margin:g}); {FLAT_MARK} flat (within ±{study.margin:g} at the end or, with no dev curve, "
        f"a training loss that stayed at its chance level or rose); {NOT_ASSESSED} not assessable (no dev curve "
        "and a loss that fell, or no loss against a chance level, or the seeds disagree). "
        + (
            f"Curves: a point every {study.curve_every} steps, plus the step-0 point, on "
            f"{study.curve_task or 'each cell'}'s {study.curve_split} split"
            + "".join(f"; {t} cells on {on}'s {sp} split" for t, (on, sp) in study.curve_per_task.items())
            + "."
            if study.curve_every
            else "This study stores no dev curves ([curves] absent): only the loss can tell."
        )
    )
    p_lines = []
    for t, c in columns.items():
        if c.best and c.p:
            p_lines.append(
                f"{t} (best {c.best}): "
                + ", ".join(f"{m} {p:.3g}" for m, p in sorted(c.p.items(), key=lambda kv: kv[1]))
            )
    if p_lines:
        notes.append("p against the column's best (Holm-adjusted): " + "; ".join(p_lines) + ".")
    return notes


ALT_AGGREGATION = {"spearman_all": "spearman_mean", "spearman_mean": "spearman_all"}
AGGREGATION_WORDS = {"spearman_all": "SimCSE's 'all'", "spearman_mean": "SentEval's per-subset mean"}


def _aggregations(table: Mapping[str, Mapping[str, aggregate.Cell]]) -> dict[str, str]:
    """column -> the subset aggregation its records name (``details.aggregation`` of the test split, e.g.
    STS12-16's "SimCSE 'all'"), for the columns scored under one of two conventions (``ALT_AGGREGATION``:
    records that store both); several named are joined."""
    out = {}
    for t, cells in table.items():
        tests = [(r.get("splits") or {}).get("test") or {} for c in cells.values() for r in c.records.values()]
        named = {
            str((sp.get("details") or {}).get("aggregation") or sp.get("main_metric"))
            for sp in tests
            if sp.get("main_metric") in ALT_AGGREGATION
        }
        if named:
            out[t] = " / ".join(sorted(named))
    return out


def _other_aggregation(cell: aggregate.Cell) -> tuple[str, float] | None:
    """(main metric, seed-mean of the other subset aggregation) of a cell whose every record stores both
    (STS12-16: ``spearman_all`` and ``spearman_mean``); None otherwise."""
    mains, vals = set(), []
    for r in cell.records.values():
        sp = (r.get("splits") or {}).get("test") or {}
        main = sp.get("main_metric")
        alt = (sp.get("scores") or {}).get(ALT_AGGREGATION.get(main, ""))
        if not isinstance(alt, int | float):
            return None
        mains.add(main)
        vals.append(float(alt))
    return (mains.pop(), sum(vals) / len(vals)) if len(mains) == 1 and vals else None


def aggregation_notes(study: Study, table: Mapping[str, Mapping[str, aggregate.Cell]]) -> list[str]:
    """The subset aggregation each multi-subset column uses (STS12-16: "all" vs the per-subset mean, the
    two conventions the papers mix), and how many trained cells lie above their reference row under
    each: a verdict that holds under one aggregation only is visible as such (seed means, no test)."""
    named = _aggregations(table)
    if not named:
        return []
    by: dict[str, list[str]] = {}
    for t, agg in named.items():
        by.setdefault(agg, []).append(t)
    lines = ["Subset aggregation of the main score: " + "; ".join(f"{', '.join(ts)}: {a}" for a, ts in by.items())]
    refs = study_references(study)[0]
    counts: dict[str, list[int]] = {}  # main metric -> [above under the main, above under the other, pairs]
    for t in named:
        for m, ref in refs.items():
            mine, base = table[t].get(m), table[t].get(ref)
            if not (mine and base and mine.scores and base.scores):
                continue
            a, b = _other_aggregation(mine), _other_aggregation(base)
            if a is None or b is None or a[0] != b[0]:
                continue
            k = counts.setdefault(a[0], [0, 0, 0])
            k[0] += mine.mean > base.mean
            k[1] += a[1] > b[1]
            k[2] += 1
    for main, (up, up_alt, n) in counts.items():
        lines.append(
            f"Of {n} trained cells in these columns, {up} lie above their reference row under "
            f"{AGGREGATION_WORDS.get(main, main)} aggregation (the main score) and {up_alt} under "
            f"{AGGREGATION_WORDS.get(ALT_AGGREGATION[main], ALT_AGGREGATION[main])} ({ALT_AGGREGATION[main]}, stored "
            "in the same records): seed means, no test"
        )
    return [ln + "." for ln in lines]


def summary(
    study: Study,
    columns: Mapping[str, Column],
    rows: Sequence[ShownRow],
    prov: Provenance,
    learning: Mapping[str, Mapping[str, Any]] | None = None,
    curves: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]] | None = None,
    aggregations: Mapping[str, str] | None = None,
) -> str:
    """A few sentences generated from the statistics, the dev-curve verdicts and the curves, hedged as
    they allow; ``aggregations`` (column -> its subset aggregation) is named beside the tallies.
    Long because each sentence has its own hedge (exploratory, preliminary, no rank claim, verdicts)."""
    parts = []
    if study.exploratory:
        parts.append(f"Exploratory, no claim about methods: {study.exploratory}")
    if study.preliminary:
        parts.append(
            f"Preliminary ({len(study.seeds)} seeds, fewer than the {PUBLISHED_MIN_SEEDS} a published study needs): "
            "seed variance is a rough estimate, so read every statement below as provisional."
        )
    context = {row.name for row in study.rows() if row.context}
    verdicts = Counter(t.verdict for c in columns.values() for m, t in c.start.items() if m not in context)
    n = sum(verdicts.values())
    if study.start and n:
        against = (
            "its own step-0 row (or the start where it has none)" if study.step0_rows else f"the start ({study.start})"
        )
        parts.append(
            f"Against {against}, of {n} trained cells: {verdicts['↑']} separably above, "
            f"{verdicts['↓']} separably below, {verdicts['≈']} shown equivalent within ±{study.margin:g} points, and "
            f"{verdicts['?']} inconclusive (neither separable nor shown equivalent: more seeds would tell)"
            + (
                f"; {', '.join(aggregations)} scored with {' / '.join(sorted(set(aggregations.values())))} "
                "aggregation (the other reading is in the notes)."
                if aggregations
                else "."
            )
        )
    rnd = random_init_row(study.start) if study.random_init else ""
    tests = [c.start[rnd] for c in columns.values() if rnd in c.start]
    if tests:
        below = sum(t.verdict == "↓" for t in tests)
        parts.append(
            f"The start beats its random init of the same shape ({study.random_init}) separably in {below} of "
            f"{len(tests)} columns"
            + (
                "; where it does not, a trained row read against it cannot show that the start's pre-training helped."
                if below < len(tests)
                else "."
            )
        )
    if learning:
        kinds = Counter(v["verdict"] for per in learning.values() for v in per.values())
        parts.append(
            f"Dev-curve verdicts over {sum(kinds.values())} trained cells: {kinds.get(MOVED_UP, 0)} moved up, "
            f"{kinds.get(MOVED_DOWN, 0)} moved down ({DOWN_MARK}), {kinds.get(FLAT, 0)} flat ({FLAT_MARK}), "
            f"{kinds.get(NOT_ASSESSABLE, 0)} not assessable ({NOT_ASSESSED})."
        )
    if curves:
        reading = budget_reading(curves, study.margin)
        if reading:
            parts.append(f"Budget, read from the curves: {reading}.")
    # a rank claim needs two ranked rows in the column, and a test that decided it (``Column.tied``)
    ranked = {t: c for t, c in columns.items() if c.best and c.n_ranked >= 2 and c.tied}
    alone = {t: c.best for t, c in ranked.items() if len(c.tied) == 1}
    shared = [len(c.tied) for c in ranked.values() if len(c.tied) > 1]
    if ranked:
        text = f"Rank 1 is one method separated from all others in {len(alone)} of {len(ranked)} columns"
        text += " that rank two or more rows" if len(ranked) < len(columns) else ""
        text += (" (" + ", ".join(f"{t}: {m}" for t, m in alone.items()) + ")") if alone else ""
        if shared:
            text += f"; elsewhere {min(shared)} to {max(shared)} methods share it (not separable after correction)"
        parts.append(text + ".")
    elif columns:
        parts.append("No rank claim: no column has two ranked rows that a test could compare.")
    full = [(r.avg, r.method) for r in rows if r.avg is not None and r.method not in context]
    if len(full) >= 2:
        avg, m = max(full)
        parts.append(f"Highest average over complete rows: {m} ({avg:.2f}); averages carry no test.")
    if prov.mixed_code or prov.mixed_encoders:
        parts.append(
            f"Provenance: {len(prov.mixed_code)} of {len(study.rows())} rows mix code versions and "
            f"{len(prov.mixed_encoders)} mix trained encoders for one seed ({ROW_MIXED_CODE.strip()}, "
            f"{ROW_MIXED_ENCODER.strip()}); a re-run at one commit would remove that caveat."
        )
    return " ".join(parts)


def paired_interval(a: Mapping[Any, float], b: Mapping[Any, float], level: float = 0.95) -> tuple[float, float, int]:
    """(mean of a - b over the seeds both hold, half-width of its ``level`` t-interval, n): the seeds'
    own spread of a row's change against its reference, paired by seed (the figure's interval; the
    verdicts come from the hierarchical bootstrap, which also resamples items). Half-width nan for n < 2."""
    from scipy import stats as sps

    d = [a[k] - b[k] for k in a if k in b]
    n = len(d)
    if n == 0:
        return math.nan, math.nan, 0
    mean = sum(d) / n
    if n < 2:
        return mean, math.nan, n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    return mean, float(sps.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n), n


_WORDS = {"↑": "moved up", "↓": "moved down", "≈": "stayed within the margin (≈)", "?": "inconclusive"}


def _tally(col: Column | None, rows: Sequence[str]) -> str:
    """ "2 moved up (a +1.23, b +0.50), 1 moved down (c -2.00)" for ``rows``' tests in ``col``."""
    by: dict[str, list[str]] = {}
    for m in rows:
        t = col.start.get(m) if col else None
        if t is not None:
            by.setdefault(t.verdict, []).append(f"{m} {t.diff:+.2f}")
    if not by:
        return "no trained cell stored"
    return ", ".join(f"{len(by[v])} {_WORDS[v]} ({', '.join(by[v])})" for v in ("↑", "≈", "?", "↓") if v in by)


def core_summary(
    study: Study,
    own: Mapping[str, Column],
    start: Mapping[str, Column],
    seed_scores: Mapping[str, Mapping[str, Mapping[Any, float]]],
) -> str:
    """Three sentences from the statistics, in the pre-registered order: the primary endpoint against each
    row's own step 0 (did the objective move it), the same endpoint against the start's training-free
    readout (is the result worth using), and the secondary columns against own step 0. Each verdict is the
    hierarchical bootstrap's (Holm within its family; ≈ is TOST at the study's margin)."""
    p = study.primary
    task, margin = p["task"], study.margin
    trained = [r.name for r in study.rows() if r.kind == STUDY_ROW_TRAINED]
    base = seed_scores.get(task, {}).get(study.start, {})
    start_text = f"{study.start}, {sum(base.values()) / len(base):.2f}" if base else study.start
    first = (
        f"Primary endpoint, {task} {p['split']} {p['statistic']} against each row's own step 0 (margin "
        f"±{margin:g}): {_tally(own.get(task), trained)}."
    )
    second = f"Against the start's own training-free readout ({start_text}): {_tally(start.get(task), trained)}."
    rest = [t for t in own if t != task]
    third = (
        "Secondary, "
        + "; ".join(f"{t} with the same encoders against own step 0: {_tally(own.get(t), trained)}" for t in rest)
        + "."
        if rest
        else "No secondary column."
    )
    return " ".join([first, second, third])


def budget_reading(curves: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]], tolerance: float) -> str:
    """Whether the study's budget let its rows level off, read from the dev curves (DESIGN.md, Studies:
    a budget the data can support): per column that stands for a training corpus, the median over the
    trained rows of their seed-mean dev curves, and the first step from which it stays within
    ``tolerance`` of its last point. "" when no row has a curve."""
    import statistics

    from benchbench.report.learning import dev_curve_of

    out = []
    for column, by_row in curves.items():
        means = []
        for recs in by_row.values():
            cs = [dict(dev_curve_of(r)) for r in recs]
            cs = [c for c in cs if c]
            common = set.intersection(*(set(c) for c in cs)) if cs else set()
            if len(common) >= 2:
                means.append({s: sum(c[s] for c in cs) / len(cs) for s in common})
        steps = sorted(set.intersection(*(set(m) for m in means))) if means else []
        if len(steps) < 2:
            continue
        med = [statistics.median(m[s] for m in means) for s in steps]
        settle = next(s for i, s in enumerate(steps) if all(abs(v - med[-1]) <= tolerance for v in med[i:]))
        out.append(
            f"{column}: the median of {len(means)} rows' dev curves goes {med[0]:.2f} -> {med[-1]:.2f} and stays "
            f"within ±{tolerance:g} of its last point from step {settle:g} of {steps[-1]:g}"
            + (
                " (it levelled off inside the budget)"
                if settle < steps[-1]
                else " (still moving at the end: a longer budget would tell more)"
            )
        )
    return "; ".join(out)


def _flag_notes(flags: Mapping[tuple[str, str], Sequence[str]], rows: Sequence[str]) -> list[str]:
    """One line per (column, flag text), naming the rows that carry it ("every row" when all do): the
    start's own-text flags are the same for every row of a column and are said once."""
    by: dict[tuple[str, str], list[str]] = {}
    for (m, t), texts in flags.items():
        for text in texts:
            by.setdefault((t, text), []).append(m)
    out = []
    for (t, text), ms in by.items():
        who = "every row" if set(ms) >= set(rows) else ", ".join(ms)
        out.append(f"{FLAG_MARK.strip()} {t} ({who}): {text}")
    return out


def _shown_cell(
    a: aggregate.Cell | None,
    m: str,
    col: Column,
    flags: Sequence[str],
    learned: Mapping[str, Any] | None = None,
    records: Mapping[Any, Mapping[str, Any]] | None = None,
) -> ShownCell:
    if a is None:
        return ShownCell(NO_CELL, False, None)
    st = col.start.get(m)
    a = dataclasses.replace(a, no_learn=None)  # a study's learning mark is the curves' verdict (below)
    text = f"{aggregate.cell_text(a)} ({len(a.scores)})"
    text += f" {AT_START_MARK}" if st is not None and st.equivalent else ""
    text += LEARNING_MARKS.get((learned or {}).get("verdict", ""), "")
    text += FLAG_MARK if flags else ""
    return ShownCell(
        text,
        m in col.tied,
        a.mean,
        bool(st and st.equivalent),
        col.p.get(m),
        st.verdict if st else "",
        tuple(flags),
        (learned or {}).get("verdict", ""),
        (learned or {}).get("reason", ""),
        st.reference if st else "",
        tuple(sorted(((s, str(r.get("_path") or "")) for s, r in (records or {}).items()), key=lambda x: str(x[0]))),
    )


def learning_verdicts(
    study: Study, table: Mapping[str, Mapping[str, aggregate.Cell]]
) -> dict[str, dict[str, dict[str, Any]]]:
    """{row: {task: {"verdict", "reason", "flags"}}} for every trained row's stored cells
    (``learning.cell_verdict`` over the cell's seeds, tolerance = the study's margin); context rows and
    the start have none (they do not train)."""
    from benchbench.report.learning import cell_verdict

    out: dict[str, dict[str, dict[str, Any]]] = {}
    for row in study.rows():
        if row.kind != STUDY_ROW_TRAINED:
            continue
        for t, cells in table.items():
            c = cells.get(row.name)
            if c is None or not c.records:
                continue
            v = cell_verdict(list(c.records.values()), tolerance=study.margin, dev_on_task=_curve_on_task(study, t))
            out.setdefault(row.name, {})[t] = {"verdict": v.verdict, "reason": v.reason, "flags": list(v.flags)}
    return out


def _curve_on_task(study: Study, task: str) -> bool:
    """Whether the study's curve task ([curves] task) trains on the same text as ``task``: the task
    itself, or one whose spec trains on the same file (the STS tasks all train on the wiki sample).
    No curve task (each cell's own) is on task."""
    on = study.curve_for(task)[0]
    if not on or on == task:
        return True
    from benchbench.core.registry import get_registry

    reg = get_registry()
    try:
        mine, theirs = dict(reg.task(task).train or {}), dict(reg.task(on).train or {})
    except BenchbenchError:  # a task no longer registered: its curve cannot be placed, so it counts
        return True
    return mine.get("source") == "file" and mine == theirs


def _learning_notes(learning: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[str]:
    """Why each row's cells moved down, stayed flat or cannot be assessed, one line per (row, reason)."""
    by: dict[tuple[str, str, str], list[str]] = {}
    for row, per in learning.items():
        for t, v in per.items():
            if v["verdict"] in LEARNING_MARKS:
                by.setdefault((row, v["verdict"], v["reason"]), []).append(t)
    return [
        f"{LEARNING_MARKS[verdict]} {row} on {', '.join(ts)}: {verdict}: {reason}"
        for (row, verdict, reason), ts in by.items()
    ]


def row_setting(study: Study, row: StudyRow) -> str:
    """What a row IS, beside its scores: pooling (or template), head, learning rate and budget."""
    import dataclasses as dc

    from benchbench.core.methods import build_config
    from benchbench.core.registry import get_registry

    if row.kind == STUDY_ROW_RANDOM:
        return f"{row.model}: random init (one draw per seed), no training"
    try:
        cfg = build_config(get_registry().method(row.method), study.row_overrides(row))
    except Exception:
        return ""
    f = {x.name: getattr(cfg, x.name) for x in dc.fields(cfg)}
    method_cls = get_registry().method(row.method)
    cls_pool = getattr(method_cls, "pooling", None)  # e.g. plm-last's "last"
    pooling = str(f.get("pooling") or cls_pool or "")
    tpl = f.get("template")
    if isinstance(tpl, str) and tpl:  # a prompt readout: PromptBERT's mask token, or a decoder's last token
        mask = next((m for m in ("[MASK]", "<mask>") if m in tpl), None)
        if mask or pooling in ("", "last"):
            parts = [f"{mask or 'last token'} of {tpl!r}"]
        else:  # echo: the pooled ({...}) pieces of its template
            parts = [f"{pooling} over the pooled pieces of {tpl!r}"]
    else:
        parts = [pooling]
    if isinstance(f.get("layer"), int) and f["layer"] != -1:
        parts.append(f"hidden state {f['layer']}")
    if f.get("mlp") not in (None, False, "none", "", "train"):
        parts.append(f"MLP ({f['mlp']})" if isinstance(f["mlp"], str) else "MLP")
    if row.kind == STUDY_ROW_START or getattr(method_cls, "trains", True) is False:
        parts.append("no training")
    elif "steps" in f:
        per = f" per stage ({f['stage']})" if "+" in str(f.get("stage") or "") else ""  # LLM2Vec's mntp+simcse
        parts.append(
            f"{f['steps']} steps x {f.get('batch_size')}{per}" if f["steps"] else "0 steps (the start as built)"
        )
        parts.append(f"lr {f['lr']:g}" if isinstance(f.get("lr"), int | float) else "lr: the method's rule")
    else:
        speed = {x.name for x in dc.fields(cfg) if x.metadata.get("hash") is False}  # change no number
        opts = {k: v for k, v in study.row_overrides(row).items() if k not in speed}
        parts.append(", ".join(f"{k}={v}" for k, v in sorted(opts.items())) or "its own budget")
    return "; ".join(p for p in parts if p)


def view(
    study: Study,
    table: Mapping[str, Mapping[str, aggregate.Cell]],
    model_label: str | None = None,
    extra_notes: Sequence[str] = (),
    *,
    results: str | Path = "",
    published: Sequence[PublishedRow] | None = None,
    cache: str | Path | bool = True,
    overlap_flags: Callable[..., Sequence[str]] | None = None,
) -> StudyView:
    """The study's table: per column the statistics (:func:`cached_column`), each cell's text and marks
    from ``aggregate`` (``‡``, ``[T]``/``[S]`` and their footnotes), the learning verdict from its curves
    (:func:`learning_verdicts`), the provenance marks, the average only over complete rows, what is
    missing, the papers' numbers apart (default: :func:`published_context`) and a generated summary.
    ``results``: the folder the records came from (the resume command names it). ``cache``: True for the
    user cache, False for none, or a folder. ``overlap_flags(method, task, model)``: text-overlap flags for
    a cell (contamination measured from text), shown as ⚑ with their text in the notes."""
    if model_label is None:
        from benchbench.encode.models import model_label_of

        model_label = model_label_of(study.model)
    tasks = list(table)
    # every row of the study has a cell (empty where nothing is stored), whatever the caller collected
    table = {t: {r.name: cells.get(r.name) or aggregate.Cell({}) for r in study.rows()} for t, cells in table.items()}
    where = default_cache() if cache is True else (cache or None)
    cols = {t: cached_column(t, table[t], study, where) for t in tasks}
    prov = provenance(study, table)
    srows = study.rows()
    names = [row.name for row in srows]
    flags = {(row.name, t): _row_flags(row, t, study, overlap_flags, model_label) for row in srows for t in tasks}
    learn = learning_verdicts(study, table)
    rows, trs = _shown_rows(study, table, tasks, model_label, cols, prov, flags, learn)
    curves = curve_columns(study, table)
    suites = {STUDY_AVG: tasks}
    trs_notes = [n for n in aggregate.table_notes(trs, suites) if not n.startswith(aggregate.NO_LEARN_MARK)]
    aggs = aggregation_notes(study, table)
    notes = [*legend(study, cols), *aggs, *provenance_notes(prov), *trs_notes, *_learning_notes(learn)]
    notes += _flag_notes(flags, names)
    notes.extend(extra_notes)
    if study.model_note:
        notes.append(study.model_note)
    missing = _missing(study, table, tasks)
    stored = sum(len(table[t][m].scores) for t in tasks for m in names)
    pub = list(published_context(study.methods, tasks) if published is None else published)
    second: dict[str, Column] = {}
    # a core study's second reading (its summary's second sentence): the same rows, each against the start
    # instead of its step 0; only there, since an extended study's page never shows it (a bootstrap per column)
    if study.tier == "core" and study.step0_rows and study.start:
        plain = dataclasses.replace(study, step0_rows=False)
        second = {t: cached_column(t, {r.name: table[t][r.name] for r in plain.rows()}, plain, where) for t in tasks}
    seed_scores = {t: {m: dict(table[t][m].scores) for m in names} for t in tasks}
    wall = wall_span(r for t in tasks for m in names for r in table[t][m].records.values())
    text = summary(study, cols, rows, prov, learn, curves, _aggregations(table))
    if study.tier == "core":
        notes.insert(0, f"Tallies: {text}")
        text = core_summary(study, cols, second, seed_scores)
    return StudyView(
        study,
        model_label,
        tasks,
        cols,
        rows,
        notes,
        pub,
        stored,
        missing,
        prov,
        text,
        str(results),
        learn,
        curves,
        {m: {t: frozenset(table[t][m].scores) for t in tasks} for m in names},
        seed_scores,
        wall,
    )


@dataclass(frozen=True)
class WallSpan:
    """The wall time a study's stored cells span: from the earliest cell's start (its record's
    ``created_at`` less its training and evaluation seconds) to the latest record's ``created_at``."""

    seconds: float
    first: str  # ISO time of the earliest start
    last: str  # ISO time of the latest record
    devices: tuple[str, ...]
    cells: int

    def text(self) -> str:
        h, rest = divmod(round(self.seconds), 3600)
        return (
            f"Its {self.cells} records span {h}:{rest // 60:02d}:{rest % 60:02d} of wall time ({self.first} to "
            f"{self.last}, on {', '.join(self.devices)}): the study's cost from scratch when it ran in one go, "
            "as a resumed study's span includes its pauses."
        )


def wall_span(records: Iterable[Mapping[str, Any]]) -> WallSpan | None:
    """The :class:`WallSpan` of ``records`` (None when none carries a readable ``created_at``). Why from the
    records and not a log: they are what the page publishes, and a re-run of the study rewrites them."""
    import datetime as dt

    starts, ends, devices = [], [], set()
    for r in records:
        try:
            end = dt.datetime.strptime(str(r.get("created_at")), "%Y-%m-%dT%H:%M:%S%z")
        except ValueError:
            continue
        took = float((r.get("train") or {}).get("seconds") or 0.0) + float(r.get("eval_seconds") or 0.0)
        starts.append(end - dt.timedelta(seconds=took))
        ends.append(end)
        devices.add(str(r.get("device") or "unknown device"))
    if not ends:
        return None
    fmt = "%Y-%m-%d %H:%M UTC"
    first, last = min(starts), max(ends)
    utc = dt.UTC
    return WallSpan(
        (last - first).total_seconds(),
        first.astimezone(utc).strftime(fmt),
        last.astimezone(utc).strftime(fmt),
        tuple(sorted(devices)),
        len(ends),
    )


def curve_columns(
    study: Study, table: Mapping[str, Mapping[str, aggregate.Cell]]
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """{column: {trained row: records}}: the first column of each distinct set of training corpora among
    the trained rows' records (the columns that would draw the same curves are drawn once)."""
    trained = [row.name for row in study.rows() if row.kind == STUDY_ROW_TRAINED]
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    seen: set[frozenset] = set()
    for t, cells in table.items():
        recs = {m: list(cells[m].records.values()) for m in trained if m in cells and cells[m].records}
        sig = frozenset(
            str(((r.get("train") or {}).get("corpus") or {}).get("sha256") or t) for rs in recs.values() for r in rs
        )
        if recs and sig not in seen:
            seen.add(sig)
            out[t] = recs
    return out


def _shown_rows(
    study: Study,
    table: Mapping[str, Mapping[str, aggregate.Cell]],
    tasks: Sequence[str],
    model_label: str,
    cols: Mapping[str, Column],
    prov: Provenance,
    flags: Mapping[tuple[str, str], Sequence[str]],
    learn: Mapping[str, Mapping[str, Mapping[str, Any]]],
) -> tuple[list[ShownRow], list[aggregate.TableRow]]:
    """Each row's cells (aggregate's marks, the statistics' marks, the learning verdict, its records),
    label (provenance marks), average, cost and setting; and aggregate's rows (for its footnotes)."""
    agg_rows = []
    for m in (row.name for row in study.rows()):
        recs = [r for t in tasks for r in table[t][m].records.values()]
        if recs:
            agg_rows.append(aggregate.Row((m,), m, m, model_label, recs))
    trs = aggregate.table_rows(agg_rows, list(tasks), {STUDY_AVG: list(tasks)})
    by_method = {tr.row.method: tr for tr in trs}
    rows = []
    for row in study.rows():
        m, tr = row.name, by_method.get(row.name)
        acells: dict[str, aggregate.Cell | None] = {}
        for t in tasks:
            sc = table[t][m].scores
            acells[t] = (tr.cells.get(t) if tr else None) or (aggregate.Cell(dict(sc)) if sc else None)
        shown = tuple(
            _shown_cell(acells[t], m, cols[t], flags[(m, t)], learn.get(m, {}).get(t), table[t][m].records)
            for t in tasks
        )
        label = (tr.row.display_label if tr else m) + (ROW_MIXED_CODE if m in prov.mixed_code else "")
        label += ROW_MIXED_ENCODER if m in prov.mixed_encoders else ""
        recs = [r for t in tasks for r in table[t][m].records.values()]
        cost = row_cost(recs)
        rows.append(
            ShownRow(m, label, shown, aggregate.suite_average(acells, list(tasks)), cost, row_setting(study, row))
        )
    return rows, trs


def _row_flags(
    row: StudyRow, task: str, study: Study, overlap_flags: Callable[..., Sequence[str]] | None, model_label: str
) -> list[str]:
    """A row's text-overlap flags: a trained row's from its own records (its start and training corpus);
    a step-0 row's are its start's (it saw no training text); a random init saw no text at all."""
    if overlap_flags is None or row.kind == STUDY_ROW_RANDOM:
        return []
    name = study.start if row.kind == STUDY_ROW_STEP0 and study.start else row.method
    return list(overlap_flags(name, task, model=model_label))


_MARKUP = {  # format -> (escape, a tie-group cell)
    "md": (escape_md, "**{}** ¹"),
    "html": (escape_html, "<b>{}</b> ¹"),
}


def render_cell(cell: ShownCell, fmt: str) -> str:
    """One cell's text in ``fmt`` ("md" or "html"): the one renderer behind both formats."""
    esc, tied = _MARKUP[fmt]
    return tied.format(esc(cell.text)) if cell.tied else esc(cell.text)


def view_markdown(v: StudyView, heading: str = "###") -> str:
    """The study's Markdown: title, status (with the command), summary, conditions, the table, its notes,
    the published context and what is missing."""
    st = v.study
    pre = (" — exploratory" if st.exploratory else "") + (" — preliminary" if st.preliminary else "")
    lines = [f"{heading} {escape_md(st.name)} (v{st.version}){pre}", "", escape_md(st.description), ""]
    if st.question:
        lines += [f"Question: {escape_md(st.question)}", ""]
    lines += [escape_md(v.status), ""]
    if v.summary:
        lines += [f"Summary: {escape_md(v.summary)}", ""]
    lines += [escape_md(v.conditions), ""]
    lines.append("| row | setting | " + " | ".join(escape_md(t) for t in v.tasks) + " | avg | cost (time; energy) |")
    lines.append("|---|---|" + "---:|" * (len(v.tasks) + 1) + "---|")
    for row in v.rows:
        cells = [render_cell(c, "md") for c in row.cells] + ["" if row.avg is None else f"{row.avg:.2f}"]
        cells.append(escape_md(row.cost))
        lines.append(f"| {escape_md(row.label)} | {escape_md(row.setting)} | " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"- {escape_md(n)}" for n in v.notes]
    if v.published:
        head, body = published_rows(v.tasks, v.published)
        lines += ["", escape_md(PUBLISHED_NOTE), ""]
        lines.append("| " + " | ".join(escape_md(h) for h in head) + " |")
        lines.append("|" + "---|" * 4 + "---:|" * (len(head) - 4))
        lines += ["| " + " | ".join(escape_md(x) for x in r) + " |" for r in body]
    if v.missing and v.stored:
        lines += ["", "Missing cells:", ""] + [f"- {escape_md(x)}" for x in v.missing]
    return "\n".join(lines) + "\n"


def extended_markdown(v: StudyView, link: str = "", heading: str = "###") -> str:
    """An extended study collapsed (:func:`completion_lines`): no table, so no wall of empty cells on the
    front page; ``link``: where its full table is."""
    st = v.study
    pre = " — extended" + (" — exploratory" if st.exploratory else "") + (" — preliminary" if st.preliminary else "")
    lines = [f"{heading} {escape_md(st.name)} (v{st.version}){pre}", "", escape_md(st.description), ""]
    lines += [f"- {escape_md(x)}" for x in completion_lines(v)]
    if link:
        lines += ["", f"Full table, notes and missing cells: [{escape_md(link)}]({link})."]
    return "\n".join(lines) + "\n"


def report_markdown(study: Study, table: Mapping[str, Mapping[str, aggregate.Cell]], **view_kw: Any) -> str:
    """Methods as rows, tasks as columns, mean ± std; the tie group in bold with rank 1 (:func:`view`)."""
    return view_markdown(view(study, table, **view_kw))
