"""Pre-registration in study files (question, primary endpoint, secondary columns, tier, expected cost)
and ``study run --estimate``'s measured probe."""

from __future__ import annotations

import pytest
from test_study_spec import _write

from benchbench.core.errors import ConfigError
from benchbench.run import study
from benchbench.run.study import load_study

CORE = {
    "tier": '"core"',
    "question": '"does it adapt?"',
    "seeds": "[1, 2, 3, 4, 5]",
}
PRIMARY = '[primary]\ntask = "sts-mini"\nsplit = "test"\nstatistic = "spearman"\ncomparison = "own-step0"\n'
COST = '[cost]\ncpu_hours = 2.0\nmeasured = "study run --estimate, 2-core CPU"\n'


def test_a_core_study_states_its_question_endpoint_and_cost(tmp_path):
    st = load_study(
        str(_write(tmp_path, {**CORE, "secondary": '["sts-mini"]'}, extra=PRIMARY + COST)), check_names=False
    )
    assert (st.tier, st.question, st.cpu_hours) == ("core", "does it adapt?", 2.0)
    assert st.primary == {"task": "sts-mini", "split": "test", "statistic": "spearman", "comparison": "own-step0"}
    assert st.secondary == ("sts-mini",)


@pytest.mark.parametrize(
    ("top", "extra", "match"),
    [
        ({"question": None}, PRIMARY + COST, "question: must be a non-empty string"),
        ({}, COST, r"primary: the primary endpoint needs \['comparison', 'split', 'statistic', 'task'\]"),
        ({}, PRIMARY, "cost.cpu_hours: a core study finishes .* within 2.5 h"),
        ({}, PRIMARY + COST.replace("2.0", "2.6"), "cost.cpu_hours: a core study finishes .* within 2.5 h"),
        (
            {},
            PRIMARY + COST.replace('measured = "study run --estimate, 2-core CPU"\n', ""),
            "cost.measured: a core study says how",
        ),
        ({"seeds": "[1, 2, 3, 4]"}, PRIMARY + COST, r"seeds: a core study has >= 5 seeds"),
        (
            {},
            PRIMARY.replace("own-step0", "best") + COST,
            r"primary.comparison: must be one of \('own-step0', 'start'\)",
        ),
        ({"tier": '"headline"'}, PRIMARY + COST, r"tier: must be one of \('core', 'extended'\)"),
    ],
)
def test_a_core_study_missing_any_preregistered_field_does_not_load(tmp_path, top, extra, match):
    with pytest.raises(ConfigError, match=match):
        load_study(str(_write(tmp_path, {**CORE, **top}, extra=extra)), check_names=False)


def test_an_extended_study_may_leave_them_out_and_a_core_limit_of_2_5_hours_is_pinned(tmp_path):
    st = load_study(str(_write(tmp_path)), check_names=False)
    assert (st.tier, st.question, st.primary, st.cpu_hours) == ("extended", "", {}, 0.0)
    assert study.CORE_MAX_CPU_HOURS == 2.5 and study.PUBLISHED_MIN_SEEDS == 5


def test_the_primary_task_and_split_must_be_the_studys(tmp_path, env):
    f = _write(tmp_path, {**CORE, "tasks": '["sts-mini"]'}, extra=PRIMARY.replace('"test"', '"dev"') + COST)
    with pytest.raises(ConfigError, match="primary.split: task 'sts-mini' has no 'dev' split"):
        load_study(str(f))
    f = _write(tmp_path, {**CORE, "tasks": '["sts-mini"]'}, extra=PRIMARY.replace('"sts-mini"', '"stsb"') + COST)
    with pytest.raises(ConfigError, match="primary.task: 'stsb' is not one of the study's tasks"):
        load_study(str(f))


def test_estimate_probes_each_task_and_method_and_projects_every_cell(tmp_path, env, monkeypatch):
    """The probe scores each task once with the start and trains each method PROBE_STEPS steps; the
    projection is steps x s/step + the task's evaluation per trained cell, evaluation alone otherwise."""
    from benchbench.run import study_estimate

    f = _write(
        tmp_path,
        {"tasks": '["sts-mini"]', "start": '"plm-mean"', "methods": '["plm-mean", "simcse"]'},
        budget={"steps": "40", "batch_size": "4"},
    )
    st = load_study(str(f))
    est = study_estimate.estimate(st, ["sts-mini"], list(st.methods), list(st.seeds))
    assert set(est.eval_seconds) == {"sts-mini"} and set(est.seconds_per_step) == {"simcse"}
    assert est.cells == 6 and not est.unprobed
    ev, sps = est.eval_seconds["sts-mini"], est.seconds_per_step["simcse"]
    assert ev > 0 and sps > 0
    # the start's 3 seeds are one evaluation (the embedding cache serves the others); each trained cell pays its own
    assert est.projected_seconds == pytest.approx(ev + 3 * (ev + 40 * sps))
    text = "\n".join(est.lines(declared_hours=1.5))
    assert "train simcse:" in text and "the study file expects 1.5 h" in text
    # a step-0 row trains nothing either: one evaluation per task, whatever the seeds
    f0 = _write(
        tmp_path,
        {"tasks": '["sts-mini"]', "start": '"plm-mean"', "methods": '["plm-mean", "simcse"]', "step0_rows": "true"},
        budget={"steps": "40", "batch_size": "4"},
    )
    st0 = load_study(str(f0))
    monkeypatch.setattr(study_estimate, "_seconds", lambda rep, key: 8.0 if key == "train" else 3.0)
    est0 = study_estimate.estimate(st0, ["sts-mini"], list(st0.methods), list(st0.seeds))
    assert est0.cells == 9
    assert est0.projected_seconds == pytest.approx(3.0 + 3.0 + 3 * (3.0 + 40 * 8.0 / study_estimate.PROBE_STEPS))


def test_train_task_reaches_every_training_row_and_not_the_start(tmp_path, env):
    f = _write(
        tmp_path,
        {"tasks": '["sts-mini"]', "start": '"plm-mean"', "step0_rows": "true", "train_task": '"sts-mini"'},
    )
    st = load_study(str(f))
    cells = study.plan(st, ["sts-mini"], [1])
    got = {c.method: c.options.get("train_task") for c in cells}
    assert got == {"plm-mean": None, "simcse": "sts-mini"}
    assert len(cells) == 3  # start, simcse's step 0, simcse: the step-0 row is a training method's row too
    assert all(c.options.get("train_task") == "sts-mini" for c in cells if c.method == "simcse")
    bad = _write(tmp_path, {"tasks": '["sts-mini"]', "train_task": '"sts-minni"'})
    with pytest.raises(ConfigError, match="train_task: Unknown task 'sts-minni'"):
        load_study(str(bad))


def test_a_train_task_studys_records_fill_its_rows(tmp_path, env):
    """The record of a cell trained on the study's train_task carries the key the study view looks for
    (``Study.record_hash``): without it the row would stay empty although its cell ran."""
    from benchbench.report import study_view
    from benchbench.store.results import ResultStore

    f = _write(tmp_path, {"tasks": '["sts-mini"]', "start": '"plm-mean"', "train_task": '"sts-mini"'})
    st = load_study(str(f))
    cells = [c for c in study.plan(st, ["sts-mini"], [1]) if c.method == "simcse"]
    out = str(tmp_path / "out")
    assert [o.status for o in study.run(st, out, "local", cells=cells)] == ["done"]
    records = list(ResultStore(out).records())
    table = study_view.collect(st, records, out, ["sts-mini"])
    assert list(table["sts-mini"]["simcse"].scores) == [1]
    assert records[0]["config_hash"] == st.record_hash(next(r for r in st.rows() if r.name == "simcse"))


def test_the_domain_adaptation_study_holds_one_budget_for_every_row():
    """The core study's rows see the same text in the same amount: steps x batch tweets for each method,
    Trans-Encoder's pairs and epochs matched to it, BSL back-translating exactly what the budget consumes,
    SimCSE in its unsupervised recipe (the MLP dropped at test time), all trained on TwitterPara."""
    st = load_study("domain-adaptation-minilm")
    assert (st.tier, st.train_task, st.primary["task"], st.primary["comparison"]) == (
        "core",
        "twitterpara",
        "twitterpara",
        "own-step0",
    )
    assert len(st.seeds) >= 5 and st.step0_rows and st.start == "plm-mean"
    n = st.steps * st.batch_size
    te = st.per_method["trans-encoder"]
    assert 2 * int(te["max_pairs"]) // int(te["cross_batch_size"]) == st.steps  # both orders, one epoch
    assert int(te["max_pairs"]) * int(te["bi_epochs"]) // int(te["bi_batch_size"]) == st.steps
    assert int(st.per_method["bsl"]["max_sentences"]) == n
    assert st.per_method["simcse"]["mlp"] == "train_only"
    assert st.cpu_hours <= study.CORE_MAX_CPU_HOURS


def test_a_local_folder_a_study_names_needs_the_command_that_builds_it(tmp_path):
    """A study naming weights in one user's ~/.cache names how a fresh clone builds them ([obtain]); a core
    study, which CI re-derives on a clean clone, names none at all."""
    gen = '[set.simcse]\nstart = "~/.cache/x/gen"\n'
    with pytest.raises(
        ConfigError, match=r"set\.simcse\.start: '~/\.cache/x/gen' is a local folder .* add it to \[obtain\]"
    ):
        load_study(str(_write(tmp_path, extra=gen)), check_names=False)
    # a path inside a k=v list (RankCSE's teacher_set) counts too
    nested = '[set.simcse]\nteacher_set = "diffcse.steps=2,diffcse.generator=/abs/gen"\n'
    with pytest.raises(ConfigError, match=r"'/abs/gen' is a local folder"):
        load_study(str(_write(tmp_path, extra=nested)), check_names=False)
    ok = gen + '[obtain]\n"~/.cache/x/gen" = "python bench/build.py --out ~/.cache/x/gen"\n'
    st = load_study(str(_write(tmp_path, extra=ok)), check_names=False)
    assert st.obtain == {"~/.cache/x/gen": "python bench/build.py --out ~/.cache/x/gen"}
    assert study.missing_local(st) == ["~/.cache/x/gen (build it with: python bench/build.py --out ~/.cache/x/gen)"]
    with pytest.raises(ConfigError, match=r"obtain: names folders the study does not use: \['/other'\]"):
        load_study(str(_write(tmp_path, extra=ok + '"/other" = "make it"\n')), check_names=False)
    with pytest.raises(ConfigError, match="a core study runs from a fresh clone"):
        load_study(str(_write(tmp_path, {**CORE, "model": '"./my-model"'}, extra=PRIMARY + COST)), check_names=False)


def test_running_a_study_without_its_local_folder_says_how_to_build_it(tmp_path):
    extra = '[set.simcse]\nstart = "~/.cache/x/gen"\n[obtain]\n"~/.cache/x/gen" = "python bench/build.py"\n'
    st = load_study(str(_write(tmp_path, extra=extra)), check_names=False)
    with pytest.raises(ConfigError, match=r"lacks: ~/\.cache/x/gen \(build it with: python bench/build\.py\)"):
        study.run(st, str(tmp_path / "out"))


def test_the_extended_studies_name_the_command_that_builds_their_local_start():
    for name in ("plain-start", "post-training-minilm"):
        st = load_study(name)
        assert list(st.obtain) == ["~/.cache/benchbench/plain-mlm-minilm-shape"]
        assert "bench/pretrain_plain_start.py train" in st.obtain["~/.cache/benchbench/plain-mlm-minilm-shape"]
