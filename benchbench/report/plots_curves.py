"""One study column's curves as a matplotlib Figure: each method's dev curve and its training loss as
a fraction of its chance level, the lines "did not learn" is read from (``benchbench.report.learning``).

Names are data: a ``$`` in a method or task name would start matplotlib's mathtext (``$\\oops$``
raises on render), so every name passes through :func:`plot_text` and the texts are made with mathtext
on, whatever the caller's rcParams, so that escape means what it says."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from benchbench.report.escaping import escape_bidi
from benchbench.report.learning import curve_points, dev_curve_of


def plot_text(name: object) -> str:
    """``name`` as literal matplotlib text under mathtext: each ``$`` escaped (``\\$``, matplotlib's
    literal dollar), so no pair of them opens a formula. A backslash needs nothing: outside a formula
    matplotlib draws it as it is, and escaping it would draw two. Bidi controls shown as their codes."""
    return escape_bidi(name).replace("$", r"\$")


def _mean_curve(curves: Sequence[list[tuple[float, float]]]) -> list[tuple[float, float]]:
    """The mean over seeds at the steps every seed has (seeds scored at the same steps agree)."""
    common = set.intersection(*({s for s, _ in c} for c in curves)) if curves else set()
    return [(s, sum(dict(c)[s] for c in curves) / len(curves)) for s in sorted(common)]


def _loss_ratio(record: Mapping[str, Any]) -> list[tuple[float, float]]:
    train = record.get("train") or {}
    chance = train.get("loss_chance")
    if not isinstance(chance, int | float) or isinstance(chance, bool) or not chance > 0:
        return []
    return [(s, v / float(chance)) for s, v in curve_points(train.get("loss_curve"))]


def curves_figure(
    records_by_method: Mapping[str, Sequence[Mapping[str, Any]]],
    column: str,
    *,
    dev_key: str | None = None,
    verdicts: Mapping[str, str] | None = None,
) -> Any:
    """A Figure of two panels for ``column`` (a task): per method, its seeds' dev curves (thin) and
    their mean (thick), and its loss / chance (1.0 = the loss of an encoder that tells nothing apart).
    ``verdicts``: method -> verdict word, appended to its legend entry. A method with no curve is named
    in the figure's footnote, never dropped silently."""
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context({"text.parse_math": True, "svg.hashsalt": "benchbench", "svg.fonttype": "none"}):
        fig = Figure(figsize=(10.0, 4.0))
        dev_ax, loss_ax = fig.subplots(1, 2)
        missing_dev, missing_loss = [], []
        for i, (method, records) in enumerate(sorted(records_by_method.items())):
            color = f"C{i % 10}"
            label = plot_text(method) + (f" ({plot_text(verdicts[method])})" if verdicts and method in verdicts else "")
            _draw(dev_ax, [dev_curve_of(r, dev_key) for r in records], color, label, missing_dev, method)
            _draw(loss_ax, [_loss_ratio(r) for r in records], color, label, missing_loss, method)
        loss_ax.axhline(1.0, color="black", linestyle="--", linewidth=1, label="chance")
        dev_ax.set(xlabel="training step", ylabel=plot_text(dev_key or "dev score"))
        loss_ax.set(xlabel="training step", ylabel="training loss / chance")
        dev_ax.set_title(plot_text(f"{column}: dev curve"))
        loss_ax.set_title(plot_text(f"{column}: loss against chance"))
        for ax in (dev_ax, loss_ax):
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=6, loc="best")
        notes = [
            f"no {what}: {', '.join(plot_text(m) for m in ms)}"
            for what, ms in (("dev curve", missing_dev), ("loss/chance", missing_loss))
            if ms
        ]
        if notes:
            fig.text(0.01, 0.01, "; ".join(notes), fontsize=6)
        fig.tight_layout(rect=(0, 0.04 if notes else 0, 1, 1))
    return fig


def _draw(ax: Any, curves: list[list[tuple[float, float]]], color: str, label: str, missing: list, method: str):
    curves = [c for c in curves if c]
    if not curves:
        missing.append(method)
        return
    for c in curves:
        ax.plot([s for s, _ in c], [v for _, v in c], color=color, linewidth=0.6, alpha=0.4)
    mean = _mean_curve(curves)
    if mean:
        ax.plot([s for s, _ in mean], [v for _, v in mean], color=color, linewidth=2, marker="o", label=label)
