"""Tasks from pinned Hugging Face datasets and ``mteb:`` tasks: each adapter's main score equals mteb's
own evaluator on the same local copy and vectors; a spec's dataset errors name the task, the dataset
and what exists; a folder benchbench saved is evaluated by mteb."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("datasets")
mteb = pytest.importorskip("mteb")

from helpers import FIXTURES  # noqa: E402

from benchbench.core.errors import ConfigError, DataError  # noqa: E402
from benchbench.core.tasks import TaskSpec  # noqa: E402
from benchbench.encode.encoding import Embedder  # noqa: E402
from benchbench.store.data import DataStore  # noqa: E402

COPIES = FIXTURES / "mteb_copies"
STSB = ("mteb/stsbenchmark-sts", "b0fddb56ed78048fa8b90373c8a3cfc37b684831")


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    import datasets

    # ``datasets`` caches a local folder under its name: the fixtures' revision folders must not
    # leave their rows where a real copy of the same revision would be read from
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf")


def _data(tmp_path) -> DataStore:
    return DataStore(COPIES, cache_dir=tmp_path / "cache", allow_download=False)


def _mteb_main(name: str, folder: Path, model) -> float:
    task = mteb.get_task(name)
    task.metadata = task.metadata.model_copy(deep=True)  # mteb shares one metadata object per task class
    task.metadata.dataset["path"] = str(folder)
    task.load_data()
    res = task.evaluate(model, "test", encode_kwargs={"batch_size": 4})
    return float(res["default"]["main_score"])


@pytest.mark.parametrize(
    "name", ["STSBenchmark", "SICK-R", "TwitterURLCorpus", "AskUbuntuDupQuestions", "CQADupstackAndroidRetrieval"]
)
def test_mteb_task_scores_equal_mteb_evaluator(name, tiny_encoder, registry, tmp_path):
    from benchbench.core.registry import make_adapter
    from benchbench.evaluate.mteb_encoder import MTEBEncoder

    data = _data(tmp_path)
    adapter = make_adapter(registry, f"mteb:{name}", data)
    emb = Embedder(tiny_encoder)
    ours = adapter.evaluate(emb, "test")
    assert ours.main_metric == mteb.get_task(name).metadata.main_score
    theirs = _mteb_main(name, adapter.hf.folder, MTEBEncoder(emb))
    tol = 1e-5 if "Retrieval" in name or "DupQuestions" in name else 1e-9  # mteb rounds retrieval to 5 places
    assert abs(ours.main_score / 100 - theirs) < tol, (ours.scores, theirs)
    assert f"hf:{adapter.hf.dataset}@{adapter.hf.revision}" in data.used  # the copy's fingerprint is recorded


def test_reranking_scores_only_the_candidates(tiny_encoder, registry, tmp_path):
    """AskUbuntu's copy lists 4 candidates per query: a relevant document outside them (q1's d7 is
    listed, q2's d8 is, q3's d2 is) is the only way to reach recall 1; full-corpus search would rank 8."""
    from benchbench.core.registry import make_adapter

    adapter = make_adapter(registry, "mteb:AskUbuntuDupQuestions", _data(tmp_path))
    corpus, queries, qrels, top = adapter._load("test")
    from benchbench.evaluate.adapters.hf import search

    res = search(Embedder(tiny_encoder), corpus, queries, top, 1000)
    assert {q: set(d) for q, d in res.items()} == {q: set(c) for q, c in top.items()}


def test_sickr_says_it_follows_mteb_whole_set(registry):
    spec = registry.task("mteb:SICK-R")
    assert any("9,927" in n and "follows MTEB" in n for n in spec.notes)
    assert spec.name != "sickr" and spec.kind == "hf-sts"


def test_unknown_or_unsupported_mteb_task_is_a_config_error(registry):
    with pytest.raises(ConfigError, match="no such task"):
        registry.task("mteb:NoSuchTask")
    with pytest.raises(ConfigError, match="English"):
        registry.task("mteb:STS22")  # multilingual


def _spec(**params) -> TaskSpec:
    base = {"dataset": STSB[0], "revision": STSB[1]}
    return TaskSpec(
        name="my-sts", kind="hf-sts", main_metric="cosine_spearman", params={**base, **params}, source="my.toml"
    )


def test_spec_by_id_and_revision_loads_offline_and_checks_fingerprint(tiny_encoder, tmp_path):
    from benchbench.evaluate.adapters.hf import HFSTSAdapter
    from benchbench.store.hf import folder_fingerprint

    folder = COPIES / "hf" / STSB[0] / STSB[1]
    fp = folder_fingerprint(folder)
    data = _data(tmp_path)
    res = HFSTSAdapter(_spec(fingerprint=fp), data).evaluate(Embedder(tiny_encoder), "test")
    assert res.notes == ["10 pairs"] and data.used[f"hf:{STSB[0]}@{STSB[1]}"] == fp
    with pytest.raises(DataError, match=f"fingerprint {fp}, the spec expects 0+"):
        HFSTSAdapter(_spec(fingerprint="0" * 64), _data(tmp_path)).evaluate(Embedder(tiny_encoder), "test")


def test_missing_column_names_task_dataset_and_columns(tiny_encoder, tmp_path):
    from benchbench.evaluate.adapters.hf import HFSTSAdapter

    a = HFSTSAdapter(_spec(columns={"score": "gold"}), _data(tmp_path))
    with pytest.raises(DataError, match=r"my-sts.*stsbenchmark-sts.*\['gold'\].*'sentence1', 'sentence2', 'score'"):
        a.evaluate(Embedder(tiny_encoder), "test")


def test_missing_revision_and_unpinned_revision_are_errors(tiny_encoder, tmp_path):
    from benchbench.evaluate.adapters.hf import HFSTSAdapter

    with pytest.raises(ConfigError, match="40-hex commit"):
        HFSTSAdapter(_spec(revision="main"), _data(tmp_path)).evaluate(Embedder(tiny_encoder), "test")
    other = "f" * 40
    with pytest.raises(DataError, match=rf"my-sts.*{other}.*no local copy.*hf/{STSB[0]}/{other}"):
        HFSTSAdapter(_spec(revision=other), _data(tmp_path)).evaluate(Embedder(tiny_encoder), "test")
    with pytest.raises(ConfigError, match="params.revision is required"):
        HFSTSAdapter(TaskSpec(name="x", kind="hf-sts", params={"dataset": STSB[0]}), _data(tmp_path))


def test_missing_split_names_what_exists(tiny_encoder, tmp_path):
    from benchbench.evaluate.adapters.hf import HFSTSAdapter

    spec = _spec()
    spec.splits = ["test", "dev"]
    with pytest.raises(DataError, match=r"no split 'dev' \(it has \['test'\]\)"):
        HFSTSAdapter(spec, _data(tmp_path)).evaluate(Embedder(tiny_encoder), "dev")


def test_mteb_evaluates_a_folder_benchbench_saved(tiny_encoder, tmp_path):
    """The saved folder is a sentence-transformers folder: mteb's own SentenceTransformer wrapper
    scores it, and the score equals benchbench's adapter on the same folder."""
    from sentence_transformers import SentenceTransformer

    from benchbench.core.registry import make_adapter  # noqa: F401
    from benchbench.encode.models import load_encoder
    from benchbench.evaluate.adapters.hf import mteb_spec

    folder = tiny_encoder.save(tmp_path / "enc")
    assert json.loads((Path(folder) / "modules.json").read_text())
    model = mteb.models.sentence_transformer_wrapper.SentenceTransformerEncoderWrapper(SentenceTransformer(str(folder)))
    theirs = _mteb_main("STSBenchmark", COPIES / "hf" / STSB[0] / STSB[1], model)
    from benchbench.evaluate.adapters.hf import HFSTSAdapter

    ours = HFSTSAdapter(mteb_spec("STSBenchmark"), _data(tmp_path)).evaluate(
        Embedder(load_encoder(str(folder))), "test"
    )
    assert abs(ours.main_score / 100 - theirs) < 1e-4


def test_two_copies_of_one_revision_never_share_rows(tmp_path, monkeypatch):
    """``datasets`` caches a local folder under its name (the revision): a second copy with other rows
    must read its own rows, not the first copy's cache (nor fail datasets' split-size check)."""
    import shutil

    import datasets

    from benchbench.store.hf import HFData

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "shared-hf-cache")
    other = tmp_path / "other" / "hf" / STSB[0] / STSB[1]
    shutil.copytree(COPIES / "hf" / STSB[0] / STSB[1], other)
    rows = (other / "default" / "test.jsonl").read_text().splitlines()
    (other / "default" / "test.jsonl").write_text("\n".join(rows[:4]) + "\n")
    first = HFData(_data(tmp_path), "a", *STSB).split(None, "test")
    second = HFData(DataStore(tmp_path / "other", cache_dir=tmp_path / "c2", allow_download=False), "b", *STSB)
    assert len(first) == 10 and len(second.split(None, "test")) == 4


def test_unreachable_hub_without_local_copy_names_where_the_copy_goes(tiny_encoder, tmp_path, monkeypatch):
    """Downloads allowed but the hub unreachable (HF offline): the error names the full revision and
    where a local copy would be found, not a bare ConnectionError."""
    from benchbench.evaluate.adapters.hf import HFSTSAdapter

    other = "e" * 40
    data = DataStore(COPIES, cache_dir=tmp_path / "cache", allow_download=True)
    monkeypatch.delenv("BENCHBENCH_OFFLINE", raising=False)
    with pytest.raises(DataError, match=rf"my-sts.*@{other}.*No local copy at .*hf/{STSB[0]}/{other}"):
        HFSTSAdapter(_spec(revision=other), data).evaluate(Embedder(tiny_encoder), "test")


def _edited_copy(tmp_path, dataset: tuple[str, str], edit) -> DataStore:
    """A copy of a fixture under ``tmp_path/data`` whose default/test.jsonl rows went through ``edit``."""
    import shutil

    folder = tmp_path / "data" / "hf" / dataset[0] / dataset[1]
    shutil.copytree(COPIES / "hf" / dataset[0] / dataset[1], folder)
    f = folder / "default" / "test.jsonl"
    rows = [json.loads(line) for line in f.read_text().splitlines()]
    f.write_text("".join(edit(i, r) + "\n" for i, r in enumerate(rows)))
    return DataStore(tmp_path / "data", cache_dir=tmp_path / "cache", allow_download=False)


TWITTER = ("mteb/twitterurlcorpus-pairclassification", "8b6510b0b1fa4e4c4f879467980e9be563ec1cdf")


def _pairs_spec() -> TaskSpec:
    return TaskSpec(
        name="my-pairs",
        kind="hf-pairs",
        main_metric="max_ap",
        params={
            "dataset": TWITTER[0],
            "revision": TWITTER[1],
            "columns": {"sentence1": "sent1", "sentence2": "sent2"},
        },
        source="my.toml",
    )


def test_graded_pair_labels_are_refused_not_cast_to_int(tiny_encoder, tmp_path):
    """Issue 50: labels 0.1 / 0.5 / 0.9 were cast to int64 (all 0) before the 0-or-1 check, then scored
    and stored (20.26). The error names the copy, the split, the row and the value."""
    from benchbench.evaluate.adapters.hf import HFPairsAdapter

    graded = [0.1, 0.5, 0.9]
    data = _edited_copy(tmp_path, TWITTER, lambda i, r: json.dumps({**r, "labels": graded[i % 3]}))
    with pytest.raises(DataError, match=r"my-pairs.*local copy .*8b6510b0.*split 'test'.*0 or 1; row 0 has 0\.1"):
        HFPairsAdapter(_pairs_spec(), data).evaluate(Embedder(tiny_encoder), "test")
    ok = _edited_copy(tmp_path / "ok", TWITTER, lambda i, r: json.dumps({**r, "labels": float(r["labels"])}))
    assert HFPairsAdapter(_pairs_spec(), ok).evaluate(Embedder(tiny_encoder), "test").scores["max_ap"] > 0


@pytest.mark.parametrize("bad", ["NaN", "null"])
def test_a_nan_gold_score_is_a_bad_label_naming_its_row_not_the_encoders_fault(bad, tiny_encoder, tmp_path):
    """Issue 50: a NaN score in an hf-sts copy was reported as "the encoder gives the same vector"."""
    from benchbench.evaluate.adapters.hf import HFSTSAdapter

    def edit(i, r):
        return json.dumps(r) if i != 3 else json.dumps(r).replace('"score": 0.0', f'"score": {bad}')

    data = _edited_copy(tmp_path, STSB, edit)
    with pytest.raises(DataError, match=r"my-sts.*local copy .*stsbenchmark-sts.*split 'test'.*'score': row 3 has"):
        HFSTSAdapter(_spec(), data).evaluate(Embedder(tiny_encoder), "test")
