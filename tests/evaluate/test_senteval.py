"""SentEval transfer: loaders keep SentEval's text and row order; the protocols pick folds, L2 and
report numbers the way SentEval does; the adapter runs end to end on fixtures."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import FIXTURES

from benchbench.core.errors import ConfigError, DataError
from benchbench.core.tasks import TaskSpec
from benchbench.encode.cache import EmbeddingCache
from benchbench.encode.encoding import Embedder
from benchbench.evaluate.adapters import _classifier as C
from benchbench.evaluate.adapters.senteval import (
    SentEvalAdapter,
    featurize,
    load_binary,
    load_mrpc,
    load_sick_entailment,
    load_sst,
    load_task,
    load_trec,
    pair_features,
)
from benchbench.store.data import DataStore

SE = FIXTURES / "senteval"


def test_binary_loader_sorts_like_senteval_and_reads_latin1():
    x, y = load_binary(SE / "MR/rt-polarity.pos", SE / "MR/rt-polarity.neg")
    assert len(x) == 40 and y.sum() == 20
    lengths = [len(s.split()) for s in x]
    # SentEval's key: (number of tokens, label), stable: negatives (0) before positives (1) at equal length
    keys = list(zip(lengths, y.tolist()))
    assert keys == sorted(keys)
    assert "caf\xe9 was great" in x  # byte 0xE9 decoded as latin-1, as SentEval does


def test_trec_mrpc_sick_sst_loaders():
    x, y = load_trec(SE / "TREC/train_5500.label")
    assert len(x) == 24 and set(y.tolist()) == set(range(6))
    assert "How far is it ?" in x  # the fine label after the colon is dropped with its word
    a, b, y = load_mrpc(SE / "MRPC/msr_paraphrase_train.txt")
    assert len(a) == 20 and y.sum() == 10  # header (with BOM) skipped
    assert all(not s.startswith("\ufeff") for s in a)
    a, b, y = load_sick_entailment(SE / "SICK/SICK_test_annotated.txt")  # CRLF file
    assert len(a) == 6 and set(y.tolist()) == {0, 1, 2} and not any(s.endswith("\r") for s in b)
    x, y = load_sst(SE / "SST/sentiment-dev")
    assert len(x) == 6 and all(not s.endswith(" ") for s in x)


def test_malformed_files_name_the_file(tmp_path):
    bad = tmp_path / "sentiment-train"
    bad.write_text("no label here\n")
    with pytest.raises(DataError, match="sentiment-train:1"):
        load_sst(bad)
    with pytest.raises(ConfigError, match="Unknown SentEval task"):
        load_task("SST5", tmp_path)


def test_pair_features_and_featurize_order():
    u = np.array([[1.0, 2.0]], dtype=np.float32)
    v = np.array([[3.0, -1.0]], dtype=np.float32)
    np.testing.assert_allclose(pair_features(u, v), [[2, 3, 3, -2]])
    np.testing.assert_allclose(pair_features(u, v, "uv_abs_prod"), [[1, 2, 3, -1, 2, 3, 3, -2]])
    data = load_task("MRPC", SE / "MRPC")
    texts = data.texts()
    vecs = np.arange(len(texts), dtype=np.float32)[:, None]
    feats = featurize(data, vecs)
    n = len(data.labels["train"])
    # train A rows come first, then train B rows: |a - b| = n for every pair
    np.testing.assert_allclose(feats["train"][:, 0], n)
    assert feats["test"].shape == (len(data.labels["test"]), 2)


# ---- the classifier: batched training equals SentEval's one-model-at-a-time recipe -----------------


@pytest.fixture(scope="module")
def noisy():
    rng = np.random.RandomState(0)
    X = rng.randn(150, 6).astype(np.float32)
    y = ((X @ rng.randn(6) + 1.5 * rng.randn(150)) > 0).astype(np.int64)
    return X, y


@pytest.mark.parametrize("setting,workers", [("default", 1), ("prototyping", 1), ("default", 2)])
def test_batched_models_equal_senteval_sequential_recipe(noisy, setting, workers):
    """workers=2: the two streams are trained in two forked processes; the numbers must not change."""
    import torch

    X, y = noisy
    s = C.with_overrides(setting, max_epoch=12, batch_size=32, workers=workers)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the sequential loop is thousands of tiny ops
    tr, dev = np.arange(0, 100), np.arange(100, 150)
    # two streams of different sizes: the shorter one has no batch at the end of an epoch and must skip that step
    streams = [
        C.Stream(tr, dev, s.l2_grid),
        C.Stream(tr[:-4], dev, s.l2_grid),
        C.validation_split_stream(tr[:90], 1e-3, s),
    ]
    fits = C.train_streams(torch.as_tensor(X), torch.as_tensor(y), streams[:2], 2, s)
    fits.append(C.train_streams(torch.as_tensor(X), torch.as_tensor(y), streams[2:], 2, s)[0])
    cases = [(tr, l2, False) for l2 in s.l2_grid] + [(tr[:-4], l2, False) for l2 in s.l2_grid] + [(tr[:90], 1e-3, True)]
    got = [f for stream in fits for f in stream]
    assert len(got) == len(cases)
    try:
        for fit, (rows, l2, split) in zip(got, cases):
            acc, w, nepoch = C.senteval_sequential_fit(X, y, rows, dev, l2, s, split=split)
            assert fit.dev_acc == acc
            assert fit.epochs == nepoch
            np.testing.assert_allclose(fit.weight.numpy(), w, atol=2e-5)
    finally:
        torch.set_num_threads(threads)


def test_protocols_on_separable_data():
    rng = np.random.RandomState(1)
    X = rng.randn(60, 4).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    X[:, 0] += np.where(y == 1, 2.0, -2.0)  # a wide margin: every protocol must be perfect
    s = C.with_overrides("prototyping", kfold=3, max_epoch=20)
    out = C.inner_kfold(X, y, 2, s)
    assert out["acc"] == 100.0 and out["devacc"] == 100.0 and len(out["l2"]) == 3
    out = C.kfold(X[:45], y[:45], X[45:], y[45:], 2, s)
    assert out["acc"] == 100.0 and out["l2"] in s.l2_grid and len(out["yhat"]) == 15
    out = C.split(X[:30], y[:30], X[30:45], y[30:45], X[45:], y[45:], 2, s)
    assert out["acc"] == 100.0 and out["l2"] == s.l2_grid[0]  # all L2 tie at 100: SentEval takes the first


def test_unknown_setting_is_a_config_error():
    with pytest.raises(ConfigError, match="prototyping"):
        C.get_setting("fast")


# ---- the adapter end to end -------------------------------------------------------------------------


class WordSignEncoder:
    """+1 on axis 0 for a positive word, -1 for a negative one, plus a per-text jitter."""

    fingerprint = "word-sign-v1"
    POS, NEG = {"good", "great", "fine", "lovely", "superb"}, {"bad", "awful", "poor", "dull", "weak"}

    def encode(self, texts):
        out = []
        for t in texts:
            w = set(t.split())
            h = (sum(map(ord, t)) % 97) / 97.0
            out.append([1.0 if w & self.POS else -1.0 if w & self.NEG else 0.0, h, 1.0 - h])
        return np.asarray(out, dtype=np.float32)


def _adapter(task: str, folder: str, setting: str = "prototyping", **overrides) -> SentEvalAdapter:
    spec = TaskSpec(
        name=task.lower(),
        kind="senteval",
        main_metric="acc",
        params={"task": task, "dir": f"senteval/{folder}", "setting": setting, "classifier_overrides": overrides},
    )
    return SentEvalAdapter(spec, DataStore(FIXTURES, allow_download=False))


def test_adapter_mr_end_to_end_records_the_setting(tmp_path):
    res = _adapter("MR", "MR").evaluate(Embedder(WordSignEncoder(), EmbeddingCache(tmp_path)), "test")
    # 40 sentences, a few RMSprop steps per fold before early stopping: well above chance (50), not perfect
    assert res.main_metric == "acc" and res.scores["acc"] >= 75 and res.scores["devacc"] >= 75
    assert res.details["setting"] == "prototyping" and res.details["classifier"]["optim"] == "rmsprop"
    assert res.details["protocol"] == "innerkfold" and len(res.details["selected_l2"]) == 5


def test_adapter_sst_and_missing_file(tmp_path):
    # 12 training rows are one minibatch: 30 steps between evaluations let the sign be learnt first
    res = _adapter("SST2", "SST", epoch_size=30).evaluate(Embedder(WordSignEncoder(), EmbeddingCache(tmp_path)), "test")
    assert res.scores["acc"] == 100.0 and res.details["n"] == {"train": 12, "dev": 6, "test": 6}
    assert res.details["setting"] == "prototyping+custom" and res.details["classifier"]["epoch_size"] == 30
    with pytest.raises(DataError, match="rt-polarity.pos"):
        _adapter("MR", "NOPE").evaluate(Embedder(WordSignEncoder()), "test")


def test_real_senteval_files_load_with_published_counts(real_data):
    # SST-2 (67k lines) and SUBJ/MPQA read the same way as MR and take most of the time: left out
    counts = {
        "MR": {"all": 10662},
        "CR": {"all": 3775},
        "TREC": {"train": 5452, "test": 500},
        "MRPC": {"train": 4076, "test": 1725},
        "SICKEntailment": {"train": 4500, "dev": 500, "test": 4927},
    }
    dirs = {"SST2": "SST/binary", "SICKEntailment": "SICK"}
    for task, n in counts.items():
        d = load_task(task, real_data / "senteval" / dirs.get(task, task))
        assert {p: len(v) for p, v in d.labels.items()} == n, task
