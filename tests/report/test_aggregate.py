"""The one aggregation behind every table (benchbench/report/aggregate.py): a record copied into two
folders counts once (a disagreeing copy is an error naming both paths), ``table`` and the site print
the same cells, ± is the sample std, a partial row has no average, and the did-not-learn flag fires
on a no-op trainer's record and not on a learning one's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import FIXTURES, local_plugin_workdir

from benchbench.cli.main import main
from benchbench.report import aggregate, site
from benchbench.report.aggregate import RecordConflict
from benchbench.store.results import checksum


def rec(method: str, task: str, score: float, seed: int = 1, chash: str = "h", **extra) -> dict:
    r = {
        "schema_version": 2,
        "task_version": 1,
        "method": method,
        "model": "m",
        "setup": "unsupervised",
        "config": {},
        "config_hash": chash,
        "seed": seed,
        "task": task,
        "device": "cpu",
        "git_sha": "abc",
        "splits": {"test": {"main_metric": "x", "main_score": score, "partial": False, "notes": [], "scores": {}}},
    }
    r.update(extra)
    return r


def write_store(root: Path, records: list[dict]) -> list[Path]:
    """Each record at its key's own path under ``root`` (the result store's layout)."""
    from benchbench.store.results import key_of

    paths = []
    for r in records:
        p = root / key_of(r).relpath()
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps({**r, "checksum": checksum(r)}))  # schema 2 records carry one
        paths.append(p)
    return paths


# ---- a record in two folders -----------------------------------------------------------------------------
def test_a_record_in_two_folders_counts_once(tmp_path: Path, capsys) -> None:
    # before: the site keyed copies by scored_by too (None in one, "bi" in the other), so glove-avg
    # sts14 in leaderboards/results and leaderboards/qt/results was seeds [1, 2, 3, 1]; `table` counted
    # every copy, printing "38.10±0.00" for one seed
    one = rec("glove-avg", "sts14", 38.0, seed=1)
    copy = {**rec("glove-avg", "sts14", 38.0, seed=1), "scored_by": "bi"}
    write_store(tmp_path / "results", [one, rec("glove-avg", "sts14", 40.0, seed=2)])
    write_store(tmp_path / "qt" / "results", [copy])
    records = aggregate.load_records(tmp_path)
    assert len(records) == 2
    (row,) = aggregate.build_rows(records, defaults=lambda m: None)
    assert row.seed_scores("sts14") == {1: 38.0, 2: 40.0}
    assert row.seeds() == [1, 2]
    # `table` over the same folder
    assert main(["table", "--output", str(tmp_path), "--tasks", "sts14", "--no-provenance"]) == 0
    out = capsys.readouterr().out
    assert "39.00 ± 1.41" in out
    # the site
    (t,) = [t for t in site.suite_tables(site.build_rows(site.load_records(tmp_path))) if t.name == "STS"]
    (cells,) = [c for _, c, _ in t.rows]
    assert cells[t.headers.index("sts14")] == "39.00 ± 1.41"


def test_of_two_copies_the_one_with_per_item_scores_is_kept_in_its_place() -> None:
    """A study re-run attaches items to a record also stored elsewhere without them: dedupe keeps the
    copy with items (the tie tests need them) at the first copy's place; without items, the first."""
    bare = {**rec("plm-mean", "stsb", 82.0), "_path": "a/stsb.json"}
    other = rec("sbert", "sts12", 70.0)
    rich = {**rec("plm-mean", "stsb", 82.0), "_path": "b/stsb.json", "items": {"test": "stsb.items.test.json.gz"}}
    kept = aggregate.dedupe([bare, other, rich])
    assert [r["method"] for r in kept] == ["plm-mean", "sbert"] and kept[0]["_path"] == "b/stsb.json"
    assert aggregate.dedupe([rich, bare])[0]["_path"] == "b/stsb.json"
    assert aggregate.dedupe([bare, {**bare, "_path": "c/stsb.json"}])[0]["_path"] == "a/stsb.json"


def test_a_cuda_and_a_cpu_run_of_one_key_are_two_measurements_not_a_conflict() -> None:
    """bf16 on a GPU and fp32 on a CPU score one key a little apart: both are kept (neither a conflict
    nor a copy to drop); two CPU copies that disagree still are a conflict."""
    cpu = {**rec("simcse", "twitterpara", 69.56), "_path": "results/a.json", "device": "cpu:x86_64x2"}
    gpu = {**rec("simcse", "twitterpara", 70.30), "_path": "studies/s/a.json", "device": "cuda:NVIDIA H100"}
    assert [r["_path"] for r in aggregate.dedupe([cpu, gpu])] == ["results/a.json", "studies/s/a.json"]
    with pytest.raises(RecordConflict):
        aggregate.dedupe([cpu, {**cpu, "_path": "other/a.json", "splits": gpu["splits"]}])


def test_a_conflicting_copy_is_an_error_naming_both_paths(tmp_path: Path, capsys) -> None:
    (a,) = write_store(tmp_path / "results", [rec("sbert", "stsb", 75.0)])
    (b,) = write_store(tmp_path / "other" / "results", [rec("sbert", "stsb", 77.0)])
    with pytest.raises(RecordConflict) as e:
        aggregate.load_records(tmp_path)
    msg = str(e.value)
    assert a.relative_to(tmp_path).as_posix() in msg and b.relative_to(tmp_path).as_posix() in msg
    assert "77.0000 vs 75.0000" in msg  # other/ sorts before results/
    # the commands say it too, and fail
    assert main(["table", "--output", str(tmp_path), "--no-provenance"]) == 2
    err = capsys.readouterr().err
    assert str(a) in err and str(b) in err
    assert main(["leaderboard", "--results", str(tmp_path), "--out", str(tmp_path / "lb")]) == 2
    # float noise between re-evaluations of the same weights is no conflict (the first path wins)
    noisy = rec("sbert", "stsb", 75.0 + aggregate.CONFLICT_TOLERANCE / 2)
    b.write_text(json.dumps({**noisy, "checksum": checksum(noisy)}))
    (r,) = aggregate.load_records(tmp_path)
    assert r["_path"] == b.relative_to(tmp_path).as_posix()


# ---- table and site agree; sample std; partial rows ----------------------------------------------------
def test_table_and_site_print_the_same_cells_with_sample_std(tmp_path: Path, capsys) -> None:
    # 10, 11, 13: ddof=0 std 1.25, ddof=1 std 1.53 (before: `table` printed ±1.25, the site ±1.53)
    recs = [rec("alpha", "stsb", s, seed) for seed, s in ((1, 10.0), (2, 11.0), (3, 13.0))]
    recs += [rec("beta", "stsb", 50.0), rec("beta", "sickr", 60.0, seed=1), rec("beta", "sickr", 61.0, seed=2)]
    write_store(tmp_path, recs)
    from benchbench.report.leaderboard import summarise

    records = aggregate.load_records(tmp_path)
    headers, rows, _ = summarise(records, ["stsb", "sickr"])
    table = {r[0]: dict(zip(headers, r)) for r in rows}
    (t,) = [t for t in site.suite_tables(site.build_rows(records)) if t.name == "STS"]
    sitecells = {c[0]: dict(zip(t.headers, c)) for _, c, _ in t.rows}
    assert table["alpha"]["stsb"] == sitecells["alpha"]["stsb"] == "11.33 ± 1.53"
    assert table["beta"]["sickr"] == sitecells["beta"]["sickr"] == "60.50 ± 0.71"
    assert table["beta"]["stsb"] == sitecells["beta"]["stsb"] == "50.00"  # one seed: no ±
    assert main(["table", "--output", str(tmp_path), "--tasks", "stsb,sickr", "--no-provenance"]) == 0
    out = capsys.readouterr().out
    assert "11.33 ± 1.53" in out and "± 1.25" not in out


def test_a_partial_row_has_no_average_and_the_missing_tasks_are_named(tmp_path: Path) -> None:
    sts = ["sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr"]
    recs = [rec("full", t, 70.0 + i) for i, t in enumerate(sts)]
    recs += [rec("half", "stsb", 80.0), rec("half", "sickr", 90.0)]
    recs += [rec("subsets", t, 60.0) for t in sts]
    recs[-1]["splits"]["test"]["partial"] = True  # sickr on fewer subsets than the task has
    from benchbench.report.leaderboard import summarise

    headers, rows, notes = summarise(recs, sts, {"sts": sts})
    avg = {r[0]: r[headers.index("sts avg")] for r in rows}
    assert avg == {"full": "73.00", "half": "", "subsets": ""}  # before: "85.00*" beside "73.00"
    (note,) = [n for n in notes if n.startswith("sts avg")]
    assert "2 of 3 rows" in note and "missing sts12 (in 1 row), sts13 (in 1 row)" in note
    assert "partial sickr (in 1 row)" in note
    (t,) = [t for t in site.suite_tables(site.build_rows(recs)) if t.name == "STS"]
    site_avg = {c[0]: c[t.headers.index("avg")] for _, c, _ in t.rows}
    assert site_avg == avg
    assert sum(n.startswith("STS avg") for n in t.notes) == 1  # named once per table, not once per row


# ---- flags ---------------------------------------------------------------------------------------------
def test_selection_and_cross_encoder_flags_from_stored_accounting() -> None:
    tenc = rec(
        "trans-encoder",
        "sickr",
        2.0,
        scored_by="cross",
        train={
            "dev_selection": "stsb:dev (first 200 pairs; its labels used only to select checkpoints, as the paper)",
            "start": {"model": "mini"},
            "selection": {
                "mini": [
                    {"cycle": 1, "kind": "cross", "at": "step 19", "dev": -5.7},
                    {"cycle": 1, "kind": "bi", "at": "step 3", "dev": 91.7},
                    {"cycle": 1, "kind": "bi", "at": "step 6", "dev": 90.2},
                    {"selected": "bi", "dev": 91.7, "at": "cycle 1, step 3"},
                    {"selected": "cross", "dev": -5.7, "at": "cycle 1, step 19"},
                ]
            },
        },
    )
    assert "stsb:dev" in aggregate.selects_on_labels(tenc)
    assert "chance" in aggregate.did_not_learn(tenc)
    assert aggregate.did_not_learn({**tenc, "scored_by": "bi"}) is None  # its bi-encoder moved
    assert aggregate.selects_on_labels({**tenc, "train": {"dev_selection": "none (last checkpoint)"}}) is None
    simcse = rec("simcse", "stsb", 70.0, config={"select_on_stsb_dev": True}, train={"steps": 10})
    assert "select_on_stsb_dev" in aggregate.selects_on_labels(simcse)
    assert aggregate.selects_on_labels(rec("simcse", "stsb", 70.0, train={"stsb_dev_selected_step": 5}))
    assert aggregate.selects_on_labels(rec("simcse", "stsb", 70.0, train={"steps": 10})) is None
    assert aggregate.selects_on_labels(rec("bsl", "stsb", 70.0, train={"checkpoint_selection": "stsb:dev"}))
    assert aggregate.did_not_learn(rec("plm-mean", "stsb", 70.0)) is None  # training-free: nothing to learn


def test_a_teacher_distilled_row_is_marked_and_names_its_teachers_in_every_table(tmp_path: Path, capsys) -> None:
    """RankCSE's records name the teachers benchbench trained first (``train.teachers``): the row is
    marked ``[D]`` in ``table``'s output and the leaderboard's suite tables, and a note names the teachers
    by method and config hash; a row without teachers carries no mark."""
    teachers = [
        {"method": "diffcse", "config_hash": "d1", "model": "m", "path": "runs/diffcse/x", "reused": True},
        {"method": "simcse", "config_hash": "s1", "model": "m", "path": "runs/simcse/y", "reused": False},
    ]
    rk = rec("rankcse", "stsb", 70.0, chash="r1", train={"steps": 5, "teachers": teachers})
    recs = [rk, rec("simcse", "stsb", 60.0, train={"steps": 5, "teachers": []})]
    assert aggregate.distilled_from(rk) == "diffcse [d1], simcse [s1]"
    assert aggregate.distilled_from(recs[1]) is None and aggregate.distilled_from(rec("ct", "stsb", 1.0)) is None
    write_store(tmp_path, recs)
    records = aggregate.load_records(tmp_path)
    (t,) = [t for t in site.suite_tables(site.build_rows(records)) if t.name == "STS"]
    labels = {c[0] for _, c, _ in t.rows}
    assert labels == {"rankcse [D]", "simcse"}
    assert "[D] rankcse / m: diffcse [d1], simcse [s1]" in t.notes
    assert main(["table", "--output", str(tmp_path), "--tasks", "stsb", "--no-provenance"]) == 0
    out = capsys.readouterr().out
    assert "| rankcse \\[D\\] " in out and "| simcse  " in out and "simcse \\[D" not in out  # Markdown-escaped
    assert "\\[D\\] rankcse / m: diffcse \\[d1\\], simcse \\[s1\\]" in out


PLUGIN = f"""
from dataclasses import dataclass
from pathlib import Path
import numpy as np
import torch
from benchbench import Method, Objective, fit, hookimpl

GOOD = [0.1, 0.2, 0.3, 0.9, 0.8]  # the fixture's cosines (tests/helpers.py): Spearman 1 with its gold


class Encoder:
    \"\"\"'b<i>' at cosine (1 - w) * reversed + w * GOOD with 'a<i>': w = 0 ranks every pair backwards.\"\"\"

    def __init__(self, w):
        self.w = float(w)
        self.fingerprint = f"learner-{{self.w:.6f}}"

    def encode(self, texts):
        out = []
        for t in texts:
            if t.startswith("b"):
                i = int(t[1:])
                c = (1 - self.w) * GOOD[4 - i] + self.w * GOOD[i]
                out.append([c, (1 - c * c) ** 0.5])
            else:
                out.append([1.0, 0.0])
        return np.asarray(out, dtype=np.float32)


class Obj(Objective):
    def __init__(self, learns):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(()))
        self.learns = learns

    def collate(self, items, rng):
        return {{}}

    def forward(self):
        return (self.w - 1.0) ** 2 if self.learns else (self.w * 0.0).sum() + 1.0

    def result(self):
        return Encoder(self.w.detach())


@dataclass
class Cfg:
    steps: int = 6
    batch_size: int = 2
    lr: float = 0.2


class Noop(Method):
    name = "noop"
    Config = Cfg
    trains = True
    default_model = None
    learns = False

    def train(self, corpus, ctx):
        obj = fit(self, Obj(self.learns), corpus, ctx, make_optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=self.config.lr))
        return obj.result()


class Learner(Noop):
    name = "learner"
    learns = True


@hookimpl
def benchbench_register_methods(register):
    register("noop", Noop)
    register("learner", Learner)


@hookimpl
def benchbench_register_tasks(register):
    register("mini", Path({str(FIXTURES / "sts_mini.toml")!r}))
"""


@pytest.fixture
def workdir(tmp_path, monkeypatch, tmp_cache):
    yield from local_plugin_workdir(tmp_path, monkeypatch, PLUGIN)


def test_did_not_learn_fires_on_a_no_op_trainer_and_not_on_a_learner(workdir, capsys) -> None:
    curve = ["--tasks", "sts-mini", "--eval-every", "2", "--eval-split", "test", "--device", "cpu"]
    assert main(["run", "--method", "noop", *curve]) == 0
    out = capsys.readouterr().out
    assert main(["run", "--method", "learner", *curve]) == 0
    capsys.readouterr()
    records = aggregate.load_records("results", store_layout=True)
    by = {r["method"]: r for r in records}
    noop, learner = by["noop"], by["learner"]
    assert len(noop["train"]["monitor"]) >= 2 and len(learner["train"]["monitor"]) >= 2
    assert "did not move" in aggregate.did_not_learn(noop)
    assert aggregate.did_not_learn(learner) is None
    moved = [p[1]["test/spearman_all"] for p in learner["train"]["monitor"]]
    assert max(moved) - min(moved) > aggregate.DEV_NOISE  # it learned: the curve moved
    # the run's own printed table flags it, and so do `table` and the site
    assert "!" in out and "did not learn" in out
    assert main(["table", "--tasks", "sts-mini", "--no-provenance"]) == 0
    table = capsys.readouterr().out
    lines = {ln.split("|")[1].strip(): ln for ln in table.splitlines() if ln.startswith("| ")}
    assert lines["noop"].rstrip(" |").endswith("!") and not lines["learner"].rstrip(" |").endswith("!")
    (t,) = [t for t in site.suite_tables(site.build_rows(records)) if "sts-mini" in t.tasks]
    cells = {c[0]: c[t.headers.index("sts-mini")] for _, c, _ in t.rows}
    assert cells["noop"].endswith("!") and not cells["learner"].endswith("!")


def test_not_zero_shot_cells_are_marked_from_the_model_card_old_records_too():
    """A MiniLM x cqadupstack cell carries ‡ (its card lists Stack Exchange duplicates); tiny-bert's
    does not; a record written before the zero-shot fields is judged from its model's card."""
    from benchbench.report import aggregate as A

    def rec(model, seed, **kw):
        return {"method": "m", "model": model, "task": "cqadupstack", "seed": seed, "config_hash": "h",
                "setup": "unsupervised", "splits": {"test": {"main_score": 40.0 + seed}}, **kw}  # fmt: skip

    rows = A.build_rows([rec("sentence-transformers/all-MiniLM-L6-v2", 1), rec("tiny-bert:16:1:2:32", 1)])
    cells = {tr.row.model: tr.cells["cqadupstack"] for tr in A.table_rows(rows, ["cqadupstack"], {})}
    assert A.cell_text(cells["sentence-transformers/all-MiniLM-L6-v2"]).endswith(A.NOT_ZERO_SHOT_MARK)
    assert A.NOT_ZERO_SHOT_MARK not in A.cell_text(cells["tiny-bert:16:1:2:32"])
    # a record's own fields win over the card (what the runner wrote for that run)
    own = rec("sentence-transformers/all-MiniLM-L6-v2", 1, zero_shot=True, contamination=[])
    assert A.contamination(own) == []
    notes = A.table_notes(A.table_rows(rows, ["cqadupstack"], {}), {})
    assert any(
        n.startswith(f"{A.NOT_ZERO_SHOT_MARK} cqadupstack: sentence-transformers/all-MiniLM-L6-v2 saw stackexchange")
        for n in notes
    )
