"""Study files: declared, controlled comparisons (``benchbench study list | run``), read, validated,
planned and run. Their tables (statistics and rendering) are ``benchbench.report.study_view``'s.

A study is a versioned data file that fixes what a fair comparison must hold equal: ONE base model,
ONE budget (steps, batch size, learning-rate rule, checkpoint-selection rule), the methods, the seeds
(>= 5 for a published study; 3 or 4 make it preliminary) and the tasks. ``run`` executes its cells
through the sweep machinery (resumable: a stored cell is skipped) with per-item scores stored.

Built-in study files live in ``benchbench/run/studies/`` (``name.toml``) or are given as a path::

    name = "post-training-minilm"
    version = 3                              # bump on EVERY edit (tests/run/test_study_spec.py holds the hashes)
    description = "..."
    model = "all-MiniLM-L6-v2"
    start = "plm-mean"                       # the base model itself, untrained: the row trained cells are read against
    seeds = [1, 2, 3, 4, 5]
    tasks = ["twitterpara", "sts"]          # tasks or suites
    methods = ["tsdae", "simcse", ...]
    step0_rows = true                        # optional: each trained method's step-0 row as cells too
    random_init = "tiny-bert:384:6:12:1536"  # optional: the start's method on a random init of its shape
    [budget]
    steps = 100
    batch_size = 16
    lr = "method"                            # the method's own default, or a number for every method
    selection = "last"                       # "last": the encoder at the end of the budget
    precision = "auto"                       # optional: --train-precision of the trained cells (auto, fp32, bf16)
    [statistics]                             # optional (defaults shown)
    margin = 1.0                             # the equivalence margin of "≈ start", in points of the metric (x100)
    resamples = 10000                        # hierarchical bootstrap resamples
    [set.simcse]                             # per-method options (strings, as --set gives them)
    select_on_stsb_dev = "false"
    [curves]                                 # optional: a learning curve (train.monitor) in every trained cell
    every = 10                               # a dev point every 10 steps, plus the step-0 point and the last
    split = "dev"
    task = "stsb"                            # whose split ("" or absent: each cell's own task)

Every value is checked against a schema before anything runs (types, ranges, uniqueness, known names);
each error names the file and the key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import tomllib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from benchbench.core.errors import BenchbenchError, ConfigError
from benchbench.core.seeds import SEED_MAX

STUDY_KEYS = {
    "name",
    "version",
    "description",
    "model",
    "model_note",
    "exploratory",
    "start",
    "seeds",
    "tasks",
    "methods",
    "budget",
    "statistics",
    "set",
    "curves",
    "step0_rows",
    "random_init",
    "tier",
    "question",
    "primary",
    "secondary",
    "cost",
    "train_task",
    "obtain",
}
PRIMARY_KEYS = {"task", "split", "statistic", "comparison"}
COMPARISONS = ("own-step0", "start")  # each trained row against its own step-0 row, or against the study's start
TIERS = ("core", "extended")
COST_KEYS = {"cpu_hours", "measured"}
# A core study runs from scratch on the project's own 2-core CPU within this many hours of wall time
# (issue 47); a design that needs more is "extended" and waits for a lent GPU.
CORE_MAX_CPU_HOURS = 2.5
CURVES_KEYS = {"every", "split", "task", "per_task"}
BUDGET_KEYS = {"steps", "batch_size", "lr", "selection", "precision"}
STATISTICS_KEYS = {"margin", "resamples"}
SELECTIONS = ("last",)  # the encoder at the end of the budget; a method that selects on labels is flagged
MIN_SEEDS = 3  # a study file with fewer does not load: two seeds give no seed variance worth the name
PUBLISHED_MIN_SEEDS = 5  # fewer and the study is shown as preliminary (its seed variance is a rough guess)
# 1.0 point of the metric (x100): the smallest seed std of trained cells in the committed studies' busier
# rows is ~0.5-1.5 and papers report gains of 1-5 points, so a method within +-1 of its start is
# "did not move it by a reportable amount"; a study may state its own.
DEFAULT_MARGIN = 1.0
DEFAULT_RESAMPLES = 10_000  # p-value Monte-Carlo error +-0.002 at p = 0.05: group membership stops moving
MIN_RESAMPLES = 1_000


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
    # why the study cannot support conclusions about methods (e.g. its start fails the plain-start test):
    # shown as "exploratory" in its title, status and summary; "" for a study that makes its claims
    exploratory: str = ""
    path: str = ""
    start: str = ""  # the training-free row that IS the base model: every trained cell is tested against it
    margin: float = DEFAULT_MARGIN
    resamples: int = DEFAULT_RESAMPLES
    sha256: str = ""  # of the file's bytes: with ``version``, what a record set was planned from
    # [curves]: a dev point every ``curve_every`` steps (0: none) on ``curve_task``'s ``curve_split`` (""
    # task: each cell's own), plus the step-0 point; ``step0_rows``: each trained method's step-0 row too
    curve_every: int = 0
    curve_split: str = "dev"
    curve_task: str = ""
    # [curves.per_task]: a study task followed on another (task, split) than the default above, e.g.
    # TwitterPara (no dev split) on its held-out TURL pairs: {"twitterpara": ("twitterpara", "heldout")}
    curve_per_task: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    step0_rows: bool = False
    # a model of the start's shape at random initialisation (``tiny-bert:H:L:A:I``): the row that tells
    # whether the start learned anything a trained row could build on ("" none)
    random_init: str = ""
    # Pre-registration, fixed before any cell runs. ``tier``: "core" (finishes on the project's CPU, leads
    # the front page; every field below required) or "extended" (GPU-sized; shown collapsed below).
    tier: str = "extended"
    question: str = ""
    primary: Mapping[str, str] = field(default_factory=dict)  # task, split, statistic, comparison
    secondary: tuple[str, ...] = ()  # the other columns: read as secondary, never as the headline
    cpu_hours: float = 0.0  # the wall time the file expects on a quiet 2-core CPU (0: not stated)
    cost_measured: str = ""  # how that expectation was obtained (``study run --estimate`` on which machine)
    # the task whose unlabelled text every trained row trains on, once per seed, for every column ("" : each
    # column's own task): a domain-adaptation study reads its other columns with the same adapted encoders
    train_task: str = ""
    # {local path as the file writes it: the one command that builds it}: every local folder the study names
    # (its model, a generator or teacher in [set.*]) says how a fresh clone gets it; a core study names none
    obtain: Mapping[str, str] = field(default_factory=dict)
    # [budget] precision: the trained cells' --train-precision ("auto": every committed study's; another
    # value is part of their keys, ``runner.with_train_precision``)
    train_precision: str = "auto"

    @property
    def builtin(self) -> bool:
        return self.path == f"benchbench/run/studies/{self.name}.toml"

    @property
    def preliminary(self) -> bool:
        """Fewer than ``PUBLISHED_MIN_SEEDS`` seeds: shown, but marked preliminary everywhere."""
        return len(self.seeds) < PUBLISHED_MIN_SEEDS

    def command(self, output: str | Path | None = None) -> str:
        """The command that runs (or resumes) this study into ``output`` (default: its leaderboard folder)."""
        arg = self.name if self.builtin else self.path
        return f"benchbench study run {arg} --output {output or f'leaderboards/studies/{self.name}'}"

    def curve_for(self, task: str) -> tuple[str, str]:
        """(task, split) a cell of ``task`` is followed on: its [curves.per_task] entry, else [curves]'
        task ("" for the cell's own) and split."""
        return self.curve_per_task.get(task, (self.curve_task, self.curve_split))

    def curve_options(self, task: str = "") -> dict[str, Any]:
        """The RunOptions fields that store a ``task`` cell's learning curve (``train.monitor``); {}
        without [curves]."""
        if not self.curve_every:
            return {}
        on, split = self.curve_for(task)
        return {"eval_every": self.curve_every, "eval_split": split, "eval_task": on or None}

    def step0_overrides(self, method: str) -> dict[str, str] | None:
        """The options of ``method``'s step-0 row (its cell's options, stopped at step 0:
        ``core.methods.step0_options_of``); None for the start, a training-free method, a method with no
        meaningful step-0 row (BERT-flow) or a study without ``step0_rows``."""
        from benchbench.core.methods import step0_options_of
        from benchbench.core.registry import get_registry

        if not self.step0_rows or method == self.start:
            return None
        try:
            stop = step0_options_of(get_registry().method(method))
        except ConfigError:
            return None
        return {**self.overrides(method), **stop}

    def rows(self) -> list[StudyRow]:
        """Every row of the study's table, in display order: the start, its random-init row (after the
        start), and each trained method preceded by its step-0 row when the study has ``step0_rows``.
        Each trained row names the row it is read against: its own step-0 row when it has one (same
        pooling, head and template: the start as THAT method's encoder), else the study's start."""
        out: list[StudyRow] = []
        for m in self.methods:
            if m == self.start:
                out.append(StudyRow(m, m, STUDY_ROW_START))
                if self.random_init:
                    out.append(StudyRow(random_init_row(m), m, STUDY_ROW_RANDOM, self.random_init, m))
                continue
            step0 = self.step0_overrides(m)
            if step0 is not None:
                out.append(StudyRow(step0_row(m), m, STUDY_ROW_STEP0, reference=self.start, step0=True))
            out.append(StudyRow(m, m, STUDY_ROW_TRAINED, reference=step0_row(m) if step0 is not None else self.start))
        return out

    def trains(self, row: StudyRow) -> bool:
        """Whether ``row``'s cells run a training method (a trained row, or its step-0 row)."""
        from benchbench.core.registry import get_registry

        return row.kind in (STUDY_ROW_TRAINED, STUDY_ROW_STEP0) and bool(get_registry().method(row.method).trains)

    def row_train_task(self, row: StudyRow) -> str | None:
        """The task whose text ``row`` trains on when the study names one (``train_task``), else None."""
        return self.train_task if self.train_task and self.trains(row) else None

    def record_hash(self, row: StudyRow) -> str:
        """The ``config_hash`` the records of ``row``'s cells carry: the row's options, its train task and
        its training precision (a training method's, as the runner folds it in)."""
        from benchbench.core.methods import build_config, config_hash
        from benchbench.core.registry import get_registry
        from benchbench.encode.sizes import resolve_for_model
        from benchbench.run.runner import with_train_precision, with_train_task

        cls = get_registry().method(row.method)
        chash = config_hash(resolve_for_model(cls, build_config(cls, self.row_overrides(row)), row.model or self.model))
        chash = with_train_task(chash, self.row_train_task(row))
        return with_train_precision(chash, self.train_precision if cls.trains else "auto")

    def row_overrides(self, row: StudyRow) -> dict[str, str]:
        """The method options of ``row``'s cells (its step-0 options for a step-0 row)."""
        if row.step0:
            return self.step0_overrides(row.method) or {}
        return self.overrides(row.method)

    def overrides(self, method: str, options: Collection[str] | None = None) -> dict[str, str]:
        """The options a cell of ``method`` runs with: the study's budget, then its own options.
        ``options``: the method's option names (default: from the registry). A method whose budget is
        not counted in steps x batch (Trans-Encoder: pairs, epochs and cycles) gets only the budget keys
        it has and must state its budget in ``[set.<method>]``; the study file says how it matches."""
        trains = True
        if options is None:
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


STUDY_ROW_START, STUDY_ROW_RANDOM, STUDY_ROW_STEP0, STUDY_ROW_TRAINED = "start", "random init", "step 0", "trained"


def step0_row(method: str) -> str:
    return f"{method} (step 0)"


def random_init_row(method: str) -> str:
    return f"{method} (random init)"


@dataclass(frozen=True)
class StudyRow:
    """One row of a study's table: ``name`` as shown, the ``method`` its records hold, its ``kind``
    (start, random init, step 0, trained), ``model`` ("" = the study's base model) and the row it is
    read against (``reference``, "" for none)."""

    name: str
    method: str
    kind: str
    model: str = ""
    reference: str = ""
    step0: bool = False

    @property
    def context(self) -> bool:
        """A row that states a condition (the start untrained, its random init, a method's step 0),
        not a method's result: outside the tie groups and the summary's counts."""
        return self.kind in (STUDY_ROW_RANDOM, STUDY_ROW_STEP0)


def _builtin_dir() -> Any:
    return resources.files("benchbench.run") / "studies"


def available() -> list[str]:
    return sorted(p.name[: -len(".toml")] for p in _builtin_dir().iterdir() if p.name.endswith(".toml"))


def builtin_files() -> dict[str, bytes]:
    """name -> the bytes of each built-in study file (the version test hashes them)."""
    return {n: (_builtin_dir() / f"{n}.toml").read_bytes() for n in available()}


def load_study(name_or_path: str, check_names: bool = True) -> Study:
    """A built-in study by name, or a study file by path, validated (:func:`parse`); every error names
    the file and the key. ``check_names``: also check the methods and tasks against the registry."""
    path = Path(name_or_path)
    if path.suffix == ".toml" and path.is_file():
        data, where = path.read_bytes(), str(path)
    else:
        f = _builtin_dir() / f"{name_or_path}.toml"
        if not f.is_file():
            raise ConfigError(
                f"Unknown study {name_or_path!r}; built-in studies: {available()} (or give a .toml path)."
            )
        data, where = f.read_bytes(), f"benchbench/run/studies/{name_or_path}.toml"
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"Study file {where}: {e}") from e
    st = parse(doc, where, hashlib.sha256(data).hexdigest())
    if check_names:
        check_known_names(st)
    return st


# ---- the schema --------------------------------------------------------------------------------------
def _bad(where: str, key: str, why: str) -> ConfigError:
    return ConfigError(f"Study file {where}: {key}: {why}")


def _int(doc: Mapping[str, Any], key: str, where: str, lo: int, shown: str | None = None) -> int:
    v = doc[key.rsplit(".", 1)[-1]]
    if isinstance(v, bool) or not isinstance(v, int):
        raise _bad(where, shown or key, f"must be an integer >= {lo} (got {v!r}, a {type(v).__name__}).")
    if v < lo:
        raise _bad(where, shown or key, f"must be >= {lo} (got {v}).")
    return v


def _str(doc: Mapping[str, Any], key: str, where: str, required: bool = True) -> str:
    v = doc.get(key, "" if not required else None)
    if not isinstance(v, str) or (required and not v.strip()):
        raise _bad(where, key, f"must be {'a non-empty' if required else 'a'} string (got {v!r}).")
    return v


def _names(doc: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    v = doc[key]
    if not isinstance(v, list) or not v or not all(isinstance(x, str) and x.strip() for x in v):
        raise _bad(where, key, f"must be a non-empty list of names (strings), got {v!r}.")
    dup = sorted({x for x in v if v.count(x) > 1})
    if dup:
        raise _bad(where, key, f"names {dup} more than once; each must appear once.")
    return tuple(v)


def _seeds(doc: Mapping[str, Any], where: str) -> tuple[int, ...]:
    v = doc["seeds"]
    if not isinstance(v, list) or not all(isinstance(s, int) and not isinstance(s, bool) for s in v):
        raise _bad(where, "seeds", f"must be a list of integers such as [1, 2, 3, 4, 5] (got {v!r}).")
    bad = [s for s in v if not 0 <= s <= SEED_MAX]
    if bad:
        raise _bad(where, "seeds", f"every seed must be from 0 to 2**32-1 (got {bad[0]}).")
    dup = sorted({s for s in v if v.count(s) > 1})
    if dup:
        raise _bad(where, "seeds", f"seed {dup[0]} appears more than once; each seed once.")
    if len(v) < MIN_SEEDS:
        raise _bad(where, "seeds", f"a study needs >= {MIN_SEEDS} distinct seeds (got {v}).")
    return tuple(v)


def _budget(doc: Mapping[str, Any], where: str) -> tuple[int, int, str | float, str]:
    budget = doc.get("budget")
    if not isinstance(budget, dict):
        raise _bad(where, "budget", f"must be a table with steps and batch_size (got {budget!r}).")
    bad = set(budget) - BUDGET_KEYS
    missing = [f"budget.{k}" for k in ("steps", "batch_size") if k not in budget]
    if bad or missing:
        raise _bad(where, "budget", f"unknown keys {sorted(bad)}, missing {missing} (known: {sorted(BUDGET_KEYS)}).")
    steps = _int(budget, "budget.steps", where, 1)
    batch = _int(budget, "budget.batch_size", where, 1)
    lr = budget.get("lr", "method")
    if lr != "method" and (isinstance(lr, bool) or not isinstance(lr, int | float) or not math.isfinite(lr) or lr <= 0):
        raise _bad(where, "budget.lr", f"is 'method' or a positive number (got {lr!r}).")
    selection = budget.get("selection", "last")
    if selection not in SELECTIONS:
        raise _bad(where, "budget.selection", f"must be one of {SELECTIONS} (got {selection!r}).")
    return steps, batch, lr, selection


def _precision(doc: Mapping[str, Any], where: str) -> str:
    """[budget] precision: the trained cells' ``--train-precision`` ("auto" when absent)."""
    from benchbench.train.precision import TRAIN_PRECISIONS

    precision = doc["budget"].get("precision", "auto")
    if precision not in TRAIN_PRECISIONS:
        raise _bad(where, "budget.precision", f"must be one of {TRAIN_PRECISIONS} (got {precision!r}).")
    return precision


def _statistics(doc: Mapping[str, Any], where: str) -> tuple[float, int]:
    stats = doc.get("statistics", {})
    if not isinstance(stats, dict) or set(stats) - STATISTICS_KEYS:
        raise _bad(where, "statistics", f"must be a table with keys among {sorted(STATISTICS_KEYS)} (got {stats!r}).")
    margin = stats.get("margin", DEFAULT_MARGIN)
    if isinstance(margin, bool) or not isinstance(margin, int | float) or not (0 < margin < math.inf):
        raise _bad(where, "statistics.margin", f"must be a positive number of metric points (got {margin!r}).")
    resamples = _int(stats, "statistics.resamples", where, MIN_RESAMPLES) if "resamples" in stats else DEFAULT_RESAMPLES
    return float(margin), resamples


def _per_method(doc: Mapping[str, Any], methods: Sequence[str], where: str) -> dict[str, dict[str, str]]:
    per = doc.get("set", {})
    if not isinstance(per, dict) or not all(isinstance(v, dict) for v in per.values()):
        raise _bad(where, "set", "must hold one table per method ([set.<method>]).")
    stray = set(per) - set(methods)
    if stray:
        raise _bad(where, "set", f"[set.*] names methods not in the study: {sorted(stray)}.")
    out = {}
    for m, opts in per.items():
        for k, v in opts.items():
            if isinstance(v, dict | list):
                raise _bad(where, f"set.{m}.{k}", f"must be a single value, as --set gives it (got {v!r}).")
        out[m] = {k: str(v) for k, v in opts.items()}
    return out


def _curves(doc: Mapping[str, Any], where: str) -> tuple[int, str, str]:
    curves = doc.get("curves", {})
    if not isinstance(curves, dict) or set(curves) - CURVES_KEYS:
        raise _bad(where, "curves", f"must be a table with keys among {sorted(CURVES_KEYS)} (got {curves!r}).")
    every = _int(curves, "curves.every", where, 1) if "every" in curves else 0
    split, task = curves.get("split", "dev"), curves.get("task", "")
    if not isinstance(split, str) or not split.strip() or not isinstance(task, str):
        raise _bad(where, "curves", f"split must be a non-empty string and task a string (got {split!r}, {task!r}).")
    per = curves.get("per_task", {})
    if not isinstance(per, dict):
        raise _bad(where, "curves.per_task", f'must be a table of task = "task:split" (got {per!r}).')
    per_task: dict[str, tuple[str, str]] = {}
    for t, v in per.items():
        on, _, sp = v.partition(":") if isinstance(v, str) else ("", "", "")
        if not on.strip() or not sp.strip():
            raise _bad(where, f"curves.per_task.{t}", f'must be "task:split", e.g. "twitterpara:heldout" (got {v!r}).')
        per_task[t] = (on.strip(), sp.strip())
    return every, split, task, per_task


def is_local_path(value: str) -> bool:
    """A folder on this machine (``~/...``, an absolute or ``./`` path), not an installed or offline name."""
    return Path(value).is_absolute() or value.startswith(("~", "./", "../"))


def local_paths(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, path) of every local folder a study file names: its model, and each [set.*] value or
    ``k=v`` part of one (RankCSE's ``teacher_set`` names the generator of a teacher)."""
    out = [("model", str(doc.get("model", "")))]
    for m, opts in (doc.get("set") or {}).items():
        for k, v in (opts or {}).items():
            for part in str(v).split(","):
                out.append((f"set.{m}.{k}", part.partition("=")[2] if "=" in part else part))
    return [(k, p.strip()) for k, p in out if is_local_path(p.strip())]


def _obtain(doc: Mapping[str, Any], where: str, tier: str) -> dict[str, str]:
    """The [obtain] table, checked against the local folders the file names. Why: weights under one user's
    ``~/.cache`` make a study that no fresh clone can resume or re-derive; a core study (re-derived by CI
    on a clean clone) may name none, another study names the one command that builds each."""
    got = doc.get("obtain", {})
    if not isinstance(got, dict) or not all(isinstance(v, str) and v.strip() for v in got.values()):
        raise _bad(where, "obtain", 'must be a table of "<local path>" = "<the one command that builds it>".')
    named = local_paths(doc)
    if tier == "core" and named:
        key, path = named[0]
        raise _bad(
            where,
            key,
            f"{path!r} is a local folder; a core study runs from a fresh clone (CI re-derives it), so it may "
            'only name models and generators the install provides. A study that needs it is tier = "extended".',
        )
    for key, path in named:
        if path not in got:
            raise _bad(
                where,
                key,
                f"{path!r} is a local folder a fresh clone does not have: add it to [obtain] with the one command "
                f'that builds it ("{path}" = "python bench/... --out {path}").',
            )
    stray = sorted(set(got) - {p for _, p in named})
    if stray:
        raise _bad(where, "obtain", f"names folders the study does not use: {stray}.")
    return {k: v.strip() for k, v in got.items()}


def missing_local(study: Study) -> list[str]:
    """The local folders ``study`` names that are not on this machine, each with the command that builds it."""
    return [
        f"{path} (build it with: {cmd})" for path, cmd in study.obtain.items() if not Path(path).expanduser().exists()
    ]


def _preregistration(doc: Mapping[str, Any], where: str, seeds: Sequence[int]) -> dict[str, Any]:
    """The pre-registered fields (tier, question, primary endpoint, secondary columns, expected cost),
    checked. A core study must state all of them, with >= 5 seeds and a cost within
    ``CORE_MAX_CPU_HOURS``: a study that leads the front page says what it asks before it runs."""
    tier = doc.get("tier", "extended")
    if tier not in TIERS:
        raise _bad(where, "tier", f"must be one of {TIERS} (got {tier!r}).")
    out: dict[str, Any] = {"tier": tier, "question": _str(doc, "question", where, required=tier == "core")}
    primary = doc.get("primary", {})
    if not isinstance(primary, dict) or set(primary) - PRIMARY_KEYS:
        raise _bad(where, "primary", f"must be a table with keys among {sorted(PRIMARY_KEYS)} (got {primary!r}).")
    if primary or tier == "core":
        missing = sorted(PRIMARY_KEYS - set(primary))
        if missing:
            raise _bad(where, "primary", f"the primary endpoint needs {missing} (task, split, statistic, comparison).")
        bad = {k: v for k, v in primary.items() if not isinstance(v, str) or not v.strip()}
        if bad:
            raise _bad(where, "primary", f"every field is a non-empty string (got {bad}).")
        if primary["comparison"] not in COMPARISONS:
            raise _bad(where, "primary.comparison", f"must be one of {COMPARISONS} (got {primary['comparison']!r}).")
    out["primary"] = dict(primary)
    out["secondary"] = _names(doc, "secondary", where) if "secondary" in doc else ()
    cost = doc.get("cost", {})
    if not isinstance(cost, dict) or set(cost) - COST_KEYS:
        raise _bad(where, "cost", f"must be a table with keys among {sorted(COST_KEYS)} (got {cost!r}).")
    hours = cost.get("cpu_hours", 0.0)
    if isinstance(hours, bool) or not isinstance(hours, int | float) or not (0 <= hours < math.inf):
        raise _bad(where, "cost.cpu_hours", f"must be a number of hours >= 0 (got {hours!r}).")
    measured = cost.get("measured", "")
    if not isinstance(measured, str):
        raise _bad(where, "cost.measured", f"must be a string (got {measured!r}).")
    out["cpu_hours"], out["cost_measured"] = float(hours), measured
    if tier == "core":
        if not 0 < hours <= CORE_MAX_CPU_HOURS:
            raise _bad(
                where,
                "cost.cpu_hours",
                f"a core study finishes on the project's 2-core CPU within {CORE_MAX_CPU_HOURS} h (got {hours!r}); "
                'a larger design is tier = "extended".',
            )
        if not measured.strip():
            raise _bad(where, "cost.measured", "a core study says how its cost was measured (machine, command).")
        if len(seeds) < PUBLISHED_MIN_SEEDS:
            raise _bad(where, "seeds", f"a core study has >= {PUBLISHED_MIN_SEEDS} seeds (got {list(seeds)}).")
    return out


def parse(doc: dict[str, Any], where: str, sha256: str = "") -> Study:
    """A study from its TOML document, every key checked (types, ranges, uniqueness): a wrong value is
    a ConfigError naming ``where`` and the key, never a silent conversion (``"123"`` is not [1, 2, 3])."""
    unknown = set(doc) - STUDY_KEYS
    if unknown:
        raise ConfigError(f"Study file {where}: unknown keys {sorted(unknown)} (known: {sorted(STUDY_KEYS)}).")
    missing = [k for k in ("name", "version", "model", "seeds", "tasks", "methods", "budget") if k not in doc]
    if missing:
        raise ConfigError(f"Study file {where}: missing keys {missing}.")
    methods = _names(doc, "methods", where)
    start = _str(doc, "start", where, required=False)
    if start and start not in methods:
        raise _bad(where, "start", f"{start!r} is not one of the study's methods {list(methods)}.")
    steps, batch, lr, selection = _budget(doc, where)
    margin, resamples = _statistics(doc, where)
    curve_every, curve_split, curve_task, curve_per_task = _curves(doc, where)
    step0_rows = doc.get("step0_rows", False)
    if not isinstance(step0_rows, bool):
        raise _bad(where, "step0_rows", f"must be true or false (got {step0_rows!r}).")
    model = _str(doc, "model", where)
    random_init = _str(doc, "random_init", where, required=False)
    if random_init and not start:
        raise _bad(where, "random_init", "needs a start row (start = ...): the random init is the start's method.")
    seeds, tasks = _seeds(doc, where), _names(doc, "tasks", where)
    return Study(
        name=_str(doc, "name", where),
        version=_int(doc, "version", where, 1),
        description=_str(doc, "description", where, required=False),
        model=str(Path(model).expanduser()) if model.startswith("~") else model,
        seeds=seeds,
        tasks=tasks,
        methods=methods,
        steps=steps,
        batch_size=batch,
        lr=lr,
        selection=selection,
        per_method=_per_method(doc, methods, where),
        model_note=_str(doc, "model_note", where, required=False),
        exploratory=_str(doc, "exploratory", where, required=False),
        path=where,
        start=start,
        margin=margin,
        resamples=resamples,
        sha256=sha256,
        curve_every=curve_every,
        curve_split=curve_split,
        curve_task=curve_task,
        curve_per_task=curve_per_task,
        step0_rows=step0_rows,
        random_init=random_init,
        train_task=_str(doc, "train_task", where, required=False),
        obtain=_obtain(doc, where, str(doc.get("tier", "extended"))),
        train_precision=_precision(doc, where),
        **_preregistration(doc, where, seeds),
    )


def check_known_names(study: Study) -> None:
    """Every method and task (or suite) the study names is registered; the error names the file, the key
    and the closest known names."""
    from benchbench.core.registry import get_registry

    reg = get_registry()
    for m in study.methods:
        try:
            reg.method(m)
        except BenchbenchError as e:
            raise _bad(study.path, "methods", str(e)) from None
    for t in study.tasks:
        try:
            reg.expand([t])
        except BenchbenchError as e:
            raise _bad(study.path, "tasks", str(e)) from None
    if study.train_task:
        try:
            reg.task(study.train_task)
        except BenchbenchError as e:
            raise _bad(study.path, "train_task", str(e)) from None
    if study.curve_task:
        try:
            reg.task(study.curve_task)
        except BenchbenchError as e:
            raise _bad(study.path, "curves.task", str(e)) from None
    tasks = set(reg.expand(list(study.tasks)))
    if study.primary:
        on, split = study.primary["task"], study.primary["split"]
        if on not in tasks:
            raise _bad(study.path, "primary.task", f"{on!r} is not one of the study's tasks {sorted(tasks)}.")
        if split not in reg.task(on).splits:
            raise _bad(
                study.path, "primary.split", f"task {on!r} has no {split!r} split (its splits: {reg.task(on).splits})."
            )
    for s_ in study.secondary:
        try:
            reg.expand([s_])
        except BenchbenchError as e:
            raise _bad(study.path, "secondary", str(e)) from None
    for t, (on, split) in study.curve_per_task.items():
        if t not in tasks:
            raise _bad(study.path, f"curves.per_task.{t}", f"{t!r} is not one of the study's tasks {sorted(tasks)}.")
        try:
            spec = reg.task(on)
        except BenchbenchError as e:
            raise _bad(study.path, f"curves.per_task.{t}", str(e)) from None
        if split not in spec.splits:
            raise _bad(
                study.path, f"curves.per_task.{t}", f"task {on!r} has no {split!r} split (its splits: {spec.splits})."
            )


def record_key_rows(study: Study) -> dict[tuple[str, str], StudyRow]:
    """``{(method, config hash): row}`` for the rows of the study's own base model: which row a stored
    record of that method and config fills (the random-init row, another model, is left out)."""
    return {(row.method, study.record_hash(row)): row for row in study.rows() if not row.model}


# ---- running -----------------------------------------------------------------------------------------
def plan(study: Study, task_names: Sequence[str], seeds: Sequence[int] | None = None) -> list[Any]:
    """One sweep cell per (row, task, seed) of :meth:`Study.rows`: each with its row's options, its
    learning-curve options ([curves]) when it trains, and the random-init row's model."""
    from benchbench.run.sweep import SweepRun

    cells = []
    for row in study.rows():
        trains = study.trains(row)
        # the random-init row draws its init from each cell's seed: its seeds are draws, not repeats
        model = (
            {"model": row.model, **({"seeded_init": True} if row.kind == STUDY_ROW_RANDOM else {})} if row.model else {}
        )
        cells += [
            SweepRun(
                row.method,
                t,
                s,
                "unsupervised",
                {
                    "overrides": study.row_overrides(row),
                    **(study.curve_options(t) if trains else {}),
                    **({"train_task": study.train_task} if study.row_train_task(row) else {}),
                    **({"train_precision": study.train_precision} if study.train_precision != "auto" else {}),
                    **model,
                },
            )
            for t in task_names
            for s in (study.seeds if seeds is None else seeds)
        ]
    return cells


def subset(study: Study, what: str, declared: Sequence[Any], wanted: Sequence[Any] | None) -> list[Any]:
    """``declared`` (the study's tasks, methods or seeds) narrowed to ``wanted`` in the study's order; a
    name the study does not declare is a ConfigError (a cell outside the study is not the study's)."""
    if not wanted:
        return list(declared)
    norm = [w.strip() if isinstance(w, str) else w for w in wanted]
    stray = [w for w in norm if w not in declared]
    if stray:
        raise ConfigError(f"study {study.name!r} has no {what} {stray}; its {what}: {', '.join(map(str, declared))}.")
    return [d for d in declared if d in set(norm)]


def run(
    study: Study,
    output: str,
    executor: str = "local",
    cells: Sequence[Any] | None = None,
    encode: Mapping[str, str] | None = None,
    **sweep_kw: Any,
) -> list[Any]:
    """Run (or resume) ``cells`` (default: every cell of ``study``) into ``output`` with per-item scores
    stored. ``encode``: the RunOptions encode fields (``encode_backend``, ``encode_dtype``). Each record
    carries the code version (``git_sha``, ``versions``) and its encoder's fingerprint; the report marks
    a row whose cells disagree on them."""
    from benchbench.core.registry import get_registry
    from benchbench.run.sweep import base_options, run_sweep

    if cells is None:
        cells = plan(study, get_registry().expand(list(study.tasks)))
    absent = missing_local(study) if cells else []  # nothing to run needs nothing
    if absent:
        raise ConfigError(f"study {study.name!r} needs local folders this machine lacks: {'; '.join(absent)}.")
    base = base_options(model=study.model, output=output, progress=False, store_items=True, **dict(encode or {}))
    return run_sweep(list(cells), base, executor, **sweep_kw)


def supersede(study: Study, output: str | Path, keep: str | None = None) -> dict[str, int]:
    """Set aside, under ``<output>/.superseded/``, every record :func:`other_code_versions` counts (this
    study's methods and seeds, written by another code version), with its per-item files and the encoder
    trained on its corpus (``runs/.../train-<data>``); {code version: records moved}. Why: a study resumed at new code
    would otherwise keep the old cells (stored cells are skipped) and mix code versions in its rows; set
    aside, they are run again at this code version, and nothing stored is deleted. ``keep``: the code version
    to keep (``store.results.code_version``), default the loaded code's; a study run at a pinned older
    commit (bench/device_studies_pack.py ``--at``) is kept by naming that commit's version."""
    from benchbench.store.files import check_inside, move_into
    from benchbench.store.records import loaded_code
    from benchbench.store.results import SUPERSEDED, ResultStore, code_version, key_of
    from benchbench.train.reuse import training_folder

    state = loaded_code()
    store = ResultStore(output)
    if not store.root.is_dir() or not (keep or state.get("git_sha")):
        return {}
    now, moved = keep or code_version(state), {}
    for r in list(store.records()):
        if r.get("method") not in study.methods or r.get("seed") not in study.seeds or code_version(r) == now:
            continue
        key = key_of(r)
        why = f"written by code version {code_version(r)}; the study was resumed at {now}"
        store.set_aside(store.path(key), SUPERSEDED, why)
        data = str((r.get("train") or {}).get("train_data_sha256") or "")[:16]
        runs = training_folder(store.root, key) / f"train-{data}"  # reuse.py's folder of this corpus
        if data and runs.is_dir():  # trained by the other code: the new cells must train their own
            dest = check_inside(store.root / SUPERSEDED / runs.relative_to(store.root), store.root)
            n = 1
            while dest.exists():
                dest, n = dest.with_name(f"{runs.name}-{n}"), n + 1
            move_into(check_inside(runs, store.root), dest, store.root)  # no linked folder on either side
        moved[code_version(r)] = moved.get(code_version(r), 0) + 1
    return moved


def other_code_versions(study: Study, output: str | Path) -> dict[str, int]:
    """{code version: records} of this study's methods already in ``output`` that another code version wrote
    (a resumed study would mix commits in a row; the report marks such rows, ``study run`` says so first)."""
    from benchbench.store.records import loaded_code
    from benchbench.store.results import ResultStore, code_version

    state = loaded_code()
    if not Path(output).is_dir() or not state.get("git_sha"):
        return {}
    now = code_version(state)
    seen: dict[str, int] = {}
    for r in ResultStore(output).records():
        if r.get("method") in study.methods and r.get("seed") in study.seeds and code_version(r) != now:
            v = code_version(r)
            seen[v] = seen.get(v, 0) + 1
    return seen
