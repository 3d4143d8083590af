"""MTEB interchange: export a whole results dir in MTEB's per-task result layout, and import MTEB
result files (their JSON schema: ``task_name``, ``scores: {split: [{hf_subset, main_score, ...}]}``,
scores in 0..1) as benchbench records labelled as imported, so a leaderboard can show MTEB's baselines
next to ours without pretending they were run here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchbench.core.errors import ConfigError
from benchbench.store.files import atomic_write_text, check_inside, slug

# MTEB task name -> benchbench task (only tasks whose protocol matches ours on the main score)
MTEB_TASKS = {
    "STS12": "sts12",
    "STS13": "sts13",
    "STS14": "sts14",
    "STS15": "sts15",
    "STS16": "sts16",
    "STSBenchmark": "stsb",
    "SICK-R": "sickr",
    "AskUbuntuDupQuestions": "askubuntu",
    "SciDocsRR": "scidocs",
    "CQADupstackRetrieval": "cqadupstack",
}


def export(results: str | Path, out: str | Path) -> list[Path]:
    """One MTEB result JSON per record: ``out/<model>/<method>__<config_hash>__seed<N>/<task>.json``."""
    from benchbench.report.site import load_records
    from benchbench.store.results import to_mteb

    written = []
    for r in load_records(results):
        if r.get("imported_from"):
            continue
        d = (
            Path(out)
            / slug(str(r.get("model", "-")))
            / slug(f"{r['method']}__{r.get('config_hash', '')}__seed{r.get('seed')}")
        )
        p = check_inside(d / f"{slug(r['task'])}.json", out)  # before mkdir: no folder made through a link
        d.mkdir(parents=True, exist_ok=True)
        doc = to_mteb({k: v for k, v in r.items() if k != "_path"})
        doc["benchbench"] = {
            "method": r["method"],
            "config": r.get("config"),
            "seed": r.get("seed"),
            "setup": r.get("setup"),
        }
        atomic_write_text(p, json.dumps(doc, indent=1, sort_keys=True) + "\n", root=out)
        written.append(p)
    return written


def import_file(path: str | Path, model: str | None = None) -> list[dict[str, Any]]:
    """benchbench records (one per split-scored task; schema 2) from one MTEB result file. The model
    name comes from ``model`` or the file's folder (MTEB writes ``results/<model>/<revision>/<task>.json``)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path}: not a readable MTEB result JSON ({e}).") from e
    if not isinstance(doc, dict) or "task_name" not in doc or not isinstance(doc.get("scores"), dict):
        raise ConfigError(f"{path}: not an MTEB result file (needs 'task_name' and a 'scores' object).")
    task = MTEB_TASKS.get(doc["task_name"])
    if task is None:
        return []
    if model is None:
        meta = path.parent / "model_meta.json"
        model = json.loads(meta.read_text()).get("name") if meta.is_file() else path.parent.parent.name
    splits = {}
    for split, entries in doc["scores"].items():
        ent = next(
            (e for e in entries if e.get("hf_subset") in ("default", "en", "en-en")), entries[0] if entries else None
        )
        if not ent or ent.get("main_score") is None:
            continue
        splits[split] = {
            "main_metric": "main_score",
            "main_score": 100 * float(ent["main_score"]),
            "partial": False,
            "notes": [f"imported from MTEB {doc.get('mteb_version') or '?'} ({path.name})"],
            "scores": {
                k: 100 * float(v) for k, v in ent.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
            },
        }
    if "test" not in splits:
        return []
    return [
        {
            "schema_version": 2,
            "task_version": 1,
            "method": str(model).split("/")[-1],
            "model": str(model),
            "setup": "unsupervised",
            "config": {},
            "config_hash": "mteb",
            "seed": 0,
            "task": task,
            "splits": splits,
            "imported_from": "MTEB",
            "device": "?",
            "git_sha": None,
            "versions": {"mteb": doc.get("mteb_version")},
        }
    ]


def import_dir(src: str | Path, out: str | Path, model: str | None = None) -> list[Path]:
    """Import every MTEB result JSON under ``src`` into ``out/imported/...`` as records."""
    written = []
    for p in sorted(Path(src).rglob("*.json")):
        if p.name == "model_meta.json":
            continue
        written += save_imported(import_file(p, model), out)
    return written


def save_imported(records: list[dict[str, Any]], out: str | Path) -> list[Path]:
    """Write imported records to ``out/imported/<model>/<task>.json``, the one path for a file and a
    folder of MTEB results: names by ``slug`` (a task or model name from the file never climbs out of
    ``out``), checksummed, atomic and never through a symlink."""
    from benchbench.store.results import checksum

    written = []
    for rec in records:
        q = check_inside(Path(out) / "imported" / slug(rec["model"]) / f"{slug(rec['task'])}.json", out)
        q.parent.mkdir(parents=True, exist_ok=True)
        rec["checksum"] = checksum(rec)  # as every schema-2 record: one without it is refused on read
        atomic_write_text(q, json.dumps(rec, indent=1, sort_keys=True) + "\n", root=out)
        written.append(q)
    return written
