"""``benchbench reproduce NAME``: one command per paper table. It runs what the stored records lack
(``benchbench run`` is resumable: stored results are skipped), then prints the paper's published numbers
next to ours with the difference and what differs in the setting (base model, budget, seeds, data gaps).

The published numbers are versioned data files, ``benchbench/reproductions/<name>.toml``, each naming
its paper, table and source; nothing numeric about a paper lives in this code.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from statistics import mean
from typing import Any

from tabulate import tabulate

from .errors import ConfigError


def available() -> list[str]:
    """Names of the bundled reproductions (the TOML files' stems)."""
    d = resources.files("benchbench") / "reproductions"
    return sorted(p.name[:-5] for p in d.iterdir() if p.name.endswith(".toml"))


def load_spec(name: str) -> dict[str, Any]:
    """The data file of reproduction ``name`` (or a path to a TOML file of the same layout)."""
    p = Path(name)
    if p.suffix == ".toml" and p.is_file():
        return tomllib.loads(p.read_text())
    if name not in available():
        raise ConfigError(
            f"reproduce: no reproduction named {name!r}; available: {', '.join(available())} "
            f"(data files in benchbench/reproductions/)."
        )
    return tomllib.loads((resources.files("benchbench") / "reproductions" / f"{name}.toml").read_text())


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


@dataclass
class Planned:
    label: str
    method: str
    installed: bool
    trains: bool
    model: str | None
    tasks: list[str]
    missing: list[str]
    command: list[str]
    matched: dict[str, list[dict[str, Any]]]
    why_skipped: str = ""


def _same_model(rec_model: str, model: str | None) -> bool:
    return model is None or str(rec_model).split("/")[-1].lower() == model.split("/")[-1].lower()


def _method_info(method: str) -> tuple[bool, bool, bool]:
    """(installed, trains, takes a base model) of a registered method."""
    try:
        from .registry import get_registry

        m = get_registry().methods.get(method)
    except Exception:
        m = None
    if m is None:
        return False, False, False
    return True, bool(getattr(m, "trains", True)), not bool(getattr(m, "fixed_model", None))


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


def plan(spec: dict[str, Any], records: list[dict[str, Any]], b: Budget, output: str) -> list[Planned]:
    """Per row of the paper's table: which runs exist in ``records`` and the command for the rest."""
    seeds = b.seeds or spec.get("seeds", [1])
    out = []
    for row in spec["rows"]:
        installed, trains, takes_model = _method_info(row["method"])
        model = (b.model or spec.get("model") or None) if takes_model else None
        steps = b.steps if b.steps is not None else spec.get("steps")
        bb = Budget(**{**b.__dict__, "steps": steps if trains else None})
        matched = {
            t: [
                r
                for r in records
                if r.get("task") == t and r.get("seed") in seeds and _matches(r, row, bb, model, trains, takes_model)
            ]
            for t in spec["tasks"]
        }
        missing = [
            t for t in spec["tasks"] if {r["seed"] for r in matched[t]} != set(seeds) and (not b.tasks or t in b.tasks)
        ]
        cmd = [
            sys.executable,
            "-m",
            "benchbench.cli",
            "run",
            "--method",
            row["method"],
            "--tasks",
            "{task}",
            "--seeds",
            ",".join(map(str, seeds)),
            "--output",
            output,
        ]
        if model:
            cmd += ["--model", model]
        if trains and steps is not None:
            cmd += ["--steps", str(steps)]
        for flag, v in (
            ("--batch-size", b.batch_size),
            ("--lr", b.lr),
            ("--device", b.device),
            ("--data-dir", b.data_dir),
            ("--encode-batch-size", b.encode_batch_size),
        ):
            if v is not None:
                cmd += [flag, str(v)]
        for k, v in sorted({**row.get("set", {}), **b.sets}.items()):
            cmd += ["--set", f"{k}={v}"]
        if row.get("score"):
            cmd += ["--score", row["score"]]
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
                row["label"], row["method"], installed, trains, model, list(spec["tasks"]), missing, cmd, matched, why
            )
        )
    return out


def execute(planned: list[Planned], echo=print) -> dict[str, int]:
    """Run the missing runs one row after another (sequentially: each ``benchbench run`` is resumable,
    so an interrupted reproduction picks up where it stopped). Returns row label -> exit code."""
    if importlib.util.find_spec("benchbench.sweep") is not None:
        echo("note: benchbench.sweep is installed; runs are still issued one by one here")
    codes = {}
    for p in planned:
        if not p.installed:
            echo(p.why_skipped)
            continue
        if not p.missing:
            continue
        for task in p.missing:  # one run per task: a task without offline data does not stop the others
            cmd = [task if c == "{task}" else c for c in p.command]
            echo("running: " + " ".join(cmd[2:]))
            code = subprocess.run(cmd, check=False).returncode
            codes[f"{p.label} {task}"] = code
            if code:
                echo(
                    f"  {p.label} on {task}: the run exited {code} (data missing offline? see its message); "
                    "the table below shows what exists"
                )
    return codes


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
                    "" if pub is None or mine is None else f"{mine - pub:+.2f}",
                    note,
                ]
            )
    table = tabulate(
        lines,
        headers=["row", "task", "paper", "ours", "ours - paper", "note"],
        tablefmt="github",
        disable_numparse=True,
    )
    return table, []


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
) -> int:
    """The whole command; returns the exit code (0 even when rows lack data: the table says so)."""
    from .site import load_records

    spec = load_spec(name)
    records = load_records(results) if Path(results).is_dir() else []
    planned = plan(spec, records, b, results)
    echo(
        f"{spec['name']}: {spec['paper']}, {spec['table']} (source: {spec['source']}; data file version "
        f"{spec.get('version', 1)})"
    )
    if dry_run:
        for p in planned:
            if not p.installed:
                echo(p.why_skipped)
            elif p.missing:
                for task in p.missing:
                    echo("would run: " + " ".join(task if c == "{task}" else c for c in p.command[2:]))
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
    codes = {} if compare_only else execute(planned, echo)
    if codes:
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
        Path(md).parent.mkdir(parents=True, exist_ok=True)
        Path(md).write_text(text)
    return 0
