"""The generated leaderboard: labels from config diffs, seeds averaged, marks, escaping, determinism and
the staleness check (records are synthetic dicts written as files: no training, fast)."""

from __future__ import annotations

import json
from pathlib import Path

from benchbench.cli.board import cmd_leaderboard
from benchbench.report import site
from benchbench.store.results import checksum

XSS = "<img src=x onerror=alert(1)>"
PNG = b"\x89PNG\r\n\x1a\n" + b"a screenshot"


def shoot(index: Path, png: Path) -> None:
    """Stands in for headless Chromium (``site.screenshot``)."""
    png.write_bytes(PNG)


def rec(
    method: str,
    task: str,
    score: float,
    seed: int = 1,
    config: dict | None = None,
    chash: str = "h1",
    model: str = "m",
    **extra,
) -> dict:
    r = {
        "schema_version": 2,
        "task_version": 1,
        "method": method,
        "model": model,
        "setup": "unsupervised",
        "config": config or {},
        "config_hash": chash,
        "seed": seed,
        "task": task,
        "device": "cpu",
        "git_sha": "abc",
        "versions": {"torch": "t"},
        "splits": {
            "test": {"main_metric": "x", "main_score": score, "partial": False, "notes": [], "scores": {"x": score}}
        },
    }
    r.update(extra)
    return r


def write(root: Path, records: list[dict]) -> None:
    for r in records:
        p = (
            root
            / "results"
            / r["method"].replace("<", "_").replace(">", "_").replace("/", "_")
            / f"{r['config_hash']}-{r['seed']}-{r['task']}.json"
        )
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps({**r, "checksum": checksum(r)}))  # schema 2 records carry one


def records() -> list[dict]:
    rs = [rec("tsdae", "twitterpara", s, seed, {"steps": 2000, "lr": 3e-5}, "a") for seed, s in ((1, 70.0), (2, 72.0))]
    rs += [
        rec(
            "tsdae",
            "cqadupstack",
            20.0,
            1,
            {"steps": 2000, "lr": 3e-5},
            "a",
            train={
                "seconds": 100,
                "flops": 1e12,
                "monitor": [[100, {"dev/ap": 60.0}], [200, {"dev/ap": 65.0}]],
                "loss_curve": [[1, 5.0], [2, 4.0]],
            },
        )
    ]
    rs[-1]["splits"]["test"]["partial"] = True
    rs += [rec("tenc", "stsb", 80.0, transductive=True)]
    rs += [rec(XSS, "stsb", 50.0), rec("sbert", "stsb", 75.0, train={"seconds": 1})]
    rs += [rec("sbert", "stsb", 75.0, seed=1)]  # the same key again (copied into another folder): counted once
    # a complete one-task suite with a training cost: the quality-vs-compute plot needs a row with an average
    rs += [rec("tsdae", "afs", 55.0, 1, {"steps": 2000, "lr": 3e-5}, "a", train={"seconds": 100, "flops": 1e12})]
    return rs


def test_labels_marks_and_means(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(
        site.tables, "method_defaults", lambda m: {"steps": 100000, "lr": 3e-5} if m == "tsdae" else None
    )
    write(tmp_path, records())
    rows = site.build_rows(site.load_records(tmp_path))
    labels = {r.label for r in rows}
    assert "tsdae steps=2000" in labels  # only the field that differs from the default
    t = {t.name: t for t in site.suite_tables(rows)}
    useb = t["USEB"]
    cells = {row.label: c for row, c, _ in useb.rows}["tsdae steps=2000"]
    assert cells[useb.headers.index("twitterpara")] == "71.00 ± 1.41"  # sample std over 2 seeds
    assert cells[useb.headers.index("cqadupstack")] == "20.00*"
    # a row missing tasks (and with a partial one) has no average (before: "20.00*", over 2 of 4 tasks);
    # the footnote names what it lacks, once for the table
    assert cells[useb.headers.index("avg")] == ""
    (note,) = [n for n in useb.notes if n.startswith("USEB avg")]
    assert "missing askubuntu (in 1 row), scidocs (in 1 row)" in note and "partial cqadupstack (in 1 row)" in note
    sts = {c[0]: c for row, c, _ in t["STS"].rows}
    assert any(k.endswith("[T]") and k.startswith("tenc") for k in sts)
    assert sts["sbert"][t["STS"].headers.index("stsb")] == "75.00"  # duplicate not averaged in as a second seed


def test_build_escapes_everywhere_and_is_deterministic(tmp_path: Path) -> None:
    write(tmp_path, records())
    a, b = tmp_path / "a", tmp_path / "b"
    site.build(tmp_path / "results", a)
    site.build(tmp_path / "results", b)
    fa = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file() and ".lock" not in p.name)  # the lock: no output
    assert fa == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file() and ".lock" not in p.name)
    for rel in fa:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    html = "".join((a / rel).read_text() for rel in fa if rel.suffix in (".html", ".md", ".tex", ".svg"))
    assert XSS not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<img src=x" not in (a / "README.md").read_text()
    tex = (a / "latex" / "sts.tex").read_text()
    assert r"\toprule" in tex and r"\textless{}img" in tex
    plots = {p.name for p in (a / "site" / "plots").iterdir()}
    assert {"learning-twitterpara-dev-ap.svg", "loss-curves.svg", "seed-spread.svg"} <= plots or {
        "loss-curves.svg",
        "seed-spread.svg",
    } <= plots
    assert any(n.startswith("learning-") for n in plots)
    assert any(n.startswith("compute-flops") for n in plots)
    assert "<dc:date>" not in (a / "site" / "plots" / "seed-spread.svg").read_text()
    assert (a / "site" / "methods" / "tsdae.html").is_file() and (a / "site" / "tasks" / "stsb.html").is_file()


def test_staleness_check_names_the_file(tmp_path: Path, capsys) -> None:
    write(tmp_path, records())
    out = tmp_path / "lb"
    (out / "topic").mkdir(parents=True)
    (out / "topic" / "hand.md").write_text("hand-written")
    site.build(tmp_path, out, shoot=shoot)
    assert site.check(tmp_path, out) == []
    assert (out / "topic" / "hand.md").read_text() == "hand-written"  # others' files untouched
    p = next((tmp_path / "results" / "sbert").glob("*.json"))
    r = json.loads(p.read_text())
    r["splits"]["test"]["main_score"] = 76.0
    p.write_text(json.dumps(r))
    problems = site.check(tmp_path, out)
    assert any("README.md" in m and "differs" in m for m in problems)
    import argparse

    rc = cmd_leaderboard(argparse.Namespace(results=str(tmp_path), out=str(out), check=True, screenshot=False))
    assert rc == 1 and "README.md" in capsys.readouterr().err
    # an extra file in a generated folder is stale too
    site.build(tmp_path, out)
    (out / "site" / "old.html").write_text("x")
    assert any("old.html" in m for m in site.check(tmp_path, out))


def test_screenshot_kept_and_checked(tmp_path: Path) -> None:
    """The screenshot (taken of the new site by ``shoot``) is carried over by a build that takes none;
    ``check`` wants it (a regular PNG file the manifest lists), not its bytes (they depend on fonts)."""
    write(tmp_path, records())
    out = tmp_path / "lb"
    site.build(tmp_path, out, shoot=shoot)
    site.build(tmp_path, out)
    assert (out / "site" / "screenshot.png").read_bytes() == PNG
    assert site.check(tmp_path, out) == []
    (out / "site" / "screenshot.png").write_bytes(PNG + b"other fonts")
    assert site.check(tmp_path, out) == []
    (out / "site" / "screenshot.png").unlink()
    assert site.check(tmp_path, out) == [f"{out / 'site' / 'screenshot.png'}: missing (rebuild with --screenshot)"]


def test_escape_latex() -> None:
    assert site.escape_latex("a_b & 50% #1 {x}") == r"a\_b \& 50\% \#1 \{x\}"


def test_every_suite_has_a_section(tmp_path: Path) -> None:
    write(tmp_path, records())
    site.build(tmp_path, tmp_path / "lb")
    readme = (tmp_path / "lb" / "README.md").read_text()
    for name in ["USEB", "STS", "STS17", "SentEval", "pairs", "AFS", "COCO"]:
        assert f"## {name}\n" in readme, name


def test_dagger_from_stats(tmp_path: Path) -> None:
    rs = []
    for seed, (a, c, s) in enumerate(((70, 60, 61), (71, 62, 60)), start=1):
        rs += [
            rec("tsdae", "askubuntu", a, seed, chash="t"),
            rec("ct", "askubuntu", c, seed, chash="c"),
            rec("simcse", "askubuntu", s, seed, chash="s"),
            rec("mlm", "askubuntu", c + 0.5, seed, chash="m"),
        ]
    write(tmp_path, rs)
    t = {t.name: t for t in site.suite_tables(site.build_rows(site.load_records(tmp_path)))}["USEB"]
    col = t.headers.index("askubuntu")
    cells = {c[0]: c[col] for _, c, _ in t.rows}
    assert cells["tsdae"].endswith("†") and "†" not in cells["mlm"] and "†" not in cells["ct"]


def test_rows_name_their_setup_and_tell_same_label_configs_apart():
    from benchbench.report.site import build_rows

    def rec(setup, chash, cfg):
        return {
            "method": "nosuchmethod-x",
            "model": "m",
            "setup": setup,
            "config_hash": chash,
            "config": cfg,
            "task": "t",
            "seed": 1,
            "splits": {"test": {"main_score": 1.0}},
        }

    rows = build_rows(
        [rec("unsupervised", "aaa", {}), rec("unsupervised@corpus=128", "aaa", {}), rec("unsupervised", "bbb", {})]
    )
    labels = sorted(r.label for r in rows)
    assert any("[unsupervised@corpus=128]" in lb for lb in labels)
    plain = [lb for lb in labels if "corpus" not in lb]
    assert len(set(plain)) == 2 and any("[aaa]" in lb for lb in plain) and any("[bbb]" in lb for lb in plain)
