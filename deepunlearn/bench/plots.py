"""The figures of a sweep's report (matplotlib, Agg): accuracy-recall curves averaged per
hyper-parameter (paper Figure 4), the two headline metrics with standard-deviation error bars
(Figure 3), Acc@Superficial (Figure 5), accuracy per relation group (Figure 6: family vs biography
in the family domain), a per-relation
breakdown of the headline metrics, and every target's own trajectory."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..unlearn.methods import catalog
from .grids import param_label as _param_label
from .metrics import mean_curve

def _get(p: Any, key: str) -> Any:
    return p[key] if isinstance(p, Mapping) else getattr(p, key)


#: Stable colours per method: the catalogue's (the paper's four have one); any other name, e.g.
#: ``graddiff``, ``du_loop`` or a batch label ``ga@b5``, takes the next colour of :data:`_CYCLE` in
#: the order of ``methods``.
_CYCLE = ["#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31",
          "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354"]
_LABELS = {"acc_at_recall_0.8": "Acc@Recall≥0.8", "recall_at_acc_0.8": "Recall@Acc≥0.8", "auc": "AUC",
           "acc_at_superficial": "Acc@Superficial"}


def _color(method: str, methods: Sequence[str]) -> str:
    if catalog.colour(method):
        return catalog.colour(method)
    others = [m for m in methods if not catalog.colour(m)]
    return _CYCLE[others.index(method) % len(_CYCLE)] if method in others else "#333333"


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "axes.spines.top": False,
                         "axes.spines.right": False, "savefig.dpi": 130})
    return plt


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


def _nan(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


# ---------------------------------------------------------------------------------------------
# Figures


def plot_curves(points: Sequence[Any], path: Path, methods: Sequence[str], threshold: float = 0.8,
                models: Sequence[str] | None = None) -> Path:
    """Figure 4: per model, each method's accuracy-recall points averaged over targets, one per
    hyper-parameter value, joined in grid order and labelled with the value."""
    plt = _plt()
    curves = mean_curve(points)
    models = [m for m in (models or curves) if m in curves]
    n = len(models)
    cols = min(n, 2)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.6 * cols, 4.8 * rows), squeeze=False)
    for ax, model in zip(axes.flat, models):
        ax.axvspan(threshold, 1.02, ymin=(threshold + 0.02) / 1.04, color="#2ca02c", alpha=0.08, lw=0)
        ax.axvline(threshold, color="grey", lw=0.8, ls="--")
        ax.axhline(threshold, color="grey", lw=0.8, ls="--")
        ax.text(1.0, 1.0, "goal: both ≥ %g" % threshold, ha="right", va="top", fontsize=8, color="#2ca02c")
        for k, method in enumerate(methods):
            c = curves[model].get(method)
            if not c:
                continue
            color = _color(method, methods)
            xs, ys = [p["recall"] for p in c], [p["accuracy"] for p in c]
            ax.plot(xs, ys, "-o", color=color, label=catalog.title(method), ms=5, lw=1.6)
            # one label per cluster of (nearly) coincident points, each method to its own side
            dx, dy = _LABEL_OFFSETS[k % len(_LABEL_OFFSETS)]
            for group in _clusters(c):
                text = _param_label(group[0]["param"])
                if len(group) > 1:
                    text += "–" + _param_label(group[-1]["param"])
                ax.annotate(text, (group[0]["recall"], group[0]["accuracy"]), textcoords="offset points",
                            xytext=(dx, dy), fontsize=7, color=color, ha="left" if dx >= 0 else "right",
                            va="bottom" if dy >= 0 else "top")
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("recall (deep unlearning)")
        ax.set_ylabel("accuracy (other facts kept)")
        ax.set_title(f"{model}: accuracy vs recall (mean over targets)")
        ax.legend(loc="lower left", frameon=False)
        ax.grid(alpha=0.25)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _bars(ax, summary: Mapping, models: Sequence[str], methods: Sequence[str], key: str, title: str,
          err: str | None = "_std") -> None:
    width = 0.8 / max(1, len(methods))
    for j, method in enumerate(methods):
        xs, ys, es = [], [], []
        for i, model in enumerate(models):
            s = summary.get(model, {}).get(method)
            if not s or _nan(s.get(key)):
                continue
            xs.append(i + (j - (len(methods) - 1) / 2) * width)
            ys.append(s[key])
            e = s.get(key + err) if err else None
            es.append(0.0 if _nan(e) else e)
        if not xs:
            continue
        # std bars are clipped to the metric's range [0, 1]
        yerr = [[min(e, y) for y, e in zip(ys, es)], [min(e, 1.0 - y) for y, e in zip(ys, es)]] if err else None
        ax.bar(xs, ys, width * 0.92, yerr=yerr, capsize=3, color=_color(method, methods),
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


def _legend_below(fig, methods: Sequence[str]) -> None:
    from matplotlib.patches import Patch

    handles = [Patch(color=_color(m, methods), label=catalog.title(m)) for m in methods]
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.legend(handles=handles, loc="lower center", ncol=max(1, len(methods)), frameon=False)


def _bar_panels(summary: Mapping, path: Path, methods: Sequence[str], panels: Sequence[tuple[str, str]],
                sharey: bool = False) -> Path:
    """One figure of bar panels side by side, one per (metric key, title), with the same axes
    label and the methods' legend below."""
    plt = _plt()
    models = list(summary)
    n = len(panels)
    width = max(7.5, (2.4 * len(models) + 1) * n) if n > 1 else max(5.0, 2.4 * len(models) + 1.5)
    fig, axes = plt.subplots(1, n, figsize=(width, 4.2 if n > 1 else 4.0), sharey=sharey, squeeze=False)
    for ax, (key, title) in zip(axes[0], panels):
        _bars(ax, summary, models, methods, key, title)
    axes[0][0].set_ylabel("mean over targets ± std (clipped to [0, 1])")
    _legend_below(fig, methods)
    fig.savefig(path)
    plt.close(fig)
    return path


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
    """Heatmaps (method x target relation) of the two headline metrics, one row per model."""
    plt = _plt()
    import numpy as np

    t = f"{threshold:g}"
    models = list(by_rel)
    keys = [(f"acc_at_recall_{t}", f"Acc@Recall≥{t}"), (f"recall_at_acc_{t}", f"Recall@Acc≥{t}")]
    width = max(9.0, 2 * (0.62 * len(relations) + 1.2))
    height = len(models) * (0.42 * len(methods) + 1.6) + 0.3
    fig, axes = plt.subplots(len(models), 2, squeeze=False, figsize=(width, height), layout="constrained")
    im = None
    for r, model in enumerate(models):
        for c, (key, label) in enumerate(keys):
            ax = axes[r][c]
            grid = np.full((len(methods), len(relations)), np.nan)
            for i, m in enumerate(methods):
                for j, rel in enumerate(relations):
                    s = by_rel[model].get(m, {}).get(rel)
                    if s is not None and not _nan(s.get(key)):
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
            ax.set_xticklabels(relations, rotation=45, ha="right")
            ax.set_title(f"{model}: {label} by target relation")
            ax.spines[:].set_visible(False)
    if im is not None:
        fig.colorbar(im, ax=axes, shrink=0.9, pad=0.01, aspect=30)
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_trajectories(points: Sequence[Any], path: Path, methods: Sequence[str], model: str,
                      threshold: float = 0.8) -> Path:
    """Every target's own trajectory, one panel per method (the spread behind the means)."""
    plt = _plt()
    from .metrics import group_trajectories

    groups = group_trajectories(p for p in points if _get(p, "model") == model)
    n = len(methods)
    cols = max(1, min(n, 6))  # many methods (ten and more) wrap onto more rows
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.3 * cols, 3.4 * rows), squeeze=False, sharey=True)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    for ax, method in zip(axes.flat, methods):
        for (mo, me, _t), traj in groups.items():
            if me != method:
                continue
            xs = [0.0] + [float(_get(p, "recall")) for p in traj]
            ys = [1.0] + [float(_get(p, "accuracy")) for p in traj]
            ax.plot(xs, ys, "-", color=_color(method, methods), alpha=0.35, lw=1)
            ax.plot(xs[1:], ys[1:], "o", color=_color(method, methods), alpha=0.5, ms=2.5)
        ax.axvline(threshold, color="grey", lw=0.8, ls="--")
        ax.axhline(threshold, color="grey", lw=0.8, ls="--")
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"{catalog.title(method)}")
        ax.set_xlabel("recall")
        ax.grid(alpha=0.25)
    for row in axes:
        row[0].set_ylabel("accuracy")
    fig.suptitle(f"{model}: each target's trajectory (from the unlearning start at (0, 1))", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
