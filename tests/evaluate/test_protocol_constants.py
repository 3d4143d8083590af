"""Fixtures where a protocol constant or a selection rule shows.

The old fixtures let realistic one-line bugs pass: every CQADupStack fixture forum held about six
documents (AP cut at 10 or at 100 agreed), and the SentEval classifier's fixture was perfectly
separable (every L2 tied, so selecting on the wrong rows chose the same). Here a forum ranks its
relevant documents 11th to 101st, and noisy data makes SentEval's own L2 grid choose differently per
fold; selection is also checked never to read a row it is later scored on.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
import torch
from helpers import fixture_adapter
from sklearn.model_selection import StratifiedKFold

from benchbench.encode.encoding import Embedder
from benchbench.evaluate.adapters import _classifier as C

# ---- CQADupStack: MAP@100 over the top 100, relevant documents ranked 11-101 ---------------------------
N_DOCS = 150
# 1-based ranks of each query's duplicates: q1's from 11 (none in the top 10) to 101 (just outside the
# top 100); q2 has two in the top 10 (so nDCG@10 and its ideal, min(3, 10) gains, show) and one at 30
RELEVANT_RANKS = {"q1": (11, 50, 100, 101), "q2": (2, 7, 30)}


class AngleEncoder:
    """2-d unit vectors: the query at angle 0, the document ranked r at angle 0.01 r, so the cosine
    ranking is exactly the rank in its text (and no two documents tie)."""

    fingerprint = "angle-encoder"

    def encode(self, texts):
        angles = [0.0 if t == "the query" else 0.01 * int(t.split()[-1]) for t in texts]
        return np.array([[np.cos(a), np.sin(a)] for a in angles], dtype=np.float32)


def _forum(root) -> None:
    forum = root / "beir" / "cqadupstack" / "android"
    (forum / "qrels").mkdir(parents=True)
    ranks = list(np.random.default_rng(0).permutation(np.arange(1, N_DOCS + 1)))  # file order is not rank order
    ranks.remove(11)
    ranks.insert(0, 11)  # a duplicate is the pool's first document (index 0 is a document, -1 the padding)
    with gzip.open(forum / "corpus.jsonl.gz", "wt") as f:
        f.writelines(json.dumps({"_id": f"d{r}", "title": f"document {r}", "text": ""}) + "\n" for r in ranks)
    with gzip.open(forum / "queries.jsonl.gz", "wt") as f:
        f.writelines(json.dumps({"_id": q, "text": "the query"}) + "\n" for q in RELEVANT_RANKS)
    (forum / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\td{r}\t1\n" for q, rs in RELEVANT_RANKS.items() for r in rs)
    )


def test_cqadupstack_map_counts_relevant_documents_down_to_rank_100_and_no_further(registry, tmp_path):
    """USEB's MAP@100: scikit-learn's AP over the top 100 only, so its denominator is the relevant
    documents retrieved there (3 for q1, not 4). A cut at 10 scores 0; a cut at 1000 (or the full
    ranking) averages in rank 101; an off-by-one cut at 99 loses rank 100."""
    _forum(tmp_path)
    ad = fixture_adapter(registry, "cqadupstack", tmp_path)
    r = ad.evaluate(Embedder(AngleEncoder()), "test")
    ap = [100 * (1 / 11 + 2 / 50 + 3 / 100) / 3, 100 * (1 / 2 + 2 / 7 + 3 / 30) / 3]
    assert r.subsets["android"]["map@100"] == pytest.approx(np.mean(ap), abs=1e-6)
    assert r.items["subsets"]["android"]["values"] == pytest.approx(ap, abs=1e-4)
    # nDCG@10: q1 has nothing in its top 10; q2's gains at ranks 2 and 7 over the ideal 3 at ranks 1-3
    ndcg_q2 = (1 / np.log2(3) + 1 / np.log2(8)) / (1 + 1 / np.log2(3) + 1 / np.log2(4))
    assert r.subsets["android"]["ndcg@10"] == pytest.approx(100 * ndcg_q2 / 2, abs=1e-6)


# ---- SentEval: the inner L2 selection on noisy data ------------------------------------------------------
@pytest.fixture(scope="module")
def noisy():
    """Non-separable data (60 dimensions, 240 rows, label noise) on which SentEval's own L2 grid picks
    different values in different folds."""
    rng = np.random.RandomState(2)
    X = rng.randn(240, 60).astype(np.float32)
    y = ((X @ rng.randn(60) + 3.0 * rng.randn(240)) > 0).astype(np.int64)
    return X, y


SETTING = C.with_overrides("prototyping", kfold=3, max_epoch=30, workers=1)


def _outer(y):
    return list(StratifiedKFold(n_splits=SETTING.kfold, shuffle=True, random_state=1111).split(np.zeros(len(y)), y))


def test_inner_kfold_chooses_l2_as_senteval_does_and_the_choices_differ(noisy):
    """The chosen L2 per outer fold equals SentEval's rule computed here from the one-model-at-a-time
    reference fit: inner folds of the outer TRAINING rows only, mean dev accuracy rounded to 2
    decimals, first maximum. On this data the folds choose differently (a rule that reads other rows
    cannot agree by accident, as it did on separable data)."""
    X, y = noisy
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = C.inner_kfold(X, y, 2, SETTING)
        want, best = [], []
        for tr, _ in _outer(y):
            inner = StratifiedKFold(n_splits=SETTING.kfold, shuffle=True, random_state=1111).split(tr, y[tr])
            folds = list(inner)
            scores = [
                round(
                    100 * np.mean([C.senteval_sequential_fit(X, y, tr[i], tr[d], l2, SETTING)[0] for i, d in folds]), 2
                )
                for l2 in SETTING.l2_grid
            ]
            want.append(SETTING.l2_grid[int(np.argmax(scores))])
            best.append(max(scores))
    finally:
        torch.set_num_threads(threads)
    assert out["l2"] == want
    assert out["devacc"] == round(float(np.mean(best)), 2)  # SentEval's devacc: the folds' best, x100, 2 decimals
    assert len(set(want)) > 1


def test_inner_kfold_selection_never_reads_the_outer_test_fold(noisy, monkeypatch):
    """Poisoning the features of outer fold 0's test rows leaves fold 0's chosen L2 unchanged (folds
    1 and 2 train on those rows and may change); and no selection stream of fold o trains or
    early-stops on fold o's test rows."""
    X, y = noisy
    outer = _outer(y)
    clean = C.inner_kfold(X, y, 2, SETTING)["l2"]
    poisoned = X.copy()
    poisoned[outer[0][1]] *= -1.0
    assert C.inner_kfold(poisoned, y, 2, SETTING)["l2"][0] == clean[0]

    seen: list[list[C.Stream]] = []
    real = C.train_streams

    def spy(Xt, yt, streams, nclasses, s):
        seen.append(list(streams))
        return real(Xt, yt, streams, nclasses, s)

    monkeypatch.setattr(C, "train_streams", spy)
    C.inner_kfold(X, y, 2, SETTING)
    selection, finals = seen
    assert len(selection) == SETTING.kfold**2 and len(finals) == SETTING.kfold
    for o, (_, te) in enumerate(outer):
        for stream in [*selection[o * SETTING.kfold : (o + 1) * SETTING.kfold], finals[o]]:
            assert not set(te) & (set(stream.train) | set(stream.dev)), f"outer fold {o}"


def _cv_mean(X, y, l2) -> float:
    """SentEval's KFoldClassifier score of one L2: the mean dev accuracy of the reference fit over
    StratifiedKFold(k, shuffle, seed) of the training set."""
    folds = StratifiedKFold(n_splits=SETTING.kfold, shuffle=True, random_state=SETTING.seed).split(X, y)
    return float(np.mean([C.senteval_sequential_fit(X, y, tr, dv, l2, SETTING)[0] for tr, dv in folds]))


def test_kfold_and_split_select_l2_without_the_test_set(noisy):
    """TREC/MRPC (k-fold on train) and SST/SICK-E (dev): test features and labels replaced by noise,
    the chosen L2 and the selection scores stay the same."""
    X, y = noisy
    tr, te = slice(0, 180), slice(180, 240)
    rng = np.random.RandomState(9)
    junk_X, junk_y = rng.randn(60, 60).astype(np.float32), 1 - y[te]
    a = C.kfold(X[tr], y[tr], X[te], y[te], 2, SETTING)
    b = C.kfold(X[tr], y[tr], junk_X, junk_y, 2, SETTING)
    assert (a["l2"], a["cv_scores"]) == (b["l2"], b["cv_scores"]) and a["acc"] != b["acc"]
    assert a["acc"] == round(100 * float(np.mean(a["yhat"] == y[te])), 2) and a["devacc"] == max(a["cv_scores"])
    assert a["cv_scores"] == [round(100 * _cv_mean(X[tr], y[tr], l2), 2) for l2 in SETTING.l2_grid]
    dv = slice(120, 180)
    a = C.split(X[:120], y[:120], X[dv], y[dv], X[te], y[te], 2, SETTING)
    b = C.split(X[:120], y[:120], X[dv], y[dv], junk_X, junk_y, 2, SETTING)
    assert (a["l2"], a["dev_scores"]) == (b["l2"], b["dev_scores"]) and a["acc"] != b["acc"]
    tr_rows, dev_rows = np.arange(120), np.arange(120, 180)
    ref = [C.senteval_sequential_fit(X[:180], y[:180], tr_rows, dev_rows, l2, SETTING)[0] for l2 in SETTING.l2_grid]
    assert a["dev_scores"] == [round(100 * r, 2) for r in ref] and a["devacc"] == max(a["dev_scores"])
