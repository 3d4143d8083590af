"""A study's table (``benchbench study report NAME``, the leaderboard README and the site's front page):
the stored records that match its conditions, the column statistics, the provenance and the page.

Cells are ``aggregate.Cell``\\ s (the one aggregation: mean ± sample std over distinct seeds), built from
the records of the study's exact conditions (``collect``). Per column, ``stats.hierarchical_bootstrap``
resamples each method's seeds and the task's items (one item draw shared by every method: paired);
then

* **tie group (bold, rank 1)**: the column's best and every method whose difference from it is not
  significant after Holm's correction over the column's comparisons (two-sided, alpha ``TIE_P``);
* **≈ start**: equivalence with the start row within ± the study's margin (TOST on the same bootstrap,
  Holm-corrected over the column's trained cells), never just "not separated"; a cell whose every
  seed lies on one side of the start is never ≈ (every seed agreeing is a move, however small);
* **↑ / ↓ start**: different from the start after Holm (the page's summary counts them).

Provenance: each row's records name their code version (``git_sha``, ``versions``) and encoder
(``encoder_fingerprint``); a row mixing code versions, or two encoders for one (method, seed, training
corpus), is marked and named. Papers' numbers are context in their own table (base model, budget), never
in a cell or a delta. Column statistics are cached by the checksums of the records they read
(``cache``), so a rebuild whose records did not change recomputes nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from benchbench.core.errors import DataError
from benchbench.report import aggregate, stats
from benchbench.report.escaping import escape_html, escape_md
from benchbench.run.study import PUBLISHED_MIN_SEEDS, Study

TIE_P = 0.05  # the family-wise level of the tie groups and of the equivalence (≈) claims
BOOTSTRAP_SEED = 0
STATS_VERSION = 3  # bump when the column statistics change: cached columns of another version are ignored
STUDY_AVG = "study"  # the average column's name in ``aggregate``'s footnotes ("study avg: only over ...")
NO_CELL = "–"
AT_START_MARK = "≈"  # equivalent to the study's start row within the margin (TOST)
ROW_MIXED_CODE = " [≠code]"  # the row's records come from more than one code version
ROW_MIXED_ENCODER = " [≠enc]"  # two trained encoders for one (method, seed, training corpus) in the row
FLAG_MARK = " ⚑"  # a text-overlap flag (``overlap_flags``) on the cell


# ---- collecting --------------------------------------------------------------------------------------
def collect(
    study: Study,
    records: Sequence[dict[str, Any]],
    root: str | Path,
    task_names: Sequence[str],
    model_label: str | None = None,
) -> dict[str, dict[str, aggregate.Cell]]:
    """``{task: {method: aggregate.Cell}}`` from the stored records that match the study's conditions
    exactly (model, config = the study's options, setup, seeds); anything else is left out. Each cell
    keeps its records and verified per-item scores by seed; an items file that fails verification is
    named in ``cell.damaged`` (the column then says it fell back to the seeds test, and why).
    ``model_label``: the base model's label in the records (default: ``model_label_of(study.model)``)."""
    from benchbench.core.methods import build_config, config_hash
    from benchbench.core.registry import get_registry
    from benchbench.encode.models import model_label_of
    from benchbench.store.results import record_items

    reg = get_registry()
    want_hash = {m: config_hash(build_config(reg.method(m), study.overrides(m))) for m in study.methods}
    model = model_label or model_label_of(study.model)
    out = {t: {m: aggregate.Cell({}) for m in study.methods} for t in task_names}
    for r in records:
        m, t, s = r.get("method"), r.get("task"), r.get("seed")
        if m not in want_hash or t not in out or s not in study.seeds:
            continue
        if r.get("config_hash") != want_hash[m] or r.get("model") != model:
            continue
        if r.get("setup", "unsupervised") != "unsupervised":
            continue
        score = aggregate.main_score(r)[0]
        if score is None:
            continue
        cell = out[t][m]
        cell.scores[s] = score
        cell.records[s] = r
        if (r.get("items") or {}).get("test"):
            try:
                cell.items[s] = record_items(r, _store_root(r, root), "test")
            except DataError as e:  # never silent: the column names the file and which test it used instead
                cell.damaged.append(str(e).splitlines()[0])
    return out


def _store_root(record: Mapping[str, Any], root: str | Path) -> Path:
    """The store a record was read from: ``root`` for a ``ResultStore`` record; for one read by
    ``aggregate.load_records`` (``_path`` relative to ``root``) the folder its key's path hangs from."""
    rel = record.get("_path")
    if not rel:
        return Path(root)
    from benchbench.store.results import key_of

    return (Path(root) / str(rel)).parents[len(key_of(dict(record)).relpath().parts) - 1]


# ---- column statistics ------------------------------------------------------------------------------
@dataclass
class StartTest:
    """One trained cell against the start row."""

    diff: float  # seed-mean minus the start's
    p: float  # two-sided difference, Holm-adjusted over the column's trained cells
    p_tost: float  # equivalence within the margin, Holm-adjusted
    one_side: bool  # every seed on one side of the start's mean
    equivalent: bool  # ≈: p_tost < TIE_P and not one_side

    @property
    def verdict(self) -> str:
        if self.equivalent:
            return "≈"
        if self.p < TIE_P:
            return "↑" if self.diff > 0 else "↓"
        return "?"


@dataclass
class Column:
    task: str
    best: str | None
    tied: set[str]  # methods sharing the best's rank (the best included)
    test: str  # stats.HIERARCHICAL | stats.SEEDS_ONLY | "-"
    p: dict[str, float]  # method -> Holm-adjusted p against the best
    p_raw: dict[str, float] = field(default_factory=dict)
    start: dict[str, StartTest] = field(default_factory=dict)  # trained method -> its test against the start
    why: str = ""  # why the seeds test decided (no items / a damaged items file)


def _column_test(cells: Mapping[str, aggregate.Cell]) -> tuple[str, str]:
    """(test, why): the hierarchical bootstrap when every seed of every cell has verified items."""
    damaged = [d for c in cells.values() for d in c.damaged]
    if damaged:
        return stats.SEEDS_ONLY, f"damaged per-item scores: {damaged[0]}" + (
            f" (+{len(damaged) - 1} more)" if len(damaged) > 1 else ""
        )
    lacking = [m for m, c in cells.items() if c.scores and not set(c.items) >= set(c.scores)]
    if lacking:
        return stats.SEEDS_ONLY, f"no per-item scores stored for {', '.join(lacking)}"
    return stats.HIERARCHICAL, ""


SCREEN = 2_000  # resamples of the first pass: a p-value far from every Holm threshold is settled there


def _pvalues(
    res: stats.Resampled, best: str, refs: Mapping[str, str], margin: float, methods: Sequence[str]
) -> dict[str, tuple]:
    """method -> (p against the best, p against its reference row, TOST p against it), unadjusted."""
    out = {}
    for m in methods:
        tie = stats.bootstrap_p(res, best, m) if m != best else None
        ref = refs.get(m)
        diff = stats.bootstrap_p(res, m, ref) if ref in res.observed else None
        tost = stats.tost_p(res, m, ref, margin) if ref in res.observed else None
        out[m] = (tie, diff, tost)
    return out


def _unsettled(ps: Mapping[str, tuple], n: int) -> set[str]:
    """Methods with a p-value that the first pass cannot place: drawn at least once on the other side
    (p above its floor 2/(n+1)) and below 3 x alpha (Holm's thresholds lie in [alpha/k, alpha])."""
    floor = 2.0 / (n + 1) + 1e-12
    return {m for m, trio in ps.items() if any(p is not None and floor < p < 3 * TIE_P for p in trio)}


def _references(start: str | Mapping[str, str], present: Collection[str]) -> dict[str, str]:
    """trained method -> the row it is read against: one start for every method, or each method's own
    (a mapping, e.g. its step-0 row); only pairs whose both rows have a cell."""
    pairs = dict.fromkeys(present, start) if isinstance(start, str) else dict(start)
    return {m: r for m, r in pairs.items() if m in present and r in present and m != r}


def column_stats(
    task: str,
    cells: Mapping[str, aggregate.Cell],
    start: str | Mapping[str, str] = "",
    margin: float = 1.0,
    n_resamples: int = 10_000,
    seed: int = BOOTSTRAP_SEED,
) -> Column:
    """The column's best (highest mean), its tie group and each trained cell's test against its
    reference row: ``start`` (one row for all) or a mapping method -> its own row (its step-0 row).
    Sequential Monte Carlo to keep a column affordable: every p-value first from ``SCREEN`` resamples;
    the methods with a p-value near a threshold (:func:`_unsettled`), the best and their reference rows
    are then resampled ``n_resamples`` times on the same item draws; their p-values replace the first."""
    present = {m: c for m, c in cells.items() if c.scores}
    if not present:
        return Column(task, None, set(), "-", {})
    test, why = _column_test(present)

    def boot(methods: Collection[str], n: int) -> stats.Resampled:
        items = {m: present[m].items for m in methods} if test == stats.HIERARCHICAL else None
        return stats.hierarchical_bootstrap({m: present[m].scores for m in methods}, items, n, seed)

    first = boot(present, min(SCREEN, n_resamples))
    best = max(present, key=lambda m: first.observed[m])
    refs = _references(start, present)
    ps = _pvalues(first, best, refs, margin, list(present))
    again = _unsettled(ps, first.n_resamples) if n_resamples > first.n_resamples else set()
    if again:
        keep = again | {best} | {refs[m] for m in again if m in refs}
        ps.update(_pvalues(boot(keep, n_resamples), best, refs, margin, sorted(again)))
    raw = {m: t[0] for m, t in ps.items() if t[0] is not None}
    adj = stats.holm(raw)
    col = Column(task, best, {best} | {m for m, p in adj.items() if p >= TIE_P}, test, adj, raw, why=why)
    p_diff = stats.holm({m: ps[m][1] for m in refs})
    p_tost = stats.holm({m: ps[m][2] for m in refs})
    for m, ref in refs.items():
        base = first.observed[ref]
        vals = list(present[m].scores.values())
        one_side = len(vals) >= 2 and (all(v < base for v in vals) or all(v > base for v in vals))
        eq = p_tost[m] < TIE_P and not one_side
        col.start[m] = StartTest(first.observed[m] - base, p_diff[m], p_tost[m], one_side, eq)
    return col


def tie_column(task: str, cells: Mapping[str, aggregate.Cell], n_resamples: int = 10_000, seed: int = 0) -> Column:
    """The column's best and the methods not separable from it (Holm-corrected hierarchical bootstrap)."""
    return column_stats(task, cells, n_resamples=n_resamples, seed=seed)


def _cache_key(task: str, cells: Mapping[str, aggregate.Cell], study: Study, seed: int) -> str:
    """What a column's statistics depend on: every record's checksum (or, without one, its scores and
    items hash), the test settings and the statistics' own version."""
    parts = []
    for m, c in sorted(cells.items()):
        for s, r in sorted(c.records.items(), key=lambda kv: str(kv[0])):
            parts.append([m, s, r.get("checksum"), r.get("items_sha256"), c.scores[s], s in c.items])
        parts.append([m, "damaged", c.damaged])
    blob = json.dumps([STATS_VERSION, task, study.start, study.margin, study.resamples, seed, parts], default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


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
    col = column_stats(task, cells, study.start, study.margin, study.resamples, seed)
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


# ---- provenance ----------------------------------------------------------------------------------------
@dataclass
class Provenance:
    """The code versions, devices and encoders behind a study's cells, and the rows that mix them."""

    commits: dict[str, int]  # git sha -> records
    versions: list[tuple[str, list[str]]]  # (package, its versions) for packages with more than one
    devices: dict[str, int]
    mixed_code: dict[str, list[str]]  # method -> its shas (when more than one)
    mixed_encoders: dict[str, list[str]]  # method -> "seed S: fp1 (tasks), fp2 (tasks)"


def provenance(study: Study, table: Mapping[str, Mapping[str, aggregate.Cell]]) -> Provenance:
    records = [(m, r) for t in table for m, c in table[t].items() for r in c.records.values()]
    commits = Counter(str(r.get("git_sha") or "unknown")[:12] for _, r in records)
    devices = Counter(str(r.get("device") or "unknown") for _, r in records)
    pkgs: dict[str, set[str]] = defaultdict(set)
    for _, r in records:
        for k, v in (r.get("versions") or {}).items():
            pkgs[k].add(str(v))
    shas: dict[str, set[str]] = defaultdict(set)
    encoders: dict[tuple[str, Any, str], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for m, r in records:
        shas[m].add(str(r.get("git_sha") or "unknown")[:12])
        train = r.get("train") if isinstance(r.get("train"), Mapping) else {}
        corpus = str(train.get("train_data_sha256") or train.get("corpus") or "")
        if corpus and r.get("encoder_fingerprint"):
            encoders[(m, r.get("seed"), corpus)][str(r["encoder_fingerprint"])].append(str(r.get("task")))
    mixed_enc: dict[str, list[str]] = defaultdict(list)
    for (m, s, _), fps in sorted(encoders.items(), key=lambda kv: (kv[0][0], str(kv[0][1]), kv[0][2])):
        if len(fps) > 1:
            mixed_enc[m].append(
                f"seed {s}: " + "; ".join(f"{fp[-16:]} ({', '.join(sorted(ts))})" for fp, ts in sorted(fps.items()))
            )
    return Provenance(
        dict(commits.most_common()),
        [(k, sorted(v)) for k, v in sorted(pkgs.items()) if len(v) > 1],
        dict(devices.most_common()),
        {m: sorted(v) for m, v in shas.items() if len(v) > 1},
        dict(mixed_enc),
    )


def provenance_notes(p: Provenance) -> list[str]:
    """What the page says about where its numbers come from: every version present, and each mixed row."""
    out = [
        f"Code versions present ({len(p.commits)} commit{'s' if len(p.commits) != 1 else ''}): "
        + ", ".join(f"{sha} ({n} records)" for sha, n in p.commits.items())
        + "."
    ]
    if p.versions:
        out.append(
            "Package versions that differ between records: "
            + "; ".join(f"{k} {', '.join(v)}" for k, v in p.versions)
            + "."
        )
    out.append("Devices: " + ", ".join(f"{d} ({n} records)" for d, n in p.devices.items()) + ".")
    if p.mixed_code:
        out.append(
            f"{ROW_MIXED_CODE.strip()}: the row's cells come from more than one code version (not one commit): "
            + "; ".join(f"{m}: {', '.join(v)}" for m, v in sorted(p.mixed_code.items()))
            + "."
        )
    for m, what in sorted(p.mixed_encoders.items()):
        out.append(
            f"{ROW_MIXED_ENCODER.strip()} {m}: cells of one seed and one training corpus come from different "
            f"trained encoders (encoder fingerprints, tail shown): {' | '.join(what)}."
        )
    return out


# ---- the base model's label ---------------------------------------------------------------------------
def is_local(model: str) -> bool:
    """A study model given as a folder (``~/...``, an absolute or ``./`` path), not a hub/offline name."""
    return Path(model).is_absolute() or model.startswith(("~", "./", "../"))


def records_model_label(study: Study, records: Sequence[Mapping[str, Any]]) -> tuple[str, list[str]]:
    """(the base model's label in the study's records, other labels of the same local folder name),
    from the records alone: a rebuild on a machine without the study's local model folder (CI) must
    show the same table. A hub/offline model: its canonical label. A local folder: the
    ``<folder name>@<weights hash>`` most of the study's records carry; records of other weights in a
    folder of that name are named, never mixed in."""
    if not is_local(study.model):
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


# ---- published context ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class PublishedRow:
    """A paper's row for one of the study's methods: context under its own conditions, never a cell."""

    ref: str  # the paper table's file (``tsdae-table2``: benchbench/report/reproductions/<ref>.toml)
    paper: str
    label: str  # the row's name in the paper
    method: str
    base_model: str
    budget: str  # the paper's setting: data, steps/epochs, batch, lr, selection
    values: dict[str, float]


def published_context(methods: Sequence[str], tasks: Sequence[str]) -> list[PublishedRow]:
    """The numbers papers report for the study's methods on its tasks, from the versioned paper tables
    (``benchbench/report/reproductions/<ref>.toml``): a table's first row of a method is the method
    itself (later rows are its variants), averages left out (a paper's average is over its own tasks)."""
    folder = resources.files("benchbench.report") / "reproductions"
    out = []
    for f in sorted((p for p in folder.iterdir() if p.name.endswith(".toml")), key=lambda p: p.name):
        name, spec = f.name[: -len(".toml")], tomllib.loads(f.read_text(encoding="utf-8"))
        taken: set[str] = set()
        for row in spec.get("rows") or []:
            m = str(row.get("method", ""))
            if m not in methods or m in taken:
                continue
            taken.add(m)
            vals = {t: float(v) for t, v in (row.get("published") or {}).items() if t in tasks}
            if vals:
                out.append(
                    PublishedRow(
                        name,
                        f"{spec.get('paper', name)}, {spec.get('table', '')}",
                        str(row.get("label", m)),
                        m,
                        str(spec.get("model") or "not stated"),
                        str(spec.get("setting") or "not stated"),
                        vals,
                    )
                )
    return out


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


@dataclass(frozen=True)
class ShownRow:
    method: str
    label: str  # the method, with aggregate's row marks ([T], [S]) and the provenance marks ([≠code], [≠enc])
    cells: tuple[ShownCell, ...]
    avg: float | None  # aggregate.suite_average: only a row with every task (none partial)
    cost: str = ""  # what the row's records cost: time and energy (:func:`row_cost`)


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

    @property
    def total(self) -> int:
        return len(self.study.methods) * len(self.tasks) * len(self.study.seeds)

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
        return f"{pre}Complete: all {self.total} (method, task, seed) cells stored. Re-run it with `{self.command}`."

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
            f"{st.sha256[:12] or '-'})" + (f"; per-method options: {per}" if per else "") + "."
        )


def _missing(study: Study, table: Mapping[str, Mapping[str, aggregate.Cell]], tasks: Sequence[str]) -> list[str]:
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


def legend(study: Study, columns: Mapping[str, Column]) -> list[str]:
    """The tests, stated: what bold, ≈ and the p-values mean, and which test decided each column."""
    k = len(study.seeds)
    notes = [
        f"Cells: mean ± sample std over the seeds stored, (n) = how many; {NO_CELL} none stored. Statistics per "
        f"column: a hierarchical bootstrap ({study.resamples} resamples, bootstrap seed {BOOTSTRAP_SEED}): each "
        "resample draws the task's items (stratified by subset; one draw shared by every method and seed, so "
        "comparisons are paired on items) and, on that draw, each method's seed-mean varies by its seed std / "
        f"sqrt(k) times a Student t with k-1 degrees of freedom (k = {k} seeds: heavy tails, as a t-test over "
        "the seeds would have). Bold ¹: the column's best and every method whose two-sided "
        f"difference from it has a Holm-adjusted p >= {TIE_P} over the column's comparisons (they share rank 1; "
        "a lone bold cell is separated from every other method).",
        "Test per column: "
        + ", ".join(f"{t}: {c.test}" + (f" ({c.why})" if c.why else "") for t, c in columns.items())
        + f" ({stats.HIERARCHICAL} = seeds x items as above; {stats.SEEDS_ONLY} = seeds resampled alone, used when "
        "a cell has no verified per-item scores; - = no cell).",
        "avg: the mean over the study's tasks, only for a row with every task stored (none partial).",
    ]
    if study.start:
        notes.append(
            f"{AT_START_MARK}: equivalent to the start row ({study.start}: the base model itself, no training) within "
            f"±{study.margin:g} points: two one-sided tests (TOST) on the same bootstrap, Holm-adjusted over the "
            f"column's trained cells at {TIE_P}; never for a cell whose every seed lies on one side of the start. "
            "No mark: the cell moved (separable from the start) or the data cannot tell (see the summary). The "
            f"margin is the study's statistics.margin (default 1.0: below the gains papers report, at the seed "
            "spread of trained cells)."
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


def summary(study: Study, columns: Mapping[str, Column], rows: Sequence[ShownRow], prov: Provenance) -> str:
    """A few sentences generated from the statistics, hedged as they allow."""
    parts = []
    if study.exploratory:
        parts.append(f"Exploratory, no claim about methods: {study.exploratory}")
    if study.preliminary:
        parts.append(
            f"Preliminary ({len(study.seeds)} seeds, fewer than the {PUBLISHED_MIN_SEEDS} a published study needs): "
            "seed variance is a rough estimate, so read every statement below as provisional."
        )
    verdicts = Counter(t.verdict for c in columns.values() for t in c.start.values())
    n = sum(verdicts.values())
    if study.start and n:
        parts.append(
            f"Against the start ({study.start}), of {n} trained cells: {verdicts['↑']} separably above, "
            f"{verdicts['↓']} separably below, {verdicts['≈']} shown equivalent within ±{study.margin:g} points, and "
            f"{verdicts['?']} inconclusive (neither separable nor shown equivalent: more seeds would tell)."
        )
    alone = {t: c.best for t, c in columns.items() if c.best and len(c.tied) == 1}
    shared = [len(c.tied) for c in columns.values() if c.best and len(c.tied) > 1]
    if any(c.best for c in columns.values()):
        text = f"Rank 1 is one method separated from all others in {len(alone)} of {len(columns)} columns"
        text += (" (" + ", ".join(f"{t}: {m}" for t, m in alone.items()) + ")") if alone else ""
        if shared:
            text += f"; elsewhere {min(shared)} to {max(shared)} methods share it (not separable after correction)"
        parts.append(text + ".")
    full = [(r.avg, r.method) for r in rows if r.avg is not None]
    if full:
        avg, m = max(full)
        parts.append(f"Highest average over complete rows: {m} ({avg:.2f}); averages carry no test.")
    if prov.mixed_code or prov.mixed_encoders:
        parts.append(
            f"Provenance: {len(prov.mixed_code)} of {len(study.methods)} rows mix code versions and "
            f"{len(prov.mixed_encoders)} mix trained encoders for one seed ({ROW_MIXED_CODE.strip()}, "
            f"{ROW_MIXED_ENCODER.strip()}); a re-run at one commit would remove that caveat."
        )
    return " ".join(parts)


def _flag_notes(flags: Mapping[tuple[str, str], Sequence[str]]) -> list[str]:
    return [f"{FLAG_MARK.strip()} {m} / {t}: {'; '.join(texts)}" for (m, t), texts in flags.items() if texts]


def _shown_cell(a: aggregate.Cell | None, m: str, col: Column, flags: Sequence[str]) -> ShownCell:
    if a is None:
        return ShownCell(NO_CELL, False, None)
    st = col.start.get(m)
    text = f"{aggregate.cell_text(a)} ({len(a.scores)})"
    text += f" {AT_START_MARK}" if st is not None and st.equivalent else ""
    text += FLAG_MARK if flags else ""
    return ShownCell(
        text, m in col.tied, a.mean, bool(st and st.equivalent), col.p.get(m), st.verdict if st else "", tuple(flags)
    )


def view(
    study: Study,
    table: Mapping[str, Mapping[str, aggregate.Cell]],
    model_label: str | None = None,
    extra_notes: Sequence[str] = (),
    *,
    results: str | Path = "",
    published: Sequence[PublishedRow] | None = None,
    cache: str | Path | bool = True,
    overlap_flags: Callable[[str, str], Sequence[str]] | None = None,
) -> StudyView:
    """The study's table: per column the statistics (:func:`cached_column`), each cell's text and marks
    from ``aggregate`` (``!``, ``‡``, ``[T]``/``[S]`` and their footnotes), the provenance marks, the
    average only over complete rows, what is missing, the papers' numbers apart (default:
    :func:`published_context`) and a generated summary. ``results``: the folder the records came from (the
    resume command names it). ``cache``: True for the user cache, False for none, or a folder.
    ``overlap_flags(method, task)``: text-overlap flags for a cell (contamination measured from text),
    shown as ⚑ with their text in the notes."""
    if model_label is None:
        from benchbench.encode.models import model_label_of

        model_label = model_label_of(study.model)
    tasks = list(table)
    where = default_cache() if cache is True else (cache or None)
    cols = {t: cached_column(t, table[t], study, where) for t in tasks}
    prov = provenance(study, table)
    agg_rows = []
    for m in study.methods:
        recs = [r for t in tasks for r in table[t][m].records.values()]
        if recs:
            agg_rows.append(aggregate.Row((m,), m, m, model_label, recs))
    suites = {STUDY_AVG: tasks}
    trs = aggregate.table_rows(agg_rows, tasks, suites)
    by_method = {tr.row.method: tr for tr in trs}
    flags = {(m, t): list(overlap_flags(m, t)) if overlap_flags else [] for m in study.methods for t in tasks}
    rows = []
    for m in study.methods:
        tr = by_method.get(m)
        acells: dict[str, aggregate.Cell | None] = {}
        for t in tasks:
            sc = table[t][m].scores
            acells[t] = (tr.cells.get(t) if tr else None) or (aggregate.Cell(dict(sc)) if sc else None)
        shown = tuple(_shown_cell(acells[t], m, cols[t], flags[(m, t)]) for t in tasks)
        label = (tr.row.display_label if tr else m) + (ROW_MIXED_CODE if m in prov.mixed_code else "")
        label += ROW_MIXED_ENCODER if m in prov.mixed_encoders else ""
        recs = [r for t in tasks for r in table[t][m].records.values()]
        rows.append(ShownRow(m, label, shown, aggregate.suite_average(acells, tasks), row_cost(recs)))
    notes = [*legend(study, cols), *provenance_notes(prov), *aggregate.table_notes(trs, suites), *_flag_notes(flags)]
    notes.extend(extra_notes)
    if study.model_note:
        notes.append(study.model_note)
    missing = _missing(study, table, tasks)
    stored = sum(len(table[t][m].scores) for t in tasks for m in study.methods)
    pub = list(published_context(study.methods, tasks) if published is None else published)
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
        summary(study, cols, rows, prov),
        str(results),
    )


def row_cost(records: Sequence[Mapping[str, Any]]) -> str:
    """A row's cost beside its scores: CPU/GPU wall time of its training and evaluation, and the energy
    codecarbon measured. A training shared by several records (one trained encoder evaluated on several
    tasks) is counted once, by its encoder fingerprint; the energy is summed only when every record
    measured it, else the page says how many did."""
    if not records:
        return ""
    trained: dict[Any, float] = {}
    seconds = 0.0
    kwh, measured = 0.0, 0
    for r in records:
        seconds += float(r.get("eval_seconds") or 0.0)
        train = r.get("train") or {}
        if train.get("seconds"):
            trained[(r.get("seed"), r.get("encoder_fingerprint"), (train.get("corpus") or {}).get("sha256"))] = float(
                train["seconds"]
            )
        total = ((r.get("energy") or {}).get("total") or {}).get("energy_kwh")
        if total is not None:
            kwh += float(total)
            measured += 1
    seconds += sum(trained.values())
    energy = (
        f"{kwh:.3g} kWh" if measured == len(records) else f"energy measured in {measured} of {len(records)} records"
    )
    took = (
        f"{seconds:.0f} s"
        if seconds < 60
        else f"{seconds / 60:.1f} min"
        if seconds < 3600
        else f"{seconds / 3600:.2f} h"
    )
    return f"{took}; {energy}"


_MARKUP = {  # format -> (escape, a tie-group cell)
    "md": (escape_md, "**{}** ¹"),
    "html": (escape_html, "<b>{}</b> ¹"),
}


def render_cell(cell: ShownCell, fmt: str) -> str:
    """One cell's text in ``fmt`` ("md" or "html"): the one renderer behind both formats."""
    esc, tied = _MARKUP[fmt]
    return tied.format(esc(cell.text)) if cell.tied else esc(cell.text)


PUBLISHED_NOTE = (
    "Published context: the numbers papers report for these methods, under THEIR conditions (base model and "
    "budget named per row; usually BERT-base, far larger budgets, often checkpoint selection on labels). They "
    "are not comparable with the study's cells: no tie group, no average, no difference is computed across "
    "conditions. Each row's table: benchbench/report/reproductions/<ref>.toml."
)


def published_rows(v: StudyView) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the published-context table, plain text (the caller escapes)."""
    tasks = [t for t in v.tasks if any(t in p.values for p in v.published)]
    head = ["paper row", "method", "base model", "budget", *tasks]
    body = [
        [
            f"{p.label} ({p.ref}: {p.paper})",
            p.method,
            p.base_model,
            p.budget,
            *(f"{p.values[t]:.2f}" if t in p.values else "" for t in tasks),
        ]
        for p in v.published
    ]
    return head, body


def published_html(v: StudyView) -> str:
    """The published-context table as HTML (the site's front page shows it under the study's table)."""
    if not v.published:
        return ""
    head, body = published_rows(v)
    th = "".join(f"<th>{escape_html(h)}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f"<td>{escape_html(x)}</td>" for x in r) + "</tr>" for r in body)
    return (
        f'<details class="published"><summary>published context</summary><p class="notes">{escape_html(PUBLISHED_NOTE)}'
        f"</p><table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table></details>"
    )


def view_markdown(v: StudyView, heading: str = "###") -> str:
    """The study's Markdown: title, status (with the command), summary, conditions, the table, its notes,
    the published context and what is missing."""
    st = v.study
    pre = (" — exploratory" if st.exploratory else "") + (" — preliminary" if st.preliminary else "")
    lines = [f"{heading} {escape_md(st.name)} (v{st.version}){pre}", "", escape_md(st.description), ""]
    lines += [escape_md(v.status), ""]
    if v.summary:
        lines += [f"Summary: {escape_md(v.summary)}", ""]
    lines += [escape_md(v.conditions), ""]
    lines.append("| method | " + " | ".join(escape_md(t) for t in v.tasks) + " | avg | cost (time; energy) |")
    lines.append("|---|" + "---:|" * (len(v.tasks) + 1) + "---|")
    for row in v.rows:
        cells = [render_cell(c, "md") for c in row.cells] + ["" if row.avg is None else f"{row.avg:.2f}"]
        cells.append(escape_md(row.cost))
        lines.append(f"| {escape_md(row.label)} | " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"- {escape_md(n)}" for n in v.notes]
    if v.published:
        head, body = published_rows(v)
        lines += ["", escape_md(PUBLISHED_NOTE), ""]
        lines.append("| " + " | ".join(escape_md(h) for h in head) + " |")
        lines.append("|" + "---|" * 4 + "---:|" * (len(head) - 4))
        lines += ["| " + " | ".join(escape_md(x) for x in r) + " |" for r in body]
    if v.missing and v.stored:
        lines += ["", "Missing cells:", ""] + [f"- {escape_md(x)}" for x in v.missing]
    return "\n".join(lines) + "\n"


def report_markdown(study: Study, table: Mapping[str, Mapping[str, aggregate.Cell]], **view_kw: Any) -> str:
    """Methods as rows, tasks as columns, mean ± std; the tie group in bold with rank 1 (:func:`view`)."""
    return view_markdown(view(study, table, **view_kw))
