"""Where a study's numbers come from: the code versions, devices and trained encoders behind its cells
(and the rows that mix them), the base model's label as the records hold it, and what each row cost."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchbench.report import aggregate
from benchbench.run.study import Study

ROW_MIXED_CODE = " [≠code]"  # the row's records come from more than one code version
ROW_MIXED_ENCODER = " [≠enc]"  # two trained encoders for one (method, seed, training corpus) in the row


@dataclass
class Provenance:
    """The code versions, devices and encoders behind a study's cells, and the rows that mix them."""

    commits: dict[str, int]  # code version (store.results.code_version) -> records
    versions: list[tuple[str, list[str]]]  # (package, its versions) for packages with more than one
    devices: dict[str, int]
    mixed_code: dict[str, list[str]]  # method -> its shas (when more than one)
    mixed_encoders: dict[str, list[str]]  # method -> "seed S: fp1 (tasks), fp2 (tasks)"
    shas: dict[str, list[str]] = field(default_factory=dict)  # code version -> the commits behind it


def provenance(study: Study, table: Mapping[str, Mapping[str, aggregate.Cell]]) -> Provenance:
    from benchbench.store.results import code_version

    records = [(m, r) for t in table for m, c in table[t].items() for r in c.records.values()]
    commits = Counter(code_version(r) for _, r in records)
    behind: dict[str, set[str]] = defaultdict(set)
    for _, r in records:
        behind[code_version(r)].add(str(r.get("git_sha") or "unknown")[:12])
    devices = Counter(str(r.get("device") or "unknown") for _, r in records)
    pkgs: dict[str, set[str]] = defaultdict(set)
    for _, r in records:
        for k, v in (r.get("versions") or {}).items():
            pkgs[k].add(str(v))
    shas: dict[str, set[str]] = defaultdict(set)
    encoders: dict[tuple[str, Any, str], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for m, r in records:
        shas[m].add(code_version(r))
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
        {v: sorted(behind[v]) for v in commits},
    )


def provenance_notes(p: Provenance) -> list[str]:
    """What the page says about where its numbers come from: every version present, and each mixed row."""
    out = [
        f"Code versions present ({len(p.commits)}; code.<hash>: the committed code paths' tree, shared by commits "
        "that change no code; a bare sha: a record from before the tree was stored; +dirty: run from uncommitted "
        "changes, named by their diff's sha256): "
        + ", ".join(f"{v} ({n} records{_commits_note(v, p.shas.get(v, []))})" for v, n in p.commits.items())
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
            f"{ROW_MIXED_CODE.strip()}: the row's cells come from more than one code version (not one code version): "
            + "; ".join(f"{m}: {', '.join(v)}" for m, v in sorted(p.mixed_code.items()))
            + "."
        )
    for m, what in sorted(p.mixed_encoders.items()):
        out.append(
            f"{ROW_MIXED_ENCODER.strip()} {m}: cells of one seed and one training corpus come from different "
            f"trained encoders (encoder fingerprints, tail shown): {' | '.join(what)}."
        )
    return out


def _commits_note(version: str, shas: list[str]) -> str:
    return f"; commit{'s' if len(shas) > 1 else ''} {', '.join(shas)}" if version.startswith("code.") and shas else ""


# ---- the base model's label ---------------------------------------------------------------------------
def is_local(model: str) -> bool:
    """A study model given as a folder (``~/...``, an absolute or ``./`` path), not a hub/offline name."""
    from benchbench.run.study import is_local_path

    return is_local_path(model)


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
