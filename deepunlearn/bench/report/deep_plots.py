"""The deep-unlearning figures of a report: Success-DU bars per method
(``success_du.png``), accuracy / recall / deep share against batch size (``batch.png``) and
against the number of sequential requests served (``sequential.png``). Any method name works
(colours come from :func:`.plots.method_color`, which never raises on an unknown name)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...unlearn.summary import SUCCESS_THRESHOLDS
from ...unlearn.methods import catalog
from .plots import bar_value, bar_x, group_ticks, is_missing, legend_below, load_pyplot, method_color, save, wrap_title

#: hatching of the Success-DU bars, one per threshold
_HATCH = ("", "//")


def plot_success_du(summary: Mapping[str, Mapping[str, Mapping[str, float]]], path: Path,
                    methods: Sequence[str]) -> Path:
    """One panel per model: per method, bars of Success-DU@0.8 (plain) and @0.9 (hatched), the
    fraction of targets deeply unlearned at that accuracy."""
    plt = load_pyplot()
    from matplotlib.patches import Patch

    models = list(summary) or ["(none)"]
    n_th = len(SUCCESS_THRESHOLDS)
    width = 0.8 / n_th
    fig_w = min(15.0, max(6.0, 0.75 * len(methods) + 2))
    fig, axes = plt.subplots(len(models), 1, figsize=(fig_w, 3.4 * len(models) + 0.5), squeeze=False,
                             layout="constrained")
    for ax, model in zip(axes[:, 0], models):
        per = summary.get(model, {})
        shown = [m for m in methods if m in per]
        for i, m in enumerate(shown):
            for j, a in enumerate(SUCCESS_THRESHOLDS):
                y = per[m].get(f"success_du_{a:g}")
                if is_missing(y):
                    continue
                x = bar_x(i, j, n_th, width)
                ax.bar(x, y, width * 0.92, color=method_color(m, methods), hatch=_HATCH[j % len(_HATCH)], edgecolor="white")
                bar_value(ax, x, y)
        group_ticks(ax, [catalog.title(m) for m in shown], fig_w - 1.0)
        ax.set_ylim(0, 1.08)
        ax.axhline(0.9, color="grey", lw=0.8, ls="--")
        ax.set_ylabel("share of targets")
        ax.set_title(wrap_title(f"{model}: Success-DU, the share of targets deeply unlearned at accuracy ≥ a", fig_w, 11))
        ax.grid(axis="y", alpha=0.25)
    # the thresholds' legend, once for every panel: the bar's hatching says which a it counts
    legend_below(fig, [Patch(facecolor="#8c8c8c", edgecolor="white", hatch=_HATCH[j % len(_HATCH)],
                              label=f"a = {a:g}") for j, a in enumerate(SUCCESS_THRESHOLDS)])
    return save(fig, path)


def _lines(ax, rows: Sequence[Mapping[str, Any]], x: str, y: str, group: str, methods: Sequence[str],
           style: str = "-o", label_suffix: str = "") -> None:
    """One line per ``group`` value (several models: "model: method") of ``y`` against ``x``."""
    models = {r["model"] for r in rows}
    keys = list(dict.fromkeys((r["model"], r[group]) for r in rows))
    for model, g in keys:
        pts = sorted((r[x], r[y]) for r in rows if r["model"] == model and r[group] == g and not is_missing(r[y]))
        if not pts:
            continue
        xs, ys = zip(*pts)
        name = (f"{model}: " if len(models) > 1 else "") + catalog.title(g) + label_suffix
        ax.plot(xs, ys, style, color=method_color(g, methods), label=name, ms=5, lw=1.6)


def _two_panels(rows: Sequence[Mapping[str, Any]], x: str, recall: str, deep: str):
    """A figure of two panels against ``x``, one line per base method: accuracy on the left;
    ``recall`` and, dashed, the ``deep`` share on the right. Returns the figure and its two axes."""
    plt = load_pyplot()
    methods = list(dict.fromkeys(r["base_method"] for r in rows))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10.5, 4.0), layout="constrained")
    _lines(a1, rows, x, "accuracy", "base_method", methods)
    _lines(a2, rows, x, recall, "base_method", methods, label_suffix=" recall")
    _lines(a2, rows, x, deep, "base_method", methods, style="--s", label_suffix=" deep share")
    return fig, a1, a2


def _finish(fig, axes, path: Path, title: str) -> Path:
    for ax in axes:
        ax.set_ylim(-0.02, 1.05)
        ax.grid(alpha=0.25)
        if ax.get_legend_handles_labels()[0]:  # every request skipped: nothing was drawn to name
            ax.legend(frameon=False, fontsize=7)
    return save(fig, path, title)


def plot_batch(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Two panels against the batch size (log2 axis): mean accuracy at each batch's last grid
    point, and mean recall with the share of deep targets (dashed), one line per base method."""
    fig, a1, a2 = _two_panels(rows, "batch_size", "recall", "deep")
    sizes = sorted({int(r["batch_size"]) for r in rows})
    for ax, label in ((a1, "accuracy (other facts kept)"), (a2, "recall / share of targets deep")):
        if len(sizes) > 1 or sizes[0] > 1:
            ax.set_xscale("log", base=2)
        ax.set_xticks(sizes)
        ax.set_xticklabels([str(s) for s in sizes])
        ax.set_xlabel("batch size (targets forgotten together)")
        ax.set_ylabel(label)
    return _finish(fig, (a1, a2), path, "Batch requests: last grid point of each batch, mean over its targets")


def plot_sequential(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Two panels against the number of requests served: accuracy after each request, and mean
    recall with the share still deep (dashed) over every target served so far."""
    fig, a1, a2 = _two_panels(rows, "requests", "mean_recall_earlier", "deep_earlier")
    top = max([int(r["requests"]) for r in rows] + [1])
    for ax, label in ((a1, "accuracy after the request"), (a2, "over the targets served so far")):
        ax.set_xlim(0.5, top + 0.5)
        ax.set_xticks(range(1, top + 1, max(1, math.ceil(top / 12))))
        ax.set_xlabel("requests served")
        ax.set_ylabel(label)
    return _finish(fig, (a1, a2), path, "Sequential requests (weights not restored between requests)")
