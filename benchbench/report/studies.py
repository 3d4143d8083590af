"""Studies: declared, controlled comparisons (``benchbench study list | run | report NAME``).

A study is a versioned data file that fixes what a fair comparison must hold equal: ONE base model,
ONE budget (steps, batch size, learning-rate rule, checkpoint-selection rule), the methods, >= 3
seeds and the tasks. ``run`` executes its cells through the sweep machinery (resumable: a stored
cell is skipped) with per-item scores stored, and ``report`` builds one table: methods as rows,
tasks as columns, mean ± sample std over the seeds, and a **tie group** per column -- the methods
that a paired test cannot separate from the column's best at p < 0.05 share its bold rank.

The paired test is on stored items when every seed of both methods has them: a stratified bootstrap
over the task's items (the same resampled items for both methods and every seed) of the difference
of the seed-averaged main scores. A task without per-item scores falls back to a paired t-test over
seeds, and the table says which test each column used.

Study files live in ``benchbench/report/studies/`` (``name.toml``) or are given as a path::

    name = "post-training-minilm"
    version = 1
    description = "..."
    model = "all-MiniLM-L6-v2"
    start = "plm-mean"                       # the base model itself, untrained: cells not separable from it get ≈
    seeds = [1, 2, 3]
    tasks = ["twitterpara", "sts"]          # tasks or suites
    methods = ["tsdae", "simcse", ...]
    [budget]
    steps = 100
    batch_size = 16
    lr = "method"                            # the method's own default, or a number for every method
    selection = "last"                       # "last": the encoder at the end of the budget
    [set.simcse]                             # per-method options (strings, as --set gives them)
    select_on_stsb_dev = "false"
"""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from benchbench.core.errors import ConfigError, DataError
from benchbench.report.escaping import escape_html, escape_md

STUDY_KEYS = {
    "name",
    "version",
    "description",
    "model",
    "model_note",
    "start",
    "seeds",
    "tasks",
    "methods",
    "budget",
    "set",
}
BUDGET_KEYS = {"steps", "batch_size", "lr", "selection"}
SELECTIONS = ("last",)  # the encoder at the end of the budget; a method that selects on labels is flagged
TIE_P = 0.05  # methods not separable from the column's best at this level share its rank
MIN_SEEDS = 3


@dataclass(frozen=True)
class Study:
    name: str
    version: int
    description: str
    model: str
    seeds: tuple[int, ...]
    tasks: tuple[str, ...]
    methods: tuple[str, ...]
    steps: int
    batch_size: int
    lr: str | float
    selection: str
    per_method: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    model_note: str = ""
    path: str = ""
    start: str = ""  # the training-free row that IS the base model: every trained cell is tested against it

    def overrides(self, method: str, options: Collection[str] | None = None) -> dict[str, str]:
        """The options a cell of ``method`` runs with: the study's budget, then its own options.
        ``options``: the method's option names (default: from the registry). A method whose budget is
        not counted in steps x batch (Trans-Encoder: pairs, epochs and cycles) gets only the budget keys
        it has and must state its budget in ``[set.<method>]``; the study file says how it matches."""
        trains = True
        if options is None:
            import dataclasses

            from benchbench.core.registry import get_registry

            cls = get_registry().method(method)
            options, trains = {f.name for f in dataclasses.fields(cls.Config)}, bool(getattr(cls, "trains", True))
        budget = {"steps": str(self.steps), "batch_size": str(self.batch_size)}
        if self.lr != "method":
            budget["lr"] = str(self.lr)
        lacking = sorted(k for k in budget if k not in options)
        if lacking and trains and not self.per_method.get(method):  # a training-free row (the start) has no budget
            raise ConfigError(
                f"Study {self.name!r} ({self.path}): method {method!r} has no option {lacking}; state its "
                f"budget in [set.{method}] with the options it has."
            )
        out = {k: v for k, v in budget.items() if k in options}
        out.update({k: str(v) for k, v in self.per_method.get(method, {}).items()})
        return out


def _builtin_dir() -> Any:
    return resources.files("benchbench.report") / "studies"


def available() -> list[str]:
    return sorted(p.name[: -len(".toml")] for p in _builtin_dir().iterdir() if p.name.endswith(".toml"))


def load_study(name_or_path: str) -> Study:
    """A built-in study by name, or a study file by path; a wrong key or value names the file."""
    path = Path(name_or_path)
    if path.suffix == ".toml" and path.is_file():
        text, where = path.read_text(encoding="utf-8"), str(path)
    else:
        f = _builtin_dir() / f"{name_or_path}.toml"
        if not f.is_file():
            raise ConfigError(
                f"Unknown study {name_or_path!r}; built-in studies: {available()} (or give a .toml path)."
            )
        text, where = f.read_text(encoding="utf-8"), f"benchbench/report/studies/{name_or_path}.toml"
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"Study file {where}: {e}") from e
    return _parse(doc, where)


def _parse(doc: dict[str, Any], where: str) -> Study:
    unknown = set(doc) - STUDY_KEYS
    if unknown:
        raise ConfigError(f"Study file {where}: unknown keys {sorted(unknown)} (known: {sorted(STUDY_KEYS)}).")
    budget = doc.get("budget") or {}
    bad = set(budget) - BUDGET_KEYS
    missing = [k for k in ("name", "version", "model", "seeds", "tasks", "methods") if k not in doc]
    missing += [f"budget.{k}" for k in ("steps", "batch_size") if k not in budget]
    if bad or missing:
        raise ConfigError(f"Study file {where}: unknown budget keys {sorted(bad)}, missing {missing}.")
    seeds = tuple(int(s) for s in doc["seeds"])
    if len(set(seeds)) < MIN_SEEDS:
        raise ConfigError(f"Study file {where}: a study needs >= {MIN_SEEDS} distinct seeds (got {list(seeds)}).")
    selection = budget.get("selection", "last")
    if selection not in SELECTIONS:
        raise ConfigError(f"Study file {where}: budget.selection must be one of {SELECTIONS} (got {selection!r}).")
    lr = budget.get("lr", "method")
    if lr != "method" and not isinstance(lr, int | float):
        raise ConfigError(f"Study file {where}: budget.lr is 'method' or a number (got {lr!r}).")
    per = doc.get("set") or {}
    stray = set(per) - set(doc["methods"])
    if stray:
        raise ConfigError(f"Study file {where}: [set.*] names methods not in the study: {sorted(stray)}.")
    start = str(doc.get("start", ""))
    if start and start not in doc["methods"]:
        raise ConfigError(f"Study file {where}: start {start!r} is not one of the study's methods {doc['methods']}.")
    return Study(
        name=str(doc["name"]),
        version=int(doc["version"]),
        description=str(doc.get("description", "")),
        model=str(Path(doc["model"]).expanduser()) if str(doc["model"]).startswith("~") else str(doc["model"]),
        seeds=seeds,
        tasks=tuple(doc["tasks"]),
        methods=tuple(doc["methods"]),
        steps=int(budget["steps"]),
        batch_size=int(budget["batch_size"]),
        lr=lr,
        selection=selection,
        per_method={m: dict(v) for m, v in per.items()},
        model_note=str(doc.get("model_note", "")),
        path=where,
        start=start,
    )


# ---- running ---------------------------------------------------------------------------------------
def plan(study: Study, task_names: Sequence[str]) -> list[Any]:
    """One sweep cell per (method, task, seed), each with the study's options for its method."""
    from benchbench.run.sweep import SweepRun

    return [
        SweepRun(m, t, s, "unsupervised", {"overrides": study.overrides(m)})
        for m in study.methods
        for t in task_names
        for s in study.seeds
    ]


def subset(study: Study, what: str, declared: Sequence[str], wanted: Sequence[str] | None) -> list[str]:
    """``declared`` (the study's tasks or methods) narrowed to ``wanted`` in the study's order; a name
    the study does not declare is a ConfigError (a cell outside the study is not the study's)."""
    if not wanted:
        return list(declared)
    stray = [w.strip() for w in wanted if w.strip() not in declared]
    if stray:
        raise ConfigError(f"study {study.name!r} has no {what} {stray}; its {what}: {', '.join(declared)}.")
    keep = {w.strip() for w in wanted}
    return [d for d in declared if d in keep]


def run(
    study: Study,
    output: str,
    executor: str = "local",
    cells: Sequence[Any] | None = None,
    encode: Mapping[str, str] | None = None,
    **sweep_kw: Any,
) -> list[Any]:
    """Run (or resume) ``cells`` (default: every cell of ``study``) into ``output`` with per-item scores
    stored. ``encode``: the RunOptions encode fields (``encode_backend``, ``encode_dtype``)."""
    from benchbench.core.registry import get_registry
    from benchbench.run.sweep import base_options, run_sweep

    if cells is None:
        cells = plan(study, get_registry().expand(list(study.tasks)))
    base = base_options(model=study.model, output=output, progress=False, store_items=True, **dict(encode or {}))
    return run_sweep(list(cells), base, executor, **sweep_kw)


# ---- reporting -------------------------------------------------------------------------------------
@dataclass
class Cell:
    scores: dict[int, float]  # seed -> main score (x100)
    items: dict[int, dict[str, Any]]  # seed -> per-item scores, when stored
    records: dict[int, dict[str, Any]] = field(default_factory=dict)  # seed -> the record (its marks)

    @property
    def mean(self) -> float:
        return float(np.mean(list(self.scores.values())))

    @property
    def std(self) -> float | None:
        v = list(self.scores.values())
        return float(np.std(v, ddof=1)) if len(v) >= 2 else None


@dataclass
class Column:
    task: str
    best: str | None
    tied: set[str]  # methods sharing the best's rank (the best included)
    test: str  # "items" | "seeds" | "-"
    p: dict[str, float]  # method -> p against the best


def seed_mean_bootstrap(
    a: Mapping[int, Mapping[str, Any]], b: Mapping[int, Mapping[str, Any]], n_resamples: int = 1000, seed: int = 0
) -> float:
    """Two-sided p of "the seed-averaged main scores of a and b differ": ``stats.paired_bootstrap_items``
    over the seeds both have, resampling the task's items (stratified by subset; the same items for both
    methods and every seed, which is what pairs them)."""
    from benchbench.report.stats import paired_bootstrap_items

    seeds = sorted(set(a) & set(b))
    if not seeds:
        raise ConfigError("seed_mean_bootstrap: no seed has per-item scores for both methods.")
    return paired_bootstrap_items([a[s] for s in seeds], [b[s] for s in seeds], n_resamples, seed).p_value


def _seed_p(a: Mapping[int, float], b: Mapping[int, float]) -> float:
    from benchbench.report.stats import paired_test

    common = sorted(set(a) & set(b))
    if len(common) < 2:
        return 1.0  # nothing to separate them with: tied
    return paired_test(dict(a), dict(b)).p_value


def _uses_items(cells: Mapping[str, Cell]) -> bool:
    """A column's paired test is on items when every seed of every stored cell has per-item scores."""
    return all(set(c.items) >= set(c.scores) for c in cells.values() if c.scores)


def start_column(
    cells: Mapping[str, Cell], start: str, bootstrap: Callable[..., float] = seed_mean_bootstrap
) -> dict[str, float]:
    """{trained method: p against the ``start`` row} for one task, by the column's test (the items
    bootstrap or the seed t-test, as :func:`tie_column` chooses). A method at p >= ``TIE_P`` is not
    separable from its own start: at this budget its training did not move this task's score beyond
    noise (the ``≈`` mark). Empty when the start cell is not stored."""
    base = cells.get(start)
    if base is None or not base.scores:
        return {}
    items = _uses_items(cells)
    return {
        m: bootstrap(base.items, c.items) if items else _seed_p(base.scores, c.scores)
        for m, c in cells.items()
        if m != start and c.scores
    }


def tie_column(task: str, cells: Mapping[str, Cell], bootstrap: Callable[..., float] = seed_mean_bootstrap) -> Column:
    """The column's best (highest mean) and the methods not separable from it at p < ``TIE_P``."""
    present = {m: c for m, c in cells.items() if c.scores}
    if not present:
        return Column(task, None, set(), "-", {})
    best = max(present, key=lambda m: present[m].mean)
    use_items = _uses_items(present)
    tied, p = {best}, {}
    for m, c in present.items():
        if m == best:
            continue
        p[m] = bootstrap(present[best].items, c.items) if use_items else _seed_p(present[best].scores, c.scores)
        if p[m] >= TIE_P:
            tied.add(m)
    return Column(task, best, tied, "items" if use_items else "seeds", p)


def collect(
    study: Study,
    records: Sequence[dict[str, Any]],
    root: str | Path,
    task_names: Sequence[str],
    model_label: str | None = None,
) -> dict:
    """``{task: {method: Cell}}`` from the stored records that match the study's conditions exactly
    (model, config = the study's options, setup, seeds); anything else is left out. ``model_label``:
    the base model's label in the records (default: ``model_label_of(study.model)``; the site passes
    :func:`records_model_label`, which needs no local folder). A record read by
    ``aggregate.load_records`` (``_path`` under ``root``, e.g. ``leaderboards/studies/NAME/...``) has its
    per-item files found beside it."""
    from benchbench.core.methods import build_config, config_hash
    from benchbench.core.registry import get_registry
    from benchbench.run.runner import model_label_of
    from benchbench.store.results import record_items

    reg = get_registry()
    want_hash = {m: config_hash(build_config(reg.method(m), study.overrides(m))) for m in study.methods}
    model = model_label or model_label_of(study.model)
    out: dict[str, dict[str, Cell]] = {t: {m: Cell({}, {}) for m in study.methods} for t in task_names}
    for r in records:
        m, t, s = r.get("method"), r.get("task"), r.get("seed")
        if m not in want_hash or t not in out or s not in study.seeds:
            continue
        if (
            r.get("config_hash") != want_hash[m]
            or r.get("model") != model
            or r.get("setup", "unsupervised") != "unsupervised"
        ):
            continue
        score = ((r.get("splits") or {}).get("test") or {}).get("main_score")
        if score is None:
            continue
        cell = out[t][m]
        cell.scores[s] = float(score)
        cell.records[s] = r
        if (r.get("items") or {}).get("test"):
            try:
                cell.items[s] = record_items(r, _store_root(r, root), "test")
            except DataError:
                pass  # a damaged items file: this cell falls back to the seed test
    return out


def _store_root(record: Mapping[str, Any], root: str | Path) -> Path:
    """The store a record was read from: ``root`` for a ``ResultStore`` record; for one read by
    ``aggregate.load_records`` (``_path`` relative to ``root``, in any sub-folder) the folder its key's
    path hangs from, so its per-item files are found beside it."""
    rel = record.get("_path")
    if not rel:
        return Path(root)
    from benchbench.store.results import key_of

    return (Path(root) / str(rel)).parents[len(key_of(dict(record)).relpath().parts) - 1]


# ---- rendering: one table (StudyView) for `study report`, leaderboards/README.md and the site ------
STUDY_AVG = "study"  # the average column's name in ``aggregate``'s footnotes ("study avg: only over ...")
NO_CELL = "–"
AT_START_MARK = "≈"  # a trained cell the paired test cannot separate from the study's start row
BOOTSTRAP_NOTE = "1000 resamples, seed 0"  # seed_mean_bootstrap's defaults: a rebuild prints the same groups


def _local(model: str) -> bool:
    """A study model given as a folder (``~/...``, an absolute or ``./`` path), not a hub/offline name."""
    return Path(model).is_absolute() or model.startswith(("~", "./", "../"))


def records_model_label(study: Study, records: Sequence[Mapping[str, Any]]) -> tuple[str, list[str]]:
    """(the base model's label in the study's records, other labels of the same local folder name),
    from the records alone: a rebuild on a machine without the study's local model folder (CI) must
    show the same table. A hub/offline model: its canonical label. A local folder: the
    ``<folder name>@<weights hash>`` most of the study's records carry (``runner.local_model_label``);
    records of other weights in a folder of that name are named, never mixed in."""
    if not _local(study.model):
        from benchbench.encode.models import canonical_model_name

        return canonical_model_name(study.model), []
    name = Path(study.model).name
    pat = re.compile(re.escape(name) + r"@[0-9a-f]{12}")
    counts = Counter(
        str(r.get("model")) for r in records if r.get("method") in study.methods and pat.fullmatch(str(r.get("model")))
    )
    if not counts:
        return f"{name}@<weights hash>", []
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return ranked[0][0], [k for k, _ in ranked[1:]]


@dataclass(frozen=True)
class PaperNumber:
    ref: str  # the paper table's file name (``tsdae-table2``); the notes say which paper, table and base model
    value: float


def paper_numbers(
    methods: Sequence[str], tasks: Sequence[str]
) -> tuple[dict[tuple[str, str], tuple[PaperNumber, ...]], dict[str, str]]:
    """({(method, task): numbers papers report}, {ref: which paper}) from the versioned paper tables
    (``benchbench/report/reproductions/<ref>.toml``). A table's first row of a method is the method
    itself (later rows are its variants: bi-QT, + drophead), so only that row is taken; averages are
    left out (a paper's average is over its own task set)."""
    # the files are read here, not through ``reproduce`` (which imports the site: an import cycle)
    folder = resources.files("benchbench.report") / "reproductions"
    cells: dict[tuple[str, str], list[PaperNumber]] = {}
    refs: dict[str, str] = {}
    for f in sorted((p for p in folder.iterdir() if p.name.endswith(".toml")), key=lambda p: p.name):
        name, spec = f.name[: -len(".toml")], tomllib.loads(f.read_text(encoding="utf-8"))
        taken: dict[str, str] = {}  # method -> the row's label in the paper
        for row in spec.get("rows") or []:
            m = str(row.get("method", ""))
            if m not in methods or m in taken:
                continue
            vals = {t: float(v) for t, v in (row.get("published") or {}).items() if t in tasks}
            taken[m] = str(row.get("label", m)) if vals else ""
            for t, v in vals.items():
                cells.setdefault((m, t), []).append(PaperNumber(name, v))
        rows = [f"{label} ({m})" for m, label in taken.items() if label]
        if rows:
            refs[name] = (
                f"{spec.get('paper', name)}, {spec.get('table', '')}; base model "
                f"{spec.get('model') or 'not stated'}; rows {', '.join(rows)}"
            )
    return {k: tuple(v) for k, v in cells.items()}, refs


@dataclass(frozen=True)
class ShownCell:
    text: str  # aggregate.cell_text (mean ± sample std, then the marks) and "(n)"; NO_CELL when empty
    tied: bool  # in the column's tie group (rank 1)
    sort: float | None
    papers: tuple[PaperNumber, ...] = ()
    at_start: bool = False  # a trained cell not separable from the start row (AT_START_MARK in ``text``)


@dataclass(frozen=True)
class ShownRow:
    method: str
    label: str  # the method, with aggregate's row marks ([T] transductive, [S] selects on labels)
    cells: tuple[ShownCell, ...]
    avg: float | None  # aggregate.suite_average: only a row with every task (none partial)


@dataclass
class StudyView:
    """Everything one study's table shows, computed once; :func:`view_markdown` and the site render it."""

    study: Study
    model_label: str
    tasks: list[str]
    columns: dict[str, Column]
    rows: list[ShownRow]
    notes: list[str]
    papers: dict[str, str]
    stored: int  # (method, task, seed) cells with a record
    missing: list[str]  # per method: what is not stored

    @property
    def total(self) -> int:
        return len(self.study.methods) * len(self.tasks) * len(self.study.seeds)

    @property
    def command(self) -> str:
        builtin = self.study.path == f"benchbench/report/studies/{self.study.name}.toml"
        arg = self.study.name if builtin else self.study.path
        return f"benchbench study run {arg} --output leaderboards/studies/{self.study.name}"

    @property
    def status(self) -> str:
        rebuild = "benchbench leaderboard --results leaderboards --out leaderboards"
        if self.stored == 0:
            return (
                f"Not run yet: no stored record matches this study's conditions. Run it with `{self.command}`, "
                f"then rebuild with `{rebuild}`."
            )
        if self.stored < self.total:
            return (
                f"Partly run: {self.stored} of {self.total} (method, task, seed) cells stored; the missing ones "
                f"are listed under the table. Resume with `{self.command}` (stored cells are skipped)."
            )
        return f"Complete: all {self.total} (method, task, seed) cells stored."

    @property
    def conditions(self) -> str:
        st = self.study
        model = f"local folder {Path(st.model).name}" if _local(st.model) else st.model
        lr = "each method's default" if st.lr == "method" else f"{st.lr:g}"
        per = "; ".join(
            f"{m}: " + ", ".join(f"{k}={v}" for k, v in sorted(o.items())) for m, o in sorted(st.per_method.items())
        )
        return (
            f"Conditions: base model {model} (records: {self.model_label}); budget {st.steps} steps, batch size "
            f"{st.batch_size}, learning rate {lr}, checkpoint selection {st.selection!r} (the encoder at the end "
            f"of the budget); seeds {list(st.seeds)}; study version {st.version} ({st.path})"
            + (f"; per-method options: {per}" if per else "")
            + "."
        )


def _missing(study: Study, table: Mapping[str, Mapping[str, Cell]], tasks: Sequence[str]) -> list[str]:
    """Per method, the (task, seed) cells with no record: ``ct: sts12, stsb (seed 3)``."""
    missing = []
    for m in study.methods:
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


def _start_note(study: Study, rows: Sequence[ShownRow]) -> list[str]:
    """The footnote of the ``≈`` mark, with how many trained cells carry it (none without a start row)."""
    if not study.start:
        return []
    marked = sum(c.at_start for r in rows for c in r.cells)
    trained = sum(c.sort is not None for r in rows if r.method != study.start for c in r.cells)
    return [
        f"{AT_START_MARK}: the trained cell is not separable from the start row ({study.start}: the base model "
        f"itself, no training) by the column's paired test at p < {TIE_P}: at this budget the method did not "
        f"move this task's score beyond noise (its encoder changed; its score did not). Marked: {marked} of "
        f"{trained} trained cells."
    ]


def view(
    study: Study,
    table: Mapping[str, Mapping[str, Cell]],
    papers: tuple[Mapping[tuple[str, str], tuple[PaperNumber, ...]], Mapping[str, str]] | None = None,
    model_label: str | None = None,
    extra_notes: Sequence[str] = (),
) -> StudyView:
    """The study's table: a tie group per column (:func:`tie_column`), each cell's text and marks
    from ``aggregate`` (the records' did-not-learn ``!``, not-zero-shot ``‡``, row marks ``[T]``/``[S]``
    and their footnotes), the average only over complete rows, the papers' numbers beside the cells
    they report (default: :func:`paper_numbers`), and what is missing."""
    from benchbench.report import aggregate

    if model_label is None:
        from benchbench.run.runner import model_label_of

        model_label = model_label_of(study.model)
    tasks = list(table)
    cols = {t: tie_column(t, table[t]) for t in tasks}
    starts = {t: start_column(table[t], study.start) for t in tasks} if study.start else {}
    by_cell, refs = papers if papers is not None else paper_numbers(study.methods, tasks)
    agg_rows = []
    for m in study.methods:
        recs = [r for t in tasks for r in table[t][m].records.values()]
        if recs:
            agg_rows.append(aggregate.Row((m,), m, m, model_label, recs))
    suites = {STUDY_AVG: tasks}
    trs = aggregate.table_rows(agg_rows, tasks, suites)
    by_method = {tr.row.method: tr for tr in trs}
    rows, used = [], set()
    for m in study.methods:
        tr = by_method.get(m)
        acells: dict[str, aggregate.Cell | None] = {}
        shown = []
        for t in tasks:
            sc = table[t][m].scores
            a = (tr.cells.get(t) if tr else None) or (aggregate.Cell(dict(sc)) if sc else None)
            acells[t] = a
            pn = tuple(by_cell.get((m, t), ()))
            used |= {p.ref for p in pn}
            text = NO_CELL if a is None else f"{aggregate.cell_text(a)} ({len(a.scores)})"
            at_start = a is not None and starts.get(t, {}).get(m, 0.0) >= TIE_P
            text += f" {AT_START_MARK}" if at_start else ""
            shown.append(ShownCell(text, m in cols[t].tied, None if a is None else a.mean, pn, at_start))
        label = tr.row.display_label if tr else m
        rows.append(ShownRow(m, label, tuple(shown), aggregate.suite_average(acells, tasks)))
    notes = [
        f"Cells: mean ± sample std over the seeds stored, (n) = how many; {NO_CELL} none stored. Bold ¹: the "
        f"column's best and every method a paired test cannot separate from it at p < {TIE_P} (they share rank 1). "
        "Tie test per column: "
        + ", ".join(f"{t}: {c.test}" for t, c in cols.items())
        + f" (items = stratified bootstrap of the seed-mean difference over the task's items, {BOOTSTRAP_NOTE}; "
        "seeds = paired t-test over seeds, used when a cell has no per-item scores; - = no cell).",
        "avg: the mean over the study's tasks, only for a row with every task stored (none partial).",
        *_start_note(study, rows),
        *aggregate.table_notes(trs, suites),
    ]
    notes.extend(extra_notes)
    if used:
        notes.append(
            "[paper NAME: x]: the number a paper reports for that method and task, as context only: another base "
            "model, budget and often evaluation, so never a comparable cell (in no tie group and no average). "
            "NAME is its table in benchbench/report/reproductions/NAME.toml:"
        )
        notes.extend(f"{r}: {refs[r]}" for r in sorted(used))
    if study.model_note:
        notes.append(study.model_note)
    missing = _missing(study, table, tasks)
    stored = sum(len(table[t][m].scores) for t in tasks for m in study.methods)
    return StudyView(study, model_label, tasks, cols, rows, notes, dict(refs), stored, missing)


_MARKUP = {  # format -> (escape, a tie-group cell, the papers' numbers)
    "md": (escape_md, "**{}** ¹", " [paper {}]"),
    "html": (escape_html, "<b>{}</b> ¹", ' <span class="paper">[paper {}]</span>'),
}


def render_cell(cell: ShownCell, fmt: str) -> str:
    """One cell's text in ``fmt`` ("md" or "html"): the one renderer behind both formats."""
    esc, tied, paper = _MARKUP[fmt]
    out = tied.format(esc(cell.text)) if cell.tied else esc(cell.text)
    if cell.papers:
        out += paper.format(esc(", ".join(f"{p.ref}: {p.value:.2f}" for p in cell.papers)))
    return out


def view_markdown(v: StudyView, heading: str = "###") -> str:
    """The study's Markdown: title, status, conditions, the table, its notes and what is missing."""
    st = v.study
    lines = [f"{heading} {escape_md(st.name)} (v{st.version})", "", escape_md(st.description), ""]
    lines += [escape_md(v.status), "", escape_md(v.conditions), ""]
    lines.append("| method | " + " | ".join(escape_md(t) for t in v.tasks) + " | avg |")
    lines.append("|---|" + "---:|" * (len(v.tasks) + 1))
    for row in v.rows:
        cells = [render_cell(c, "md") for c in row.cells] + ["" if row.avg is None else f"{row.avg:.2f}"]
        lines.append(f"| {escape_md(row.label)} | " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"- {escape_md(n)}" for n in v.notes]
    if v.missing and v.stored:
        lines += ["", "Missing cells:", ""] + [f"- {escape_md(x)}" for x in v.missing]
    return "\n".join(lines) + "\n"


def report_markdown(
    study: Study,
    table: Mapping[str, Mapping[str, Cell]],
    papers: tuple[Mapping[tuple[str, str], tuple[PaperNumber, ...]], Mapping[str, str]] | None = None,
) -> str:
    """Methods as rows, tasks as columns, mean ± std; the tie group in bold with rank 1 (:func:`view`)."""
    return view_markdown(view(study, table, papers))
