"""The figures of the report's "How much remains" section, in :mod:`.plots`' style:

* truth-ratio histograms of the minimal-set facts before unlearning, after it (each method's
  first-forgotten point) and under the retain model (TOFU Figure 4);
* forget quality (log scale) vs model utility along each method's grid (TOFU's trade-off plot);
* PrivLeak per method with bootstrap 95 % intervals over targets (MUSE);
* the target's exposure along the grid, in-distribution vs canary targets (Baluta et al.).

Each function returns None (and writes nothing) when the points carry none of what it draws: a
histogram needs ``measures["forget_truth_ratios"]``, the trade-off plot needs forget quality
(which needs a retain model), and so on.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ...unlearn.methods import catalog
from ..grids import param_label
from ..jobs import safe_name
from ..metrics import group_trajectories, value_of
from .measures_tables import bootstrap_ci, is_canary, measures_of, stop_points, value
from .plots import group_ticks, label_rows, load_pyplot, method_color, panel_grid, save, wrap_title


def _ratios(points: Sequence[Any]) -> list[float]:
    out: list[float] = []
    for p in points:
        m = measures_of(p)
        vals = m.get("forget_truth_ratios") if m is not None else None
        if isinstance(vals, list):
            out += [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)
                    and math.isfinite(v) and v > 0]
    return out


def _of(points: Sequence[Any], model: str, method: str) -> list[Any]:
    return [p for p in points if value_of(p, "model") == model and value_of(p, "method") == method]


def _finish_panel(ax, title: str, xlabel: str) -> None:
    """A method's panel: its title, the x axis' name, the legend and a light grid."""
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.legend(frameon=False, fontsize=8)
    ax.grid(alpha=0.25)


def plot_truth_ratios(points: Sequence[Any], path: Path, methods: Sequence[str], model: str) -> Path | None:
    """TOFU Figure 4: histograms of log10 truth ratio over U* facts, one panel per method."""
    stops = stop_points(points)
    before, retain = _ratios(_of(points, model, "original")), _ratios(_of(points, model, "retrain"))
    after = {m: _ratios([p for (mo, me, _t), p in stops.items() if mo == model and me == m]) for m in methods}
    everything = before + retain + [v for a in after.values() for v in a]
    if not everything:
        return None
    plt = load_pyplot()
    bins = np.histogram_bin_edges(np.log10(everything), bins=20)
    fig, axes = panel_grid(plt, len(methods), 3.4, 3.0, sharey=True)
    for ax, method in zip(axes, methods or [""]):
        if before:
            ax.hist(np.log10(before), bins=bins, color="#999999", alpha=0.55, label="before")
        if after.get(method):
            ax.hist(np.log10(after[method]), bins=bins, color=method_color(method, methods), alpha=0.6,
                    label=f"after {catalog.title(method)}")
        if retain:
            ax.hist(np.log10(retain), bins=bins, histtype="step", color="black", lw=1.4, label="retain model")
        _finish_panel(ax, catalog.title(method) if method else model, "log10 truth ratio (U* facts)")
    label_rows(axes, "facts")
    return save(fig, path, f"{model}: truth ratios of the minimal sets (after = first point that forgets the target)")


def plot_fq_mu(rows: Sequence[Mapping[str, Any]], path: Path, methods: Sequence[str], model: str) -> Path | None:
    """TOFU's trade-off: forget quality (log) vs model utility per grid point (measures_table rows)."""
    rows = [r for r in rows if r["model"] == model and r.get("forget_quality") is not None
            and r.get("model_utility") is not None]
    if not rows:
        return None
    plt = load_pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 4.4), layout="constrained")
    floor = 1e-300  # a KS p-value that underflowed to 0 still shows, at the bottom
    for method in methods:
        rs = [r for r in rows if r["method"] == method]
        if not rs:
            continue
        xs, ys = [r["model_utility"] for r in rs], [max(r["forget_quality"], floor) for r in rs]
        ax.plot(xs, ys, "-o", color=method_color(method, methods), label=catalog.title(method), ms=5)
        for r, x, y in zip(rs, xs, ys):
            ax.annotate(param_label(r["param"]), (x, y), textcoords="offset points", xytext=(4, 3), fontsize=7,
                        color=method_color(method, methods))
    for method, marker, label in (("original", "s", "before (original)"), ("retrain", "*", "retain model")):
        for r in rows:
            if r["method"] == method:
                ax.plot([r["model_utility"]], [max(r["forget_quality"], floor)], marker, color="black", ms=9,
                        label=label)
    ys_all = [y for line in ax.get_lines() for y in line.get_ydata()]
    if ys_all and min(ys_all) == max(ys_all):  # one value: give the log axis a decade each side
        ax.set_ylim(ys_all[0] / 10, ys_all[0] * 10)
    ax.set_yscale("log")
    ax.axhline(0.05, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("model utility (retain facts, harmonic mean)")
    ax.set_ylabel("forget quality (KS p-value, log)")
    ax.set_title(wrap_title(f"{model}: forget quality vs model utility (mean over targets)", 6.0, 11))
    ax.legend(frameon=False, fontsize=8)
    ax.grid(alpha=0.25)
    return save(fig, path)


def plot_privleak(points: Sequence[Any], path: Path, methods: Sequence[str], model: str) -> Path | None:
    """MUSE's PrivLeak per method at its first-forgotten points (and before unlearning), bars
    with bootstrap 95 % intervals over targets."""
    stops = stop_points(points)
    groups = [("before", [value(p, "privleak") for p in _of(points, model, "original")], "#999999")]
    groups += [(catalog.title(m), [value(p, "privleak") for (mo, me, _t), p in stops.items() if mo == model and me == m],
                method_color(m, methods)) for m in methods]
    groups = [(name, [v for v in vals if v is not None], c) for name, vals, c in groups]
    groups = [g for g in groups if g[1]]
    if not groups:
        return None
    plt = load_pyplot()
    fig_w = min(15.0, max(4.5, 1.1 * len(groups) + 2))
    fig, ax = plt.subplots(figsize=(fig_w, 3.8), layout="constrained")
    for i, (name, vals, color) in enumerate(groups):
        mean = float(np.mean(vals))
        lo, hi = bootstrap_ci(vals)
        err = None if lo is None else [[max(0.0, mean - lo)], [max(0.0, hi - mean)]]
        ax.bar([i], [mean], 0.7, yerr=err, capsize=4, color=color, error_kw={"lw": 1, "ecolor": "#333333"})
        tip = (hi if mean >= 0 else lo) if lo is not None else mean   # the label clears the interval
        ax.text(i + 0.12, tip, f"{mean:+.2f}", ha="left", va="bottom" if mean >= 0 else "top", fontsize=8)
    ax.axhline(0, color="black", lw=0.8)
    group_ticks(ax, [g[0] for g in groups], fig_w - 1.0)
    ax.set_ylabel("PrivLeak (AUC − AUC_retrain) / AUC_retrain")
    ax.set_title(wrap_title(f"{model}: PrivLeak (0 = like the retain model)", fig_w, 11))
    ax.grid(axis="y", alpha=0.25)
    return save(fig, path)


def plot_exposure(points: Sequence[Any], path: Path, methods: Sequence[str], model: str) -> Path | None:
    """The target's exposure along each method's grid (position 0: before unlearning), mean over
    in-distribution targets and over canary targets."""
    canary = is_canary(points)
    before: dict[bool, list[float]] = defaultdict(list)
    for p in _of(points, model, "original"):
        v = value(p, "target.exposure")
        if v is not None:
            before[canary.get((model, int(value_of(p, "target"))), False)].append(v)
    series: dict[str, dict[bool, dict[Any, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for (mo, me, t), traj in group_trajectories(points).items():
        if mo != model or me not in methods:
            continue
        for p in traj:
            v = value(p, "target.exposure")
            if v is not None:
                series[me][canary.get((mo, t), False)][value_of(p, "param")].append(v)
    if not series and not before:
        return None
    plt = load_pyplot()
    shown = [m for m in methods if m in series] or list(methods[:1]) or [""]
    fig, axes = panel_grid(plt, len(shown), 3.4, 3.0, sharey=True)
    for ax, method in zip(axes, shown):
        params = sorted({p for g in series.get(method, {}).values() for p in g}, key=float)
        for is_c, style, label in ((False, "-o", "in-distribution"), (True, "--s", "canary")):
            g = series.get(method, {}).get(is_c, {})
            xs = ([0] if before.get(is_c) else []) + [i + 1 for i, p in enumerate(params) if p in g]
            ys = ([float(np.mean(before[is_c]))] if before.get(is_c) else []) + [
                float(np.mean(g[p])) for p in params if p in g]
            if xs:
                ax.plot(xs, ys, style, color=method_color(method, methods) if method else "#333333", ms=4, label=label,
                        alpha=1.0 if not is_c else 0.8)
        ax.set_xticks(range(len(params) + 1))
        ax.set_xticklabels(["before"] + [param_label(p) for p in params], rotation=45, fontsize=8)
        _finish_panel(ax, catalog.title(method) if method else model, "grid value")
    label_rows(axes, "exposure of the target (bits)")
    return save(fig, path, f"{model}: exposure along the trajectory, in-distribution vs canary targets")


def plot_measures(points: Sequence[Any], rows: Sequence[Mapping[str, Any]], out: Path, methods: Sequence[str],
                  models: Sequence[str]) -> dict[str, Path]:
    """Every figure above for every model, into ``out``: ``{name: path}`` of those written."""
    figs: dict[str, Path] = {}
    for model in models:
        safe = safe_name(model)
        for name, draw in (("truth_ratios", lambda p: plot_truth_ratios(points, p, methods, model)),
                           ("fq_mu", lambda p: plot_fq_mu(rows, p, methods, model)),
                           ("privleak", lambda p: plot_privleak(points, p, methods, model)),
                           ("exposure", lambda p: plot_exposure(points, p, methods, model))):
            got = draw(out / f"{name}_{safe}.png")
            if got is not None:
                figs[f"{name}_{model}"] = got
    return figs
