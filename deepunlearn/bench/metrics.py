"""Metrics over a sweep (paper section 5.1, Table 3, Figures 3 to 6), as plain functions.

A *curve* is one target's trajectory under one method: the (recall, accuracy) points its
hyper-parameter grid gave. Following the reference, every curve gets the two end points
``(recall 0, accuracy 1)`` (do nothing) and ``(recall 1, accuracy 0)`` (forget everything) before
any best-of is taken, so each metric is defined for every target; the metrics are then
averaged over targets.

* **Acc@Recall>=t**: the best accuracy among points with recall >= t (t = 0.8 in the paper).
* **Recall@Acc>=t**: the best recall among points with accuracy >= t.
* **AUC**: the area under the curve's upper envelope ``A(r) = max{acc_i : recall_i >= r}`` for
  r in [0, 1], end points included. ``A`` is the best accuracy a method reaches at recall at
  least r, a non-increasing step function, so AUC is the mean of Acc@Recall>=r over all
  thresholds r: 1 for a method that reaches (1, 1), 0 for one that never loses anything, and
  points under the envelope do not count (unlike a trapezoid through the raw points, it does not
  reward a grid for having more bad points).
* **Acc@Superficial**: the best accuracy among points where the target itself is forgotten
  (paper Figure 5). The end point (1, 0) forgets the target too, so a target the method never
  forgot scores 0; ``superficial_rate`` says for how many targets any grid point forgot it.
* **Per relation group** (``acc_at_recall_{t}_{group}``): Acc@Recall>=t with the accuracy over one
  group's facts only in place of the overall accuracy, for every group of the KB (paper Figure 6:
  family and biography facts, the family domain's groups; a domain names its own). ``groups``
  defaults to the groups the points report (:func:`point_groups`), ``family`` / ``biography`` for
  points written before per-group accuracies.
* **Success-DU@a** (a = 0.8 and 0.9): the fraction of targets with some grid point that
  is *deep* (t not in Omega(K_after, R)) with accuracy >= a; end points never count. Points of old
  stores have no ``deep`` flag: ``recall >= 1 - EPS`` stands in for it. ``deep_rate``: the fraction
  of targets with any deep point. ``seconds``: the mean over targets of each trajectory's wall
  seconds (seconds per target; a batch's seconds are shared by its targets). See
  :mod:`deepunlearn.unlearn.summary` for the per-target definitions.

Baseline rows (:data:`BASELINES`: the model before unlearning and the retain model trained without
the forget set) are stored beside the methods' points but are no unlearning method:
every function here leaves them out, so the paper's metrics are the same with or without them.

Thresholds compare with a 1e-9 tolerance (recall 4/5 counts as >= 0.8). Spreads over targets:
the sample standard deviation (ddof = 1) and the standard error ``std / sqrt(n)``; Acc@R, R@A,
Success-DU and the deep rate also get 95 % bootstrap intervals over targets
(:mod:`deepunlearn.bench.bootstrap`), which the tables print as ``0.45 [0.20, 0.70]``.
"""

from __future__ import annotations

import math
import numbers
from collections import defaultdict
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from .bootstrap import add_intervals as add_bootstrap, format_value, has_interval, interval_note
# The per-curve metrics live in the unlearn layer (``unlearn`` prints them per target without
# importing bench); bench aggregates them over targets.
from ..unlearn.summary import (  # noqa: F401  (re-exported)
    DEFAULT_GROUPS, ENDPOINTS, EPS, SUCCESS_THRESHOLDS, value_of, acc_at_recall, acc_at_superficial, auc, curve_of,
    envelope, field_of, group_accuracy, is_deep, metric_columns, metric_names, point_groups, recall_at_acc, seconds_per_target,
    success_du, target_metrics, with_endpoints,
)

from .intervals import add_intervals as add_accuracy_bounds

Curve = Sequence[tuple[float, float]]

#: Methods of the baseline rows: "original" (the model before unlearning) and "retrain" (the
#: retain model, trained without the target and its minimal set).
BASELINES = ("original", "retrain")


def is_baseline(p: Any) -> bool:
    """Whether a point (object or dict) is a baseline row rather than an unlearning method's.

    >>> is_baseline({"method": "retrain"}), is_baseline({"method": "ga"})
    (True, False)
    """
    return value_of(p, "method") in BASELINES


def method_points(points: Iterable[Any]) -> list[Any]:
    """The unlearning methods' points: ``points`` without the baseline rows."""
    return [p for p in points if not is_baseline(p)]


def spread(values: Sequence[float]) -> dict[str, float]:
    """Mean, sample standard deviation (ddof 1) and standard error over targets, ignoring NaN.

    >>> s = spread([0.2, 0.4, 0.9])
    >>> round(s["mean"], 4), round(s["std"], 4), round(s["sem"], 4), s["n"]
    (0.5, 0.3606, 0.2082, 3)
    >>> spread([0.5])["std"]
    nan
    """
    v = np.asarray([x for x in values if x is not None and not math.isnan(x)], dtype=float)
    n = len(v)
    mean = float(v.mean()) if n else math.nan
    std = float(v.std(ddof=1)) if n > 1 else math.nan
    return {"mean": mean, "std": std, "sem": std / math.sqrt(n) if n > 1 else math.nan, "n": n}


def group_trajectories(points: Iterable[Any]) -> dict[tuple[str, str, int], list[Any]]:
    """Points grouped by ``(model, method, target)``, each list sorted by param; baseline rows
    are left out."""
    groups: dict[tuple[str, str, int], list[Any]] = defaultdict(list)
    for p in method_points(points):
        groups[(value_of(p, "model"), value_of(p, "method"), int(value_of(p, "target")))].append(p)
    for g in groups.values():
        g.sort(key=lambda p: float(value_of(p, "param")))
    return dict(groups)


def per_target(points: Iterable[Any], threshold: float = 0.8, groups: Sequence[str] | None = None
               ) -> dict[tuple[str, str, int], dict[str, float]]:
    """:func:`target_metrics` of every (model, method, target) trajectory, with one
    ``acc_at_recall_{t}_{group}`` per relation group (default: the points' own groups)."""
    points = list(points)
    groups = point_groups(points) if groups is None else list(groups)
    return {k: target_metrics(v, threshold, groups) for k, v in group_trajectories(points).items()}




def _aggregate(rows: Iterable[dict[str, float]], threshold: float, groups: Sequence[str],
               intervals: bool = False, runs: Sequence[tuple[int, int]] | None = None) -> dict[str, float]:
    """Means (and spreads) over ``rows``; ``runs``: each row's (target, seed) when several seeds ran,
    then ``n_targets`` counts targets, ``n_seeds`` seeds, ``n_runs`` rows, and the intervals resample targets."""
    rows = list(rows)
    out: dict[str, float] = {"n_targets": len(rows)}
    if runs is not None:
        out.update(n_targets=len({t for t, _ in runs}), n_seeds=len({s for _, s in runs}), n_runs=len(rows))
    for name, _, metric in metric_columns(threshold, groups):
        s = spread([r[name] for r in rows])
        out[name] = s["mean"]
        if metric.spread:  # a share of targets (the deep rate) is reported without a spread
            out[f"{name}_std"] = s["std"]
            out[f"{name}_sem"] = s["sem"]
    if intervals:  # 95 % bootstrap intervals over targets of the headline metrics (bench.bootstrap)
        add_bootstrap(out, rows, threshold, clusters=None if runs is None else [t for t, _ in runs])
    return out


def point_seeds(points: Iterable[Any]) -> list[int]:
    """The run seeds of ``points`` in ascending order (``[None]`` for points without one).

    >>> point_seeds([{"seed": 2}, {"seed": 0}, {"seed": 2}]), point_seeds([{"method": "ga"}])
    ([0, 2], [None])
    """
    seeds = {field_of(p, "seed") for p in points}
    return sorted(seeds - {None}) if seeds - {None} else [None]


def first_seed(points: Iterable[Any]) -> list[Any]:
    """The points of the first run seed: what per-trajectory sections (curves, trajectories, the
    adversarial and measures sections) show in a sweep of several seeds; all points with one seed."""
    points = list(points)
    first = point_seeds(points)[0]
    return [p for p in points if field_of(p, "seed") == first]


def summarize(points: Iterable[Any], threshold: float = 0.8, groups: Sequence[str] | None = None
              ) -> dict[str, dict[str, dict[str, float]]]:
    """``{model: {method: metrics}}``: each metric averaged over targets with ``_std`` and ``_sem``,
    the headline ones also with a 95 % bootstrap interval over targets (``_ci_lo``, ``_ci_hi``,
    ``_ci_n``; :mod:`deepunlearn.bench.bootstrap`); ``groups``: the relation groups of
    ``acc_at_recall_{t}_{group}`` (default: the points' own,
    e.g. the sweep KB's ``kb.groups``).

    >>> pts = [dict(model="m", method="ga", target=t, param=1, recall=r, accuracy=a, accuracy_family=a,
    ...             accuracy_biography=1.0, target_forgotten=True) for t, r, a in [(0, 0.9, 0.6), (1, 0.5, 0.9)]]
    >>> s = summarize(pts)["m"]["ga"]
    >>> s["acc_at_recall_0.8"], s["recall_at_acc_0.8"], s["n_targets"]   # (0.6 + 0) / 2, (0 + 0.5) / 2
    (0.3, 0.25, 2)
    """
    points = list(points)
    groups = point_groups(points) if groups is None else list(groups)
    seeds = point_seeds(points)
    if len(seeds) > 1:
        return _summarize_seeds(points, seeds, threshold, groups)
    by: dict[tuple[str, str], list[dict[str, float]]] = defaultdict(list)
    for (model, method, _t), m in per_target(points, threshold, groups).items():
        by[(model, method)].append(m)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for (model, method), rows in by.items():
        out.setdefault(model, {})[method] = _aggregate(rows, threshold, groups, intervals=True)
    add_accuracy_bounds(out, group_trajectories(points), threshold)  # sampled accuracy: {metric}_low / _high
    return out


def _summarize_seeds(points: list, seeds: list[int], threshold: float, groups: Sequence[str]
                     ) -> dict[str, dict[str, dict[str, float]]]:
    """:func:`summarize` of a sweep of several run seeds: one row per (target, seed) trajectory, the
    mean over seeds × targets, the 95 % interval resampling targets with all their seeds."""
    by: dict[tuple[str, str], list[tuple[tuple[int, int], dict[str, float]]]] = defaultdict(list)
    trajectories: dict[tuple[str, str, Any], list[Any]] = {}
    for seed in seeds:
        mine = [p for p in points if field_of(p, "seed") == seed]
        for (model, method, t), traj in group_trajectories(mine).items():
            by[(model, method)].append(((t, seed), target_metrics(traj, threshold, groups)))
            trajectories[(model, method, (t, seed))] = traj
    out: dict[str, dict[str, dict[str, float]]] = {}
    for (model, method), runs in by.items():
        runs.sort(key=lambda r: r[0])
        out.setdefault(model, {})[method] = _aggregate([m for _, m in runs], threshold, groups, intervals=True,
                                                       runs=[k for k, _ in runs])
    add_accuracy_bounds(out, trajectories, threshold)
    return out


def summarize_by(points: Iterable[Any], group_of: Callable[[int], str], threshold: float = 0.8,
                 groups: Sequence[str] | None = None) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    """``{model: {method: {group: metrics}}}`` with targets grouped by ``group_of(target)``
    (e.g. the target's relation); ``groups`` as in :func:`summarize`."""
    points = list(points)
    groups = point_groups(points) if groups is None else list(groups)
    by: dict[tuple[str, str, str], list[dict[str, float]]] = defaultdict(list)
    for (model, method, t), m in per_target(points, threshold, groups).items():
        by[(model, method, group_of(t))].append(m)
    out: dict = {}
    for (model, method, g), rows in by.items():
        out.setdefault(model, {}).setdefault(method, {})[g] = _aggregate(rows, threshold, groups)
    return out


def mean_curve(points: Iterable[Any]) -> dict[str, dict[str, list[dict[str, float]]]]:
    """Paper Figure 4: per model and method, one point per hyper-parameter value with recall
    and accuracy averaged over the targets that ran it (baseline rows left out).

    >>> pts = [dict(model="m", method="ga", target=t, param=p, recall=r, accuracy=a)
    ...        for t, p, r, a in [(0, 1, 0.2, 0.9), (1, 1, 0.4, 0.7), (0, 2, 0.6, 0.5)]]
    >>> [(c["param"], round(c["recall"], 3), round(c["accuracy"], 3), c["n"]) for c in mean_curve(pts)["m"]["ga"]]
    [(1, 0.3, 0.8, 2), (2, 0.6, 0.5, 1)]
    """
    acc: dict[tuple[str, str, Any], list[tuple[float, float]]] = defaultdict(list)
    for p in method_points(points):
        acc[(value_of(p, "model"), value_of(p, "method"), value_of(p, "param"))].append(
            (float(value_of(p, "recall")), float(value_of(p, "accuracy"))))
    out: dict = {}
    for (model, method, param), vals in sorted(acc.items(), key=lambda kv: (kv[0][0], kv[0][1], float(kv[0][2]))):
        r, a = zip(*vals)
        out.setdefault(model, {}).setdefault(method, []).append(
            {"param": param, "recall": float(np.mean(r)), "accuracy": float(np.mean(a)), "n": len(vals)})
    return out


# ---------------------------------------------------------------------------------------------
# The paper's Table 3 on the console


def _missing(x: Any) -> bool:
    return not isinstance(x, numbers.Real) or isinstance(x, bool) or not math.isfinite(x)


def _fmt(x: float, spread_: float | None = None) -> str:
    if _missing(x):
        return "-"
    if _missing(spread_):
        return f"{x:.2f}"
    return f"{x:.2f}±{spread_:.2f}"


def format_table(summary: Mapping[str, Mapping[str, Mapping[str, float]]], threshold: float = 0.8,
                 methods: Sequence[str] | None = None, show_spread: bool = False) -> str:
    """Table 3's shape: one row per model, Recall@Acc>=t then Acc@Recall>=t for every method.

    >>> s = {"tiny": {"ga": {"recall_at_acc_0.8": 0.65, "acc_at_recall_0.8": 0.66},
    ...               "tv": {"recall_at_acc_0.8": 0.61, "acc_at_recall_0.8": 0.56}}}
    >>> print(format_table(s))
    Metric  Recall@Acc>=0.8 (up)  Acc@Recall>=0.8 (up)
    Method    GA    TV              GA    TV
    tiny    0.65  0.61            0.66  0.56
    """
    t = f"{threshold:g}"
    if methods is None:
        methods = list(dict.fromkeys(m for per in summary.values() for m in per))
    if not summary or not methods:  # e.g. every target skipped: nothing to tabulate
        return "(no results: no point was evaluated)"
    cols = [(f"recall_at_acc_{t}", m) for m in methods] + [(f"acc_at_recall_{t}", m) for m in methods]

    def cell(model: str, key: str, method: str) -> str:
        s = summary.get(model, {}).get(method)
        if not s:
            return "-"
        if show_spread:  # the bootstrap interval where the summary has one, else ± std
            return format_value(s, key, 2, True, s.get("n_targets"))
        return _fmt(s.get(key, math.nan))

    rows = [[cell(model, k, m) for k, m in cols] for model in summary]
    w = max([4] + [len(c) for r in rows for c in r] + [len(m) for m in methods])
    first = max([6] + [len(m) for m in summary])
    n = len(methods)
    group_w = n * (w + 2) - 2
    head1 = f"{'Metric':<{first}}  {f'Recall@Acc>={t} (up)':<{group_w}}  {f'Acc@Recall>={t} (up)'}"
    sep = "  "
    head2 = f"{'Method':<{first}}  " + sep.join(f"{m.upper():>{w}}" for m in methods) + "    " + sep.join(
        f"{m.upper():>{w}}" for m in methods)
    lines = [head1.rstrip(), head2]
    for model, r in zip(summary, rows):
        lines.append(f"{model:<{first}}  " + sep.join(f"{c:>{w}}" for c in r[:n]) + "    "
                     + sep.join(f"{c:>{w}}" for c in r[n:]))
    if show_spread and any(has_interval(s, k) for per in summary.values() for s in per.values() for k, _ in cols):
        lines.append(interval_note(summary, methods))
    return "\n".join(lines)


def format_du_table(summary: Mapping[str, Mapping[str, Mapping[str, float]]], methods: Sequence[str] | None = None,
                    threshold: float = 0.8) -> str:
    """The deep-unlearning table as markdown: one row per (model, method) with Acc@R>=t, R@A>=t,
    AUC, Success-DU@0.8, Success-DU@0.9, deep rate (and their model-derived counterparts where the
    summary has them), seconds per target and the number of targets
    (means over targets, each but AUC with its 95 % bootstrap interval over targets where the summary
    has one, :func:`~deepunlearn.bench.bootstrap.format_value`; "–" where a value is missing, e.g.
    seconds of an old store). A sampled accuracy's 95 % bounds follow as ``(sampled low–high)``
    (:mod:`.intervals`).

    >>> s = {"tiny": {"ga": {"acc_at_recall_0.8": 0.25, "recall_at_acc_0.8": 0.76, "auc": 0.5, "success_du_0.8": 0.1,
    ...                      "success_du_0.9": 0.0, "deep_rate": 0.9, "seconds": 12.34, "n_targets": 10}}}
    >>> print(format_du_table(s))
    | model | method | Acc@R≥0.8 | R@A≥0.8 | AUC | Success-DU@0.8 | Success-DU@0.9 | deep rate | s/target | targets |
    |---|---|---|---|---|---|---|---|---|---|
    | tiny | ga | 0.25 | 0.76 | 0.50 | 0.10 | 0.00 | 0.90 | 12.3 | 10 |
    """
    rows = [s for per in summary.values() for s in per.values()]
    columns = [(name, label, 2 if m.digits is None else m.digits) for name, label, m in metric_columns(threshold, ())
               if m.du_table and (not m.optional or any(not _missing(s.get(name)) for s in rows))]  # optional: where measured
    header = ["model", "method", *(label for _, label, _ in columns), "targets"]
    if methods is None:
        methods = list(dict.fromkeys(m for per in summary.values() for m in per))
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for model, per in summary.items():
        for m in methods:
            s = per.get(m)
            if not s:
                continue
            cells = [model, m] + [("–" if _missing(s.get(k)) else format_value(s, k, d, False, s.get("n_targets")) + (
                f" (sampled {s[k + '_low']:.2f}–{s[k + '_high']:.2f})" if f"{k}_low" in s else "")) for k, _, d in columns]
            cells += [str(s.get("n_targets", "–"))]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def json_safe(obj: Any) -> Any:
    """NaN and infinities become None so the result is strict JSON.

    >>> json_safe({"a": float("nan"), "b": [1.0, float("inf")]})
    {'a': None, 'b': [1.0, None]}
    """
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, Mapping):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.generic):
        return json_safe(obj.item())
    return obj
