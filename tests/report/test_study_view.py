"""A study's page (report.study_view): provenance marks (code versions, encoders), the ≈ legend, the
published context kept out of the cells, the resume command, damaged items named, cached statistics."""

from __future__ import annotations

import dataclasses
import json

import pytest

from benchbench.report import study_provenance, study_view
from benchbench.report.aggregate import Cell
from benchbench.run.study import load_study

TASKS = ["sts12", "sts13"]


def _record(method, task, seed, score, sha="a" * 40, fp="tf-1", corpus="c1", checksum=None):
    return {
        "method": method,
        "task": task,
        "seed": seed,
        "model": "m",
        "config_hash": "h",
        "splits": {"test": {"main_score": score}},
        "git_sha": sha,
        "versions": {"transformers": "5.23.0" if sha.startswith("a") else "5.22.0"},
        "device": "cpu:x86_64x2",
        "encoder_fingerprint": fp,
        "train": {"train_data_sha256": corpus},
        "checksum": checksum or f"sha256:{method}{task}{seed}{score}",
    }


def _table(st, mutate=None):
    """Every method on two STS tasks with three seeds, no items (the seeds test decides)."""
    table = {t: {m: Cell({}) for m in st.methods} for t in TASKS}
    for i, m in enumerate(st.methods):
        for t in TASKS:
            for s in st.seeds:
                r = _record(m, t, s, 50.0 + i + 0.1 * s, fp=f"tf-{m}-{s}")
                if mutate:
                    r = mutate(r) or r
                table[t][m].scores[s] = r["splits"]["test"]["main_score"]
                table[t][m].records[s] = r
    return table


@pytest.fixture(scope="module")
def st():
    """The built-in study narrowed to what these tests read: its first 13 methods, 3 seeds (preliminary),
    no step-0 or random-init rows (tests/report/test_study_rows.py covers those)."""
    full = load_study("post-training-minilm")
    return dataclasses.replace(full, methods=full.methods[:13], seeds=(1, 2, 3), step0_rows=False, random_init="")


def test_a_row_mixing_two_encoders_for_one_seed_is_marked(st):
    """simcse seed 2's sts13 record comes from another trained encoder than its sts12 record (same training
    corpus): the row is marked [≠enc] and the note names the seed, both fingerprints and their tasks."""

    def other_encoder(r):
        if r["method"] == "simcse" and r["seed"] == 2 and r["task"] == "sts13":
            r["encoder_fingerprint"] = "tf-simcse-2-OTHER"

    v = study_view.view(st, _table(st, other_encoder), model_label="m", published=[], cache=False)
    rows = {r.method: r for r in v.rows}
    assert rows["simcse"].label.endswith(study_provenance.ROW_MIXED_ENCODER)
    assert not any(r.label.endswith(study_provenance.ROW_MIXED_ENCODER) for m, r in rows.items() if m != "simcse")
    note = next(n for n in v.notes if n.startswith("[≠enc] simcse"))
    assert "seed 2:" in note and "simcse-2-OTHER (sts13)" in note and "tf-simcse-2 (sts12)" in note
    assert v.provenance.mixed_encoders.keys() == {"simcse"}

    # another training corpus (e.g. TwitterPara's own text) is another encoder by design: not marked
    def other_corpus(r):
        if r["method"] == "simcse" and r["task"] == "sts13":
            r["encoder_fingerprint"], r["train"]["train_data_sha256"] = "tf-x", "c2"

    v2 = study_view.view(st, _table(st, other_corpus), model_label="m", published=[], cache=False)
    assert not v2.provenance.mixed_encoders


def test_a_row_mixing_code_versions_is_marked_and_every_version_listed(st):
    def old_code(r):
        if r["method"] == "tsdae" and r["seed"] == 3:
            r["git_sha"] = "b" * 40
            r["versions"] = {"transformers": "5.22.0"}

    v = study_view.view(st, _table(st, old_code), model_label="m", published=[], cache=False)
    rows = {r.method: r for r in v.rows}
    assert rows["tsdae"].label.endswith(study_provenance.ROW_MIXED_CODE) and not rows["ct"].label.endswith("]")
    text = "\n".join(v.notes)
    assert f"{'a' * 12} ({len(st.methods) * 6 - 2} records), {'b' * 12} (2 records)" in text
    assert "transformers 5.22.0, 5.23.0" in text and "cpu:x86_64x2" in text
    assert "1 of 13 rows mix code versions" in v.summary


def test_records_of_two_commits_with_one_code_tree_are_one_version_and_name_both_commits(st):
    """A study resumed after a results-only commit: the records name two commits but one code tree, so no
    row mixes code; the note lists both commits behind the one version. A different tree is still marked."""

    def tree(r):
        r["git_code_tree"] = "t" * 64
        if r["method"] == "tsdae" and r["seed"] == 3:
            r["git_sha"] = "b" * 40

    v = study_view.view(st, _table(st, tree), model_label="m", published=[], cache=False)
    assert not any(r.label.endswith(study_provenance.ROW_MIXED_CODE) for r in v.rows)
    assert f"code.{'t' * 12} ({len(st.methods) * 6} records; commits {'a' * 12}, {'b' * 12})" in "\n".join(v.notes)

    def other_tree(r):
        tree(r)
        if r["method"] == "tsdae" and r["seed"] == 3:
            r["git_code_tree"] = "u" * 64

    v2 = study_view.view(st, _table(st, other_tree), model_label="m", published=[], cache=False)
    assert {r.method for r in v2.rows if r.label.endswith(study_provenance.ROW_MIXED_CODE)} == {"tsdae"}


def test_the_page_states_the_tests_the_command_and_keeps_papers_out_of_cells(st, tmp_path):
    v = study_view.view(st, _table(st), model_label="m", results="my/results", cache=False)
    md = study_view.view_markdown(v)
    assert "Resume" not in v.status and "`benchbench study run post-training-minilm --output my/results`" in v.status
    assert "Preliminary: 3 seeds" in v.status and "— preliminary" in md
    assert "hierarchical bootstrap (2,000 resamples, rising to 10,000 for the p-values near a threshold" in md
    assert "Holm-adjusted" in md and "TOST" in md
    assert "±1 points" in md and f"sha256 {st.sha256[:12]}" in md
    assert v.published and all("[paper" not in c.text for r in v.rows for c in r.cells)
    table_lines = [ln for ln in md.splitlines() if ln.startswith("| ")]
    assert any(
        ln.startswith("| BSL-BERT (bsl-table1: Bootstrapped Unsupervised") and "| bsl | bert-base-uncased |" in ln
        for ln in table_lines
    )
    assert "no difference is computed across conditions" in md
    assert v.summary.startswith("Preliminary (3 seeds")


def test_overlap_flags_show_on_the_cell_and_in_the_notes(st):
    flags = {("simcse", "sts13"): ["sts13/headlines: 4 test sentences verbatim in the training corpus"]}
    v = study_view.view(
        st,
        _table(st),
        model_label="m",
        published=[],
        cache=False,
        overlap_flags=lambda m, t, model=None: flags.get((m, t), []),
    )
    cell = {r.method: r for r in v.rows}["simcse"].cells[1]
    assert cell.text.endswith(study_view.FLAG_MARK) and cell.flags == tuple(flags[("simcse", "sts13")])
    assert "⚑ sts13 (simcse): sts13/headlines: 4 test sentences verbatim in the training corpus" in v.notes


def test_a_damaged_items_file_is_named_and_the_column_says_which_test_decided():
    cells = {
        "a": Cell(
            {1: 60.0, 2: 61.0, 3: 60.5}, damaged=["Per-item scores of a/sts12 seed 2: /x/sts12.items.test.json.gz: bad"]
        ),
        "b": Cell({1: 50.0, 2: 51.0, 3: 50.5}),
    }
    col = study_view.column_stats("sts12", cells, n_resamples=2000)
    assert col.test == "seeds" and "sts12.items.test.json.gz" in col.why and "damaged" in col.why
    notes = study_view.legend(load_study("post-training-minilm"), {"sts12": col})
    assert any("sts12: seeds (damaged per-item scores: Per-item scores of a/sts12 seed 2" in n for n in notes)


def test_column_statistics_are_reused_while_the_scores_are_unchanged(st, tmp_path, monkeypatch):
    table = _table(st)
    first = study_view.cached_column("sts12", table["sts12"], st, tmp_path)
    assert len(list(tmp_path.glob("*.json"))) == 1

    def boom(*a, **k):
        raise AssertionError("recomputed although nothing changed")

    monkeypatch.setattr(study_view, "column_stats", boom)
    again = study_view.cached_column("sts12", table["sts12"], st, tmp_path)
    assert again == first
    # a re-stamped record (new checksum, same score) is the same column
    table["sts12"]["ct"].records[1] = dict(table["sts12"]["ct"].records[1], checksum="sha256:new")
    assert study_view.cached_column("sts12", table["sts12"], st, tmp_path) == first
    # one seed's score changes: its column is recomputed
    table["sts12"]["ct"].scores[1] += 0.01
    with pytest.raises(AssertionError, match="recomputed"):
        study_view.cached_column("sts12", table["sts12"], st, tmp_path)
    # a cache file that does not read is recomputed, never trusted
    monkeypatch.undo()
    for f in tmp_path.glob("*.json"):
        f.write_text("{not json")
    assert study_view.cached_column("sts12", _table(st)["sts12"], st, tmp_path) == first
    assert json.loads(next(tmp_path.glob("*.json")).read_text())["best"] == first.best


def _with(cells, m, **change):
    """``cells`` with row ``m``'s cell replaced by a copy carrying ``change`` (fresh dicts: no aliasing)."""
    c = cells[m]
    fresh = dict(scores=dict(c.scores), items=dict(c.items), records=dict(c.records), damaged=list(c.damaged))
    return {**cells, m: dataclasses.replace(c, **{**fresh, **change})}


def test_the_column_cache_key_follows_each_input_of_the_value_one_at_a_time_and_nothing_else(st):
    """Issue 50: the key was only ever tested along the records' checksums. Each field that changes the
    column's statistics changes the key on its own; fields that do not (a record's checksum, commit or
    timestamp; the study's description) leave it alone."""
    cells = _table(st)["sts12"]
    ct = cells["ct"]
    with_items = _with(
        cells, "ct", items={1: {"x": 1}}, records={**ct.records, 1: {**ct.records[1], "items_sha256": "a"}}
    )

    def key(cells=cells, study=st, seed=0, task="sts12"):
        return study_view._cache_key(task, cells, study, seed)

    base = key()
    changed = {
        "TOST margin": key(study=dataclasses.replace(st, margin=2.0)),
        "resamples": key(study=dataclasses.replace(st, resamples=5000)),
        "bootstrap seed": key(seed=1),
        "task": key(task="sts13"),
        "references (step-0 rows)": key(study=dataclasses.replace(st, step0_rows=True)),
        "one seed's score": key(cells=_with(cells, "ct", scores={**ct.scores, 1: ct.scores[1] + 1e-9})),
        "a seed more": key(cells=_with(cells, "ct", scores={**ct.scores, 4: 50.0})),
        "items used": key(cells=with_items),
        "which items": key(
            cells=_with(with_items, "ct", records={**ct.records, 1: {**ct.records[1], "items_sha256": "b"}})
        ),
        "damaged file": key(cells=_with(cells, "ct", damaged=["Per-item scores of ct/sts12 seed 1: bad"])),
    }
    assert base not in changed.values() and len(set(changed.values())) == len(changed), changed
    same = {
        "checksum": _with(cells, "ct", records={**ct.records, 1: {**ct.records[1], "checksum": "sha256:other"}}),
        "commit and time": _with(
            cells, "ct", records={**ct.records, 1: {**ct.records[1], "git_sha": "c" * 40, "created_at": "2030"}}
        ),
        "items sha of a seed whose items are not used": _with(
            cells, "ct", records={**ct.records, 1: {**ct.records[1], "items_sha256": "z"}}
        ),
    }
    assert {k: key(cells=c) for k, c in same.items()} == dict.fromkeys(same, base)
    assert key(study=dataclasses.replace(st, description="another wording", version=99)) == base


def test_a_cached_column_is_not_served_for_another_margin(st, tmp_path):
    """The margin decides ≈: a column cached at ±1 must not answer for ±5 (the mutation that drops the
    margin from the key survived every earlier test)."""
    table = _table(st)["sts12"]
    narrow = study_view.cached_column("sts12", table, st, tmp_path)
    wide_st = dataclasses.replace(st, margin=5.0)
    wide = study_view.cached_column("sts12", table, wide_st, tmp_path)
    assert wide == study_view.cached_column("sts12", table, wide_st, None)  # what a fresh computation gives
    assert sum(t.equivalent for t in wide.start.values()) > sum(t.equivalent for t in narrow.start.values())
    assert len(list(tmp_path.glob("*.json"))) == 2


def test_the_markdown_bolds_the_tie_group_with_the_sample_std(st):
    """Two clearly apart rows (no items: the seeds test): the best alone is bold with rank 1, mean ± sample
    std and (n); the rest are plain."""
    table = {t: {m: Cell({}) for m in st.methods} for t in ["stsb"]}
    for m, vals in (("tsdae", (80.0, 81.0, 82.0)), ("simcse", (60.0, 61.0, 60.5))):
        recs = {s: _record(m, "stsb", s, v) for s, v in zip((1, 2, 3), vals)}
        table["stsb"][m] = Cell(dict(zip((1, 2, 3), vals)), records=recs)
    md = study_view.view_markdown(study_view.view(st, table, model_label="m", published=[], cache=False))
    # no curve and no loss against a chance level in these records: "not assessable", never silently nothing
    assert "| tsdae | cls; 200 steps x 64; lr 3e-05 | **81.00 ± 1.00 (3)∅** ¹ |" in md
    simcse_row = next(line for line in md.splitlines() if line.startswith("| simcse |"))
    assert "**" not in simcse_row and "60.50 ± 0.50 (3)" in simcse_row
    assert "stsb: seeds (no per-item scores stored)" in md


def test_study_run_names_records_from_other_code_versions(st, tmp_path, monkeypatch):
    from benchbench.run import study as spec
    from benchbench.store import records, results

    recs = [_record("simcse", "stsb", 1, 60.0, sha="c" * 40), _record("simcse", "stsb", 2, 60.0, sha="d" * 40)]
    recs.append(_record("nosuch", "stsb", 1, 60.0, sha="e" * 40))  # not the study's: not counted
    # the same commit from an edited tree is another code version
    recs.append(dict(_record("simcse", "stsb", 3, 60.0, sha="d" * 40), git_dirty=True, git_diff_sha256="f" * 64))
    monkeypatch.setattr(records, "loaded_code", lambda: {"git_sha": "d" * 40, "git_dirty": False})
    monkeypatch.setattr(results, "ResultStore", lambda root: type("S", (), {"records": lambda self: iter(recs)})())
    assert spec.other_code_versions(st, tmp_path) == {"c" * 12: 1, "d" * 12 + "+dirty.ffffffff": 1}
    assert spec.other_code_versions(st, tmp_path / "absent") == {}


def test_a_row_shows_its_cost_beside_its_scores():
    """Time and energy per study row: a training two tasks share counts once; energy is summed only when
    every record measured it."""
    from benchbench.report.study_provenance import row_cost

    def rec(task, eval_s, kwh, fp="enc1"):
        return {
            "task": task,
            "seed": 1,
            "encoder_fingerprint": fp,
            "eval_seconds": eval_s,
            "train": {"seconds": 3600.0, "corpus": {"sha256": "c"}},
            "energy": {"total": {"energy_kwh": kwh}},
        }

    both = [rec("stsb", 360.0, 0.25), rec("sickr", 360.0, 0.5)]
    assert row_cost(both) == "1.20 h; 0.75 kWh"  # one shared training (1 h) + 2 x 0.1 h evaluation
    assert row_cost([*both, rec("sts12", 0.0, 0.1, fp="enc2")]) == "2.20 h; 0.85 kWh"  # another encoder trained
    assert row_cost([rec("stsb", 0.0, None), rec("sickr", 0.0, 0.5)]) == "1.00 h; energy measured in 1 of 2 records"
    short = [{**rec("stsb", 30.0, 0.001), "train": {}}]
    assert row_cost(short) == "30 s; 0.001 kWh" and row_cost([{**short[0], "eval_seconds": 150.0}]).startswith(
        "2.5 min"
    )
    assert row_cost([]) == ""
