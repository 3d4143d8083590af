"""Studies: declared comparisons, their files, their cells, and tie groups from stored items."""

from __future__ import annotations

import numpy as np
import pytest

from benchbench.core.errors import ConfigError
from benchbench.evaluate.item_scores import pair_items
from benchbench.report import studies
from benchbench.report.studies import Cell, load_study, tie_column


def test_builtin_studies_load_with_one_model_one_budget_and_three_seeds():
    assert {"post-training-minilm", "plain-start"} <= set(studies.available())
    for name in studies.available():
        st = load_study(name)
        assert len(set(st.seeds)) >= 3 and st.model and st.steps > 0 and st.batch_size > 0
        # the budget is the same for every method; only declared per-method options differ
        for m in st.methods:
            o = st.overrides(m)
            if m == "plm-mean":  # the start: no training, no budget
                assert o == {}
                continue
            if m == "trans-encoder":  # its budget is in pairs and epochs: 100 bi + 100 cross steps of 16
                assert "steps" not in o and o["cycles"] == "1" and o["select"] == "false"
                n, bs = int(o["max_pairs"]), int(o["bi_batch_size"])
                assert n // bs * int(o["bi_epochs"]) == st.steps and bs == st.batch_size
                assert 2 * n // int(o["cross_batch_size"]) == st.steps
                continue
            assert o["steps"] == str(st.steps) and o["batch_size"] == str(st.batch_size)
    a = load_study("post-training-minilm")
    assert a.overrides("simcse")["select_on_stsb_dev"] == "false" and "lr" not in a.overrides("tsdae")


def test_a_method_without_the_budget_options_must_state_its_budget(tmp_path):
    f = tmp_path / "s.toml"
    body = 'name = "s"\nversion = 1\nmodel = "tiny-bert"\ntasks = ["stsb"]\nmethods = ["trans-encoder", "simcse"]\n'
    body += "seeds = [1, 2, 3]\n[budget]\nsteps = 4\nbatch_size = 2\n"
    f.write_text(body)
    st = load_study(str(f))
    assert st.overrides("simcse") == {"steps": "4", "batch_size": "2"}
    assert st.overrides("plm-mean") == {}  # the start row: no training, no budget
    with pytest.raises(ConfigError, match=r"method 'trans-encoder' has no option \['batch_size', 'steps'\]"):
        st.overrides("trans-encoder")
    f.write_text(body + '[set.trans-encoder]\nmax_pairs = "4"\n')
    assert load_study(str(f)).overrides("trans-encoder") == {"max_pairs": "4"}


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("seeds = [1, 2]\n", "needs >= 3 distinct seeds"),
        ('seeds = [1, 2, 3]\ncolour = "red"\n', "unknown keys"),
        ('seeds = [1, 2, 3]\n[set.nosuch]\nx = "1"\n', "not in the study"),
    ],
)
def test_a_bad_study_file_names_the_file(tmp_path, body, match):
    f = tmp_path / "s.toml"
    f.write_text(
        'name = "s"\nversion = 1\nmodel = "tiny-bert"\ntasks = ["stsb"]\nmethods = ["simcse"]\n'
        + body.replace("[set.", "[budget]\nsteps = 1\nbatch_size = 2\n[set.", 1)
        + ("" if "[set." in body else "[budget]\nsteps = 1\nbatch_size = 2\n")
    )
    with pytest.raises(ConfigError, match=match) as e:
        load_study(str(f))
    assert str(f) in str(e.value)


def test_plan_is_every_method_task_seed_with_the_study_options():
    st = load_study("post-training-minilm")
    cells = studies.plan(st, ["twitterpara", "stsb"])
    assert len(cells) == len(st.methods) * 2 * 3
    bsl = next(c for c in cells if c.method == "bsl")
    assert bsl.options["overrides"]["max_sentences"] == "1600" and bsl.setup == "unsupervised"


def _items(pred: np.ndarray, gold: np.ndarray) -> dict:
    return pair_items({"all": (pred, gold)}, "spearman")


def _cells(noise_b: float, shift_b: float = 0.0) -> dict[str, Cell]:
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 400)
    out = {}
    for name, noise in (("a", 0.3), ("b", noise_b)):
        scores, items = {}, {}
        for s in (1, 2, 3):
            pred = gold + rng.normal(0, noise, gold.size) + (shift_b if name == "b" else 0.0)
            items[s] = _items(pred, gold)
            scores[s] = 100 * float(np.corrcoef(np.argsort(np.argsort(pred)), np.argsort(np.argsort(gold)))[0, 1])
        out[name] = Cell(scores, items)
    return out


def test_tie_group_follows_the_items():
    """Two methods with equally noisy predictions share the best's rank; make b's predictions much
    noisier (separable on the items) and it leaves the tie group."""
    close = tie_column("stsb", _cells(noise_b=0.3))
    assert close.test == "items" and close.tied == {"a", "b"}, close
    apart = tie_column("stsb", _cells(noise_b=3.0))
    assert apart.best == "a" and apart.tied == {"a"} and apart.p["b"] < studies.TIE_P, apart


def test_without_items_the_column_falls_back_to_the_seed_test():
    cells = {m: Cell(c.scores, {}) for m, c in _cells(noise_b=3.0).items()}
    col = tie_column("stsb", cells)
    assert col.test == "seeds" and col.best == "a" and col.p["b"] < studies.TIE_P


def test_report_marks_the_tie_group_and_the_sample_std():
    st = load_study("post-training-minilm")
    cells = _cells(noise_b=3.0)
    table = {"stsb": {m: cells.get({"tsdae": "a", "simcse": "b"}.get(m, ""), Cell({}, {})) for m in st.methods}}
    md = studies.report_markdown(st, table)
    a = cells["a"]
    assert f"**{a.mean:.2f} ± {np.std(list(a.scores.values()), ddof=1):.2f} (3)** ¹" in md
    simcse_row = next(line for line in md.splitlines() if line.startswith("| simcse |"))
    assert "**" not in simcse_row
    assert "stsb: items" in md


def test_a_trained_cell_not_separable_from_the_start_row_is_marked():
    """The start row (plm-mean) is the base model itself: a trained cell whose items the paired test
    cannot separate from it gets the ≈ mark; one that moved clearly (much noisier predictions) does
    not, even though it is also not the column's best."""
    st = load_study("post-training-minilm")
    assert st.start == "plm-mean" and load_study("plain-start").start == "plm-mean"
    same, moved = _cells(noise_b=0.3), _cells(noise_b=3.0)
    table = {
        "stsb": {
            m: {"plm-mean": same["a"], "tsdae": same["b"], "simcse": moved["b"]}.get(m, Cell({}, {}))
            for m in st.methods
        }
    }
    p = studies.start_column(table["stsb"], "plm-mean")
    assert set(p) == {"tsdae", "simcse"} and p["tsdae"] >= studies.TIE_P > p["simcse"], p
    v = studies.view(st, table, papers=({}, {}))
    row = {r.method: r.cells[0] for r in v.rows}
    assert row["tsdae"].at_start and row["tsdae"].text.endswith(f" {studies.AT_START_MARK}")
    assert not row["simcse"].at_start and studies.AT_START_MARK not in row["simcse"].text
    assert not row["plm-mean"].at_start  # the start is never marked against itself
    assert any(n.startswith(studies.AT_START_MARK) and "Marked: 1 of 2 trained cells" in n for n in v.notes)
    # a study without a start row marks nothing
    import dataclasses

    v2 = studies.view(dataclasses.replace(st, start=""), table, papers=({}, {}))
    assert not any(c.at_start for r in v2.rows for c in r.cells)


def test_a_start_outside_the_methods_is_an_error(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text(
        'name = "s"\nversion = 1\nmodel = "tiny-bert"\nstart = "plm-cls"\ntasks = ["stsb"]\nmethods = ["simcse"]\n'
        "seeds = [1, 2, 3]\n[budget]\nsteps = 1\nbatch_size = 2\n"
    )
    with pytest.raises(ConfigError, match=r"start 'plm-cls' is not one of the study's methods") as e:
        load_study(str(f))
    assert str(f) in str(e.value)
