"""MTEB interchange: export a whole results dir in MTEB's per-task result layout, and import MTEB
result files (their JSON schema: ``task_name``, ``scores: {split: [{hf_subset, main_score, ...}]}``,
scores in 0..1) as benchbench records labelled as imported, so a leaderboard can show MTEB's baselines
next to ours without pretending they were run here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchbench.core.errors import BenchbenchError, ConfigError, DataError
from benchbench.store.files import atomic_write_text, check_inside, slug

# The only MTEB tasks that measure what a benchbench task measures: the same rows, split and metric,
# MTEB task -> (benchbench task, split, MTEB metric, benchbench metric). STSBenchmark: both score
# the official sts-test.csv (1,379 pairs) by cosine Spearman (checked: bench/mteb_equality.py gives
# MTEB's published all-MiniLM-L6-v2 number, 0.8203, on a copy built from our file). Everything else
# is imported under MTEB's own name as ``mteb:<name>``, the column of benchbench's ``mteb:`` tasks,
# which follow MTEB's protocol; never under ours:
#   SICK-R: MTEB scores the whole SICK set (9,927 pairs), our sickr the 4,927-pair test split;
#   CQADupstackRetrieval: MTEB title+body corpus and nDCG@10, our cqadupstack USEB's titles and MAP@100;
#   SciDocsRR: MTEB's own reranking set and MAP, our scidocs USEB's four sub-tasks averaged;
#   AskUbuntuDupQuestions: MTEB's candidate lists and MAP@1000, our askubuntu USEB's 20 BM25 candidates;
#   STS12-16: MTEB's untokenized text, ours SentEval's tokenized, lowercased copies;
#   TwitterURLCorpus/TwitterSemEval2015: MTEB max AP on each, our twitterpara USEB's cosine AP averaged.
MAPPED = {"STSBenchmark": ("stsb", "test", "cosine_spearman", "spearman")}
EXPORTED = {ours: (mteb, split, theirs, metric) for mteb, (ours, split, theirs, metric) in MAPPED.items()}
MTEB_PREFIX = "mteb:"


def _finite_scores(entry: dict[str, Any], path: Path, split: str) -> dict[str, float]:
    """The entry's numeric scores x100; a NaN, an infinity or a number that overflows once scaled
    (``1e308``) is an error naming the file: a non-finite score would sort anywhere in a table."""
    import math

    out = {}
    for k, v in entry.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        scaled = 100 * float(v)
        if not math.isfinite(scaled):
            raise ConfigError(
                f"{path}: score {k!r} of split {split!r} is {v!r}, not a finite number in 0..1; nothing of this "
                f"file is imported. Fix or remove the file."
            )
        out[k] = scaled
    return out


# An MTEB result file holds a few scores per split (kilobytes); a file this large is not one. The one
# read limit (``benchbench.store.data``, ``BENCHBENCH_MAX_READ_BYTES`` raises it) applies.
RESULT_READ_LIMIT = (64 << 20, "the default for an MTEB result file, 64 MiB")


def _read(path: Path) -> Any:
    """An MTEB JSON file through the bounded reader: over the limit it is refused before it is read."""
    from benchbench.store.data import read_json

    try:
        return read_json(path, default=RESULT_READ_LIMIT)
    except OSError as e:
        raise ConfigError(f"{path}: not a readable MTEB result JSON ({e.strerror or e}).") from e
    except DataError as e:
        raise ConfigError(f"{e} Nothing of this file is imported.") from e


def _check_task(path: Path, name: str) -> None:
    """Refuse a result whose task this install cannot show: stored, it would be a record of a task no
    table can resolve (``mteb:<name>`` is resolved through the installed mteb)."""
    from benchbench.core.registry import get_registry

    try:
        get_registry().task(MTEB_PREFIX + name)
    except BenchbenchError as e:
        raise ConfigError(
            f"{path}: task_name {name!r} is not a task this install can show ({str(e).rstrip('.')}). Nothing of this file is "
            f"imported: remove it from what you import, or install the mteb version that has the task."
        ) from e


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
        p = check_inside(d / f"{slug(r['task'])}.json", out)  # its folders: made by the write, under out
        doc = to_mteb({k: v for k, v in r.items() if k != "_path"})
        _mteb_names(doc, r)
        doc["benchbench"] = {
            "method": r["method"],
            "config": r.get("config"),
            "seed": r.get("seed"),
            "setup": r.get("setup"),
        }
        atomic_write_text(p, json.dumps(doc, indent=1, sort_keys=True) + "\n", root=out)
        written.append(p)
    return written


def _mteb_names(doc: dict[str, Any], record: dict[str, Any]) -> None:
    """An exported record under MTEB's task name only where it measures MTEB's thing: a mapped task
    (its split only) or an ``mteb:`` task; any other keeps benchbench's name, which no MTEB task has."""
    task = record["task"]
    if task in EXPORTED:
        name, split, theirs, ours = EXPORTED[task]
        doc["task_name"] = name
        doc["scores"] = {s: e for s, e in doc["scores"].items() if s == split}
        for e in doc["scores"].get(split, []):
            if ours in e:
                e[theirs] = e[ours]
    elif task.startswith(MTEB_PREFIX):
        doc["task_name"] = task[len(MTEB_PREFIX) :]


def import_file(path: str | Path, model: str | None = None) -> list[dict[str, Any]]:
    """benchbench records (one per split-scored task; schema 2) from one MTEB result file. The model
    name comes from ``model`` or the file's folder (MTEB writes ``results/<model>/<revision>/<task>.json``)."""
    path = Path(path)
    doc = _read(path)
    if not isinstance(doc, dict) or "task_name" not in doc or not isinstance(doc.get("scores"), dict):
        raise ConfigError(f"{path}: not an MTEB result file (needs 'task_name' and a 'scores' object).")
    name = str(doc["task_name"])
    mapped = MAPPED.get(name)
    if mapped is None:
        _check_task(path, name)
    if model is None:
        meta = path.parent / "model_meta.json"
        info = _read(meta) if meta.is_file() else {}
        model = info.get("name") if isinstance(info, dict) else None
        model = model or path.parent.parent.name
    splits = {}
    for split, entries in doc["scores"].items():
        ent = next(
            (e for e in entries if e.get("hf_subset") in ("default", "en", "en-en")), entries[0] if entries else None
        )
        if not ent or ent.get("main_score") is None:
            continue
        scores = _finite_scores(ent, path, split)
        main_metric, main = "main_score", scores["main_score"]
        if mapped is not None and split == mapped[1] and mapped[2] in scores:
            main_metric, main = mapped[3], scores[mapped[2]]  # our metric's name, from MTEB's value of it
            scores[mapped[3]] = main
        splits[split] = {
            "main_metric": main_metric,
            "main_score": main,
            "partial": False,
            "notes": [f"imported from MTEB {doc.get('mteb_version') or '?'} ({path.name})"],
            "scores": scores,
        }
    # a mapped task lands in our column only with the split and metric it shares; else under MTEB's name
    same = mapped is not None and mapped[1] in splits and splits[mapped[1]]["main_metric"] == mapped[3]
    task = mapped[0] if same else MTEB_PREFIX + name
    if same:
        splits = {mapped[1]: splits[mapped[1]]}
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
    """Import every MTEB result JSON under ``src`` into ``out/imported/...`` as records: all or nothing.
    Every file is read and checked first; one that is refused (unreadable, over the read limit, a task
    this install cannot show) is named, with the others refused, and nothing is written."""
    records: list[dict[str, Any]] = []
    refused: list[str] = []
    for p in sorted(Path(src).rglob("*.json")):
        if p.name == "model_meta.json":
            continue
        try:
            records += import_file(p, model)
        except BenchbenchError as e:
            refused.append(str(e))
    if refused:
        more = f"\n  ... and {len(refused) - 10} more" if len(refused) > 10 else ""
        raise ConfigError(
            f"{len(refused)} MTEB result file(s) under {src} are refused, so nothing was imported (move them "
            f"out of the folder, or fix them, and import again):\n  " + "\n  ".join(refused[:10]) + more
        )
    return save_imported(records, out)


def save_imported(records: list[dict[str, Any]], out: str | Path) -> list[Path]:
    """Write imported records to ``out/imported/<model>/<task>.json``, the one path for a file and a
    folder of MTEB results: names by ``slug`` (a task or model name from the file never climbs out of
    ``out``), checksummed, atomic and never through a symlink."""
    from benchbench.store.results import checksum

    written = []
    for rec in records:
        q = check_inside(Path(out) / "imported" / slug(rec["model"]) / f"{slug(rec['task'])}.json", out)
        rec["checksum"] = checksum(rec)  # as every schema-2 record: one without it is refused on read
        atomic_write_text(q, json.dumps(rec, indent=1, sort_keys=True) + "\n", root=out)
        written.append(q)
    return written
