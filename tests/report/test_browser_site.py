"""The generated site in a real browser: headless Chromium (Debian ``chromium``) driven by playwright
loads index.html (the studies: one section per built-in study) from disk (file://) with no console
errors, its link leads to all.html (every record), where a header click reorders a table, a plot
renders (an SVG image with a size), and a method named like an XSS payload shows as text."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchbench.report import site
from benchbench.run import study as study_spec
from benchbench.store.results import checksum

XSS = "<img src=x onerror=alert(1)>"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed (pip install -e '.[test]')")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install chromium)")


def _rec(method: str, score: float, seed: int = 1) -> dict:
    return {
        "schema_version": 2,
        "task_version": 1,
        "method": method,
        "model": "m",
        "setup": "unsupervised",
        "config": {},
        "config_hash": "h",
        "seed": seed,
        "task": "stsb",
        "device": "cpu",
        "git_sha": "x",
        "train": {"seconds": 10 * score},
        "splits": {"test": {"main_metric": "s", "main_score": score, "partial": False, "notes": [], "scores": {}}},
    }


def test_site_in_chromium(tmp_path: Path) -> None:
    recs = [_rec("alpha", 70.0), _rec("beta", 50.0), _rec("gamma", 60.0), _rec(XSS, 40.0), _rec("alpha", 72.0, seed=2)]
    for i, r in enumerate(recs):
        (tmp_path / "r").mkdir(exist_ok=True)
        (tmp_path / "r" / f"{i}.json").write_text(json.dumps({**r, "checksum": checksum(r)}))  # as written
    site.build(tmp_path / "r", tmp_path / "lb")
    index = tmp_path / "lb" / "site" / "index.html"
    errors: list[str] = []
    dialogs: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(index.as_uri())
        page.wait_for_load_state("load")
        shown = page.eval_on_selector_all("section.study", "ss => ss.map(s => s.offsetHeight)")
        assert len(shown) == len(study_spec.available()) and all(h > 0 for h in shown)
        # a core study's table is on the front page; an extended one is collapsed (its table on its own page)
        core = [n for n in study_spec.available() if study_spec.load_study(n).tier == "core"]
        assert page.eval_on_selector_all("table.study-table", "ts => ts.length") == len(core)
        page.click("p.all a")  # the front page's way to every stored record
        page.wait_for_load_state("load")
        assert page.url.endswith("/all.html")
        table = "#t-sts"
        col = page.eval_on_selector_all(f"{table} th", "hs => hs.map(h => h.textContent)").index("stsb")

        def first() -> list[str]:
            return page.eval_on_selector_all(f"{table} tbody tr", f"rs => rs.map(r => r.cells[{col}].textContent)")

        before = first()
        page.click(f"{table} th:nth-child({col + 1})")
        asc = first()
        assert asc[0].startswith("40.00") and asc != before  # ascending by number
        page.click(f"{table} th:nth-child({col + 1})")
        assert first()[0].startswith("71.00")  # descending: alpha's seed mean
        # the payload is text, not an element; no alert fired
        assert XSS in page.inner_text(table)
        assert page.eval_on_selector_all(f"{table} img", "xs => xs.length") == 0
        # plots render: every SVG image decoded with a non-zero size
        sizes = page.eval_on_selector_all(
            "img.plot", "xs => xs.map(x => [x.complete, x.naturalWidth, x.naturalHeight])"
        )
        assert sizes and all(c and w > 0 and h > 0 for c, w, h in sizes)
        page.screenshot(path=str(tmp_path / "shot.png"))
        browser.close()
    assert errors == [] and dialogs == []
    assert (tmp_path / "shot.png").stat().st_size > 1000
