"""Study files (benchbench.run.study): the schema (every bad value names the file and the key), the
built-in files' versions (an edit without a version bump fails here), planning and the seed subset."""

from __future__ import annotations

import hashlib

import pytest

from benchbench.core.errors import ConfigError
from benchbench.core.registry import get_registry
from benchbench.run import study
from benchbench.run.study import load_study

# Each built-in study file's sha256 per version. Editing a file changes its hash: bump its `version`
# and add the new (version, hash) here; an old version keeps its old hash (one version, one content).
VERSIONS = {
    "domain-adaptation-minilm": {1: "6462fb034cf9"},
    "generic-text-minilm": {1: "cb1d5b084e16"},
    "decoder-readouts-smollm2": {1: "b267ff58fa4c"},
    "post-training-minilm": {
        2: "030234fef3c6",
        3: "8fe2c5762a27",
        4: "afa635915bdd",
        5: "0b7e56b68c54",
        6: "0311bd32ed95",
        7: "4532063571a1",
        8: "7760bdadcb05",
    },
    "plain-start": {
        2: "765e6468ad94",
        3: "f98c5a383c76",
        4: "aef9e81ec701",
        5: "060e8ca01783",
        6: "a6d5b91de0e5",
        7: "069f1aa2fbea",
        8: "7b1209121a70",
        9: "ed610d4e23b9",
    },
}

BASE = {
    "name": '"s"',
    "version": "1",
    "model": '"tiny-bert"',
    "tasks": '["stsb"]',
    "methods": '["plm-mean", "simcse"]',
    "seeds": "[1, 2, 3]",
}
BUDGET = {"steps": "4", "batch_size": "2"}


def _write(tmp_path, top=None, budget=None, extra=""):
    doc = {**BASE, **(top or {})}
    b = {**BUDGET, **(budget or {})}
    text = "".join(f"{k} = {v}\n" for k, v in doc.items() if v is not None)
    text += "[budget]\n" + "".join(f"{k} = {v}\n" for k, v in b.items() if v is not None) + extra
    f = tmp_path / "s.toml"
    f.write_text(text)
    return f


def test_every_builtin_study_file_matches_the_hash_of_its_version():
    """A study file edited without a version bump fails: each file's (version, content hash) must be in
    VERSIONS, and a version names one content only."""
    files = study.builtin_files()
    assert set(files) == set(VERSIONS), "a new or removed study file: add it to VERSIONS"
    for name, data in files.items():
        st = load_study(name)
        digest = hashlib.sha256(data).hexdigest()
        assert st.sha256 == digest
        known = VERSIONS[name]
        assert st.version in known, f"{name}: version {st.version} is not in VERSIONS; add it with its hash"
        assert digest.startswith(known[st.version]), (
            f"{name}.toml changed without a version bump (version {st.version} was {known[st.version]}, the file "
            f"is now {digest[:12]}): bump `version` and record the new hash in VERSIONS"
        )
        assert st.version == max(known), f"{name}: an older version's content is back; bump the version"


def test_the_version_test_catches_an_edit_without_a_bump(tmp_path, monkeypatch):
    """The guard itself: the same check on an edited copy of a built-in file fails."""
    data = study.builtin_files()["plain-start"] + b"\n# an edit\n"
    assert not hashlib.sha256(data).hexdigest().startswith(VERSIONS["plain-start"][max(VERSIONS["plain-start"])])


def test_a_study_whose_start_has_not_qualified_is_marked_exploratory(tmp_path):
    """plain-start's start has not yet shown both qualification tests at the study's budget: the file says
    so, and the page's title, status and summary carry it (DESIGN.md, Studies)."""
    from benchbench.report import aggregate, study_view

    st = load_study("plain-start")
    assert "random init" in st.exploratory and not load_study("post-training-minilm").exploratory
    table = {t: {r.name: aggregate.Cell({}) for r in st.rows()} for t in ["stsb"]}
    v = study_view.view(st, table, model_label="plain-mlm-minilm-shape@x", cache=False)
    md = study_view.view_markdown(v)
    assert "— exploratory" in md.splitlines()[0] and "Exploratory: a start qualifies" in v.status
    f = _write(tmp_path, extra="")
    assert load_study(str(f)).exploratory == ""
    f.write_text(f.read_text().replace('name = "s"', 'name = "s"\nexploratory = 3'))
    with pytest.raises(ConfigError, match="exploratory"):
        load_study(str(f))


def test_builtin_studies_load_and_three_seed_ones_are_preliminary():
    assert {"post-training-minilm", "plain-start"} <= set(study.available())
    for name in study.available():
        st = load_study(name)
        assert st.model and st.steps > 0 and st.batch_size > 0 and st.margin == 1.0 and st.resamples == 10_000
        assert st.preliminary == (len(st.seeds) < study.PUBLISHED_MIN_SEEDS)
        for m in st.methods:
            o = st.overrides(m)
            if m == "plm-mean":  # the start: no training, no budget
                assert o == {}
            elif not get_registry().method(m).trains:  # a training-free readout: at most its encoding batch
                assert "steps" not in o and set(o) <= {"batch_size"}, (name, m, o)
            elif m == "trans-encoder":  # its budget in pairs and epochs: as many bi and cross steps as the budget
                n, bs = int(o["max_pairs"]), int(o["bi_batch_size"])
                assert n // bs * int(o["bi_epochs"]) == st.steps and 2 * n // int(o["cross_batch_size"]) == st.steps
            else:
                assert o["steps"] == str(st.steps) and o["batch_size"] == str(st.batch_size)
    for name in ("post-training-minilm", "plain-start"):  # the published studies: 5 seeds, own starts, curves
        st = load_study(name)
        assert not st.preliminary and st.step0_rows and st.random_init and st.curve_every == 20, name


def test_a_five_seed_study_is_not_preliminary(tmp_path):
    assert not load_study(str(_write(tmp_path, {"seeds": "[1, 2, 3, 4, 5]"}))).preliminary


@pytest.mark.parametrize(
    ("top", "budget", "key", "match"),
    [
        ({"seeds": '"123"'}, None, "seeds", "list of integers"),
        ({"seeds": "[1.9, 2.5, 3.7]"}, None, "seeds", "list of integers"),
        ({"seeds": '["a", "b", "c"]'}, None, "seeds", "list of integers"),
        ({"seeds": "[true, 2, 3]"}, None, "seeds", "list of integers"),
        ({"seeds": "[1, 1, 2, 3]"}, None, "seeds", "more than once"),
        ({"seeds": "[-1, 2, 3]"}, None, "seeds", "from 0 to 2"),
        ({"seeds": "[1, 2]"}, None, "seeds", ">= 3 distinct seeds"),
        ({"version": '"one"'}, None, "version", "integer"),
        ({"version": "2.0"}, None, "version", "integer"),
        ({"version": "0"}, None, "version", ">= 1"),
        ({"methods": '["simcse", "simcse"]'}, None, "methods", "more than once"),
        ({"tasks": '["stsb", "stsb"]'}, None, "tasks", "more than once"),
        ({"methods": '["nosuch-method"]'}, None, "methods", "nosuch-method"),
        ({"tasks": '["nosuch-task"]'}, None, "tasks", "nosuch-task"),
        ({"name": "3"}, None, "name", "string"),
        ({"start": '"plm-cls"'}, None, "start", "not one of the study's methods"),
        (None, {"steps": "2.7"}, "budget.steps", "integer"),
        (None, {"steps": "true"}, "budget.steps", "integer"),
        (None, {"steps": "0"}, "budget.steps", ">= 1"),
        (None, {"batch_size": '"16"'}, "budget.batch_size", "integer"),
        (None, {"lr": "-1.0"}, "budget.lr", "positive number"),
        (None, {"lr": "true"}, "budget.lr", "positive number"),
        (None, {"selection": '"best"'}, "budget.selection", "one of"),
    ],
)
def test_each_bad_value_names_the_file_and_the_key(tmp_path, top, budget, key, match):
    f = _write(tmp_path, top, budget)
    with pytest.raises(ConfigError, match=match) as e:
        load_study(str(f))
    msg = str(e.value)
    assert str(f) in msg and f"{key}:" in msg, msg


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ("[statistics]\nmargin = 0\n", "statistics.margin"),
        ("[statistics]\nmargin = true\n", "statistics.margin"),
        ("[statistics]\nresamples = 10\n", "statistics.resamples"),
        ("[statistics]\ncolour = 1\n", "statistics"),
        ("[set.nosuch]\nx = 1\n", "set"),
        ("[set.simcse]\nx = [1, 2]\n", "set.simcse.x"),
    ],
)
def test_bad_statistics_and_per_method_tables_name_the_key(tmp_path, extra, key):
    f = _write(tmp_path, extra=extra)
    with pytest.raises(ConfigError) as e:
        load_study(str(f))
    assert str(f) in str(e.value) and f"{key}:" in str(e.value), str(e.value)


def test_unknown_top_keys_and_good_statistics(tmp_path):
    with pytest.raises(ConfigError, match="unknown keys") as e:
        load_study(str(_write(tmp_path, {"colour": '"red"'})))
    assert str(tmp_path) in str(e.value)
    st = load_study(str(_write(tmp_path, extra="[statistics]\nmargin = 0.5\nresamples = 2000\n")))
    assert (st.margin, st.resamples) == (0.5, 2000)


def test_a_method_without_the_budget_options_must_state_its_budget(tmp_path):
    f = _write(tmp_path, {"methods": '["trans-encoder", "simcse"]'})
    st = load_study(str(f))
    assert st.overrides("simcse") == {"steps": "4", "batch_size": "2"}
    with pytest.raises(ConfigError, match=r"method 'trans-encoder' has no option \['batch_size', 'steps'\]"):
        st.overrides("trans-encoder")


def test_plan_covers_every_method_task_seed_and_a_seed_subset():
    st = load_study("post-training-minilm")
    cells = study.plan(st, ["twitterpara", "stsb"])
    # one cell per row (the start, its random init, 16 step-0 rows, 17 trained rows) x task x seed
    assert len(st.rows()) == len(st.methods) + 1 + sum(r.kind == "step 0" for r in st.rows()) == 35
    assert len(cells) == len(st.rows()) * 2 * len(st.seeds)
    bsl = next(c for c in cells if c.method == "bsl")
    assert bsl.options["overrides"]["max_sentences"] == "12800" and bsl.setup == "unsupervised"
    two = study.plan(st, ["stsb"], study.subset(st, "seeds", list(st.seeds), [3, 1]))
    assert sorted({c.seed for c in two}) == [1, 3]  # the study's order, only the wanted seeds
    with pytest.raises(ConfigError, match=r"has no seeds \[9\]"):
        study.subset(st, "seeds", list(st.seeds), [9])


def test_the_command_names_the_folder_used(tmp_path):
    st = load_study("post-training-minilm")
    assert (
        st.command() == "benchbench study run post-training-minilm --output leaderboards/studies/post-training-minilm"
    )
    assert st.command("my/results").endswith("--output my/results")
    own = load_study(str(_write(tmp_path)))
    assert own.command("x") == f"benchbench study run {tmp_path / 's.toml'} --output x"


@pytest.mark.parametrize("name", sorted(n for n in VERSIONS if "rankcse" in load_study(n).methods))
def test_rankcse_teachers_are_the_studys_own_cells(name):
    """RankCSE's teachers must be the study's own DiffCSE and SimCSE cells (the same config hash, hence the
    same run folder): a teacher with other options would be another encoder than the row beside it."""
    from benchbench_plugins.rankcse import parse_teacher_set

    from benchbench.core.methods import build_config, config_hash
    from benchbench.core.registry import get_registry

    st, reg = load_study(name), get_registry()
    cfg = build_config(reg.method("rankcse"), st.overrides("rankcse"))
    options = parse_teacher_set(cfg.teacher_set, cfg.teachers)
    assert cfg.teachers == ["diffcse", "simcse"]
    for teacher in cfg.teachers:
        assert teacher in st.methods
        mine = config_hash(build_config(reg.method(teacher), options[teacher]))
        assert mine == config_hash(build_config(reg.method(teacher), st.overrides(teacher))), teacher
