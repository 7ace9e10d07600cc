"""The figures of a sweep's report (matplotlib, Agg): accuracy-recall curves averaged per
hyper-parameter (paper Figure 4), the two headline metrics with standard-deviation error bars
(Figure 3), Acc@Superficial (Figure 5), accuracy per relation group (Figure 6: family vs biography
in the family domain), a per-relation
breakdown of the headline metrics, and every target's own trajectory."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...unlearn.methods import catalog
from ..grids import param_label as _param_label
from ..metrics import group_trajectories, mean_curve, value_of
from .plots import bar_x, is_missing, label_rows, legend_below, load_pyplot, method_color, panel_grid, save, wrap_title

#: where each method's parameter labels go, in points from the marker (so methods sharing a
#: region of the plot do not print on top of each other)
_LABEL_OFFSETS = ((4, 4), (4, -4), (-4, 4), (-4, -4))


def _clusters(curve: Sequence[Mapping[str, Any]], tol: float = 0.02) -> list[list[Mapping[str, Any]]]:
    """Consecutive points of a curve closer than ``tol`` (in recall and accuracy) to the first of
    their group, so "1e5–1e8" labels three points that lie on top of each other."""
    groups: list[list[Mapping[str, Any]]] = []
    for p in curve:
        g = groups[-1] if groups else None
        if g and abs(p["recall"] - g[0]["recall"]) < tol and abs(p["accuracy"] - g[0]["accuracy"]) < tol:
            g.append(p)
        else:
            groups.append([p])
    return groups


# ---------------------------------------------------------------------------------------------
# Figures


def plot_curves(points: Sequence[Any], path: Path, methods: Sequence[str], threshold: float = 0.8,
                models: Sequence[str] | None = None) -> Path:
    """Figure 4: per model, each method's accuracy-recall points averaged over targets, one per
    hyper-parameter value, joined in grid order and labelled with the value."""
    plt = load_pyplot()
    from matplotlib.lines import Line2D

    curves = mean_curve(points)
    models = [m for m in (models or curves) if m in curves]
    n = len(models)
    cols = min(n, 2)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.6 * cols, 4.8 * rows), squeeze=False, layout="constrained")
    drawn: list[str] = []
    for ax, model in zip(axes.flat, models):
        ax.axvspan(threshold, 1.02, ymin=(threshold + 0.02) / 1.04, color="#2ca02c", alpha=0.08, lw=0)
        ax.axvline(threshold, color="grey", lw=0.8, ls="--")
        ax.axhline(threshold, color="grey", lw=0.8, ls="--")
        ax.text(1.0, 1.0, "goal: both ≥ %g" % threshold, ha="right", va="top", fontsize=8, color="#2ca02c")
        for k, method in enumerate(methods):
            c = curves[model].get(method)
            if not c:
                continue
            drawn += [] if method in drawn else [method]
            color = method_color(method, methods)
            xs, ys = [p["recall"] for p in c], [p["accuracy"] for p in c]
            ax.plot(xs, ys, "-o", color=color, ms=5, lw=1.6)
            # one label per cluster of (nearly) coincident points, each method to its own side
            dx, dy = _LABEL_OFFSETS[k % len(_LABEL_OFFSETS)]
            for group in _clusters(c):
                text = _param_label(group[0]["param"])
                if len(group) > 1:
                    text += "–" + _param_label(group[-1]["param"])
                ax.annotate(text, (group[0]["recall"], group[0]["accuracy"]), textcoords="offset points",
                            xytext=(dx, dy), fontsize=7, color=color, ha="left" if dx >= 0 else "right",
                            va="bottom" if dy >= 0 else "top", annotation_clip=True)
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("recall (deep unlearning)")
        ax.set_ylabel("accuracy (other facts kept)")
        ax.set_title(wrap_title(f"{model}: accuracy vs recall (mean over targets)", 5.6, 11))
        ax.grid(alpha=0.25)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    # one legend for every panel, under them: inside a panel it would hide the curves' start
    legend_below(fig, [Line2D([], [], color=method_color(m, methods), marker="o", ms=5, lw=1.6, label=catalog.title(m))
                        for m in drawn])
    return save(fig, path)


def _bars(ax, summary: Mapping, models: Sequence[str], methods: Sequence[str], key: str, title: str,
          err: str | None = "_std") -> None:
    width = 0.8 / max(1, len(methods))
    for j, method in enumerate(methods):
        xs, ys, es = [], [], []
        for i, model in enumerate(models):
            s = summary.get(model, {}).get(method)
            if not s or is_missing(s.get(key)):
                continue
            xs.append(bar_x(i, j, len(methods), width))
            ys.append(s[key])
            e = s.get(key + err) if err else None
            es.append(0.0 if is_missing(e) else e)
        if not xs:
            continue
        # std bars are clipped to the metric's range [0, 1]
        yerr = [[min(e, y) for y, e in zip(ys, es)], [min(e, 1.0 - y) for y, e in zip(ys, es)]] if err else None
        ax.bar(xs, ys, width * 0.92, yerr=yerr, capsize=3, color=method_color(method, methods),
               label=catalog.title(method), error_kw={"lw": 1, "ecolor": "#333333"})
        for x, y in zip(xs, ys):
            inside = y >= 0.15
            ax.text(x, y - 0.015 if inside else y + 0.015, f"{y:.2f}", ha="center", va="top" if inside else "bottom",
                    fontsize=7.5, color="white" if inside else "#222222",
                    bbox=None if inside else {"facecolor": "white", "edgecolor": "none", "pad": 0.6, "alpha": 0.9},
                    zorder=5)
    ax.set_xticks(range(len(models)))
    ax.set_xticklabels(models)
    ax.set_ylim(0, 1.05)
    ax.axhline(0.8, color="grey", lw=0.8, ls="--")
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.25)


def _bar_panels(summary: Mapping, path: Path, methods: Sequence[str], panels: Sequence[tuple[str, str]],
                sharey: bool = False) -> Path:
    """One figure of bar panels side by side, one per (metric key, title), with the same axes
    label and the methods' legend below. A panel widens with the bars it holds (up to a
    readable image; then the bars narrow)."""
    plt = load_pyplot()
    from matplotlib.patches import Patch

    models = list(summary)
    n = len(panels)
    group = max(2.4, 0.32 * len(methods))                      # inches per model's group of bars
    panel = min(15.0 / n, group * len(models) + (1.0 if n > 1 else 1.5))
    width = max(7.5 if n > 1 else 5.0, panel * n)
    fig, axes = plt.subplots(1, n, figsize=(width, 4.2 if n > 1 else 4.0), sharey=sharey, squeeze=False,
                             layout="constrained")
    for ax, (key, title) in zip(axes[0], panels):
        _bars(ax, summary, models, methods, key, wrap_title(title, width / n, 11))
    axes[0][0].set_ylabel("mean over targets ± std (clipped to [0, 1])")
    legend_below(fig, [Patch(color=method_color(m, methods), label=catalog.title(m)) for m in methods])
    return save(fig, path)


def plot_headline(summary: Mapping, path: Path, methods: Sequence[str], threshold: float = 0.8) -> Path:
    """Figure 3: Acc@Recall>=t and Recall@Acc>=t per model and method, error bars = std over targets."""
    t = f"{threshold:g}"
    return _bar_panels(summary, path, methods, [(f"acc_at_recall_{t}", f"Acc@Recall≥{t} (↑)"),
                                                (f"recall_at_acc_{t}", f"Recall@Acc≥{t} (↑)")])


def plot_superficial(summary: Mapping, path: Path, methods: Sequence[str]) -> Path:
    """Figure 5: the best accuracy among points where the target itself is forgotten."""
    return _bar_panels(summary, path, methods, [("acc_at_superficial", "Acc@Superficial unlearning (↑)")])


def plot_groups(summary: Mapping, path: Path, methods: Sequence[str], threshold: float = 0.8,
                groups: Sequence[str] = ("family", "biography")) -> Path:
    """Figure 6: Acc@Recall>=t measured on each relation group's facts, one panel per group
    (family facts and biography facts in the family domain)."""
    t = f"{threshold:g}"
    return _bar_panels(summary, path, methods, [(f"acc_at_recall_{t}_{g}", f"Acc@Recall≥{t}: {g} facts")
                                                for g in groups], sharey=True)


def plot_by_relation(by_rel: Mapping, path: Path, methods: Sequence[str], relations: Sequence[str],
                     threshold: float = 0.8) -> Path:
    """Heatmaps (method x target relation) of the two headline metrics, one row per model; the
    two side by side, or one above the other when a KB has too many relations for that."""
    plt = load_pyplot()
    import numpy as np

    t = f"{threshold:g}"
    models = list(by_rel)
    keys = [(f"acc_at_recall_{t}", f"Acc@Recall≥{t}"), (f"recall_at_acc_{t}", f"Recall@Acc≥{t}")]
    panel = 0.62 * len(relations) + 1.6
    stacked = 2 * panel > 15.0
    cell = 0.42 if len(methods) <= 8 else 0.32
    width = min(15.0, panel) if stacked else max(9.0, 2 * panel)
    rows = len(models) * (2 if stacked else 1)
    height = rows * (cell * len(methods) + 1.6) + 0.3
    fig, axes = plt.subplots(rows, 1 if stacked else 2, squeeze=False, figsize=(width, height), layout="constrained")
    # narrow columns (many relations) take their names upright, so neighbours never touch
    rotation = 90 if (width - 1.6) / (1 if stacked else 2) / max(1, len(relations)) < 0.55 else 45
    im = None
    for r, model in enumerate(models):
        for c, (key, label) in enumerate(keys):
            ax = axes[2 * r + c][0] if stacked else axes[r][c]
            grid = np.full((len(methods), len(relations)), np.nan)
            for i, m in enumerate(methods):
                for j, rel in enumerate(relations):
                    s = by_rel[model].get(m, {}).get(rel)
                    if s is not None and not is_missing(s.get(key)):
                        grid[i, j] = s[key]
            im = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto")
            for i in range(len(methods)):
                for j in range(len(relations)):
                    if not np.isnan(grid[i, j]):
                        ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=7,
                                color="white" if grid[i, j] < 0.6 else "black")
            ax.set_yticks(range(len(methods)))
            ax.set_yticklabels([catalog.title(m) for m in methods])
            ax.set_xticks(range(len(relations)))
            ax.set_xticklabels(relations, rotation=rotation, ha="right" if rotation == 45 else "center")
            ax.set_title(wrap_title(f"{model}: {label} by target relation", width if stacked else width / 2, 11))
            ax.spines[:].set_visible(False)
    if im is not None:
        fig.colorbar(im, ax=axes, shrink=0.9, pad=0.01, aspect=30)
    return save(fig, path)


def plot_trajectories(points: Sequence[Any], path: Path, methods: Sequence[str], model: str,
                      threshold: float = 0.8) -> Path:
    """Every target's own trajectory, one panel per method (the spread behind the means)."""
    plt = load_pyplot()
    groups = group_trajectories(p for p in points if value_of(p, "model") == model)
    fig, axes = panel_grid(plt, len(methods), 2.9, 2.7, sharey=True)
    for ax, method in zip(axes, methods):
        for (mo, me, _t), traj in groups.items():
            if me != method:
                continue
            xs = [0.0] + [float(value_of(p, "recall")) for p in traj]
            ys = [1.0] + [float(value_of(p, "accuracy")) for p in traj]
            ax.plot(xs, ys, "-", color=method_color(method, methods), alpha=0.35, lw=1)
            ax.plot(xs[1:], ys[1:], "o", color=method_color(method, methods), alpha=0.5, ms=2.5)
        ax.axvline(threshold, color="grey", lw=0.8, ls="--")
        ax.axhline(threshold, color="grey", lw=0.8, ls="--")
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"{catalog.title(method)}")
        ax.set_xlabel("recall")
        ax.grid(alpha=0.25)
    label_rows(axes, "accuracy")
    return save(fig, path, f"{model}: each target's trajectory (from the unlearning start at (0, 1))")
