"""benchbench reproduce: bundled data files are well-formed, the dry run lists exactly the runs the
records lack, stored records are compared with the paper (difference signed ours - paper), an
uninstalled method gives a clear line, and MTEB export/import round-trips a score."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchbench.core.errors import ConfigError
from benchbench.report import mteb_io, reproduce
from benchbench.report.reproduce import Budget
from benchbench.store.results import checksum

REQUIRED = {"tsdae-table2", "tsdae-table3", "qt-table1", "bsl-table1", "tenc-table1", "tenc-pairs"}
REQUIRED |= {"esimcse-sts", "mirror-bert-sts", "promptbert-sts", "diffcse-sts", "sncse-sts", "whitenedcse-sts"}
REQUIRED |= {"denosent-sts"}


def test_data_files() -> None:
    """Every bundled table (not only the required ones) is well formed: named as its file, its paper,
    table and source given, labelled with the paper's base model ("" for a model trained from scratch)
    and setting, which published context needs; each row's values are on the table's tasks, and an
    average printed beside a full row is the mean of the values as transcribed (a mistyped value
    moves the mean by 1/7 of the typo: caught unless under the average's own rounding)."""
    assert set(reproduce.available()) >= REQUIRED
    for name in reproduce.available():
        spec = reproduce.load_spec(name)
        assert spec["name"] == name and spec["paper"] and spec["table"] and spec["source"], name
        assert isinstance(spec.get("model"), str) and spec.get("setting"), name
        assert spec["rows"] and spec["tasks"], name
        for row in spec["rows"]:
            pub = row["published"]
            assert row["label"] and row["method"] and pub, (name, row.get("label"))
            assert set(pub) <= set(spec["tasks"]) | {"avg"}, (name, row["label"])
            assert all(isinstance(v, int | float) and 0 <= v <= 100 for v in pub.values()), (name, row["label"])
            if "avg" in pub and all(t in pub for t in spec["tasks"]):
                decimals = len(repr(float(pub["avg"])).split(".")[1])
                slack = 0.5 * 10**-decimals + 0.015  # the paper averaged unrounded values
                got = sum(pub[t] for t in spec["tasks"]) / len(spec["tasks"])
                assert abs(got - pub["avg"]) <= slack, (name, row["label"], got, pub["avg"])
    t2 = reproduce.load_spec("tsdae-table2")
    assert t2["rows"][0]["published"]["avg"] == 55.2


def _rec(
    method: str, task: str, score: float, steps: int | None, model: str = "sentence-transformers/all-MiniLM-L6-v2"
) -> dict:
    return {
        "schema_version": 2,
        "task_version": 1,
        "method": method,
        "model": model,
        "setup": "unsupervised",
        "config": {} if steps is None else {"steps": steps},
        "config_hash": f"h{steps}",
        "seed": 1,
        "task": task,
        "device": "cpu",
        "splits": {
            "test": {
                "main_metric": "ap",
                "main_score": score,
                "partial": False,
                "notes": ["x gap"],
                "scores": {"ap": score},
            }
        },
    }


def _spec(tmp_path: Path) -> Path:
    p = tmp_path / "t.toml"
    p.write_text(
        'name = "t"\npaper = "P"\ntable = "T1"\nsource = "s"\nmodel = "bert-base-uncased"\nsteps = 100000\n'
        'seeds = [1]\ntasks = ["twitterpara", "cqadupstack"]\n'
        '[[rows]]\nlabel = "TSDAE"\nmethod = "tsdae"\npublished = { twitterpara = 73.0, cqadupstack = 14.5, avg = 55.2 }\n'
        '[[rows]]\nlabel = "Nope"\nmethod = "no-such-method"\npublished = { twitterpara = 1.0 }\n'
    )
    return p


def test_dry_run_and_compare(tmp_path: Path) -> None:
    res = tmp_path / "res"
    res.mkdir()
    for i, r in enumerate([_rec("tsdae", "twitterpara", 70.0, 200), _rec("tsdae", "cqadupstack", 20.0, 2000)]):
        (res / f"{i}.json").write_text(json.dumps({**r, "checksum": checksum(r)}))  # schema 2 records carry one
    out: list[str] = []
    b = Budget(model="all-MiniLM-L6-v2", steps=200)
    assert reproduce.reproduce(str(_spec(tmp_path)), str(res), b, dry_run=True, echo=out.append) == 0
    text = "\n".join(out)
    # twitterpara at 200 steps is stored; cqadupstack only at 2000 steps -> that one run is listed
    assert "--tasks cqadupstack" in text and "--tasks twitterpara" not in text and "--steps 200" in text
    assert "method not installed: 'no-such-method'" in text
    out.clear()
    assert reproduce.reproduce(str(_spec(tmp_path)), str(res), b, compare_only=True, echo=out.append) == 0
    text = re.sub(r" +", " ", "\n".join(out))
    # other base model and budget: the paper's number is context, never a difference
    assert (
        "| TSDAE | twitterpara | 73.00 | 70.00 | n/a (base model sentence-transformers/all-MiniLM-L6-v2 vs bert-base-uncased; 200 steps vs 100000) |"
        in text
    )
    assert "-3.00" not in text
    assert "base model: paper bert-base-uncased; ours sentence-transformers/all-MiniLM-L6-v2" in text
    assert "paper 100000 steps; ours 200 steps" in text and "data gap: twitterpara: x gap" in text


def test_a_difference_only_under_the_papers_conditions(tmp_path: Path) -> None:
    res = tmp_path / "res"
    res.mkdir()
    r = _rec("tsdae", "twitterpara", 70.0, 200)
    (res / "0.json").write_text(json.dumps({**r, "checksum": checksum(r)}))
    spec = _spec(tmp_path)
    spec.write_text(
        spec.read_text()
        .replace('model = "bert-base-uncased"', 'model = "sentence-transformers/all-MiniLM-L6-v2"')
        .replace("steps = 100000", "steps = 200")
    )
    out: list[str] = []
    b = Budget(model="all-MiniLM-L6-v2", steps=200)
    assert reproduce.reproduce(str(spec), str(res), b, compare_only=True, echo=out.append) == 0
    assert "| TSDAE | twitterpara | 73.00 | 70.00 | -3.00 |" in re.sub(r" +", " ", "\n".join(out))


def test_mteb_roundtrip(tmp_path: Path) -> None:
    res = tmp_path / "res"
    res.mkdir()
    r = _rec("sbert", "stsb", 82.5, None)
    (res / "a.json").write_text(json.dumps({**r, "checksum": checksum(r)}))
    files = mteb_io.export(res, tmp_path / "mteb")
    assert len(files) == 1
    doc = json.loads(files[0].read_text())
    assert doc["task_name"] == "STSBenchmark" and abs(doc["scores"]["test"][0]["main_score"] - 0.825) < 1e-9
    # an MTEB-style file for STSBenchmark imports as an 'imported' record on stsb, x100
    src = tmp_path / "mteb_in" / "some__model" / "rev"
    src.mkdir(parents=True)
    (src / "STSBenchmark.json").write_text(
        json.dumps(
            {
                "task_name": "STSBenchmark",
                "mteb_version": "1.0",
                "scores": {"test": [{"hf_subset": "default", "main_score": 0.8, "cosine_spearman": 0.8}]},
            }
        )
    )
    unknown = src / "Unknown.json"
    unknown.write_text(json.dumps({"task_name": "Unknown", "scores": {"test": []}}))
    # a task this install cannot show refuses the whole folder, naming the file (it once blanked every page)
    with pytest.raises(ConfigError, match=r"Unknown.json: task_name 'Unknown' is not a task this install can show"):
        mteb_io.import_dir(tmp_path / "mteb_in", tmp_path / "imp")
    assert not (tmp_path / "imp").exists() or not any((tmp_path / "imp").rglob("*.json"))
    unknown.unlink()
    written = mteb_io.import_dir(tmp_path / "mteb_in", tmp_path / "imp")
    assert len(written) == 1
    rec = json.loads(written[0].read_text())
    assert rec["task"] == "stsb" and abs(rec["splits"]["test"]["main_score"] - 80.0) < 1e-9
    assert rec["imported_from"] == "MTEB"
    from benchbench.report import site

    rows = site.build_rows(site.load_records(tmp_path / "imp"))
    assert rows[0].label.endswith("(imported: MTEB)")
