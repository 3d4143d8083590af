"""The site's plots: matplotlib SVGs (quality vs training cost, learning and loss curves, size curves,
POS bars, seed spread), deterministic (fixed hash salt, no date).

Names in plots are data: every ``$`` in a method or task name is escaped (``_t``), so it is a dollar
sign, never a formula matplotlib would parse (``$\\oops$`` stopped every build), and bidi controls are
shown as their codes (``escaping.escape_bidi``)."""

from __future__ import annotations

import io
from collections import defaultdict
from typing import Any

from benchbench.report import aggregate
from benchbench.report.aggregate import Row
from benchbench.report.escaping import escape_bidi
from benchbench.report.site.tables import COST_FIELDS, SPLIT, Table, anchor
from benchbench.store.files import slug


def _t(text: str) -> str:
    """A name as plot text: every ``$`` escaped (matplotlib reads text with two unescaped dollars as
    mathtext; an escaped one is shown as ``$``), bidi controls shown as codes. Per text, not the global
    ``text.parse_math`` switch: the log axes' tick labels are mathtext (``10^{1}``)."""
    return escape_bidi(text).replace("$", r"\$")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams.update(
        {
            "svg.hashsalt": "benchbench",
            "svg.fonttype": "none",
            "font.family": "DejaVu Sans",
            "figure.figsize": (6.4, 4.0),
            "path.simplify": False,
        }
    )
    return plt


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "benchbench"}, bbox_inches=None)
    _plt().close(fig)
    return buf.getvalue()


def make_plots(tables: list[Table], rows: list[Row]) -> dict[str, tuple[str, str]]:
    """name -> (title, SVG text). Only plots that have data are made."""
    plt = _plt()
    plots: dict[str, tuple[str, str]] = {}
    for make in (_compute_plots, _curve_plots, _size_plots, _pos_plot, _spread_plot):
        make(plt, tables, rows, plots)
    return plots


def _compute_plots(plt: Any, tables: list[Table], rows: list[Row], plots: dict[str, tuple[str, str]]) -> None:
    """Quality vs training compute, per suite: x = mean training seconds (or FLOPs), y = suite average."""
    for field, xlabel in COST_FIELDS:
        for t in tables:
            pts = [  # rows with an average only (a complete row: aggregate.suite_average)
                (row.cost(field), vals[len(t.tasks) + 2], row.label)
                for row, _, vals in t.rows
                if row.cost(field) is not None and vals[len(t.tasks) + 2] is not None
            ]
            if not pts:
                continue
            fig, ax = plt.subplots()
            for x, y, lab in pts:
                ax.scatter([x], [y], label=_t(lab[:40]))
            ax.set_xscale("log")
            ax.set_xlabel(xlabel + " (log)")
            ax.set_ylabel(_t(f"{t.name} avg (x100)"))
            ax.set_title(_t(f"{t.name}: quality vs training {xlabel}"))
            ax.legend(fontsize=6, loc="best")
            plots[slug(f"compute-{field.split('.')[1]}-{anchor(t.name)}")] = (
                f"{t.name}: quality vs {xlabel}",
                _svg(fig),
            )


def _curve_plots(plt: Any, tables: list[Table], rows: list[Row], plots: dict[str, tuple[str, str]]) -> None:
    """Learning curves from ``train.monitor``, and the training loss curves."""
    curves: dict[str, list[tuple[str, list[tuple[float, float]]]]] = defaultdict(list)
    losses: list[tuple[str, list[tuple[float, float]]]] = []
    seen_loss: set[str] = set()
    for row in rows:
        for r in sorted(row.records, key=lambda r: (r["task"], r.get("seed", 0))):
            mon = aggregate.field(r, "train.monitor") or []
            series: dict[str, list[tuple[float, float]]] = defaultdict(list)
            for item in mon:
                if isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[1], dict):
                    for k, v in sorted(item[1].items()):
                        if aggregate.num(v) is not None and aggregate.num(item[0]) is not None:
                            series[k].append((float(item[0]), float(v)))
            for k, s in sorted(series.items()):
                curves[f"{r['task']} {k}"].append((f"{row.label} seed {r.get('seed')}", s))
            lc = aggregate.field(r, "train.loss_curve") or []
            key = f"{row.label}|{row.model}|{r.get('seed')}"
            if lc and key not in seen_loss and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in lc):
                seen_loss.add(key)
                losses.append((f"{row.label} seed {r.get('seed')}", [(float(a), float(b)) for a, b in lc]))
    for name, series_list in sorted(curves.items()):
        fig, ax = plt.subplots()
        for lab, s in series_list:
            ax.plot([p[0] for p in s], [p[1] for p in s], marker="o", label=_t(lab[:40]))
        ax.set_xlabel("training step")
        ax.set_ylabel(_t(name))
        ax.set_title(_t(f"learning curve: {name}"))
        ax.legend(fontsize=6)
        plots[slug(f"learning-{name}")] = (f"learning curve: {name}", _svg(fig))
    if losses:
        fig, ax = plt.subplots()
        for lab, s in losses:
            ax.plot([p[0] for p in s], [p[1] for p in s], label=_t(lab[:40]))
        ax.set_xlabel("training step")
        ax.set_ylabel("training loss")
        ax.set_title("training loss curves")
        ax.legend(fontsize=6)
        plots["loss-curves"] = ("training loss curves", _svg(fig))


def _size_plots(plt: Any, tables: list[Table], rows: list[Row], plots: dict[str, tuple[str, str]]) -> None:
    """Corpus-size and labelled-size curves: one task, one method, varying size."""
    for field, title in (("train.corpus_sentences", "corpus size (sentences)"), ("train.labelled", "labelled size")):
        by: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
        for row in rows:
            for r in row.records:
                x, y = (
                    aggregate.num(aggregate.field(r, field)),
                    aggregate.num((r["splits"].get(SPLIT) or {}).get("main_score")),
                )
                if x is not None and y is not None:
                    by[(row.method, r["task"])].append((x, y))
        by = {k: sorted(set(v)) for k, v in by.items() if len({p[0] for p in v}) > 1}
        if by:
            fig, ax = plt.subplots()
            for (m, task), pts in sorted(by.items()):
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=_t(f"{m} {task}"[:40]))
            ax.set_xscale("log")
            ax.set_xlabel(title)
            ax.set_ylabel("score (x100)")
            ax.set_title(f"score vs {title}")
            ax.legend(fontsize=6)
            plots[slug(f"size-{anchor(title)}")] = (f"score vs {title}", _svg(fig))


def _pos_plot(plt: Any, tables: list[Table], rows: list[Row], plots: dict[str, tuple[str, str]]) -> None:
    """POS bars: records whose scores carry ``pos_*`` entries (e.g. an ablation by part of speech)."""
    pos = [
        (
            row.label,
            r["task"],
            {
                k[4:]: v
                for k, v in sorted((r["splits"].get(SPLIT) or {}).get("scores", {}).items())
                if k.startswith("pos_") and aggregate.num(v) is not None
            },
        )
        for row in rows
        for r in row.records
    ]
    pos = [p for p in pos if p[2]]
    if pos:
        fig, ax = plt.subplots()
        cats = sorted({c for _, _, d in pos for c in d})
        w = 0.8 / len(pos)
        for i, (lab, task, d) in enumerate(pos):
            ax.bar(
                [j + i * w for j in range(len(cats))], [d.get(c, 0) for c in cats], w, label=_t(f"{lab} {task}"[:40])
            )
        ax.set_xticks(range(len(cats)), [_t(c) for c in cats])
        ax.set_title("scores by part of speech")
        ax.legend(fontsize=6)
        plots["pos-bars"] = ("scores by part of speech", _svg(fig))


def _spread_plot(plt: Any, tables: list[Table], rows: list[Row], plots: dict[str, tuple[str, str]]) -> None:
    """Seed spread: every seed's score per (row, task) with more than one seed."""
    spread = [
        (f"{row.label} {t}", row.scores(t))
        for row in rows
        for t in sorted({r["task"] for r in row.records})
        if len(row.scores(t)) > 1
    ]
    if spread:
        fig, ax = plt.subplots(figsize=(6.4, max(2.0, 0.3 * len(spread) + 1)))
        for i, (_, vals) in enumerate(spread):
            ax.scatter(vals, [i] * len(vals))
        ax.set_yticks(range(len(spread)), [_t(s[0][:40]) for s in spread], fontsize=6)
        ax.set_xlabel("score (x100)")
        ax.set_title("seed spread")
        fig.tight_layout()
        plots["seed-spread"] = ("seed spread", _svg(fig))


def study_curve_plot(study: str, column: str) -> tuple[str, str]:
    """(file name, title) of a study's curve figure for ``column``: the site's page and its plots agree."""
    return (
        f"study-{slug(anchor(study))}-{slug(anchor(column))}",
        f"{study}: learning curves of the rows trained for {column}",
    )


def study_curve_plots(sections: list[Any]) -> dict[str, tuple[str, str]]:
    """name -> (title, SVG) of each study's learning curves (``report.plots_curves.curves_figure``): one
    figure per column that stands for a training corpus (``StudyView.curves``), each trained row's dev
    curve and loss / chance with its learning verdict in the legend."""
    from benchbench.report.plots_curves import curves_figure

    _plt()
    out: dict[str, tuple[str, str]] = {}
    for sec in sections:
        v = getattr(sec, "view", None)
        if v is None:
            continue
        for column, recs in v.curves.items():
            words = {}
            for m in recs:
                got = {x["verdict"] for x in v.learning.get(m, {}).values()}
                words[m] = got.pop() if len(got) == 1 else "verdicts differ by column"
            fig = curves_figure(recs, column, verdicts=words)
            name, title = study_curve_plot(v.study.name, column)
            out[name] = (title, _svg(fig))
    return out


def study_endpoint_plot(study: str) -> tuple[str, str]:
    """(file name, title) of a core study's primary-endpoint figure."""
    return f"study-{slug(anchor(study))}-primary", f"{study}: the primary endpoint, each row against its own step 0"


def study_endpoint_plots(sections: list[Any]) -> dict[str, tuple[str, str]]:
    """name -> (title, SVG) of each core study's primary-endpoint figure: per trained row, its step-0 mean
    (open) and its trained mean (filled) joined by an arrow, the trained end with the 95% t-interval of the
    change paired by seed (``study_view.paired_interval``), and the start's own training-free readout as a
    dashed line: both readings of every row in one picture."""
    import math

    from benchbench.report.study_view import paired_interval
    from benchbench.run.study import STUDY_ROW_TRAINED, step0_row

    plt = _plt()
    out: dict[str, tuple[str, str]] = {}
    for sec in sections:
        v = getattr(sec, "view", None)
        if v is None or v.extended or not v.study.primary:
            continue
        st, task = v.study, v.study.primary["task"]
        scores = v.seed_scores.get(task, {})
        rows = [r.name for r in st.rows() if r.kind == STUDY_ROW_TRAINED and scores.get(r.name)]
        if not rows:
            continue
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for i, m in enumerate(rows):
            trained, ref = scores[m], scores.get(step0_row(m)) or scores.get(st.start, {})
            t_mean = sum(trained.values()) / len(trained)
            diff, half, _ = paired_interval(trained, ref)
            r_mean = t_mean - diff if ref else t_mean
            ax.annotate("", (i, t_mean), (i, r_mean), arrowprops={"arrowstyle": "->", "color": "0.4"})
            ax.scatter([i], [r_mean], facecolors="white", edgecolors="C0", zorder=3, label="step 0" if i == 0 else None)
            ax.errorbar(
                [i],
                [t_mean],
                yerr=None if math.isnan(half) else [[half], [half]],
                fmt="o",
                color="C0",
                capsize=4,
                zorder=4,
                label="trained (95% t-interval of the change)" if i == 0 else None,
            )
        base = scores.get(st.start, {})
        if base:
            ax.axhline(
                sum(base.values()) / len(base),
                color="C3",
                linestyle="--",
                linewidth=1,
                label=_t(f"start's readout ({st.start})"),
            )
        ax.set_xticks(range(len(rows)), [_t(m) for m in rows], rotation=20, fontsize=8)
        ax.set_ylabel(_t(f"{task} {st.primary['split']} {st.primary['statistic']} (x100)"))
        name, title = study_endpoint_plot(st.name)
        ax.set_title(_t(f"{st.name}: {task}, each row against its own step 0"), fontsize=9)
        ax.legend(fontsize=7, loc="best")
        fig.tight_layout()
        out[name] = (title, _svg(fig))
    return out
