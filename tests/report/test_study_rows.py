"""A study's rows (run.study.Study.rows) and how the page reads them (report.study_view): each trained
method against its OWN step-0 row, the random-init row of the start's shape, the learning verdict from
the stored curves in every trained cell (moved up, "▾" moved down, "!" flat, "∅" not assessable, never
silently absent),
and the curve figures the site draws."""

from __future__ import annotations

import pytest

from benchbench.core.methods import build_config, config_hash
from benchbench.core.registry import get_registry
from benchbench.report import study_view
from benchbench.run.study import parse, plan

DOC = {
    "name": "rows",
    "version": 1,
    "model": "tiny-bert:16:1:2:32",
    "start": "plm-mean",
    "seeds": [1, 2, 3, 4, 5],
    "tasks": ["stsb"],
    "methods": ["plm-mean", "simcse", "mlm", "bertflow"],
    "budget": {"steps": 100, "batch_size": 16},
    "step0_rows": True,
    "random_init": "tiny-bert:16:1:2:32",
    "curves": {"every": 25, "task": "stsb"},
    "obtain": {"~/no-such-folder/base": "python bench/build_base.py --out ~/no-such-folder/base"},  # a local start
}
BASE = "base@000000000000"


@pytest.fixture(scope="module")
def st():
    return parse(dict(DOC, model="~/no-such-folder/base"), "rows.toml")


def test_rows_order_kinds_and_references(st):
    rows = st.rows()
    assert [(r.name, r.kind, r.reference) for r in rows] == [
        ("plm-mean", "start", ""),
        ("plm-mean (random init)", "random init", "plm-mean"),
        ("simcse (step 0)", "step 0", "plm-mean"),
        ("simcse", "trained", "simcse (step 0)"),
        ("mlm (step 0)", "step 0", "plm-mean"),
        ("mlm", "trained", "mlm (step 0)"),
        ("bertflow", "trained", "plm-mean"),  # no meaningful step-0 row: read against the start
    ]
    assert rows[1].model == "tiny-bert:16:1:2:32" and rows[1].context and rows[2].context and not rows[3].context
    cells = plan(st, ["stsb"], seeds=[1])
    by = {(c.method, c.options["overrides"].get("steps"), c.options.get("model")): c.options for c in cells}
    assert ("plm-mean", None, "tiny-bert:16:1:2:32") in by and ("plm-mean", None, None) in by
    # the random-init row draws its init from each cell's seed; no other row does
    assert by[("plm-mean", None, "tiny-bert:16:1:2:32")]["seeded_init"] is True
    assert not any(o.get("seeded_init") for k, o in by.items() if k != ("plm-mean", None, "tiny-bert:16:1:2:32"))
    assert by[("simcse", "0", None)]["eval_every"] == 25 and "eval_every" not in by[("plm-mean", None, None)]


def test_random_init_needs_a_start():
    from benchbench.core.errors import ConfigError

    with pytest.raises(ConfigError, match="random_init"):
        parse({k: v for k, v in DOC.items() if k != "start"}, "x.toml")


def _rec(st, row, seed, score, *, monitor=None, loss=None, chance=None, model=BASE):
    cls = get_registry().method(row.method)
    train = {"step0_row": True, "steps": 0} if row.step0 else {}
    if monitor is not None:
        train["monitor"] = [[s, {"stsb:dev/spearman": v}] for s, v in monitor]
    if loss is not None:
        train.update(loss_curve=loss, loss_chance=chance)
    drawn = {"init_seed": seed} if row.kind == "random init" else {}  # the row draws one init per seed
    return {
        **drawn,
        "method": row.method,
        "task": "stsb",
        "seed": seed,
        "model": row.model or model,
        "config_hash": config_hash(build_config(cls, st.row_overrides(row))),
        "splits": {"test": {"main_score": score}},
        "git_sha": "a" * 40,
        "encoder_fingerprint": f"{row.name}-{seed}",
        "train": train,
        "checksum": f"sha256:{row.name}{seed}{score}",
    }


def _records(st):
    """start 50; random init 40; simcse's step 0 (CLS + MLP) 30 and simcse 45 (a rising curve: +15 over
    its own step 0, -5 under the mean-pooled start); mlm's step 0 50 and mlm 50.05 (a flat curve); bertflow
    52 with no curve and no loss chance."""
    rows = {r.name: r for r in st.rows()}
    out = []
    for s in st.seeds:
        j = 0.1 * s
        out += [
            _rec(st, rows["plm-mean"], s, 50 + j),
            _rec(st, rows["plm-mean (random init)"], s, 40 + j),
            _rec(st, rows["simcse (step 0)"], s, 30 + j),
            _rec(st, rows["simcse"], s, 45 + j, monitor=[(0, 30), (50, 40), (100, 45)]),
            _rec(st, rows["mlm (step 0)"], s, 50 + j),
            _rec(st, rows["mlm"], s, 50.05 + j, monitor=[(0, 50), (50, 50.2), (100, 50.1)]),
            _rec(st, rows["bertflow"], s, 52 + j),
        ]
    return out


@pytest.fixture(scope="module")
def v(st):
    table = study_view.collect(st, _records(st), "/nowhere", ["stsb"], model_label=BASE)
    return study_view.view(st, table, model_label=BASE, published=[], cache=False)


def test_collect_puts_each_record_in_its_row(st):
    table = study_view.collect(st, _records(st), "/nowhere", ["stsb"], model_label=BASE)
    means = {m: round(c.mean, 2) for m, c in table["stsb"].items()}
    assert means == {
        "plm-mean": 50.3,
        "plm-mean (random init)": 40.3,
        "simcse (step 0)": 30.3,
        "simcse": 45.3,
        "mlm (step 0)": 50.3,
        "mlm": 50.35,
        "bertflow": 52.3,
    }
    # a record of another base model never lands in the start's row
    other = _records(st) + [_rec(st, st.rows()[0], 1, 99.0, model="other@111111111111")]
    again = study_view.collect(st, other, "/nowhere", ["stsb"], model_label=BASE)
    assert again["stsb"]["plm-mean"].scores[1] == pytest.approx(50.1)


def test_records_of_an_older_task_version_are_left_out_and_named(st, monkeypatch):
    """A cell is the task as defined now: a record of task version 1 when the task is at version 2 (e.g.
    TwitterPara before its heldout split left the training text) is not a cell, and the page says so."""
    import dataclasses

    reg = get_registry()
    recs = _records(st)
    for r in recs:
        r["task_version"] = 2
    recs[0] = {**recs[0], "task_version": 1, "splits": {"test": {"main_score": 99.0}}}  # plm-mean, seed 1
    monkeypatch.setitem(reg.tasks, "stsb", dataclasses.replace(reg.task("stsb"), version=2))
    table = study_view.collect(st, recs, "/nowhere", ["stsb"], model_label=BASE)
    start = table["stsb"]["plm-mean"]
    assert 1 not in start.scores and start.superseded == {1: "of task version 1 (the task is at version 2)"}
    assert len(start.scores) == 4
    view = study_view.view(st, table, model_label=BASE, published=[], cache=False)
    assert view.missing[0] == (
        "stsb: 1 stored record of task version 1 (the task is at version 2) left out: not this study's cells"
    )
    assert "plm-mean: stsb (seed 1)" in view.missing
    # at version 1 the same record is the cell
    monkeypatch.setitem(reg.tasks, "stsb", dataclasses.replace(reg.task("stsb"), version=1))
    for r in recs:
        r["task_version"] = 1
    assert study_view.collect(st, recs, "/nowhere", ["stsb"], model_label=BASE)["stsb"]["plm-mean"].scores[1] == 99.0


def test_random_init_records_of_one_repeated_init_are_left_out(st):
    """Records of the random-init row written before it drew one init per seed (no ``init_seed``: seed 0's
    init for every seed) are not its cells: five copies of one init would pass for five draws."""
    recs = _records(st)
    for r in recs:
        if r["model"] == "tiny-bert:16:1:2:32" and r["seed"] in (1, 2):
            r.pop("init_seed")
    table = study_view.collect(st, recs, "/nowhere", ["stsb"], model_label=BASE)
    cell = table["stsb"]["plm-mean (random init)"]
    assert sorted(cell.scores) == [3, 4, 5] and set(cell.superseded) == {1, 2}
    view = study_view.view(st, table, model_label=BASE, published=[], cache=False)
    assert view.missing[0].startswith("stsb: 2 stored records of one seed-0 init repeated for every seed")
    assert table["stsb"]["plm-mean"].superseded == {}  # the start is not drawn: its records stay


def test_a_trained_row_is_read_against_its_own_step0_row(v):
    col = v.columns["stsb"]
    simcse = col.start["simcse"]
    assert simcse.reference == "simcse (step 0)" and simcse.diff == pytest.approx(15.0) and simcse.verdict == "↑"
    # against the mean-pooled start simcse would read as a loss (-5): the page must not say that
    assert col.start["bertflow"].reference == "plm-mean"
    assert col.start["simcse (step 0)"].reference == "plm-mean" and col.start["simcse (step 0)"].verdict == "↓"
    assert col.start["plm-mean (random init)"].verdict == "↓"
    # context rows are never ranked: bertflow (52.3) is best among ranked rows, and no step-0 row is bold
    assert col.best == "bertflow" and not {"simcse (step 0)", "mlm (step 0)", "plm-mean (random init)"} & col.tied
    cells = {r.method: r.cells[0] for r in v.rows}
    assert cells["simcse"].reference == "simcse (step 0)" and cells["simcse"].start == "↑"


def test_learning_marks_in_every_trained_cell(v):
    cells = {r.method: r.cells[0] for r in v.rows}
    assert cells["simcse"].learning == "moved up" and not cells["simcse"].text.endswith(("!", "∅", "▾"))
    assert cells["mlm"].learning == "flat" and "!" in cells["mlm"].text
    assert cells["bertflow"].learning == "not assessable" and "∅" in cells["bertflow"].text
    assert cells["plm-mean"].learning == "" and "∅" not in cells["plm-mean"].text  # the start does not train
    assert cells["simcse (step 0)"].learning == ""
    assert any(n.startswith("! mlm on stsb: flat: all 5 seeds: dev went 50.00 -> 50.10") for n in v.notes)
    assert any(n.startswith("∅ bertflow on stsb: not assessable") for n in v.notes)
    assert "1 moved up, 0 moved down (▾), 1 flat (!), 1 not assessable (∅)" in v.summary
    assert "learned" not in v.summary
    assert "beats its random init of the same shape (tiny-bert:16:1:2:32) separably in 1 of 1 columns." in v.summary


def test_a_flat_loss_at_chance_says_flat_a_falling_one_cannot_tell_the_direction(st):
    rows = {r.name: r for r in st.rows()}
    flat = [_rec(st, rows["mlm"], s, 50.0, loss=[[5, 2.77], [100, 2.76]], chance=2.77) for s in st.seeds]
    fell = [_rec(st, rows["mlm"], s, 50.0, loss=[[5, 2.5], [100, 0.4]], chance=2.77) for s in st.seeds]
    for recs, want in ((flat, "flat"), (fell, "not assessable")):
        table = study_view.collect(st, recs, "/nowhere", ["stsb"], model_label=BASE)
        assert study_view.learning_verdicts(st, table)["mlm"]["stsb"]["verdict"] == want


def test_a_falling_dev_curve_is_moved_down_on_the_page_never_learned(st):
    """Every seed's dev curve falls 86.7 -> 85.3 (BSL's STS-B dev on post-training-minilm) with a loss well
    below its chance level: the cell is "moved down", marked ▾, and the summary counts no cell as learned."""
    rows = {r.name: r for r in st.rows()}
    fell = [
        _rec(
            st,
            rows["mlm"],
            s,
            80.0 + 0.1 * s,
            monitor=[(0, 86.7), (50, 85.6), (100, 85.3)],
            loss=[[5, 2.5], [100, 0.4]],
            chance=2.77,
        )
        for s in st.seeds
    ]
    table = study_view.collect(st, fell, "/nowhere", ["stsb"], model_label=BASE)
    got = study_view.view(st, table, model_label=BASE, published=[], cache=False)
    cell = {r.method: r.cells[0] for r in got.rows}["mlm"]
    assert cell.learning == "moved down" and cell.text.endswith("▾")
    assert "0 moved up, 1 moved down (▾)" in got.summary and "learned" not in got.summary
    assert any(n.startswith("▾ mlm on stsb: moved down: all 5 seeds: dev went 86.70 -> 85.30") for n in got.notes)


def test_settings_and_curve_figure(v):
    settings = {r.method: r.setting for r in v.rows}
    assert settings["simcse"].startswith("cls; MLP (train_and_test); 100 steps x 16; lr 5e-05")
    assert settings["simcse (step 0)"].startswith("cls; MLP (train_and_test); 0 steps")
    assert settings["plm-mean"] == "mean; no training"
    assert settings["plm-mean (random init)"] == "tiny-bert:16:1:2:32: random init (one draw per seed), no training"
    assert list(v.curves) == ["stsb"] and set(v.curves["stsb"]) == {"simcse", "mlm", "bertflow"}
    from benchbench.report.site.plots import study_curve_plots

    class Sec:
        view = v

    plots = study_curve_plots([Sec()])
    ((name, (title, svg)),) = plots.items()
    assert name == "study-rows-stsb" and "learning curves" in title and "<svg" in svg
    assert "(moved up)" in svg and "(flat)" in svg and "no dev curve: bertflow" in svg


def test_the_budget_is_read_from_the_median_curve(v):
    """The summary says where the median trained row's dev curve settles within the margin of its last
    point, and when it does not settle before the end."""
    # simcse 30 -> 40 -> 45, mlm 50 -> 50.2 -> 50.1: the median 40 -> 45.1 -> 47.55 still moves at the end
    assert "Budget, read from the curves: stsb: the median of 2 rows' dev curves goes 40.00 -> 47.55" in v.summary
    assert "from step 100 of 100 (still moving at the end" in v.summary

    def rec(points):
        return {"train": {"monitor": [[s, {"stsb:dev/spearman": x}] for s, x in points]}}

    flat_late = [(0, 10.0), (20, 30.0), (40, 39.5), (60, 40.2), (80, 40.0)]
    text = study_view.budget_reading({"stsb": {"a": [rec(flat_late)], "b": [rec(flat_late)]}}, 1.0)
    assert "goes 10.00 -> 40.00" in text and "from step 40 of 80 (it levelled off inside the budget)" in text
    assert study_view.budget_reading({"stsb": {"a": [rec([(0, 1.0)])]}}, 1.0) == ""  # one point: no reading


def test_a_twitterpara_cell_is_not_called_flat_from_a_flat_stsb_curve(st):
    """A study without a [curves.per_task] entry for TwitterPara (no dev split) follows its cells on STS-B
    dev: a flat STS-B curve with a loss far below chance cannot tell TwitterPara's direction ("not
    assessable"), while the same curve on an STS cell (same training text as STS-B) reads "flat"."""
    assert not study_view._curve_on_task(st, "twitterpara")
    assert study_view._curve_on_task(st, "sts13") and study_view._curve_on_task(st, "stsb")
    row = {r.name: r for r in st.rows()}["mlm"]
    flat = [(0, 50.0), (50, 50.2), (100, 50.1)]
    table = {}
    for task in ("twitterpara", "sts13"):
        recs = [
            dict(
                _rec(st, row, s, 50.0, monitor=flat, loss=[[5, 2.5], [100, 0.3]], chance=2.77),
                task=task,
                task_version=get_registry().task(task).version,
            )
            for s in st.seeds
        ]
        table.update(study_view.collect(st, recs, "/nowhere", [task], model_label=BASE))
    got = study_view.learning_verdicts(st, table)["mlm"]
    assert got["twitterpara"]["verdict"] == "not assessable"
    assert "another task's dev split" in got["twitterpara"]["reason"]
    assert got["sts13"]["verdict"] == "flat"


def test_with_a_per_task_curve_a_flat_twitterpara_curve_is_flat(st):
    """With [curves.per_task] twitterpara = "twitterpara:heldout" its cells follow their own task's curve:
    the same flat curve now decides "flat", as on an STS cell."""
    per = parse(
        dict(
            DOC,
            model="~/no-such-folder/base",
            curves={"every": 25, "task": "stsb", "per_task": {"twitterpara": "twitterpara:heldout"}},
        ),
        "rows.toml",
    )
    assert study_view._curve_on_task(per, "twitterpara") and study_view._curve_on_task(per, "sts13")
    row = {r.name: r for r in per.rows()}["mlm"]
    flat = [(0, 50.0), (50, 50.2), (100, 50.1)]
    recs = [
        dict(
            _rec(per, row, s, 50.0, monitor=flat, loss=[[5, 2.5], [100, 0.3]], chance=2.77),
            task="twitterpara",
            task_version=get_registry().task("twitterpara").version,
        )
        for s in per.seeds
    ]
    table = study_view.collect(per, recs, "/nowhere", ["twitterpara"], model_label=BASE)
    assert study_view.learning_verdicts(per, table)["mlm"]["twitterpara"]["verdict"] == "flat"


def test_a_teacher_distilled_row_is_marked_on_the_study_page_naming_its_teachers():
    """RankCSE's records name the teachers it was distilled from (``train.teachers``): its study row is
    marked [D] and a note names them; its step-0 row (no teachers trained) is not marked."""
    st = parse(dict(DOC, model="~/no-such-folder/base", methods=["plm-mean", "simcse", "rankcse"]), "rows.toml")
    rows = {r.name: r for r in st.rows()}
    teachers = [{"method": "simcse", "config_hash": "0d6b36ec17ec", "model": BASE, "path": "runs/simcse/x"}]
    recs = []
    for s in st.seeds:
        recs += [_rec(st, rows["plm-mean"], s, 50.0 + s), _rec(st, rows["rankcse (step 0)"], s, 40.0 + s)]
        r = _rec(st, rows["rankcse"], s, 45.0 + s, monitor=[(0, 30), (100, 45)])
        r["train"]["teachers"] = teachers
        recs.append(r)
    table = study_view.collect(st, recs, "/nowhere", ["stsb"], model_label=BASE)
    view = study_view.view(st, table, model_label=BASE, published=[], cache=False)
    labels = {r.method: r.label for r in view.rows}
    assert labels["rankcse"].endswith("[D]") and not labels["rankcse (step 0)"].endswith("[D]")
    assert any(n.startswith("[D] rankcse") and "simcse [0d6b36ec17ec]" in n for n in view.notes)


def test_step0_rows_with_contamination_flags_on(st):
    """Issue 50: the page's flag fixture turned step-0 rows off. With both on: a step-0 row carries its
    START's flags (it saw no training text), never its method's training-corpus flags; a trained row its
    own; the random init none; and the step-0 rows keep their context tests."""
    flags = {
        ("plm-mean", "stsb"): ["stsb: 3 of 9 test sentences occur verbatim (the start's own training text)"],
        ("simcse", "stsb"): ["stsb: 5 of 9 test sentences occur verbatim (simcse's training corpus)"],
    }
    asked = []

    def overlap(method, task, model=None):
        asked.append(method)
        return flags.get((method, task), [])

    table = study_view.collect(st, _records(st), "/nowhere", ["stsb"], model_label=BASE)
    got = study_view.view(st, table, model_label=BASE, published=[], cache=False, overlap_flags=overlap)
    cells = {r.method: r.cells[0] for r in got.rows}
    start_flag, simcse_flag = tuple(flags[("plm-mean", "stsb")]), tuple(flags[("simcse", "stsb")])
    assert cells["simcse (step 0)"].flags == start_flag and cells["mlm (step 0)"].flags == start_flag
    assert cells["simcse"].flags == simcse_flag and cells["plm-mean"].flags == start_flag
    assert cells["plm-mean (random init)"].flags == () and "plm-mean (random init)" not in asked
    assert all(c.text.endswith(study_view.FLAG_MARK) for m, c in cells.items() if c.flags)
    assert any(n.startswith("⚑ stsb (plm-mean, simcse (step 0), mlm (step 0)): ") for n in got.notes), got.notes
    # the flags take nothing away from the step-0 rows: their context tests against the start stand
    col = got.columns["stsb"]
    assert col.start["simcse (step 0)"].verdict == "↓" and cells["simcse"].reference == "simcse (step 0)"
    assert cells["simcse"].start == "↑"


def test_one_ranked_row_makes_no_rank_claim_on_the_page(st):
    """Only the start is stored among the ranked rows (the trained rows are missing; the step-0 rows and
    the random init are context): no bold cell and no "rank 1 separated" sentence (plain-start printed
    "rank 1 separated in 7 of 8 columns" with plm-mean the only ranked row)."""
    keep = {"plm-mean", "plm-mean (random init)", "simcse (step 0)", "mlm (step 0)"}
    recs = [r for r in _records(st) if r["encoder_fingerprint"].rsplit("-", 1)[0] in keep]  # "<row>-<seed>"
    table = study_view.collect(st, recs, "/nowhere", ["stsb"], model_label=BASE)
    assert {m for m, c in table["stsb"].items() if c.scores} == keep
    got = study_view.view(st, table, model_label=BASE, published=[], cache=False)
    assert not any(c.tied for r in got.rows for c in r.cells)
    assert "Rank 1" not in got.summary and "No rank claim" in got.summary
    assert "Highest average" not in got.summary  # one complete ranked row: no "highest" either


def test_the_sts12_aggregation_is_named_with_the_other_reading(st):
    """STS12-16's main score is SimCSE's 'all' aggregation; SentEval's per-subset mean is in the same
    records. The page names the one it uses and counts the trained cells above their reference under
    each (BSL's sts12 "separably above" held only under 'all')."""
    rows = {r.name: r for r in st.rows()}
    version = get_registry().task("sts12").version

    def sts12(row, s, all_, mean):
        r = _rec(st, row, s, all_)
        r.update(task="sts12", task_version=version)
        r["splits"] = {
            "test": {
                "main_score": all_,
                "main_metric": "spearman_all",
                "scores": {"spearman_all": all_, "spearman_mean": mean},
                "details": {"aggregation": "SimCSE 'all' (pairs of all subsets concatenated)"},
            }
        }
        return r

    recs = []
    for s in st.seeds:
        recs += [
            sts12(rows["simcse (step 0)"], s, 70.0 + 0.1 * s, 68.0),
            sts12(rows["simcse"], s, 72.0 + 0.1 * s, 67.0),
        ]
    table = study_view.collect(st, recs, "/nowhere", ["sts12"], model_label=BASE)
    got = study_view.view(st, table, model_label=BASE, published=[], cache=False)
    assert "Subset aggregation of the main score: sts12: SimCSE 'all' (pairs of all subsets concatenated)." in got.notes
    assert any(
        n.startswith("Of 1 trained cells in these columns, 1 lie above their reference row under SimCSE's 'all'")
        and "and 0 under SentEval's per-subset mean (spearman_mean" in n
        for n in got.notes
    ), got.notes
    assert "sts12 scored with SimCSE 'all' (pairs of all subsets concatenated) aggregation" in got.summary
    md = study_view.view_markdown(got)
    assert "Subset aggregation of the main score: sts12: SimCSE" in md


def test_row_settings_name_each_readout_as_built():
    """A decoder readout is its last token (PromptEOL, token prepending) or a mean over echo's pooled pieces,
    never PromptBERT's "[MASK] of"; a training-free method says so, without its speed knobs; LLM2Vec's
    steps are per stage; PromptBERT's rows keep "[MASK] of"."""
    from benchbench.report.study_view import row_setting
    from benchbench.run.study import load_study

    st = load_study("decoder-readouts-smollm2")
    got = {r.name: row_setting(st, r) for r in st.rows()}
    assert got["prompteol"] == 'last token of \'This sentence : "{text}" means in one word:"\'; no training'
    assert got["token-prepending"].startswith("last token of 'This sentence : <PST>")
    assert got["token-prepending"].endswith("; hidden state 27; no training")
    assert got["echo"].startswith("mean over the pooled pieces of '<s>Instruct:") and "no training" in got["echo"]
    assert got["plm-last"] == "last; no training"
    assert got["llm2vec"] == "mean; 20 steps x 16 per stage (mntp+simcse); lr: the method's rule"
    assert not any("MASK" in v or "batch_size" in v for v in got.values()), got
    post = load_study("post-training-minilm")
    p = {r.name: row_setting(post, r) for r in post.rows()}
    assert p["promptbert"].startswith("[MASK] of 'This sentence of \"[X]\" means [MASK].'; MLP; 200 steps")
