"""SICK relatedness with a trained regressor, as SentEval runs it and Quick-Thoughts reports it
(Table 1: Pearson r, Spearman rho, MSE on SICK test).

Not the unsupervised cosine protocol (task ``sickr`` in tasks/sts.toml): here a softmax layer on the
pair features ``[|u-v|, u*v]`` predicts the distribution of the score over 1..5 (Tai et al. 2015's
encoding: a score of 3.6 is 0.4 on "3" and 0.6 on "4"), trained with MSE against that distribution;
the prediction is the distribution's expectation. SentEval's ``RelatednessPytorch`` details kept:
Adam (torch defaults), no L2, minibatches of 64 in ``np.random.permutation`` order after seeding
1111, rounds of 50 epochs, early stopping on dev (SICK trial) Pearson, stopping at the 4th round
that does not improve, at most 1000 epochs, the best round's model scores test.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from benchbench.core.errors import DataError
from benchbench.encode.encoding import Embedder
from benchbench.evaluate import metrics
from benchbench.evaluate.adapters.base import TaskAdapter, TaskResult
from benchbench.evaluate.adapters.senteval import load_sick, pair_features
from benchbench.store.data import parse_score

SPLIT_FILES = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}


def score_distribution(scores: np.ndarray, nclass: int = 5) -> np.ndarray:
    """Tai et al.'s sparse target: mass split between floor(y) and floor(y)+1 (classes are 1..nclass)."""
    y = np.asarray(scores, dtype=np.float64)
    if y.size and (y.min() < 1 or y.max() > nclass):
        raise DataError(f"relatedness scores must lie in [1, {nclass}] (got {y.min()}..{y.max()})")
    out = np.zeros((len(y), nclass), dtype=np.float32)
    fl = np.floor(y).astype(int)
    rows = np.arange(len(y))
    out[rows, fl - 1] = fl - y + 1
    upper = fl < nclass  # a score of exactly 5 puts all its mass on class 5
    out[rows[upper], fl[upper]] = (y - fl)[upper]
    return out


def fit_relatedness(
    train_x: np.ndarray,
    train_y: np.ndarray,
    dev_x: np.ndarray,
    dev_scores: np.ndarray,
    seed: int = 1111,
    batch_size: int = 64,
    round_epochs: int = 50,
    tenacity: int = 3,
    max_epoch: int = 1000,
) -> tuple[torch.nn.Module, float, int]:
    """Train SentEval's relatedness regressor; returns (best model, its dev Pearson, epochs run).

    The ~40k minibatch steps are written as plain tensor ops (forward, the softmax-MSE gradient,
    torch.optim.Adam's update) rather than autograd + optimizer calls: same arithmetic, a fraction
    of the per-step overhead that dominates a 768x5 layer on a CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny ops: extra threads only add overhead
    try:
        with torch.no_grad():
            return _fit(train_x, train_y, dev_x, dev_scores, seed, batch_size, round_epochs, tenacity, max_epoch)
    finally:
        torch.set_num_threads(threads)


def _fit(train_x, train_y, dev_x, dev_scores, seed, batch_size, round_epochs, tenacity, max_epoch):
    rs = np.random.RandomState(seed)  # SentEval: np.random.seed(seed), then one permutation per epoch
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(train_x.shape[1], train_y.shape[1]), torch.nn.Softmax(dim=-1))
    torch.random.set_rng_state(state)
    W = model[0].weight.detach().T.contiguous()  # (d, 5)
    b = model[0].bias.detach().clone()
    mW, vW, mb, vb = (torch.zeros_like(t) for t in (W, W, b, b))
    lr, b1, b2, eps, step = 1e-3, 0.9, 0.999, 1e-8, 0  # torch.optim.Adam defaults, weight_decay 0
    X = torch.as_tensor(np.ascontiguousarray(train_x, dtype=np.float32))
    Y = torch.as_tensor(np.ascontiguousarray(train_y, dtype=np.float32))
    Xd = torch.as_tensor(np.ascontiguousarray(dev_x, dtype=np.float32))
    r = torch.arange(1, train_y.shape[1] + 1, dtype=torch.float32)
    best, best_wb, count, nepoch = -1.0, None, 0, 0
    while nepoch <= max_epoch:
        for _ in range(round_epochs):
            perm = torch.as_tensor(rs.permutation(len(X)))
            for i in range(0, len(X), batch_size):
                idx = perm[i : i + batch_size]
                xb = X.index_select(0, idx)
                p = torch.addmm(b, xb, W).softmax(-1)
                # MSELoss (mean over all B*5 entries) through the softmax
                dp = (p - Y.index_select(0, idx)).mul_(2.0 / p.numel())
                dz = p * (dp - (dp * p).sum(1, keepdim=True))
                step += 1
                bc1, bc2 = 1 - b1**step, (1 - b2**step) ** 0.5
                for prm, g, m, v in ((W, xb.T @ dz, mW, vW), (b, dz.sum(0), mb, vb)):
                    m.lerp_(g, 1 - b1)
                    v.mul_(b2).addcmul_(g, g, value=1 - b2)
                    prm.addcdiv_(m, v.sqrt().div_(bc2).add_(eps), value=-lr / bc1)
        nepoch += round_epochs
        pr = metrics.pearson(((Xd @ W + b).softmax(-1) @ r).numpy(), dev_scores)
        if pr > best:
            best, best_wb = pr, (W.clone(), b.clone())
        else:
            if count >= tenacity:
                break
            count += 1
    assert best_wb is not None
    model[0].weight.copy_(best_wb[0].T)
    model[0].bias.copy_(best_wb[1])
    return model, best, nepoch


class SICKRelatednessAdapter(TaskAdapter):
    """params: ``dir`` (SentEval's SICK folder), ``pair_features`` (``abs_prod`` = SentEval's ``[|u-v|, u*v]``)."""

    kind = "sick-relatedness"

    def files_for(self, split: str) -> list[str]:
        return [f"{self.param('dir', '')}/{f}" for f in SPLIT_FILES.values()]

    def load(self) -> dict[str, tuple[list[str], list[str], np.ndarray]]:
        out = {}
        for part, name in SPLIT_FILES.items():
            path = self.file(f"{self.param('dir', '')}/{name}")
            a, b, y = load_sick(path, column=3)
            scores = [self._score(v, path, i + 2) for i, v in enumerate(y)]  # y[i] is line i + 2 (after the header)
            # SentEval sorts each split by (len A, len B, score); only the training order matters (minibatch order)
            order = sorted(zip(a, b, scores), key=lambda z: (len(z[0]), len(z[1]), z[2]))
            out[part] = (
                [" ".join(x) for x, _, _ in order],
                [" ".join(x) for _, x, _ in order],
                np.array([z for _, _, z in order], dtype=np.float64),
            )
        return out

    def _score(self, text: str, path, lineno: int) -> float:
        """A relatedness score inside ``score_range`` (SICK's 1..5 unless the spec says otherwise): the
        regressor's classes are that scale, and a test score outside it would be scored, not refused."""
        try:
            v = parse_score(text)
        except ValueError as e:
            raise DataError(f"{path}:{lineno}: relatedness_score is not a number ({e}).") from e
        lo, hi = self.spec.score_range or (1.0, 5.0)
        if not lo <= v <= hi:
            raise DataError(
                f"{path}:{lineno}: relatedness_score {v:g} is outside the task's range [{lo:g}, {hi:g}] (score_range "
                f"of task {self.name!r}, spec {self.spec.source or '?'}). Is it the published file, unmodified?"
            )
        return v

    def evaluate(self, model: Embedder, split: str) -> TaskResult:
        self.check_split(split)
        data = self.load()
        texts = [s for a, b, _ in data.values() for s in a + b]
        vecs = model.embed(texts, desc=self.name)
        kind = self.param("pair_features", "abs_prod")
        feats, pos = {}, 0
        for part, (a, _, _) in data.items():
            n = len(a)
            feats[part] = pair_features(vecs[pos : pos + n], vecs[pos + n : pos + 2 * n], kind)
            pos += 2 * n
        t0 = time.perf_counter()
        net, dev_r, epochs = fit_relatedness(
            feats["train"], score_distribution(data["train"][2]), feats["dev"], data["dev"][2]
        )
        with torch.no_grad():
            probs = net(torch.as_tensor(np.ascontiguousarray(feats[split], dtype=np.float32))).numpy()
        pred = probs @ np.arange(1, probs.shape[1] + 1)
        gold = data[split][2]
        scores = {
            "pearson": 100 * metrics.pearson(pred, gold),
            "spearman": 100 * metrics.spearman(pred, gold),
            "mse": metrics.mse(pred, gold),
            "dev_pearson": 100 * dev_r,
        }
        return TaskResult(
            main_metric=self.spec.main_metric,
            scores=scores,
            details={
                "protocol": "SentEval RelatednessPytorch (softmax over 1..5, MSE, early stop on dev Pearson)",
                "pair_features": "[|u-v|, u*v]" if kind == "abs_prod" else "[u, v, |u-v|, u*v]",
                "epochs": epochs,
                "classifier_seconds": round(time.perf_counter() - t0, 2),
                "n": {p: len(v[0]) for p, v in data.items()},
            },
        )

    def own_sentences(self) -> list[str]:
        return list(dict.fromkeys(s for a, b, _ in self.load().values() for s in a + b))

    def train_pairs(self) -> list[tuple[str, str]] | None:
        return [(x, z) for a, b, _ in self.load().values() for x, z in zip(a, b)]
