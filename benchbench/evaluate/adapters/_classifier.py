"""SentEval's logistic-regression protocol, with every model of a grid trained at once.

SentEval (facebookresearch/SentEval, ``senteval/tools/{classifier,validation}.py``) fits one
PyTorch ``nn.Linear`` per (outer fold, L2 value, inner fold): for MR that is 410 models trained one
after another, ~25 minutes on two CPU cores. The numbers only depend on what each model sees, so
this module reproduces each model's exact recipe and trains them side by side as one batched linear
layer. Every detail that changes a number is SentEval's:

* folds: ``StratifiedKFold(k, shuffle=True, random_state=1111)`` for the outer and the inner split;
* the model: ``nn.Linear(d, nclasses)`` initialised right after ``torch.manual_seed(1111)`` (so all
  models start from the same weights), cross-entropy averaged over the minibatch;
* the optimiser: Adam (default setting) or RMSprop (prototyping) with torch's default learning rate
  and coupled L2 (``weight_decay``) on weight and bias; L2 grid ``[1e-5, 1e-4, 1e-3, 1e-2]``;
* the data order: ``np.random.seed(1111)`` per model, one ``np.random.permutation`` per epoch (after
  one for the 5 % validation split when the model has no given dev set); minibatches of 64 (128);
* early stopping: every ``epoch_size`` epochs, accuracy on the dev data; the best model is kept;
  training stops at the ``tenacity + 1``-th evaluation that does not improve (SentEval never resets
  the counter) or after ``max_epoch`` (200) epochs;
* selection and rounding: mean dev accuracy per L2 value rounded to 2 decimals, first maximum wins;
  test accuracy of a model refit with the chosen L2 (inner/k-fold: on all its training data with 5 %
  held out for early stopping; split tasks: the same fit, so the selected model itself is scored).

Why hand-written: neither scikit-learn nor torch trains hundreds of independent, individually
early-stopped minibatch models with per-model data orders in one pass; the optimiser step is
written out (a few lines of Adam/RMSprop) because each model needs its own step count.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.model_selection import StratifiedKFold

from benchbench.core.errors import ConfigError

L2_GRID = (1e-5, 1e-4, 1e-3, 1e-2)  # SentEval's pytorch grid: [10**t for t in range(-5, -1)]
OPTIM_LR = {"adam": 1e-3, "rmsprop": 1e-2}  # torch defaults, which SentEval's "adam"/"rmsprop" strings get


@dataclass(frozen=True)
class Setting:
    """A SentEval classifier configuration (``params_senteval`` + ``params_senteval['classifier']``)."""

    name: str
    kfold: int
    optim: str
    batch_size: int
    tenacity: int
    epoch_size: int
    max_epoch: int = 200
    seed: int = 1111
    validation_split: float = 0.05
    l2_grid: tuple[float, ...] = L2_GRID
    stream_chunk: int = 8  # CPU only: streams per gather/product block (speed only, same numbers)
    workers: int = (
        0  # CPU only: processes the streams are split over (0: one per core, at most 4; speed only, same numbers)
    )

    def describe(self) -> dict[str, Any]:
        return {
            "kfold": self.kfold,
            "nhid": 0,
            "optim": self.optim,
            "batch_size": self.batch_size,
            "tenacity": self.tenacity,
            "epoch_size": self.epoch_size,
            "max_epoch": self.max_epoch,
            "seed": self.seed,
            "l2_grid": list(self.l2_grid),
        }


SETTINGS = {
    # SentEval README: "default config" and "config for prototyping"
    "default": Setting("default", kfold=10, optim="adam", batch_size=64, tenacity=5, epoch_size=4),
    "prototyping": Setting("prototyping", kfold=5, optim="rmsprop", batch_size=128, tenacity=3, epoch_size=2),
}


def get_setting(name: str | Setting) -> Setting:
    if isinstance(name, Setting):
        return name
    if name not in SETTINGS:
        raise ConfigError(f"Unknown SentEval setting {name!r}; choose one of {sorted(SETTINGS)}.")
    return SETTINGS[name]


@dataclass
class Stream:
    """Models that see the same data in the same order and differ only in L2 (one per value)."""

    train: np.ndarray  # row indices into the feature matrix, in the order the model's X has them
    dev: np.ndarray  # rows used for early stopping
    l2: tuple[float, ...]
    split_from: int = 0  # >0: train/dev came from a validation split of this many rows (consumed one permutation)


def validation_split_stream(rows: np.ndarray, l2: float, s: Setting) -> Stream:
    """SentEval's ``prepare_split``: a permutation of the model's own training rows; the first 5 % are dev."""
    perm = np.random.RandomState(s.seed).permutation(len(rows))
    k = int(s.validation_split * len(rows))
    return Stream(train=rows[perm[k:]], dev=rows[perm[:k]], l2=(l2,), split_from=len(rows))


class _Permutations:
    """The per-epoch permutations a SentEval model draws after ``np.random.seed(seed)``; models with
    the same training-set size (and split) draw the same ones, so they are shared."""

    def __init__(self, seed: int, n_train: int, split_from: int):
        self.rs = np.random.RandomState(seed)
        if split_from:
            self.rs.permutation(split_from)
        self.n = n_train
        self.done: list[np.ndarray] = []

    def epoch(self, e: int) -> np.ndarray:
        while len(self.done) <= e:
            self.done.append(self.rs.permutation(self.n))
        return self.done[e]


@dataclass
class Fitted:
    """One trained model: its best dev accuracy and the weights that reached it."""

    dev_acc: float
    weight: torch.Tensor  # (d, C)
    bias: torch.Tensor  # (C,)
    epochs: int


def _init(d: int, nclasses: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    # the exact draw SentEval's MLP makes: manual_seed, then nn.Linear's default init
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    lin = torch.nn.Linear(d, nclasses)
    torch.random.set_rng_state(state)
    return lin.weight.detach().T.contiguous(), lin.bias.detach().clone()


def train_streams(
    X: torch.Tensor, y: torch.Tensor, streams: list[Stream], nclasses: int, s: Setting
) -> list[list[Fitted]]:
    """Train every model of every stream at once; returns, per stream, one ``Fitted`` per L2 value.

    On CPU the streams are split over ``s.workers`` forked processes, each running single-threaded
    torch ops: the streams are independent, so the numbers do not change. (Threads do not help: the
    loop is thousands of sub-millisecond ops, and handing the GIL back and forth between them cost
    as much as the second core gave.)"""
    w0, b0 = _init(X.shape[1], nclasses, s.seed)  # once, here, for every worker
    if X.device.type != "cpu":
        with torch.no_grad():
            return _train_streams(X, y, streams, nclasses, s, w0, b0)
    threads = torch.get_num_threads()
    # thousands of small ops: a second intra-op thread only adds synchronisation (10x slower on a busy 2-core box)
    torch.set_num_threads(1)
    try:
        nw = min(s.workers or min(4, os.cpu_count() or 1), len(streams))
        if nw <= 1:
            with torch.no_grad():
                return _train_streams(X, y, streams, nclasses, s, w0, b0)
        groups = _balanced_groups(streams, nw)
        out: list[list[Fitted] | None] = [None] * len(streams)
        for idx, res in zip(groups, _map_groups(X, y, streams, nclasses, s, w0, b0, groups)):
            for i, r in zip(idx, res):
                out[i] = r
        return out  # type: ignore[return-value]
    finally:
        torch.set_num_threads(threads)


def _balanced_groups(streams: list[Stream], n: int) -> list[list[int]]:
    """At most ``n`` groups of stream indices with about equal work (training rows per epoch),
    filled greedily largest first; each group keeps its streams in their original order (a
    stream's numbers do not depend on its group, only the wall time does)."""
    order = sorted(range(len(streams)), key=lambda i: -len(streams[i].train))
    load, groups = [0] * n, [[] for _ in range(n)]
    for i in order:
        g = load.index(min(load))
        groups[g].append(i)
        load[g] += len(streams[i].train)
    return [sorted(g) for g in groups if g]


_FORKED: dict[str, Any] = {}  # what a forked worker inherits instead of unpickling the feature matrix


def _forked_group(idx: list[int]) -> list[list[Fitted]]:
    a = _FORKED
    torch.set_num_threads(1)
    with torch.no_grad():
        return _train_streams(a["X"], a["y"], [a["streams"][i] for i in idx], a["nclasses"], a["s"], a["w0"], a["b0"])


def _map_groups(X, y, streams, nclasses, s, w0, b0, groups: list[list[int]]) -> list[list[list[Fitted]]]:
    """Each group of streams in its own forked process where the platform forks (Linux), else in turn."""
    import multiprocessing as mp

    if len(groups) > 1 and "fork" in mp.get_all_start_methods() and not mp.current_process().daemon:
        _FORKED.update(X=X, y=y, streams=streams, nclasses=nclasses, s=s, w0=w0, b0=b0)
        try:
            with mp.get_context("fork").Pool(len(groups)) as pool:
                return pool.map(_forked_group, groups, chunksize=1)
        except OSError:  # no process pool here (e.g. no /dev/shm for its semaphores): same work, one core
            pass
        finally:
            _FORKED.clear()
    with torch.no_grad():
        return [_train_streams(X, y, [streams[i] for i in g], nclasses, s, w0, b0) for g in groups]


def _train_streams(
    X: torch.Tensor,
    y: torch.Tensor,
    streams: list[Stream],
    nclasses: int,
    s: Setting,
    w0: torch.Tensor,
    b0: torch.Tensor,
) -> list[list[Fitted]]:
    """Train every model of every stream at once (SentEval's recipe per model, see ``_StreamBatch``)."""
    return _StreamBatch(X, y, streams, nclasses, s, w0, b0).run()


class _StreamBatch:
    """S streams (cross-validation folds) of K logistic-regression models each (one per L2 value),
    trained together as batched matrix products: each model follows SentEval's recipe exactly
    (its own shuffles, Adam/RMSprop step counts, dev checks every ``epoch_size`` epochs, early
    stopping after ``tenacity`` checks without improvement, best weights kept). Written by hand
    because no library trains thousands of tiny independent classifiers as one batched problem.

    Layout: ``W`` (S, d, K*C) holds model k's class c in column k*C+c; ``b`` (S, K*C). Streams whose
    every model has stopped are dropped from ``W``/``b``/the optimiser state (``alive`` maps the
    remaining rows to stream indices); ``bestW``/``bestb`` keep all S streams."""

    def __init__(
        self,
        X: torch.Tensor,
        y: torch.Tensor,
        streams: list[Stream],
        nclasses: int,
        s: Setting,
        w0: torch.Tensor,
        b0: torch.Tensor,
    ):
        if s.optim not in OPTIM_LR:
            raise ConfigError(f"SentEval optimiser {s.optim!r} is not supported here; use 'adam' or 'rmsprop'.")
        self.X, self.streams, self.s = X, streams, s
        self.dev = X.device
        self.S, self.K, self.C, self.B = len(streams), len(streams[0].l2), nclasses, s.batch_size
        if any(len(st.l2) != self.K for st in streams):
            raise ValueError("all streams of one batch must hold the same number of models")
        S, K, C, dev = self.S, self.K, self.C, self.dev
        self.W = w0.to(dev).repeat(1, K).unsqueeze(0).repeat(S, 1, 1).contiguous()
        self.b = b0.to(dev).repeat(K).unsqueeze(0).repeat(S, 1).contiguous()
        self.l2 = torch.tensor([[v for v in st.l2 for _ in range(C)] for st in streams], dtype=X.dtype, device=dev)
        self.mW, self.vW = torch.zeros_like(self.W), torch.zeros_like(self.W)
        self.mb, self.vb = torch.zeros_like(self.b), torch.zeros_like(self.b)
        self.steps = torch.zeros(S, dtype=torch.float64, device=dev)
        self.adam = s.optim == "adam"
        self.lr = OPTIM_LR[s.optim]
        self.y_np = y.cpu().numpy()
        self._shuffles()
        self._dev_rows()
        self.best_acc = np.full((S, K), -1.0)
        self.count = np.zeros((S, K), dtype=np.int64)
        self.stopped = np.zeros((S, K), dtype=bool)
        self.stop_epoch = np.zeros((S, K), dtype=np.int64)
        self.bestW, self.bestb = self.W.clone(), self.b.clone()
        self.alive = np.arange(S)  # streams still training (some model not stopped)
        self.chunk = S if dev.type != "cpu" else max(1, int(s.stream_chunk))
        self.nepoch = 0

    # ---- setup ----------------------------------------------------------------------------------
    def _shuffles(self) -> None:
        """SentEval's per-epoch permutations; streams with the same train size and origin share them."""
        perms: dict[tuple[int, int], _Permutations] = {}
        self.pstream = []
        for st in self.streams:
            key = (len(st.train), st.split_from)
            if key not in perms:
                perms[key] = _Permutations(self.s.seed, len(st.train), st.split_from)
            self.pstream.append(perms[key])
        self.ntrain = np.array([len(st.train) for st in self.streams])
        self.nbatches = -(-self.ntrain // self.B)
        self.nb_max = int(self.nbatches.max())

    def _dev_rows(self) -> None:
        """Dev rows of every stream, padded; label -1 never matches a prediction."""
        self.ndev = np.array([len(st.dev) for st in self.streams])
        dev_idx = np.zeros((self.S, int(self.ndev.max())), dtype=np.int64)
        dev_lab = np.full((self.S, int(self.ndev.max())), -1, dtype=np.int64)
        for i, st in enumerate(self.streams):
            dev_idx[i, : len(st.dev)] = st.dev
            dev_lab[i, : len(st.dev)] = self.y_np[st.dev]
        self.dev_idx_t = torch.from_numpy(dev_idx).to(self.dev)
        self.dev_lab_t = torch.from_numpy(dev_lab).to(self.dev)

    # ---- the loop -------------------------------------------------------------------------------
    def run(self) -> list[list[Fitted]]:
        while len(self.alive) and self.nepoch <= self.s.max_epoch:
            for e in range(self.nepoch, self.nepoch + self.s.epoch_size):
                self._epoch(e)
            self.nepoch += self.s.epoch_size
            self._check_dev()
            self._drop_finished()
        self.stop_epoch[~self.stopped] = self.nepoch
        C = self.C
        return [
            [
                Fitted(
                    float(self.best_acc[i, k]),
                    self.bestW[i, :, k * C : (k + 1) * C].clone(),
                    self.bestb[i, k * C : (k + 1) * C].clone(),
                    int(self.stop_epoch[i, k]),
                )
                for k in range(self.K)
            ]
            for i in range(self.S)
        ]

    def _epoch(self, e: int) -> None:
        """One epoch of minibatches for every alive stream (rows padded to the longest stream)."""
        B, alive = self.B, self.alive
        rows = np.zeros((len(alive), self.nb_max * B), dtype=np.int64)
        wts = np.zeros((len(alive), self.nb_max * B), dtype=np.float32)
        for j, i in enumerate(alive):
            n = self.ntrain[i]
            rows[j, :n] = self.streams[i].train[self.pstream[i].epoch(e)]
            sizes = np.minimum(B, n - np.arange(self.nbatches[i]) * B)
            wts[j, :n] = np.repeat(1.0 / sizes, sizes)
        rows_t = torch.from_numpy(rows).to(self.dev)
        wts_t = torch.from_numpy(wts).to(device=self.dev, dtype=self.X.dtype)
        tgt_t = (
            F.one_hot(torch.from_numpy(self.y_np[rows]).to(self.dev), self.C).to(self.X.dtype).mul_(wts_t.unsqueeze(-1))
        )
        nb_alive = self.nbatches[alive]
        for bi in range(int(nb_alive.max())):
            sl = slice(bi * B, (bi + 1) * B)
            have = nb_alive > bi
            if have.all():
                self._step(None, rows_t[:, sl], wts_t[:, sl], tgt_t[:, sl])
            else:  # a stream with one batch fewer takes no optimiser step here
                sel = torch.from_numpy(np.flatnonzero(have)).to(self.dev)
                self._step(sel, rows_t[sel, sl], wts_t[sel, sl], tgt_t[sel, sl])

    def _gradients(
        self, Ws: torch.Tensor, bs_: torch.Tensor, rows: torch.Tensor, wts: torch.Tensor, tgt: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Gradients of SentEval's mean cross-entropy (``wts``: 1/batch size per row, 0 = padding;
        ``tgt``: one-hot labels times ``wts``) plus torch's coupled weight decay."""
        K, C = self.K, self.C
        A_, Bn = rows.shape
        gW, gb = torch.empty_like(Ws), torch.empty_like(bs_)
        # streams in chunks: a chunk's gathered rows stay in cache between the forward and backward products
        for c0 in range(0, A_, self.chunk):
            c = slice(c0, c0 + self.chunk)
            xb = F.embedding(rows[c], self.X)  # (c, B, d): torch's fastest row gather on CPU
            z = torch.baddbmm(bs_[c].unsqueeze(1), xb, Ws[c]).view(-1, Bn, K, C)
            if (
                C == 2
            ):  # softmax over two logits is a sigmoid of their difference (torch's softmax is slow on a dim of 2)
                p1 = torch.sigmoid(z[..., 1] - z[..., 0])
                g = torch.stack((1 - p1, p1), -1)
            else:
                g = z.softmax(-1)
            g.mul_(wts[c].view(-1, Bn, 1, 1)).sub_(tgt[c].unsqueeze(2))  # d(mean CE)/d(logits)
            g = g.view(-1, Bn, K * C)
            torch.bmm(xb.transpose(1, 2), g, out=gW[c])
            torch.sum(g, 1, out=gb[c])
        return gW, gb

    def _step(self, sel: torch.Tensor | None, rows: torch.Tensor, wts: torch.Tensor, tgt: torch.Tensor) -> None:
        """One optimiser step for every stream in ``sel`` (None: all alive), in place."""
        Ws, bs_ = (self.W, self.b) if sel is None else (self.W[sel], self.b[sel])
        gW, gb = self._gradients(Ws, bs_, rows, wts, tgt)
        l2s = self.l2 if sel is None else self.l2[sel]
        gW.addcmul_(l2s.unsqueeze(1), Ws)  # torch's coupled weight_decay: grad + l2 * param
        gb.addcmul_(l2s, bs_)
        if sel is None:
            self.steps += 1
            t = self.steps
        else:
            self.steps[sel] += 1
            t = self.steps[sel]
        if self.adam:
            m1, v1, m2, v2 = (
                (self.mW, self.vW, self.mb, self.vb)
                if sel is None
                else (self.mW[sel], self.vW[sel], self.mb[sel], self.vb[sel])
            )
            self._adam((Ws, gW, m1, v1, (-1, 1, 1)), (bs_, gb, m2, v2, (-1, 1)), t=t)
        else:
            v1, v2 = (self.vW, self.vb) if sel is None else (self.vW[sel], self.vb[sel])
            self._rmsprop((Ws, gW, v1), (bs_, gb, v2))
            m1 = m2 = None
        if sel is not None:  # indexing made copies: write the subset back
            self.W[sel], self.b[sel] = Ws, bs_
            if self.adam:
                self.mW[sel], self.mb[sel] = m1, m2
            self.vW[sel], self.vb[sel] = v1, v2

    def _adam(self, *groups, t: torch.Tensor) -> None:
        """torch.optim.Adam's single-tensor update, with a step count per stream."""
        b1, b2, eps = 0.9, 0.999, 1e-8
        step_size = (self.lr / (1 - b1**t)).to(self.X.dtype)
        bc2 = (1 - b2**t).sqrt().to(self.X.dtype)
        for p_, g_, m_, v_, shape in groups:
            m_.lerp_(g_, 1 - b1)
            v_.mul_(b2).addcmul_(g_, g_, value=1 - b2)
            denom = v_.sqrt().div_(bc2.view(shape)).add_(eps)
            p_.sub_(torch.div(m_, denom).mul_(step_size.view(shape)))

    def _rmsprop(self, *groups) -> None:
        """torch.optim.RMSprop's defaults: alpha 0.99, eps 1e-8, no momentum."""
        alpha, eps = 0.99, 1e-8
        for p_, g_, v_ in groups:
            v_.mul_(alpha).addcmul_(g_, g_, value=1 - alpha)
            p_.addcdiv_(g_, v_.sqrt().add_(eps), value=-self.lr)

    def _check_dev(self) -> None:
        """Score every alive model on its dev rows; keep improvements, count the rest (tenacity)."""
        alive, C = self.alive, self.C
        acc = (
            _accuracy(self.X, self.W, self.b, self.dev_idx_t[alive], self.dev_lab_t[alive], self.K, C)
            / self.ndev[alive][:, None]
        )
        improved = (acc > self.best_acc[alive]) & ~self.stopped[alive]
        for j, i in enumerate(alive):
            for k in range(self.K):
                if self.stopped[i, k]:
                    continue
                if improved[j, k]:
                    self.best_acc[i, k] = acc[j, k]
                    cols = slice(k * C, (k + 1) * C)
                    self.bestW[i, :, cols] = self.W[j, :, cols]
                    self.bestb[i, cols] = self.b[j, cols]
                else:
                    if self.count[i, k] >= self.s.tenacity:
                        self.stopped[i, k] = True
                        self.stop_epoch[i, k] = self.nepoch
                    self.count[i, k] += 1

    def _drop_finished(self) -> None:
        """Streams whose every model stopped leave the batch (and its optimiser state)."""
        keep = ~self.stopped[self.alive].all(1)
        if not keep.all():
            kt = torch.from_numpy(np.flatnonzero(keep)).to(self.dev)
            self.W, self.b, self.mW, self.vW, self.mb, self.vb, self.steps = (
                t[kt] for t in (self.W, self.b, self.mW, self.vW, self.mb, self.vb, self.steps)
            )
            self.l2 = self.l2[kt]
            self.alive = self.alive[keep]


def _accuracy(
    X: torch.Tensor,
    W: torch.Tensor,
    b: torch.Tensor,
    idx: torch.Tensor,
    lab: torch.Tensor,
    K: int,
    C: int,
    chunk: int = 8,
) -> np.ndarray:
    """Correct predictions per (stream, model) on padded row sets (label -1 = padding)."""
    out = []
    for s0 in range(0, len(idx), chunk):
        sl = slice(s0, s0 + chunk)
        logits = torch.baddbmm(b[sl].unsqueeze(1), X[idx[sl]], W[sl])
        pred = logits.view(logits.shape[0], logits.shape[1], K, C).argmax(-1)
        out.append((pred == lab[sl].unsqueeze(-1)).sum(1).cpu().numpy())
    return np.concatenate(out).astype(np.int64)


def predict(X: torch.Tensor, model: Fitted) -> np.ndarray:
    return (X @ model.weight.to(X.device) + model.bias.to(X.device)).argmax(1).cpu().numpy()


def _score(X: torch.Tensor, y: np.ndarray, model: Fitted) -> float:
    return 1.0 * int((predict(X, model) == y).sum()) / len(y)


def _tensors(X: np.ndarray, y: np.ndarray, device: str | None) -> tuple[torch.Tensor, torch.Tensor]:
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    return torch.as_tensor(np.ascontiguousarray(X, dtype=np.float32), device=dev), torch.as_tensor(
        np.asarray(y, dtype=np.int64), device=dev
    )


def inner_kfold(
    X: np.ndarray, y: np.ndarray, nclasses: int, setting: str | Setting = "default", device: str | None = None
) -> dict[str, Any]:
    """SentEval's ``InnerKFoldClassifier`` (MR, CR, SUBJ, MPQA)."""
    s = get_setting(setting)
    Xt, yt = _tensors(X, y, device)
    skf = StratifiedKFold(n_splits=s.kfold, shuffle=True, random_state=1111)
    outer = list(skf.split(X, y))
    streams = []
    for tr, _ in outer:
        inner = StratifiedKFold(n_splits=s.kfold, shuffle=True, random_state=1111).split(tr, y[tr])
        for itr, ite in inner:
            streams.append(Stream(train=tr[itr], dev=tr[ite], l2=s.l2_grid))
    fitted = train_streams(Xt, yt, streams, nclasses, s)
    dev_results, chosen = [], []
    for o in range(len(outer)):
        per_fold = fitted[o * s.kfold : (o + 1) * s.kfold]
        scores = [round(100 * np.mean([f[r].dev_acc for f in per_fold]), 2) for r in range(len(s.l2_grid))]
        chosen.append(s.l2_grid[int(np.argmax(scores))])
        dev_results.append(np.max(scores))
    finals = train_streams(
        Xt, yt, [validation_split_stream(tr, l2, s) for (tr, _), l2 in zip(outer, chosen)], nclasses, s
    )
    test_results = [round(100 * _score(Xt[torch.as_tensor(te)], y[te], f[0]), 2) for (_, te), f in zip(outer, finals)]
    return {
        "devacc": float(round(np.mean(dev_results), 2)),
        "acc": float(round(np.mean(test_results), 2)),
        "l2": chosen,
        "fold_acc": test_results,
        "models": _count(fitted, finals),
    }


def kfold(
    Xtr: np.ndarray,
    ytr: np.ndarray,
    Xte: np.ndarray,
    yte: np.ndarray,
    nclasses: int,
    setting: str | Setting = "default",
    device: str | None = None,
) -> dict[str, Any]:
    """SentEval's ``KFoldClassifier`` (TREC, MRPC): L2 by k-fold on train, refit on train, score test."""
    s = get_setting(setting)
    Xt, yt = _tensors(Xtr, ytr, device)
    folds = list(StratifiedKFold(n_splits=s.kfold, shuffle=True, random_state=s.seed).split(Xtr, ytr))
    fitted = train_streams(Xt, yt, [Stream(train=tr, dev=te, l2=s.l2_grid) for tr, te in folds], nclasses, s)
    scores = [round(100 * np.mean([f[r].dev_acc for f in fitted]), 2) for r in range(len(s.l2_grid))]
    l2 = s.l2_grid[int(np.argmax(scores))]
    final = train_streams(Xt, yt, [validation_split_stream(np.arange(len(ytr)), l2, s)], nclasses, s)[0][0]
    Xtest = _tensors(Xte, yte, str(Xt.device))[0]
    yhat = predict(Xtest, final)
    acc = 1.0 * int((yhat == np.asarray(yte)).sum()) / len(yte)
    return {
        "devacc": float(np.max(scores)),
        "acc": round(100 * acc, 2),
        "l2": l2,
        "yhat": yhat,
        "cv_scores": scores,
        "models": _count(fitted, [[final]]),
    }


def split(
    Xtr: np.ndarray,
    ytr: np.ndarray,
    Xdev: np.ndarray,
    ydev: np.ndarray,
    Xte: np.ndarray,
    yte: np.ndarray,
    nclasses: int,
    setting: str | Setting = "default",
    device: str | None = None,
) -> dict[str, Any]:
    """SentEval's ``SplitClassifier`` (SST-2, SICK-E): L2 chosen on dev, the chosen model scored on test."""
    s = get_setting(setting)
    X = np.concatenate([Xtr, Xdev])
    y = np.concatenate([ytr, ydev])
    Xt, yt = _tensors(X, y, device)
    ntr = len(ytr)
    fitted = train_streams(
        Xt, yt, [Stream(train=np.arange(ntr), dev=np.arange(ntr, len(y)), l2=s.l2_grid)], nclasses, s
    )[0]
    scores = [round(100 * f.dev_acc, 2) for f in fitted]
    r = int(np.argmax(scores))
    # SentEval refits with the chosen L2 and the same seed: the identical model, so it is reused
    Xtest = _tensors(Xte, yte, str(Xt.device))[0]
    return {
        "devacc": float(np.max(scores)),
        "acc": round(100 * _score(Xtest, np.asarray(yte), fitted[r]), 2),
        "l2": s.l2_grid[r],
        "dev_scores": scores,
        "models": _count([fitted]),
    }


def _count(*groups: list[list[Fitted]]) -> dict[str, float]:
    """How many models were trained and for how many epochs (on average, at most)."""
    ep = [f.epochs for g in groups for stream in g for f in stream]
    return {"trained": len(ep), "epochs_mean": round(float(np.mean(ep)), 1), "epochs_max": int(max(ep))}


def with_overrides(setting: str | Setting, **kw: Any) -> Setting:
    return replace(get_setting(setting), **kw)


def senteval_sequential_fit(X, y, tr, dev, l2: float, s: Setting, split: bool = False):
    """SentEval's MLP(nhid=0).fit written out sequentially, one model at a time: seed both RNGs, build
    the Linear, torch's Adam/RMSprop with weight_decay, one permutation per epoch, early stopping.
    Not used for scoring: it is the reference the batched trainer is tested against and timed
    against (tests/evaluate/test_senteval.py, bench/senteval_speed.py). Returns (best dev acc, W, epochs)."""
    import copy

    np.random.seed(s.seed)
    torch.manual_seed(s.seed)
    model = torch.nn.Linear(X.shape[1], int(y.max()) + 1)
    opt = (torch.optim.Adam if s.optim == "adam" else torch.optim.RMSprop)(model.parameters(), weight_decay=l2)
    loss_fn = torch.nn.CrossEntropyLoss()
    Xtr, ytr = X[tr], y[tr]
    if split:
        perm = np.random.permutation(len(Xtr))
        k = int(s.validation_split * len(Xtr))
        Xdv, ydv, Xtr, ytr = Xtr[perm[:k]], ytr[perm[:k]], Xtr[perm[k:]], ytr[perm[k:]]
    else:
        Xdv, ydv = X[dev], y[dev]
    Xtr, ytr, Xdv, ydv = map(torch.as_tensor, (Xtr, ytr, Xdv, ydv))
    nepoch, best, count, stop = 0, -1.0, 0, False
    while not stop and nepoch <= s.max_epoch:
        for _ in range(s.epoch_size):
            perm = np.random.permutation(len(Xtr))
            for i in range(0, len(Xtr), s.batch_size):
                idx = torch.as_tensor(perm[i : i + s.batch_size])
                loss = loss_fn(model(Xtr[idx]), ytr[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        nepoch += s.epoch_size
        with torch.no_grad():
            acc = 1.0 * int((model(Xdv).argmax(1) == ydv).sum()) / len(ydv)
        if acc > best:
            best, best_model = acc, copy.deepcopy(model)
        else:
            if count >= s.tenacity:
                stop = True
            count += 1
    return best, best_model.weight.detach().T.numpy(), nepoch
