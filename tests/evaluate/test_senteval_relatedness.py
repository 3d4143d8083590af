"""SICK-R (SentEval regressor): Tai et al.'s target encoding, the trainer against SentEval's
autograd recipe, and the adapter end to end on the SICK fixture."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from helpers import FIXTURES

from benchbench.core.errors import DataError
from benchbench.core.tasks import TaskSpec
from benchbench.encode.encoding import Embedder
from benchbench.evaluate.adapters.sick_relatedness import SICKRelatednessAdapter, fit_relatedness, score_distribution
from benchbench.store.data import DataStore


def test_score_distribution_hand_computed():
    y = score_distribution(np.array([3.6, 5.0, 1.0, 2.0]))
    np.testing.assert_allclose(y, [[0, 0, 0.4, 0.6, 0], [0, 0, 0, 0, 1], [1, 0, 0, 0, 0], [0, 1, 0, 0, 0]], atol=1e-6)
    np.testing.assert_allclose(y @ np.arange(1, 6), [3.6, 5.0, 1.0, 2.0], atol=1e-6)  # expectation = score
    with pytest.raises(DataError, match="must lie in"):
        score_distribution(np.array([0.5]))


def _senteval_recipe(X, Y, Xd, dev_scores, seed=1111, round_epochs=5, tenacity=3, max_epoch=30):
    """SentEval's RelatednessPytorch, sequential and with autograd: Linear + Softmax, MSELoss, Adam."""
    np.random.seed(seed)
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(X.shape[1], 5), torch.nn.Softmax(dim=-1))
    opt = torch.optim.Adam(model.parameters(), weight_decay=0.0)
    loss_fn = torch.nn.MSELoss()
    X, Y, Xd = map(torch.as_tensor, (X, Y, Xd))
    r = np.arange(1, 6)
    nepoch, best, count = 0, -1.0, 0
    while nepoch <= max_epoch:
        for _ in range(round_epochs):
            perm = np.random.permutation(len(X))
            for i in range(0, len(X), 8):
                idx = torch.as_tensor(perm[i : i + 8])
                loss = loss_fn(model(X[idx]), Y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        nepoch += round_epochs
        with torch.no_grad():
            pr = np.corrcoef(model(Xd).numpy() @ r, dev_scores)[0, 1]
        if pr > best:
            best, keep = pr, copy.deepcopy(model)
        else:
            if count >= tenacity:
                break
            count += 1
    return keep, best, nepoch


def test_trainer_equals_senteval_recipe():
    rng = np.random.RandomState(0)
    X = rng.randn(60, 6).astype(np.float32)
    scores = np.clip(3 + X[:, 0] + 0.3 * rng.randn(60), 1, 5)
    Y = score_distribution(scores)
    ref, ref_r, ref_ep = _senteval_recipe(X[:40], Y[:40], X[40:], scores[40:])
    got, r, ep = fit_relatedness(X[:40], Y[:40], X[40:], scores[40:], batch_size=8, round_epochs=5, max_epoch=30)
    assert ep == ref_ep and r == pytest.approx(ref_r, abs=1e-5)
    np.testing.assert_allclose(got[0].weight.detach().numpy(), ref[0].weight.detach().numpy(), atol=2e-5)


class RelatedEncoder:
    """'running' pairs are near-identical, others far apart: relatedness is learnable from |u-v|."""

    fingerprint = "sick-rel-v1"

    def encode(self, texts):
        verb = {"running": 0, "eating": 1, "sleeping": 2, "cooking": 3, "awake": 4}
        out = np.zeros((len(texts), 6), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, verb[t.split()[3]]] = 1.0
            out[i, 5] = 1.0
        return out


def test_adapter_end_to_end_on_fixture():
    spec = TaskSpec(
        name="sick-r",
        kind="sick-relatedness",
        main_metric="pearson",
        splits=["test", "dev"],
        params={"dir": "senteval/SICK"},
    )
    res = SICKRelatednessAdapter(spec, DataStore(FIXTURES, allow_download=False)).evaluate(
        Embedder(RelatedEncoder()), "test"
    )
    # three kinds of pairs (4.5 / 3.0 / 1.6): the expected score must at least order them
    assert res.scores["spearman"] == pytest.approx(100.0) and res.scores["pearson"] > 90
    assert res.scores["mse"] >= 0 and res.details["n"] == {"train": 12, "dev": 6, "test": 6}
