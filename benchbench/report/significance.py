"""``benchbench significance``: is a method's win over named rivals on one task real?

From the stored records alone: mean ± std over seeds, the dagger (the method beats every rival in
every shared seed), a paired test across seeds (t-test or Wilcoxon), and, where the records were
stored with ``--store-items``, a paired bootstrap over the task's items for each shared seed
(``benchbench.report.stats.paired_bootstrap_items``); then the studies' test from the same library
(hierarchical bootstrap over seeds and items, Holm over the rivals, ≈ only from TOST within a margin).
The tests are named under the table.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from benchbench.core.errors import ConfigError, DataError


def select(
    records: list[dict[str, Any]],
    task: str,
    methods: list[str],
    setup: str = "unsupervised",
    split: str = "test",
    configs: dict[str, str] | None = None,
    model: str | None = None,
) -> dict[str, dict[int, dict[str, Any]]]:
    """method -> seed -> record, one configuration per method (``configs`` names it when a method
    has several for this task)."""
    configs = configs or {}
    found: dict[str, dict[str, dict[int, dict[str, Any]]]] = defaultdict(lambda: defaultdict(dict))
    for r in records:
        if r.get("task") != task or r.get("setup") != setup or r.get("method") not in methods:
            continue
        if model and r.get("model") != model:
            continue
        sp = (r.get("splits") or {}).get(split)
        if not sp or sp.get("main_score") is None:
            continue
        found[r["method"]][r["config_hash"]][int(r["seed"])] = r
    out = {}
    for m in methods:
        by_cfg = found.get(m, {})
        if m in configs:
            pick = [h for h in by_cfg if h.startswith(configs[m])]
        else:
            pick = list(by_cfg)
        if not pick:
            raise DataError(
                f"No {split!r} records of method {m!r} on task {task!r} (setup {setup!r})"
                + (f" with config {configs[m]!r}" if m in configs else "")
                + ". Run it first, or check --results/--setup/--split."
            )
        if len(pick) > 1:
            raise ConfigError(
                f"Method {m!r} has {len(pick)} configurations on {task!r}: "
                + ", ".join(f"{h} ({len(by_cfg[h])} seeds)" for h in sorted(pick))
                + f". Name one with --config {m}=HASH."
            )
        out[m] = by_cfg[pick[0]]
    return out


def report(
    chosen: dict[str, dict[int, dict[str, Any]]],
    method: str,
    rivals: list[str],
    root: str | Path,
    split: str = "test",
    test: str = "ttest",
    resamples: int = 2000,
    margin: float = 1.0,
) -> str:
    from benchbench.report.stats import TEST_NAMES, dagger, format_mean_std, paired_bootstrap_items, paired_test
    from benchbench.store.results import DamagedItems, record_items

    def scores(m: str) -> dict[int, float]:
        return {s: float(r["splits"][split]["main_score"]) for s, r in chosen[m].items()}

    lines = ["| method | config | seeds | main score (mean ± std) |", "|---|---|---|---|"]
    for m in [method, *rivals]:
        cfg = next(iter(chosen[m].values()))["config_hash"]
        lines.append(f"| {m} | {cfg} | {','.join(map(str, sorted(chosen[m])))} | {format_mean_std(scores(m))} |")
    mine = scores(method)
    rival_scores = {r: scores(r) for r in rivals}
    mark = "†" if dagger(mine, rival_scores) else "no"
    lines += [
        "",
        f"Dagger (beats {', '.join(rivals)} in every shared seed, >= 2 seeds): {mark}",
        "",
        f"| {method} vs | shared seeds | mean diff | {test} p | paired bootstrap per seed: diff (p) |",
        "|---|---|---|---|---|",
    ]
    for r in rivals:
        shared = sorted(set(mine) & set(rival_scores[r]))
        try:
            t = paired_test(mine, rival_scores[r], test)
            tp, diff = f"{t.p_value:.3g}", f"{t.mean_diff:+.2f}"
        except ConfigError as e:
            tp, diff = f"n/a ({e})", "n/a"
        boots = []
        for s in shared:
            try:
                b = paired_bootstrap_items(
                    record_items(chosen[method][s], root, split),
                    record_items(chosen[r][s], root, split),
                    n_resamples=resamples,
                    seed=s,
                )
                dropped = f", {b.dropped} undefined resamples dropped" if b.dropped else ""
                boots.append(f"seed {s}: {b.mean_diff:+.2f} (p {b.p_value:.3g}{dropped})")
            except DamagedItems as e:  # named in full: a damaged file must not pass as a missing test
                boots.append(f"seed {s}: n/a (damaged per-item file {e.path}: recompute it with --store-items)")
            except (DataError, ConfigError) as e:
                boots.append(f"seed {s}: n/a ({str(e).splitlines()[0][:80]})")
        lines.append(f"| {r} | {','.join(map(str, shared))} | {diff} | {tp} | {'; '.join(boots)} |")
    lines += hierarchical_lines(chosen, method, rivals, root, split, margin=margin)
    lines += [
        "",
        f"Seed test: {TEST_NAMES[test]}. Item test: {TEST_NAMES['bootstrap']}, {resamples} resamples, "
        "on the per-item scores stored with `--store-items`.",
    ]
    return "\n".join(lines) + "\n"


def hierarchical_lines(
    chosen: dict[str, dict[int, dict[str, Any]]],
    method: str,
    rivals: list[str],
    root: str | Path,
    split: str = "test",
    resamples: int = 10_000,
    margin: float = 1.0,
) -> list[str]:
    """The studies' test for ``method`` against each rival (``stats``, the one library of studies, `table`
    and this command): the hierarchical bootstrap over seeds and items (seeds alone where a record has no
    verified items, the file named; none where seeds alone must decide and a side has one seed), the
    difference p and the equivalence (TOST within ±``margin``) p, each Holm-adjusted over the rivals."""
    from benchbench.report import stats
    from benchbench.report.aggregate import Cell
    from benchbench.store.results import record_items

    names = [method, *rivals]
    cells = {m: Cell({s: float(r["splits"][split]["main_score"]) for s, r in chosen[m].items()}) for m in names}
    for m in names:
        for s, r in chosen[m].items():
            if not (r.get("items") or {}).get(split):
                continue
            try:
                cells[m].items[s] = record_items(r, root, split)
            except DataError as e:  # named, never a silent switch of test
                cells[m].damaged.append(str(e).splitlines()[0])
    test, why = stats.column_test(cells)
    head = f"Hierarchical bootstrap ({resamples} resamples, seed 0; benchbench.report.stats, the studies' test"
    if test == stats.NO_TEST:
        return ["", f"{head}): no test could decide: {why}."]
    items = {m: c.items for m, c in cells.items()} if test == stats.HIERARCHICAL else None
    res = stats.hierarchical_bootstrap({m: c.scores for m, c in cells.items()}, items, resamples, 0)
    adj = stats.holm({r: stats.bootstrap_p(res, method, r) for r in rivals})
    eq = stats.holm({r: stats.tost_p(res, method, r, margin) for r in rivals})
    out = [
        "",
        f"| {method} vs | diff of seed means | hierarchical bootstrap p | Holm-adjusted p | TOST ±{margin:g} p (Holm) |",
        "|---|---|---|---|---|",
    ]
    for r in rivals:
        mark = " ≈" if eq[r] < stats.TIE_P else ""  # TOST alone decides
        raw = stats.bootstrap_p(res, method, r)
        out.append(
            f"| {r} | {res.observed[method] - res.observed[r]:+.2f} | {raw:.3g} | {adj[r]:.3g} | {eq[r]:.3g}{mark} |"
        )
    level = (
        f"{stats.HIERARCHICAL}: the task's items drawn with replacement, one draw shared by every run; "
        + stats.seed_level_text()
        if test == stats.HIERARCHICAL
        else f"{stats.SEEDS_ONLY}: seeds resampled alone, {why}"
    )
    return out + [
        "",
        f"{head}; {level}), Holm's correction over the {len(rivals)} rival(s). ≈: equivalent within ±{margin:g} "
        f"points (two one-sided tests, Holm-adjusted p < {stats.TIE_P}; TOST alone decides: seeds all on one side "
        "of the rival's mean within the margin are equivalent); no ≈ does not mean different.",
    ]
