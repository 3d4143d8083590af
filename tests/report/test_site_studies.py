"""The site's front page is the studies: a tiny study (a TOML in tmp) and records fabricated for it,
written through the real ``ResultStore`` with per-item scores (so the tie groups come from the item
bootstrap; per-query items, whose resampled score is a mean, keep its 1000 resamples fast), built
into a site; one table per study, the tie groups bold exactly as ``tie_column``
computes them, the average only for complete rows, the papers' numbers beside their cells only, the
records' marks, what is missing, and the old every-record view one click away on ``all.html``."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from benchbench.core.methods import build_config, config_hash
from benchbench.core.registry import get_registry
from benchbench.encode.models import model_label_of
from benchbench.evaluate.item_scores import aggregate_score, query_items
from benchbench.report import site, study_view
from benchbench.report.stats import HIERARCHICAL
from benchbench.run import study as study_spec
from benchbench.store.results import ResultStore

TASKS = ("askubuntu", "scidocs")
METHODS = ("tsdae", "ct", "bsl")
SHIFT = {"tsdae": 0.0, "ct": 0.0, "bsl": -8.0}  # bsl scores 8 points lower on every query: out of the tie group
STUDY = """name = "mini"
version = 3
description = "A tiny study for the site test."
model = "tiny-bert"
seeds = [1, 2, 3]
tasks = ["askubuntu", "scidocs"]
methods = ["tsdae", "ct", "bsl"]
model_note = "A note about the start."
[budget]
steps = 1
batch_size = 2
"""
EMPTY = STUDY.replace('name = "mini"', 'name = "nothing-yet"').replace("seeds = [1, 2, 3]", "seeds = [7, 8, 9]")


def _record(st: study_spec.Study, method: str, task: str, seed: int, items: dict) -> dict:
    reg = get_registry()
    score = aggregate_score(items)
    r = {
        "schema_version": 2,
        "task_version": 1,
        "method": method,
        "model": model_label_of(st.model),
        "setup": "unsupervised",
        "config": {},
        "config_hash": config_hash(build_config(reg.method(method), st.overrides(method))),
        "seed": seed,
        "task": task,
        "device": "cpu",
        "git_sha": "abc",
        "zero_shot": True,
        "contamination": [],
        "train": {},
        "splits": {
            "test": {"main_metric": "spearman", "main_score": score, "partial": False, "notes": [], "scores": {}}
        },
    }
    if method == "tsdae" and task == "askubuntu":  # the base model saw the task's source: not zero-shot
        r["zero_shot"] = False
        r["contamination"] = [{"dataset": "some corpus", "source": "askubuntu-source", "via": "base model"}]
    if method == "bsl":  # selects on labels, and on scidocs its dev curve never moved: flat
        r["train"]["checkpoint_selection"] = "stsb:dev"
        if task == "scidocs":
            r["train"]["monitor"] = [[10, {"stsb_dev": 50.0}], [20, {"stsb_dev": 50.0}]]
    if method == "ct":
        r["transductive"] = True
    return r


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    """Records of the mini study (ct never ran askubuntu) in leaderboards/studies/mini, one of them also
    copied into another folder (a record counts once); a site built from it with two studies."""
    tmp = tmp_path_factory.mktemp("site_studies")
    (tmp / "mini.toml").write_text(STUDY)
    (tmp / "nothing-yet.toml").write_text(EMPTY)
    st = study_spec.load_study(str(tmp / "mini.toml"))
    lb = tmp / "lb"
    store = ResultStore(lb / "studies" / "mini")
    rng = np.random.default_rng(0)
    base = {t: rng.uniform(10, 90, 300) for t in TASKS}  # per-query AP x100
    for m in METHODS:
        for t in TASKS:
            if m == "ct" and t == "askubuntu":
                continue
            for s in st.seeds:
                values = base[t] + SHIFT[m] + rng.normal(0, 5, base[t].size)
                items = query_items({"all": ([f"q{i}" for i in range(values.size)], values)}, "map")
                store.write(_record(st, m, t, s, items), items={"test": items})
    first = next(p for p in sorted((lb / "studies" / "mini").rglob("*.json")))
    copy = lb / "copy" / first.relative_to(lb / "studies" / "mini")
    copy.parent.mkdir(parents=True)
    shutil.copy(first, copy)
    for gz in first.parent.glob("*.gz"):
        shutil.copy(gz, copy.parent / gz.name)
    names = [str(tmp / "mini.toml"), str(tmp / "nothing-yet.toml")]
    site.build(lb, lb, study_names=names, shoot=lambda index, png: png.write_bytes(b"\x89PNG\r\n\x1a\n"))
    table = study_view.collect(st, list(store.records()), store.root, list(TASKS))  # what `study report` reads
    return {
        "lb": lb,
        "names": names,
        "st": st,
        "table": table,
        "index": (lb / "site" / "index.html").read_text(),
        # both studies are extended (the default tier): the front page shows them collapsed, each full table
        # on its own page
        "page": (lb / "site" / "study-mini.html").read_text(),
        "empty_page": (lb / "site" / "study-nothing-yet.html").read_text(),
        "readme": (lb / "README.md").read_text(),
    }


def _rows(html: str, table_id: str) -> dict[str, list[str]]:
    """{row label (text): [cell inner HTML, ...]} of one table (a study's setting column left out)."""
    body = re.search(rf'<table[^>]*id="{table_id}".*?<tbody>(.*?)</tbody>', html, re.S)
    assert body, table_id
    out = {}
    for tr in re.findall(r"<tr>(.*?)</tr>", body.group(1), re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)
        setting = 'class="setting"' in tr
        cells = [re.sub(r'^<a href="records-[^"]+">(.*)</a>$', r"\1", c, flags=re.S) for c in cells]
        out[re.sub(r"<[^>]+>", "", cells[0])] = cells[2:] if setting else cells[1:]
    return out


def test_one_table_per_study_and_the_tie_groups_are_tie_columns(built) -> None:
    index = built["page"]
    assert re.findall(r'<table class="sortable study-table" id="(t-study-[^"]+)"', index) == ["t-study-mini"]
    assert 'id="t-study-nothing-yet"' in built["empty_page"] and "study-table" not in built["index"]
    cols = {t: study_view.tie_column(t, built["table"][t]) for t in TASKS}
    assert cols["scidocs"].test == HIERARCHICAL and cols["scidocs"].tied == {"tsdae", "ct"}  # the designed groups
    assert cols["askubuntu"].tied == {"tsdae"} and cols["askubuntu"].test == HIERARCHICAL
    rows = _rows(index, "t-study-mini")
    by_method = {label.split(" ")[0]: cells for label, cells in rows.items()}
    for i, t in enumerate(TASKS):
        bold = {m for m, cells in by_method.items() if cells[i].startswith("<b>")}
        assert bold == cols[t].tied, t
        assert all(cells[i].startswith("<b>") == cells[i].count("¹") for cells in by_method.values())
    # mean ± sample std (n) from the stored scores
    sc = list(built["table"]["scidocs"]["tsdae"].scores.values())
    assert by_method["tsdae"][1].startswith(f"<b>{np.mean(sc):.2f} ± {np.std(sc, ddof=1):.2f} (3)∅</b> ¹")
    # each stored cell links to its records: the study's records page lists one file per seed, under ../
    assert '<a href="records-mini.html#c-tsdae-scidocs">' in index
    page = (built["lb"] / "site" / "records-mini.html").read_text(encoding="utf-8")
    para = re.search(r'<p id="c-tsdae-scidocs">(.*?)</p>', page, re.S)
    hrefs = re.findall(r'href="([^"]+)"', para.group(1)) if para else []
    recs = [json.loads((built["lb"] / "site" / h).read_text()) for h in hrefs]
    assert len(hrefs) == 3 and {(r["method"], r["task"]) for r in recs} == {("tsdae", "scidocs")}
    assert sorted(r["seed"] for r in recs) == sorted(built["table"]["scidocs"]["tsdae"].scores)


def test_partial_row_has_no_average_and_the_missing_cells_are_named(built) -> None:
    rows = {label.split(" ")[0]: cells for label, cells in _rows(built["page"], "t-study-mini").items()}
    assert rows["ct"][-2] == "" and rows["ct"][0].startswith("–")  # avg (the last column is the row's cost)
    means = [built["table"][t]["tsdae"].mean for t in TASKS]
    assert rows["tsdae"][-2] == f"{np.mean(means):.2f}"
    assert rows["tsdae"][-1].endswith("energy measured in 0 of 6 records")  # 2 tasks x 3 seeds, no energy in them
    index = built["page"]
    assert "Partly run: 15 of 18 (method, task, seed) cells stored" in index
    assert "<li>ct: askubuntu</li>" in index
    # the copy in another folder is the same record: still 3 seeds, no conflict
    assert "(3)" in rows["tsdae"][0] and "(6)" not in index


def test_papers_numbers_apart_from_the_cells(built) -> None:
    """The papers' numbers (TSDAE's Table 2 reports tsdae and ct on both tasks) are context under their own
    conditions: a table of their own under the study's (``published.published_html``), never in a cell."""
    rows = {label.split(" ")[0]: cells for label, cells in _rows(built["page"], "t-study-mini").items()}
    assert all("paper" not in c and "59.40" not in c for cells in rows.values() for c in cells)
    section = built["page"][built["page"].index('id="study-mini"') :]
    published = section[section.index('<details class="published">') :]
    assert "59.40" in published and "74.00" in published and "56.30" in published and "67.60" in published
    assert "bsl" not in re.sub(r"<[^>]+>", " ", published).split()


def test_marks_from_aggregate(built) -> None:
    rows = _rows(built["page"], "t-study-mini")
    assert set(rows) == {"tsdae", "ct [T]", "bsl [S]"}
    cells = {label.split(" ")[0]: c for label, c in rows.items()}
    assert "‡" in cells["tsdae"][0] and "‡" not in cells["tsdae"][1]  # per cell, from the record
    assert "!" in cells["bsl"][1] and "!" not in cells["bsl"][0]
    index = built["page"]
    assert "! bsl on scidocs: flat: " in index and "[S] selects its checkpoint on task labels" in index
    assert "[T] transductive" in index and "‡ not zero-shot" in index


def test_conditions_status_and_the_way_to_every_record(built) -> None:
    index, lb = built["page"], built["lb"]
    assert "budget 1 steps, batch size 2" in index and "seeds [1, 2, 3]; study version 3" in index
    assert f"Test per column: askubuntu: {HIERARCHICAL}, scidocs: {HIERARCHICAL}" in index
    empty = built["empty_page"]
    assert "Not run yet" in empty and "--output leaderboards/studies/nothing-yet" in empty
    front = built["index"][built["index"].index('id="study-nothing-yet"') :]
    assert "Run with <code>benchbench study run" in front and "--output leaderboards/studies/nothing-yet" in front
    assert '<p class="all"><a href="all.html">' in built["index"]
    all_html = (lb / "site" / "all.html").read_text()
    assert '<h2 id="s-useb">USEB</h2>' in all_html and 'id="t-useb"' in all_html  # the old suite tables
    method_page = (lb / "site" / "methods" / "tsdae.html").read_text()
    assert 'href="../index.html">studies</a>' in method_page and 'href="../all.html">' in method_page


def test_readme_shows_an_extended_study_collapsed_and_its_table_on_its_own_page(built) -> None:
    """``study report`` prints the full table; the README and the front page show an extended study collapsed
    (no table, so no wall of dashes) and link to the site page that holds the same table."""
    readme = built["readme"]
    assert readme.index("## Studies") < readme.index("## Extended studies") < readme.index("### mini (v3) — extended")
    assert readme.index("### mini (v3)") < readme.index("## USEB\n")
    report = study_view.report_markdown(built["st"], built["table"])
    table_lines = [line for line in report.splitlines() if line.startswith("| ")]
    assert len(table_lines) >= 4 and not any(line in readme for line in table_lines)
    assert "**" in table_lines[1] and "¹" in table_lines[1]
    assert "(site/study-mini.html)" in readme and "Cells stored (row x task x seed): 15 of 18 (83%)." in readme
    page_rows = _rows(built["page"], "t-study-mini")
    assert len(page_rows) == len(built["st"].rows())


def test_rebuild_is_identical(built) -> None:
    assert site.check(built["lb"], built["lb"], built["names"]) == []


def test_a_study_reads_its_own_folder_when_it_has_one(built) -> None:
    """The same key measured elsewhere (another device or commit, another folder) never fills a cell of
    a study whose output folder holds records: its rows stay one run's."""
    from benchbench.report.site.tables import load_records, study_sections

    records = load_records(built["lb"])
    mine = next(r for r in records if str(r["_path"]).startswith("studies/mini/") and r["method"] == "tsdae")
    stranger = {**mine, "_path": "elsewhere/x.json", "device": "cuda:X", "git_sha": "f" * 40}
    stranger["splits"] = {"test": {**mine["splits"]["test"], "main_score": 0.0}}
    (sec,) = [s for s in study_sections(records + [stranger], built["lb"], built["names"]) if s.name == "mini"]
    cell = sec.view.rows[[r.method for r in sec.view.rows].index("tsdae")].cells
    assert all("0.00" not in c.text for c in cell) and "f" * 12 not in " ".join(sec.view.notes)


def test_an_extended_study_on_the_front_page_is_its_completion_state_not_a_table_of_dashes(built) -> None:
    index = built["index"]
    assert index.index('<h2 id="extended">Extended studies</h2>') < index.index('id="study-mini"')
    mini = index[index.index('id="study-mini"') : index.index('id="study-nothing-yet"')]
    empty = index[index.index('id="study-nothing-yet"') : index.index("Generated by")]
    for section in (mini, empty):
        assert "<table" not in section and study_view.NO_CELL not in section
    assert "Cells stored (row x task x seed): 15 of 18 (83%)." in mini
    assert "Seeds complete (every row and task stored): 0 of 3." in mini  # ct never ran askubuntu
    assert "Code versions: abc (15 records)." in mini
    assert "Missing by method: ct: 3 of 6 missing (askubuntu)." in mini
    assert "Missing by task: askubuntu: 3 of 9." in mini
    assert "Resume with <code>benchbench study run " in mini and 'href="study-mini.html"' in mini
    assert "Missing by method: nothing stored for 3 methods (tsdae, ct, bsl)." in empty
    assert "Missing by task: askubuntu: all 9; scidocs: all 9." in empty


def test_completion_counts_the_seeds_the_methods_and_the_tasks(built) -> None:
    """Against a table edited by hand: ct's askubuntu filled for seed 1 only, bsl's scidocs seed 3 dropped;
    seed 1 is then the one complete seed."""
    from benchbench.report.aggregate import Cell

    st, table = built["st"], built["table"]
    cells = {t: {m: Cell(dict(c.scores)) for m, c in table[t].items()} for t in TASKS}
    cells["askubuntu"]["ct"] = Cell({1: 50.0})
    del cells["scidocs"]["bsl"].scores[3]
    c = study_view.completion(study_view.view(st, cells, cache=False, published=[]))
    assert (c.stored, c.planned) == (15, 18)
    assert c.seeds == (1, 2, 3) and c.seeds_complete == (1,)
    assert c.by_task == (("askubuntu", 2, 9), ("scidocs", 1, 9))
    assert c.empty_methods == () and c.partial_methods == (("ct", 2, 6, ("askubuntu",)), ("bsl", 1, 6, ("scidocs",)))


def test_the_front_page_leads_with_the_seed_papers_core_studies_then_the_decoder_study():
    """Issue 47's two core studies first, the LLM era's decoder study after them, then the rest by name;
    the committed front page (leaderboards/README.md) is in that order."""
    from pathlib import Path

    from benchbench.report.site.tables import front_page_order
    from benchbench.run.study import available

    order = front_page_order(available())
    assert order[:3] == ["domain-adaptation-minilm", "generic-text-minilm", "decoder-readouts-smollm2"]
    assert order[3:] == sorted(order[3:]) and set(order) == set(available())
    assert front_page_order(["z", "decoder-readouts-smollm2", "a"]) == ["decoder-readouts-smollm2", "a", "z"]
    page = (Path(__file__).resolve().parents[2] / "leaderboards" / "README.md").read_text(encoding="utf-8")
    heads = [page.index(f"### {n} (v") for n in order[:3]]
    assert heads == sorted(heads)
