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

import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from benchbench.core.errors import ConfigError, DataError

STUDY_KEYS = {"name", "version", "description", "model", "model_note", "seeds", "tasks", "methods", "budget", "set"}
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

    def overrides(self, method: str) -> dict[str, str]:
        """The options a cell of ``method`` runs with: the study's budget, then its own options."""
        out = {"steps": str(self.steps), "batch_size": str(self.batch_size)}
        if self.lr != "method":
            out["lr"] = str(self.lr)
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
    study: Study, output: str, executor: str = "local", cells: Sequence[Any] | None = None, **sweep_kw: Any
) -> list[Any]:
    """Run (or resume) ``cells`` (default: every cell of ``study``) into ``output`` with per-item scores stored."""
    from benchbench.core.registry import get_registry
    from benchbench.run.sweep import base_options, run_sweep

    if cells is None:
        cells = plan(study, get_registry().expand(list(study.tasks)))
    base = base_options(model=study.model, output=output, progress=False, store_items=True)
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


def tie_column(task: str, cells: Mapping[str, Cell], bootstrap: Callable[..., float] = seed_mean_bootstrap) -> Column:
    """The column's best (highest mean) and the methods not separable from it at p < ``TIE_P``."""
    present = {m: c for m, c in cells.items() if c.scores}
    if not present:
        return Column(task, None, set(), "-", {})
    best = max(present, key=lambda m: present[m].mean)
    use_items = all(set(c.items) >= set(c.scores) for c in present.values())
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


def report_markdown(study: Study, table: Mapping[str, Mapping[str, Cell]], paper: Mapping | None = None) -> str:
    """Methods as rows, tasks as columns, mean ± sample std; the tie group in bold with rank 1."""
    from benchbench.report.escaping import escape_md as escape_markdown

    cols = {t: tie_column(t, cells) for t, cells in table.items()}
    head = "| method | " + " | ".join(escape_markdown(t) for t in table) + " |"
    lines = [f"### {escape_markdown(study.name)} (v{study.version})", "", study.description, "", head]
    lines.append("|---|" + "---|" * len(table))
    for m in study.methods:
        row = [escape_markdown(m)]
        for t, cells in table.items():
            c = cells[m]
            if not c.scores:
                row.append("–")
                continue
            txt = f"{c.mean:.2f}" + (f" ± {c.std:.2f}" if c.std is not None else "") + f" ({len(c.scores)})"
            if m in cols[t].tied:
                txt = f"**{txt}** ¹"
            if paper and (paper.get(m) or {}).get(t) is not None:
                txt += f" [paper {paper[m][t]:.2f}]"
            row.append(txt)
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        f"Base model {study.model}; budget {study.steps} steps, batch {study.batch_size}, lr "
        f"{study.lr}, selection {study.selection}; seeds {list(study.seeds)}. Mean ± sample std over "
        "seeds (n). **Bold ¹**: the column's best and every method a paired test cannot separate from "
        f"it at p < {TIE_P} (test per column: "
        + ", ".join(f"{escape_markdown(t)}: {c.test}" for t, c in cols.items())
        + "; items = stratified bootstrap of the seed-mean over the task's items, seeds = paired t-test).",
    ]
    if study.model_note:
        lines += ["", study.model_note]
    return "\n".join(lines) + "\n"
