"""Seeds and significance for result tables (TSDAE paper, Tables 2/4: mean ± std over seeds, a
dagger where a method beats named rivals in EVERY seed; a paired test across seeds; a paired
bootstrap over the queries/pairs of one task).

Public API (the leaderboard calls these; all pure functions on plain numbers):

* :func:`mean_std` -- mean and sample std (ddof=1; 0 for one seed) of per-seed scores;
* :func:`format_mean_std` -- ``"81.23 ± 0.45"`` for a table cell;
* :func:`dagger` -- True when a method beats every named rival in every shared seed;
* :func:`paired_test` -- paired t-test (or Wilcoxon) across seeds, via scipy;
* :func:`paired_bootstrap` -- paired bootstrap over per-item scores of one task (items resampled
  with replacement; the metric recomputed on each resample);
* :func:`paired_bootstrap_items` -- the same from two runs' stored per-item files
  (``benchbench run --store-items``), stratified by the task's subsets;
* :data:`TEST_NAMES` -- the human-readable name of each test, to print under a table;
* :func:`hierarchical_bootstrap`, :func:`bootstrap_p`, :func:`tost_p`, :func:`holm` -- seeds and items
  resampled together, a difference p, an equivalence (TOST) p, Holm's correction;
* :func:`column_stats` -> :class:`Column` -- one table column: its best, the tie group and each cell
  against its reference row (≈ only from TOST); :func:`tie_legend` states that test under a table, and
  :func:`resamples_text` the resample counts the columns' p-values came from.
  Studies, ``benchbench table`` and ``benchbench significance`` all decide through these.

Seeds are matched by their seed number (a dict ``seed -> score``), never by position, so a
missing seed on one side drops that seed from the comparison instead of shifting the pairing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from benchbench.core.errors import ConfigError

TEST_NAMES = {
    "ttest": "two-sided paired t-test across seeds (scipy.stats.ttest_rel)",
    "wilcoxon": "two-sided Wilcoxon signed-rank test across seeds (scipy.stats.wilcoxon)",
    "bootstrap": "paired bootstrap over the task's queries/pairs (resampled with replacement, stratified by subset)",
}


def mean_std(scores: Sequence[float] | Mapping[int, float]) -> tuple[float, float]:
    """Mean and SAMPLE standard deviation (ddof=1) of per-seed scores; std is 0.0 for one seed.
    Sample std because seeds are a sample of the seed distribution (what papers report)."""
    vals = np.asarray(list(scores.values()) if isinstance(scores, Mapping) else list(scores), dtype=float)
    if vals.size == 0:
        raise ConfigError("mean_std: no scores given (no seed has a result).")
    return float(vals.mean()), float(vals.std(ddof=1)) if vals.size > 1 else 0.0


def format_mean_std(scores: Sequence[float] | Mapping[int, float], digits: int = 2) -> str:
    """``"mean ± std"`` for a table cell; a single seed prints its value alone."""
    vals = list(scores.values()) if isinstance(scores, Mapping) else list(scores)
    m, s = mean_std(vals)
    return f"{m:.{digits}f}" if len(vals) == 1 else f"{m:.{digits}f} ± {s:.{digits}f}"


def _common(a: Mapping[int, float], b: Mapping[int, float]) -> list[int]:
    return sorted(set(a) & set(b))


def dagger(
    method: Mapping[int, float],
    rivals: Mapping[str, Mapping[int, float]],
    higher_is_better: bool = True,
    min_seeds: int = 2,
) -> bool:
    """The paper's dagger: ``method`` beats EVERY rival in EVERY seed both have (strictly). False when
    a rival shares fewer than ``min_seeds`` seeds with the method (one seed proves nothing) or when
    no rival is named."""
    if not rivals:
        return False
    for r in rivals.values():
        seeds = _common(method, r)
        if len(seeds) < min_seeds:
            return False
        for s in seeds:
            better = method[s] > r[s] if higher_is_better else method[s] < r[s]
            if not better:
                return False
    return True


@dataclass
class TestResult:
    """A significance test's outcome. ``statistic`` and ``p_value`` as the test defines them;
    ``mean_diff`` is method minus rival (positive: the method scores higher); ``n`` the number of
    paired units (seeds, or items for the bootstrap)."""

    test: str
    statistic: float
    p_value: float
    mean_diff: float
    n: int
    dropped: int = 0  # bootstrap: resamples on which the metric was undefined (e.g. no positive pair drawn)

    @property
    def name(self) -> str:
        return TEST_NAMES.get(self.test, self.test)

    def significant(self, alpha: float = 0.05) -> bool:
        return self.p_value < alpha


def paired_test(a: Mapping[int, float], b: Mapping[int, float], test: str = "ttest") -> TestResult:
    """Paired test of ``a`` against ``b`` over the seeds both have (scipy). ``ttest``: ttest_rel;
    ``wilcoxon``: signed-rank. Identical score vectors give p = 1 (no evidence of a difference)."""
    from scipy import stats as sps

    seeds = _common(a, b)
    if len(seeds) < 2:
        raise ConfigError(f"paired_test needs >= 2 shared seeds (got {seeds}); run more seeds (--seeds 1-5).")
    x = np.array([a[s] for s in seeds], dtype=float)
    y = np.array([b[s] for s in seeds], dtype=float)
    d = x - y
    if np.allclose(d, 0):
        return TestResult(test, 0.0, 1.0, 0.0, len(seeds))
    if test == "ttest":
        if np.allclose(d, d[0]):  # constant non-zero difference: t is infinite, p is 0
            return TestResult(test, math.copysign(math.inf, d[0]), 0.0, float(d.mean()), len(seeds))
        r = sps.ttest_rel(x, y)
    elif test == "wilcoxon":
        r = sps.wilcoxon(x, y)
    else:
        raise ConfigError(f"paired_test: unknown test {test!r}; choose 'ttest' or 'wilcoxon'.")
    return TestResult(test, float(r.statistic), float(r.pvalue), float(d.mean()), len(seeds))


def paired_bootstrap(
    items_a: Sequence[float] | np.ndarray,
    items_b: Sequence[float] | np.ndarray,
    metric: Callable[[np.ndarray], float] | None = None,
    n_resamples: int = 10000,
    seed: int = 0,
    labels: Sequence[float] | np.ndarray | None = None,
) -> TestResult:
    """Paired bootstrap over the items (queries or pairs) of ONE task: the same resampled indices
    are applied to both systems. ``items_a``/``items_b`` are per-item values -- per-query scores
    (e.g. AP of each query), or per-pair similarities when ``metric(scores, labels)`` needs the
    labels of the resampled pairs (e.g. AP/Spearman over pairs). Without ``metric`` the statistic is
    the mean. p is the one-sided share of resamples where ``a`` does not beat ``b``, doubled (two-sided)
    and capped at 1."""
    a = np.asarray(items_a, dtype=float)
    b = np.asarray(items_b, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ConfigError(
            f"paired_bootstrap: per-item vectors must be 1-D and the same length (got {a.shape}, {b.shape})."
        )
    y = None if labels is None else np.asarray(labels)
    if y is not None and y.shape[0] != a.size:
        raise ConfigError("paired_bootstrap: labels must have one entry per item.")

    def stat(v: np.ndarray, idx: np.ndarray) -> float:
        if metric is None:
            return float(v[idx].mean())
        return float(metric(v[idx], y[idx]) if y is not None else metric(v[idx]))

    full = np.arange(a.size)
    observed = stat(a, full) - stat(b, full)
    rng = np.random.default_rng(seed)

    def diffs() -> Iterator[float | None]:
        for _ in range(n_resamples):
            idx = rng.integers(0, a.size, a.size)
            yield stat(a, idx) - stat(b, idx)

    p, _ = _bootstrap_p(observed, diffs())
    return TestResult("bootstrap", float(observed), float(p), float(observed), int(a.size))


def _bootstrap_p(observed: float, diffs: Iterable[float | None]) -> tuple[float, int]:
    """Two-sided bootstrap p from the resampled differences: the share of resamples that do not
    favour the observed winner, doubled and capped at 1 (1 when there is no difference). A ``None``
    difference (metric undefined on that resample) is dropped. Returns (p, resamples used)."""
    wins = valid = 0
    for d in diffs:
        if d is None:
            continue
        valid += 1
        wins += (d <= 0) if observed > 0 else (d >= 0)
    p = 1.0 if observed == 0 else min(1.0, 2.0 * (wins + 1) / (valid + 1))
    return p, valid


def paired_bootstrap_items(
    items_a: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    items_b: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    n_resamples: int = 2000,
    seed: int = 0,
) -> TestResult:
    """Paired bootstrap of one task's main score from two runs' stored per-item scores
    (``benchbench.store.items``): each resample draws the items of every subset with replacement (the same
    indices for both runs, stratified by subset so TwitterPara keeps its TURL/PIT split and CQADupStack
    its forums), recomputes the task's metric for both and takes the difference. p is two-sided as in
    :func:`paired_bootstrap`. ``n_resamples`` is lower by default because the pair metrics (AP, Spearman)
    are recomputed per resample.

    Each side may also be a sequence of item sets of the same task (one per seed, paired by position):
    the statistic is then the difference of the seed-averaged scores, every seed scored on the same
    resampled items (a study's tie groups)."""
    from benchbench.evaluate.item_scores import aggregate_score, check_paired

    runs_a = [items_a] if isinstance(items_a, Mapping) else list(items_a)
    runs_b = [items_b] if isinstance(items_b, Mapping) else list(items_b)
    if not runs_a or len(runs_a) != len(runs_b):
        raise ConfigError(f"paired_bootstrap_items: {len(runs_a)} vs {len(runs_b)} item sets do not pair up.")
    for a, b in zip(runs_a, runs_b):
        check_paired(runs_a[0], a)
        check_paired(a, b)
    ref = runs_a[0]
    sizes = {name: len(sub["pred"] if ref["unit"] == "pair" else sub["values"]) for name, sub in ref["subsets"].items()}
    if not sizes or min(sizes.values()) == 0:
        raise ConfigError("paired_bootstrap_items: a subset has no items.")

    def diff(index: dict[str, np.ndarray] | None) -> float:
        return float(np.mean([aggregate_score(a, index) - aggregate_score(b, index) for a, b in zip(runs_a, runs_b)]))

    observed = diff(None)
    rng = np.random.default_rng(seed)
    if ref["unit"] == "pair" and ref["metric"] in _RESAMPLED and ref["aggregate"] in ("mean", "all"):
        # the same draws as the loop below, scored for every resample at once (STS: thousands of pairs)
        draws = [{name: rng.integers(0, n, n) for name, n in sizes.items()} for _ in range(n_resamples)]
        scores_a = _resampled_scores(runs_a, draws).mean(axis=1)
        scores_b = _resampled_scores(runs_b, draws).mean(axis=1)
        p, valid = _bootstrap_p(observed, (float(d) if math.isfinite(d) else None for d in scores_a - scores_b))
        return _items_result(observed, p, valid, n_resamples, sizes)

    def diffs() -> Iterator[float | None]:
        for _ in range(n_resamples):
            idx = {name: rng.integers(0, n, n) for name, n in sizes.items()}
            try:  # a resample can leave a metric undefined (AP with no positive pair drawn): it is dropped
                d = diff(idx)
            except (ValueError, IndexError, ZeroDivisionError):
                d = float("nan")
            yield d if math.isfinite(d) else None

    p, valid = _bootstrap_p(observed, diffs())
    return _items_result(observed, p, valid, n_resamples, sizes)


def _items_result(observed: float, p: float, valid: int, n_resamples: int, sizes: Mapping[str, int]) -> TestResult:
    if valid < n_resamples / 2:
        raise ConfigError(
            f"paired_bootstrap_items: the metric is undefined on {n_resamples - valid} of {n_resamples} "
            "resamples (subsets too small for a bootstrap)."
        )
    return TestResult(
        "bootstrap", float(observed), float(p), float(observed), int(sum(sizes.values())), n_resamples - valid
    )


def _count_ranks(values: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For resamples given as counts ``c`` [resamples, items]: (the sort order of ``values``, each
    item's tie group in that order, the drawn count per tie group [resamples, groups])."""
    order = np.argsort(values, kind="stable")
    v = values[order]
    new_group = np.r_[True, v[1:] != v[:-1]]
    group = np.empty(len(v), dtype=np.int64)
    group[order] = np.cumsum(new_group) - 1
    return order, group, np.add.reduceat(c[:, order], np.flatnonzero(new_group), axis=1)


def _centred_ranks(values: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Each item's average rank among the drawn values of each resample, minus the mean rank: the
    count drawn below it plus (its tie group's count + 1) / 2."""
    mid = (c.sum(axis=1, keepdims=True) + 1) / 2  # the mean rank of m drawn values
    _, group, per = _count_ranks(values, c)
    ranks = np.cumsum(per, axis=1)  # in place from here: these arrays are [resamples, items]
    ranks -= per / 2
    ranks += 0.5
    out = ranks[:, group]
    out -= mid
    return out


def _spearman_counts(
    pred: np.ndarray, gold: np.ndarray, c: np.ndarray, gold_ranks: np.ndarray | None = None
) -> np.ndarray:
    """Spearman x100 of each resample: a count-weighted Pearson of the centred average ranks
    (``gold_ranks``: the gold side's, when already computed for these counts)."""
    mid = (c.sum(axis=1) + 1) / 2
    pr = _centred_ranks(pred, c)
    gr = _centred_ranks(gold, c) if gold_ranks is None else gold_ranks
    cp = c * pr
    num = np.einsum("ij,ij->i", cp, gr)
    den = np.sqrt(np.einsum("ij,ij->i", cp, pr) * np.einsum("ij,ij,ij->i", c, gr, gr))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = 100 * num / den
    return np.where(den > 1e-9 * (mid**3), out, np.nan)  # a constant side: undefined


def _ap_counts(pred: np.ndarray, positive: np.ndarray, c: np.ndarray) -> np.ndarray:
    """scikit-learn's step-wise average precision x100 of each resample: thresholds at the distinct
    scores, high to low; AP = sum over thresholds of (new positives / all positives) x precision there."""
    order, _, per = _count_ranks(-pred, c)  # descending scores
    pos_new = np.add.reduceat((c * positive)[:, order], np.flatnonzero(np.r_[True, np.diff(-pred[order]) != 0]), axis=1)
    tp, n = np.cumsum(pos_new, axis=1), np.cumsum(per, axis=1)
    total = tp[:, -1]
    with np.errstate(invalid="ignore", divide="ignore"):
        prec = np.where(pos_new > 0, tp / np.maximum(n, 1), 0.0)
        out = 100 * (pos_new * prec).sum(axis=1) / total
    # no positive drawn: scikit-learn warns and returns 0 (recall set to one); nothing drawn: undefined
    return np.where(total > 0, out, np.where(n[:, -1] > 0, 0.0, np.nan))


def _counts(draws: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """subset -> [resamples, items] how often each item was drawn (a resample as counts: never sorted)."""
    out = {}
    for name in draws[0]:
        idx = np.stack([d[name] for d in draws])
        b, n = idx.shape
        flat = (np.arange(b)[:, None] * n + idx).ravel()
        out[name] = np.bincount(flat, minlength=b * n).reshape(b, n).astype(np.float64)
    return out


def _resampled_scores(runs: Sequence[Mapping[str, Any]], draws: Sequence[Mapping[str, np.ndarray]]) -> np.ndarray:
    """[resamples, runs] of the main score of pair items (``_RESAMPLED`` metrics), every resample at
    once: the same numbers as ``aggregate_score`` on each draw, NaN where the metric is undefined.
    Written out because scipy's spearmanr and scikit-learn's average_precision_score handle one
    resample per call (TwitterPara's AP: ~65 ms a call here, hours for a study's column); here a
    resample is a COUNT per original item, so no resample is sorted."""
    return _count_scores(runs, _counts(draws))


def _count_scores(runs: Sequence[Mapping[str, Any]], counts: Mapping[str, np.ndarray]) -> np.ndarray:
    """:func:`_resampled_scores` from the draws' counts; the gold side's ranks are computed once for all
    runs (a study column scores ~40 runs on the same draws)."""
    names = list(runs[0]["subsets"])
    metric = runs[0]["metric"]

    def scores(parts: list[str]) -> np.ndarray:
        c = np.hstack([counts[n] for n in parts])
        gold = np.concatenate([np.asarray(runs[0]["subsets"][n]["gold"], dtype=np.float64) for n in parts])
        preds = [np.concatenate([np.asarray(r["subsets"][n]["pred"], dtype=np.float64) for n in parts]) for r in runs]
        if metric == "spearman":
            gr = _centred_ranks(gold, c)
            return np.stack([_spearman_counts(p, gold, c, gr) for p in preds], axis=1)
        if metric == "paraphrase_ap":  # USEB TwitterPara: label 3 dropped, > 3 a paraphrase
            c, positive = c * (gold != 3), (gold > 3).astype(np.float64)
        else:
            positive = (gold > 0).astype(np.float64)
        return np.stack([_ap_counts(p, positive, c) for p in preds], axis=1)

    if runs[0]["aggregate"] == "all":  # one score over the subsets' drawn pairs together
        return scores(names)
    return np.mean([scores([n]) for n in names], axis=0)


_RESAMPLED = ("spearman", "paraphrase_ap", "average_precision")


# ---- a study column: hierarchical bootstrap over seeds and items, Holm, TOST --------------------------
HIERARCHICAL = "hierarchical"  # seeds within each method x the task's items shared by every method
SEEDS_ONLY = "seeds"  # no per-item scores for some cell: seeds resampled alone
_CHUNK = 500  # resamples scored at once: bounds memory ([chunk, items] float64 arrays)


@dataclass(frozen=True)
class Resampled:
    """One column's bootstrap: each method's observed seed-mean and its resampled seed-means (the same
    item draws for every method and seed: that is what pairs them)."""

    observed: dict[str, float]
    draws: dict[str, np.ndarray]  # method -> [resamples] seed-mean on each resample (NaN: undefined)
    test: str  # HIERARCHICAL or SEEDS_ONLY
    n_resamples: int


def _item_scores(runs: Sequence[Mapping[str, Any]], n_resamples: int, seed: int) -> np.ndarray:
    """[resamples, runs]: each run's main score on the same stratified item draws (subsets kept apart)."""
    from benchbench.evaluate.item_scores import aggregate_score

    ref = runs[0]
    sizes = {name: len(sub["pred"] if ref["unit"] == "pair" else sub["values"]) for name, sub in ref["subsets"].items()}
    if not sizes or min(sizes.values()) == 0:
        raise ConfigError("hierarchical bootstrap: a subset has no items.")
    rng = np.random.default_rng(seed)
    fast = ref["unit"] == "pair" and ref["metric"] in _RESAMPLED and ref["aggregate"] in ("mean", "all")
    out = []
    for start in range(0, n_resamples, _CHUNK):
        b = min(_CHUNK, n_resamples - start)
        idx = {name: rng.integers(0, n, (b, n)) for name, n in sizes.items()}
        if fast:
            counts = {}
            for name, n in sizes.items():
                flat = (np.arange(b)[:, None] * n + idx[name]).ravel()
                counts[name] = np.bincount(flat, minlength=b * n).reshape(b, n).astype(np.float64)
            out.append(_count_scores(runs, counts))
            continue
        block = np.full((b, len(runs)), np.nan)
        for i in range(b):  # metrics without a count form: one aggregate_score per resample and run
            one = {name: idx[name][i] for name in sizes}
            for j, r in enumerate(runs):
                try:
                    block[i, j] = aggregate_score(r, one)
                except (ValueError, IndexError, ZeroDivisionError):
                    pass
        out.append(block)
    return np.vstack(out)


def _items_key(items: Mapping[str, Any]) -> str:
    """A digest of one run's per-item predictions (values): equal runs score equally on every draw."""
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    for name, sub in items["subsets"].items():
        h.update(name.encode("utf-8"))
        h.update(np.asarray(sub["pred"] if items["unit"] == "pair" else sub["values"], dtype=np.float64).tobytes())
    return h.hexdigest()


def _seed_stream(seed: int, method: str) -> np.random.Generator:
    """A method's own seed-resampling stream: adding or dropping another method never moves its draws."""
    import zlib

    return np.random.default_rng([seed, zlib.crc32(method.encode("utf-8"))])


def hierarchical_bootstrap(
    scores: Mapping[str, Mapping[int, float]],
    items: Mapping[str, Mapping[int, Mapping[str, Any]]] | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> Resampled:
    """Each method's seed-mean resampled in two levels. Items: the task's items drawn with replacement
    (stratified by subset; ONE draw per resample shared by every method and seed, so comparisons are
    paired on items), each seed scored on the draw. Seeds: on each item draw, the method's seed-mean
    plus its seed std / sqrt(k) times a Student t draw with k-1 degrees of freedom (seeds are not paired
    across methods: seed 1 of two methods shares nothing). Why t and not seeds resampled with
    replacement: with k = 3 seeds a resample can never leave the range of the three, so three seeds on
    one side of a rival give p at the bootstrap's floor where a t-test over the same seeds gives 0.05-0.2;
    the t draw carries the small-sample uncertainty of a seed std (the Behrens-Fisher problem solved by
    simulation). ``items``: method -> seed -> stored items, for every seed of every method; without them
    (None) the seed level alone (``SEEDS_ONLY``)."""
    methods = [m for m in scores if scores[m]]
    if not methods:
        raise ConfigError("hierarchical_bootstrap: no method has a score.")
    seeds = {m: sorted(scores[m]) for m in methods}
    test = HIERARCHICAL if items is not None else SEEDS_ONLY
    if items is not None:
        from benchbench.evaluate.item_scores import check_paired

        runs, where, col = [], {}, {}  # equal predictions scored once (a training-free start repeats its seeds)
        for m in methods:
            for s in seeds[m]:
                key = _items_key(items[m][s])
                if key not in where:
                    where[key] = len(runs)
                    runs.append(items[m][s])
                col[(m, s)] = where[key]
        for r in runs[1:]:
            check_paired(runs[0], r)
        per_run = _item_scores(runs, n_resamples, seed)
        level = {m: per_run[:, [col[(m, s)] for s in seeds[m]]] for m in methods}
    else:
        level = {m: np.tile([float(scores[m][s]) for s in seeds[m]], (n_resamples, 1)) for m in methods}
    draws = {}
    for m in methods:
        x, k = level[m], len(seeds[m])
        mean_b = x.mean(axis=1)
        if k < 2:
            draws[m] = mean_b
            continue
        t = _seed_stream(seed, m).standard_t(k - 1, size=n_resamples)
        draws[m] = mean_b + x.std(axis=1, ddof=1) / math.sqrt(k) * t
    observed = {m: float(np.mean([scores[m][s] for s in seeds[m]])) for m in methods}
    return Resampled(observed, draws, test, n_resamples)


def bootstrap_p(res: Resampled, a: str, b: str) -> float:
    """Two-sided p of "the seed-means of ``a`` and ``b`` differ": the share of resamples whose difference
    does not favour the observed winner, doubled, with the +1 correction (p is never 0), capped at 1.
    Resamples where either side's metric is undefined are dropped."""
    d = res.draws[a] - res.draws[b]
    d = d[np.isfinite(d)]
    obs = res.observed[a] - res.observed[b]
    if obs == 0 or d.size == 0:
        return 1.0
    wins = int((d <= 0).sum() if obs > 0 else (d >= 0).sum())
    return min(1.0, 2.0 * (wins + 1) / (d.size + 1))


def tost_p(res: Resampled, a: str, b: str, margin: float) -> float:
    """Equivalence (two one-sided tests) of ``a`` and ``b`` within +-``margin`` points: p is the larger of
    the bootstrap shares at or beyond -margin and at or beyond +margin; p < alpha claims |a - b| < margin
    (the 1 - 2 alpha percentile interval lies inside the margin). Not "not separated": a noisy cell
    fails both this test and the difference test."""
    d = res.draws[a] - res.draws[b]
    d = d[np.isfinite(d)]
    if d.size == 0:
        return 1.0
    lo = (int((d <= -margin).sum()) + 1) / (d.size + 1)
    hi = (int((d >= margin).sum()) + 1) / (d.size + 1)
    return min(1.0, max(lo, hi))


def holm(pvalues: Mapping[str, float]) -> dict[str, float]:
    """Holm's step-down adjusted p-values (family-wise error over the given comparisons). Written here:
    five lines, and statsmodels (which has it) is not a dependency."""
    order = sorted(pvalues, key=lambda k: (pvalues[k], k))
    out, running, n = {}, 0.0, len(order)
    for i, k in enumerate(order):
        running = max(running, min(1.0, (n - i) * pvalues[k]))
        out[k] = running
    return out


# ---- a column of any table: its best, the tie group, each cell against its reference row --------------
# One function for every table that compares cells (a study's column, ``benchbench table``,
# ``significance``), so the same cells get the same marks whichever command prints them.
TIE_P = 0.05  # the family-wise level of the tie groups and of the equivalence (≈) claims
SCREEN = 2_000  # resamples of the first pass: a p-value far from every Holm threshold is settled there
NO_TEST = "-"  # a column no test can decide (no cell, or one seed and no per-item scores)


class ColumnCell(Protocol):
    """What a column's statistics read from a cell (``aggregate.Cell`` is one): seed -> score, seed ->
    verified per-item scores, and why an items file could not be used."""

    scores: Mapping[Any, float]
    items: Mapping[Any, Mapping[str, Any]]
    damaged: Sequence[str]


@dataclass
class StartTest:
    """One cell against its reference row (a study's start)."""

    diff: float  # seed-mean minus the reference's
    p: float  # two-sided difference, Holm-adjusted over the column's compared cells
    p_tost: float  # equivalence within the margin, Holm-adjusted
    equivalent: bool  # ≈: p_tost < TIE_P (TOST alone decides)
    reference: str = ""  # the row it was tested against (its own step-0 row, or the study's start)

    @property
    def verdict(self) -> str:
        if self.equivalent:
            return "≈"
        if self.p < TIE_P:
            return "↑" if self.diff > 0 else "↓"
        return "?"


@dataclass
class Column:
    task: str
    best: str | None
    tied: set[str]  # cells sharing the best's rank (the best included); empty: no rank claim (no test, or
    # fewer than two ranked cells)
    test: str  # HIERARCHICAL | SEEDS_ONLY | NO_TEST
    p: dict[str, float]  # cell -> Holm-adjusted p against the best
    p_raw: dict[str, float] = field(default_factory=dict)
    start: dict[str, StartTest] = field(default_factory=dict)  # cell -> its test against its reference row
    why: str = ""  # why the seeds test decided, or why none could
    n_ranked: int = 0  # ranked cells with a score: a rank claim needs two
    resamples: int = 0  # resamples of the pass every p-value first came from (0: no bootstrap ran)
    refined: list[str] = field(default_factory=list)  # cells whose p-values were redrawn at ``refined_resamples``
    refined_resamples: int = 0


def column_test(cells: Mapping[str, ColumnCell]) -> tuple[str, str]:
    """(test, why): the hierarchical bootstrap when every seed of every cell has verified items; seeds
    alone otherwise (why names the damaged file or the cells without items); no test when seeds alone
    must decide and a cell has a single seed (its seed spread is unknown: any gap would look certain)."""
    damaged = [d for c in cells.values() for d in c.damaged]
    lacking = [m for m, c in cells.items() if c.scores and not set(c.items) >= set(c.scores)]
    if damaged:
        why = f"damaged per-item scores: {damaged[0]}" + (f" (+{len(damaged) - 1} more)" if len(damaged) > 1 else "")
    elif lacking:
        why = "no per-item scores stored" + ("" if len(lacking) == len(cells) else f" for {', '.join(lacking)}")
    else:
        return HIERARCHICAL, ""
    return _seeds_alone(cells, why)


def _seeds_alone(cells: Mapping[str, ColumnCell], why: str) -> tuple[str, str]:
    """Seeds alone decide, unless a cell has one seed: then nothing can (its seed spread is unknown)."""
    single = [m for m, c in cells.items() if len(c.scores) == 1]
    if single:
        who = "every row has one seed" if len(single) == len(cells) else f"one seed only: {', '.join(single)}"
        return NO_TEST, f"{why}; {who}, so no test can separate the rows"
    return SEEDS_ONLY, why


def _pvalues(
    res: Resampled,
    best: str,
    refs: Mapping[str, str],
    margin: float,
    methods: Sequence[str],
    ranked: Collection[str] | None = None,
) -> dict[str, tuple]:
    """method -> (p against the best, p against its reference row, TOST p against it), unadjusted;
    no p against the best for a row outside ``ranked`` (a context row: a step-0 or random-init row)."""
    out = {}
    for m in methods:
        tie = bootstrap_p(res, best, m) if m != best and (ranked is None or m in ranked) else None
        ref = refs.get(m)
        diff = bootstrap_p(res, m, ref) if ref in res.observed else None
        tost = tost_p(res, m, ref, margin) if ref in res.observed else None
        out[m] = (tie, diff, tost)
    return out


def _unsettled(ps: Mapping[str, tuple], n: int) -> set[str]:
    """Methods with a p-value that the first pass cannot place: drawn at least once on the other side
    (p above its floor 2/(n+1)) and below 3 x alpha (Holm's thresholds lie in [alpha/k, alpha])."""
    floor = 2.0 / (n + 1) + 1e-12
    return {m for m, trio in ps.items() if any(p is not None and floor < p < 3 * TIE_P for p in trio)}


def _references(start: str | Mapping[str, str], present: Collection[str]) -> dict[str, str]:
    """cell -> the row it is read against: one start for every cell, or each cell's own (a mapping, e.g.
    its step-0 row); only pairs whose both rows have a cell."""
    pairs = dict.fromkeys(present, start) if isinstance(start, str) else dict(start)
    return {m: r for m, r in pairs.items() if m in present and r in present and m != r}


def column_stats(
    task: str,
    cells: Mapping[str, ColumnCell],
    start: str | Mapping[str, str] = "",
    margin: float = 1.0,
    n_resamples: int = 10_000,
    seed: int = 0,
    context: Mapping[str, str] | None = None,
    ranked: Collection[str] | None = None,
) -> Column:
    """The column's best (highest mean among ``ranked``, default every row; a context row never is), its
    tie group (Holm over the comparisons with the best; none with fewer than two ranked cells: one row
    ranks against nothing) and each cell's test against its reference row: ``start`` (one row for all)
    or a mapping row -> its own reference (a method -> its step-0 row). ``context``: rows tested against
    a reference as a second Holm family, never ranked. Sequential Monte Carlo to keep a column
    affordable: every p-value first from ``SCREEN`` resamples; the rows with a p-value near a threshold
    (:func:`_unsettled`), the best and their reference rows are then resampled ``n_resamples`` times on
    the same item draws; their p-values replace the first. The column records both counts and which
    rows were redrawn, so a legend can state them (:func:`resamples_text`)."""
    present = {m: c for m, c in cells.items() if c.scores}
    rank = [m for m in present if ranked is None or m in ranked]
    if not rank:
        return Column(task, None, set(), NO_TEST, {})
    test, why = column_test(present)

    def boot(methods: Collection[str], n: int) -> Resampled:
        items = {m: present[m].items for m in methods} if test == HIERARCHICAL else None
        return hierarchical_bootstrap({m: present[m].scores for m in methods}, items, n, seed)

    if test == HIERARCHICAL:
        try:
            first = boot(present, min(SCREEN, n_resamples))
        except ConfigError as e:  # the cells' items do not pair (another task version): said, never silent
            test, why = _seeds_alone(present, f"the cells' per-item scores do not pair ({str(e).splitlines()[0]})")
    if test == NO_TEST:
        best = max(rank, key=lambda m: mean_std(present[m].scores)[0])
        return Column(task, best, set(), NO_TEST, {}, why=why, n_ranked=len(rank))
    if test == SEEDS_ONLY:
        first = boot(present, min(SCREEN, n_resamples))
    best = max(rank, key=lambda m: first.observed[m])
    refs = _references(start, present)
    ctx_refs = {m: r for m, r in _references(context or {}, present).items() if m not in refs}
    both = {**refs, **ctx_refs}
    ps = _pvalues(first, best, both, margin, list(present), rank)
    again = _unsettled(ps, first.n_resamples) if n_resamples > first.n_resamples else set()
    if again:
        keep = again | {best} | {both[m] for m in again if m in both}
        ps.update(_pvalues(boot(keep, n_resamples), best, both, margin, sorted(again), rank))
    raw = {m: t[0] for m, t in ps.items() if t[0] is not None}
    adj = holm(raw)
    tied = {best} | {m for m, p in adj.items() if p >= TIE_P} if len(rank) >= 2 else set()
    col = Column(task, best, tied, test, adj, raw, why=why, n_ranked=len(rank), resamples=first.n_resamples)
    if again:
        col.refined, col.refined_resamples = sorted(again), n_resamples
    for family in (refs, ctx_refs):
        col.start.update(_against_references(first, ps, family))
    return col


def _against_references(first: Resampled, ps: Mapping[str, tuple], family: Mapping[str, str]) -> dict[str, StartTest]:
    """One Holm family of rows against their references: ≈ from TOST alone. No veto for seeds that all
    lie on one side of the reference: a shift inside the margin is what the margin allows (bit-identical
    seeds can average one ulp apart), and a shift beyond it already fails TOST."""
    p_diff = holm({m: ps[m][1] for m in family})
    p_tost = holm({m: ps[m][2] for m in family})
    return {
        m: StartTest(first.observed[m] - first.observed[ref], p_diff[m], p_tost[m], p_tost[m] < TIE_P, ref)
        for m, ref in family.items()
    }


def resamples_text(columns: Iterable[Column]) -> str:
    """The resample counts the columns' p-values actually came from, e.g. "2,000 resamples, rising to
    10,000 for the p-values near a threshold (stsb: a, b)": a legend that names only the full count
    would overstate the precision of most p-values."""
    cols = [c for c in columns if c.resamples]
    if not cols:
        return "no resamples (no column could be tested)"
    first = " or ".join(f"{n:,}" for n in sorted({c.resamples for c in cols}))
    refined = [c for c in cols if c.refined]
    if not refined:
        return f"{first} resamples (no p-value lay near a threshold, so none was redrawn)"
    full = " or ".join(f"{n:,}" for n in sorted({c.refined_resamples for c in refined}))
    where = "; ".join(
        f"{c.task}: {', '.join(c.refined) if len(c.refined) <= 4 else f'{len(c.refined)} rows'}" for c in refined
    )
    return f"{first} resamples, rising to {full} for the p-values near a threshold ({where})"


def seed_level_text() -> str:
    """How the seed level of :func:`hierarchical_bootstrap` varies a seed-mean (every legend says it so)."""
    return (
        "on each item draw, each row's seed-mean varies by its seed std / sqrt(k) times a Student t with k-1 "
        "degrees of freedom (k = its seeds; one seed: the items alone)"
    )


def tie_legend(columns: Mapping[str, Column], n_resamples: int, seed: int, rank_mark: str = "¹") -> list[str]:
    """The tie test, stated under a table: what the rank mark means and which test decided each column
    (or why none could; columns decided alike named together), with the p-values against each column's best.
    The resample counts are the ones the columns used (:func:`resamples_text`); ``n_resamples`` is the
    requested count, said only when no column ran a bootstrap."""
    by_test: dict[tuple[str, str], list[str]] = {}
    for t, c in columns.items():
        by_test.setdefault((c.test, c.why), []).append(t)
    used = (
        resamples_text(columns.values())
        if any(c.resamples for c in columns.values())
        else f"{n_resamples:,} resamples requested, none run"
    )
    lone = [t for t, c in columns.items() if c.best and c.n_ranked < 2]
    notes = [
        f"{rank_mark} rank 1: the column's best and every row whose two-sided difference from it has a "
        f"Holm-adjusted p ≥ {TIE_P} over the column's comparisons; no {rank_mark} in a column with fewer than "
        "two rows" + (f" ({', '.join(lone)})" if lone else "") + ". Test: a hierarchical bootstrap "
        f"({used}, bootstrap seed {seed}; benchbench.report.stats, the studies' test): each "
        "resample draws the task's items (stratified by subset, one draw shared by every row and seed) and, "
        f"{seed_level_text()}.",
        "Test per column: "
        + "; ".join(f"{test}{f' ({why})' if why else ''}: {', '.join(ts)}" for (test, why), ts in by_test.items())
        + f" ({HIERARCHICAL} = seeds x items; {SEEDS_ONLY} = seeds alone, when a cell has no verified per-item "
        f"scores (`benchbench run --store-items`); {NO_TEST} = no test could decide, no {rank_mark} in that column).",
    ]
    p_lines = [
        f"{t} (best {c.best}): " + ", ".join(f"{m} {p:.3g}" for m, p in sorted(c.p.items(), key=lambda kv: kv[1]))
        for t, c in columns.items()
        if c.best and c.p
    ]
    if p_lines:
        notes.append(f"p against the column's best (Holm-adjusted): {'; '.join(p_lines)}.")
    return notes
