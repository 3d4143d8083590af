"""``benchbench reproduce NAME``: one command per paper table. It runs what the stored records lack,
then prints the paper's published numbers next to ours with the difference and what differs in the
setting (base model, budget, seeds, data gaps).

The runs go through the sweep machinery (``benchbench.run.sweep.run_sweep``): one sweep run per (row,
task, seed) the records lack, on Ray when the user asks for workers (``--workers N`` or ``--address``,
as ``benchbench sweep``) and Ray is installed, one after another in this process otherwise. A run
that fails is reported by name and the others go on; a run already stored is not in the list (and the
runner skips a stored key anyway), so an interrupted reproduction picks up where it stopped.

The published numbers are versioned data files, ``benchbench/report/reproductions/<name>.toml``, each naming
its paper, table and source; nothing numeric about a paper lives in this code.
"""

from __future__ import annotations

import importlib.util
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from statistics import mean
from typing import Any

from tabulate import tabulate

from benchbench.core.errors import ConfigError
from benchbench.run import sweep
from benchbench.run.sweep import Outcome, SweepRun


def available() -> list[str]:
    """Names of the bundled reproductions (the TOML files' stems)."""
    d = resources.files("benchbench.report") / "reproductions"
    return sorted(p.name[:-5] for p in d.iterdir() if p.name.endswith(".toml"))


def load_spec(name: str) -> dict[str, Any]:
    """The data file of reproduction ``name`` (or a path to a TOML file of the same layout)."""
    p = Path(name)
    if p.suffix == ".toml" and p.is_file():
        return tomllib.loads(p.read_text())
    if name not in available():
        raise ConfigError(
            f"reproduce: no reproduction named {name!r}; available: {', '.join(available())} "
            f"(data files in benchbench/report/reproductions/)."
        )
    return tomllib.loads((resources.files("benchbench.report") / "reproductions" / f"{name}.toml").read_text())


@dataclass
class Budget:
    """The setting we run: pass-through flags override the paper's (``--model``, ``--steps``, ...)."""

    model: str | None = None
    steps: int | None = None
    seeds: list[int] | None = None
    batch_size: int | None = None
    lr: float | None = None
    sets: dict[str, str] = field(default_factory=dict)
    device: str | None = None
    data_dir: str | None = None
    encode_batch_size: int | None = None
    tasks: list[str] | None = None  # restrict the runs to these tasks (the table still shows every task)
    encode_backend: str | None = None  # --encode-backend / --encode-dtype, as `run` takes them
    encode_dtype: str | None = None


@dataclass
class Planned:
    label: str
    method: str
    installed: bool
    trains: bool  # trains with a ``steps`` budget (what --steps / the paper's steps apply to)
    model: str | None
    tasks: list[str]
    missing: list[str]  # tasks where some seed has no matching record
    runs: list[SweepRun]  # one per (task, seed) the records lack; the row's options ride on each
    matched: dict[str, list[dict[str, Any]]]
    why_skipped: str = ""


def _same_model(rec_model: str, model: str | None) -> bool:
    return model is None or str(rec_model).split("/")[-1].lower() == model.split("/")[-1].lower()


def _method_info(method: str) -> tuple[bool, bool, bool]:
    """(installed, trains, takes a base model) of a registered method."""
    try:
        from benchbench.core.registry import get_registry

        m = get_registry().methods.get(method)
    except Exception:
        m = None
    if m is None:
        return False, False, False
    return True, bool(getattr(m, "trains", True)), not bool(getattr(m, "fixed_model", None))


def _method_options(method: str) -> set[str]:
    """The option names (Config fields) of a registered method."""
    import dataclasses

    from benchbench.core.registry import get_registry

    return {f.name for f in dataclasses.fields(get_registry().methods[method].Config)}


def _matches(
    rec: dict[str, Any], row: dict[str, Any], b: Budget, model: str | None, trains: bool, takes_model: bool
) -> bool:
    cfg = rec.get("config") or {}
    if rec.get("method") != row["method"] or (takes_model and not _same_model(rec.get("model", ""), model)):
        return False
    if row.get("score", "bi") != rec.get("scored_by", "bi"):
        return False
    if trains and b.steps is not None and cfg.get("steps") != b.steps:
        return False
    for k, v in {**row.get("set", {}), **b.sets}.items():
        if k in cfg and str(cfg[k]) != str(v):
            return False
    if b.batch_size is not None and "batch_size" in cfg and cfg["batch_size"] != b.batch_size:
        return False
    if b.lr is not None and "lr" in cfg and float(cfg["lr"]) != float(b.lr):
        return False
    return rec.get("splits", {}).get("test", {}).get("main_score") is not None


def newest_configuration(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of ONE configuration: the one stored most recently, when several match a row
    (e.g. the same budget before and after a fidelity fix changed the config hash). A cell never
    averages two configurations; one record per seed (the newest)."""
    if not records:
        return records
    newest_hash = max(records, key=lambda r: str(r.get("created_at", "")))["config_hash"]
    per_seed: dict[Any, dict[str, Any]] = {}
    for r in sorted(records, key=lambda r: str(r.get("created_at", ""))):
        if r["config_hash"] == newest_hash:
            per_seed[r["seed"]] = r
    return [per_seed[s] for s in sorted(per_seed)]


def plan(spec: dict[str, Any], records: list[dict[str, Any]], b: Budget, output: str) -> list[Planned]:
    """Per row of the paper's table: which runs exist in ``records`` and the sweep runs for the rest
    (``output`` is where they will write; the shared options are ``base_options(b, output)``)."""
    seeds = b.seeds or spec.get("seeds", [1])
    out = []
    for row in spec["rows"]:
        installed, trains, takes_model = _method_info(row["method"])
        # the budget flags go only to a method that has the option (Trans-Encoder has no ``steps``:
        # its budget is cycles/epochs); an uninstalled method's options are unknown: all assumed
        has = _method_options(row["method"]) if installed else {"steps", "batch_size", "lr"}
        takes_steps = trains and "steps" in has
        model = (b.model or spec.get("model") or None) if takes_model else None
        steps = b.steps if b.steps is not None else spec.get("steps")
        bb = Budget(**{**b.__dict__, "steps": steps if takes_steps else None})
        matched = {
            t: [
                r
                for r in records
                if r.get("task") == t and r.get("seed") in seeds and _matches(r, row, bb, model, trains, takes_model)
            ]
            for t in spec["tasks"]
        }
        matched = {t: newest_configuration(rs) for t, rs in matched.items()}
        wanted = [t for t in spec["tasks"] if not b.tasks or t in b.tasks]
        lacking = {t: [s for s in seeds if s not in {r["seed"] for r in matched[t]}] for t in wanted}
        missing = [t for t in wanted if lacking[t]]
        overrides: dict[str, Any] = {}
        if takes_steps and steps is not None:
            overrides["steps"] = steps
        if b.batch_size is not None and "batch_size" in has:
            overrides["batch_size"] = b.batch_size
        if b.lr is not None and "lr" in has:
            overrides["lr"] = b.lr
        overrides.update(sorted({**row.get("set", {}), **b.sets}.items()))
        options: dict[str, Any] = {"overrides": overrides}
        if model:
            options["model"] = model
        if row.get("score"):
            options["score"] = row["score"]
        runs = [SweepRun(row["method"], t, int(s), "unsupervised", dict(options)) for t in missing for s in lacking[t]]
        why = (
            ""
            if installed
            else (
                f"method not installed: {row['method']!r} (no loaded plugin registers it; "
                f"install its plugin, see `benchbench plugins`)"
            )
        )
        out.append(
            Planned(
                row["label"],
                row["method"],
                installed,
                takes_steps,
                model,
                list(spec["tasks"]),
                missing,
                runs,
                matched,
                why,
            )
        )
    return out


def base_options(b: Budget, output: str, progress: bool | None = None) -> dict[str, Any]:
    """The ``RunOptions`` fields every run of a reproduction shares (its rows add model, overrides, score)."""
    return sweep.base_options(
        output=output,
        data_dir=b.data_dir,
        device=b.device,
        encode_batch_size=b.encode_batch_size,
        encode_backend=b.encode_backend,
        encode_dtype=b.encode_dtype,
        progress=progress,
    )


def command(run: SweepRun, base: dict[str, Any]) -> str:
    """The ``benchbench run`` line equivalent to one sweep run (what ``--dry-run`` lists)."""
    opts = {**base, **run.options}
    cmd = ["benchbench", "run", "--method", run.method, "--tasks", run.task, "--seeds", str(run.seed)]
    cmd += ["--output", str(opts["output"])]
    if opts.get("model"):
        cmd += ["--model", str(opts["model"])]
    flags = {"steps": "--steps", "batch_size": "--batch-size", "lr": "--lr"}
    over = dict(opts.get("overrides") or {})
    for k, flag in flags.items():
        if k in over:
            cmd += [flag, str(over.pop(k))]
    shared = {
        "device": "--device",
        "data_dir": "--data-dir",
        "encode_batch_size": "--encode-batch-size",
        "encode_backend": "--encode-backend",
        "encode_dtype": "--encode-dtype",
    }
    for k, flag in shared.items():
        if opts.get(k) is not None:
            cmd += [flag, str(opts[k])]
    for k, v in over.items():
        cmd += ["--set", f"{k}={v}"]
    if opts.get("score"):
        cmd += ["--score", str(opts["score"])]
    return " ".join(cmd)


def choose_executor(workers: int | None, address: str | None) -> tuple[str, str]:
    """("ray" | "local", a line saying why): Ray only when asked for (``--workers``/``--address``)
    and installed; a reproduction must also run where Ray is not (it is an optional extra)."""
    if workers is None and address is None:
        return "local", "executor: local (runs one after another; --workers N or --address for Ray)"
    if importlib.util.find_spec("ray") is None:
        return "local", (
            "executor: local -- --workers/--address ask for Ray, which is not installed "
            "(pip install 'benchbench[sweep]'); running the runs one after another"
        )
    where = f"the Ray cluster at {address}" if address else f"local Ray with {workers} CPU(s)"
    return "ray", f"executor: {where}"


def execute(
    planned: list[Planned],
    base: dict[str, Any],
    echo=print,
    workers: int | None = None,
    address: str | None = None,
    cpus_per_run: float = 1.0,
    gpus_per_run: float = 0.0,
) -> list[tuple[str, Outcome]]:
    """Run every missing (row, task, seed) through ``sweep.run_sweep``; a failed run is reported by
    name and does not stop the others. Returns (row label, outcome) per run, in plan order."""
    for p in planned:
        if not p.installed:
            echo(p.why_skipped)
    todo = [(p.label, r) for p in planned if p.installed for r in p.runs]
    if not todo:
        echo("nothing to run: the records have every run of this table (for this budget)")
        return []
    executor, why = choose_executor(workers, address)
    echo(f"{why}; {len(todo)} runs")
    if executor == "ray":
        base = {**base, "progress": False}  # workers' bars would interleave
    outcomes = sweep.run_sweep([r for _, r in todo], base, executor, address, workers, cpus_per_run, gpus_per_run)
    for (label, _), o in zip(todo, outcomes, strict=True):
        scores = " ".join(f"{t}={v:.2f}" for t, v in o.scores.items() if v is not None)
        echo(f"{o.status:8s} {label}: {o.run.label} {scores}".rstrip())
        if o.status == "failed":
            echo(f"         {(o.error or '').splitlines()[0] if o.error else 'no error message'}")
    failed = [f"{label}: {o.run.label}" for (label, _), o in zip(todo, outcomes, strict=True) if o.status == "failed"]
    echo(
        f"{len(outcomes)} runs: {len(outcomes) - len(failed)} ok, {len(failed)} failed"
        + (f" ({'; '.join(failed)}); the table below shows what exists" if failed else "")
    )
    return list(zip([label for label, _ in todo], outcomes, strict=True))


def compare(spec: dict[str, Any], planned: list[Planned]) -> tuple[str, list[str]]:
    """The side-by-side table (Markdown) and the list of setting differences."""
    cols = [] if spec.get("only_avg") else list(spec["tasks"])
    cols += ["avg"]
    lines = []
    for p, row in zip(planned, spec["rows"], strict=True):
        ours: dict[str, float] = {}
        for t in spec["tasks"]:
            vals = [r["splits"]["test"]["main_score"] for r in p.matched[t]]
            if vals:
                ours[t] = mean(vals)
        if len(ours) == len(spec["tasks"]):
            ours["avg"] = mean(ours[t] for t in spec["tasks"])
        other = other_conditions(spec, p)
        for c in cols:
            pub = row["published"].get(c)
            mine = ours.get(c)
            if pub is None and mine is None:
                continue
            partial = any((r["splits"]["test"].get("partial")) for r in p.matched.get(c, []))
            note = "method not installed" if not p.installed else ("no record" if mine is None else "")
            if partial:
                note = "partial (see data gaps)"
            lines.append(
                [
                    p.label,
                    c,
                    "" if pub is None else f"{pub:.2f}",
                    "" if mine is None else f"{mine:.2f}",
                    _delta(pub, mine, other),
                    note,
                ]
            )
    table = tabulate(
        lines,
        headers=["row", "task", "paper (published context)", "ours", "ours - paper (same conditions only)", "note"],
        tablefmt="github",
        disable_numparse=True,
    )
    return table, []


def other_conditions(spec: dict[str, Any], p: Planned) -> str:
    """Why a row's numbers are not comparable with the paper's ('' when they are): another base model or
    another training budget. A difference across conditions is not a fidelity measurement, so none is
    printed (DESIGN.md, Studies: papers' numbers are context, never a delta)."""
    records = [r for rs in p.matched.values() for r in rs]
    if not records:
        return ""
    why = []
    models = sorted({str(r.get("model", "?")).split("@")[0] for r in records})
    if spec.get("model") and models != [str(spec["model"])]:
        why.append(f"base model {', '.join(models)} vs {spec['model']}")
    steps = sorted({str((r.get("config") or {}).get("steps")) for r in records}) if p.trains else []
    if p.trains and spec.get("steps") and steps != [str(spec["steps"])]:
        why.append(f"{', '.join(steps)} steps vs {spec['steps']}")
    return "; ".join(why)


def _delta(pub: float | None, mine: float | None, other: str) -> str:
    if pub is None or mine is None:
        return ""
    return f"n/a ({other})" if other else f"{mine - pub:+.2f}"


def differences(spec: dict[str, Any], planned: list[Planned], b: Budget) -> list[str]:
    """What differs between the paper's setting and ours, from the records themselves."""
    diffs = [f"paper's setting: {spec.get('setting', '?')}"]
    models = sorted({r.get("model", "?") for p in planned for rs in p.matched.values() for r in rs})
    if spec.get("model"):
        diffs.append(f"base model: paper {spec['model']}; ours {', '.join(models) or '(no records)'}")
    steps = sorted(
        {
            str((r.get("config") or {}).get("steps"))
            for p in planned
            if p.trains
            for rs in p.matched.values()
            for r in rs
        }
    )
    if spec.get("steps") or steps:
        diffs.append(f"training budget: paper {spec.get('steps', '?')} steps; ours {', '.join(steps) or '-'} steps")
    seeds = sorted({r.get("seed") for p in planned for rs in p.matched.values() for r in rs})
    diffs.append(f"seeds: paper {spec.get('seeds', '?')}; ours {seeds or '-'}")
    devices = sorted({str(r.get("device")) for p in planned for rs in p.matched.values() for r in rs})
    if devices:
        diffs.append(f"device: {', '.join(devices)}")
    gaps = sorted(
        {
            f"{r['task']}: {n}"
            for p in planned
            for rs in p.matched.values()
            for r in rs
            for n in r["splits"]["test"].get("notes", [])
        }
    )
    diffs += [f"data gap: {g}" for g in gaps]
    absent = sorted({t for p in planned if p.installed for t in p.missing})
    if absent:
        diffs.append(f"no record (data not offline, run failed or not run): {', '.join(absent)}")
    for p in planned:
        if not p.installed:
            diffs.append(p.why_skipped)
    if spec.get("score_notes"):
        diffs.append(spec["score_notes"])
    return diffs


def reproduce(
    name: str,
    results: str,
    b: Budget,
    dry_run: bool = False,
    md: str | None = None,
    echo=print,
    compare_only: bool = False,
    workers: int | None = None,
    address: str | None = None,
    cpus_per_run: float = 1.0,
    gpus_per_run: float = 0.0,
) -> int:
    """The whole command; returns the exit code (0 even when rows lack data or a run failed: the
    run lines name each failure and the table says what exists). ``workers``/``address``: run on
    Ray (see ``choose_executor``)."""
    from benchbench.report.site import load_records

    spec = load_spec(name)
    records = load_records(results) if Path(results).is_dir() else []
    planned = plan(spec, records, b, results)
    base = base_options(b, results)
    echo(
        f"{spec['name']}: {spec['paper']}, {spec['table']} (source: {spec['source']}; data file version "
        f"{spec.get('version', 1)})"
    )
    if dry_run:
        for p in planned:
            if not p.installed:
                echo(p.why_skipped)
            elif p.runs:
                for r in p.runs:
                    echo("would run: " + command(r, base))
            else:
                have = [t for t in p.tasks if p.matched[t]]
                echo(
                    f"stored: {p.label} ({p.method}) on {', '.join(have) or '(none)'}"
                    + (
                        f"; not run (outside --tasks): {', '.join(t for t in p.tasks if t not in have)}"
                        if len(have) < len(p.tasks)
                        else ""
                    )
                )
        return 0
    done = [] if compare_only else execute(planned, base, echo, workers, address, cpus_per_run, gpus_per_run)
    if done:
        records = load_records(results)
        planned = plan(spec, records, b, results)
    table, _ = compare(spec, planned)
    diffs = differences(spec, planned, b)
    text = (
        f"## {spec['name']}: {spec['table']} of {spec['paper']}\n\n{table}\n\nWhat differs from the paper:\n\n"
        + "\n".join(f"- {d}" for d in diffs)
        + "\n"
    )
    echo(text)
    if md:
        from benchbench.store.files import atomic_write_text

        atomic_write_text(md, text, root=Path(md).parent)  # never through a link at --md
    return 0
