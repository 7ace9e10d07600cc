"""Intervals of the headline metrics when points carry a sampled accuracy.

A point measured with ``accuracy = "sampled"`` (:mod:`deepunlearn.unlearn.sampled`) has exact
recall and deep but an estimated accuracy with a 95 % interval ``[accuracy_low, accuracy_high]``.
Acc@R>=t, R@A>=t and Success-DU@a are each non-decreasing in every point's accuracy (recall is
fixed), so evaluating a trajectory once with every point at its lower bound and once at its upper
bound brackets the metric whenever every point's interval holds; the summary's ``{metric}_low`` /
``{metric}_high`` are those brackets averaged over targets. A point without an interval (full
probe) enters with its accuracy at both ends. Summaries of full-probe sweeps get no such keys.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Mapping

import numpy as np

from ..unlearn.summary import SUCCESS_THRESHOLDS, value_of, acc_at_recall, field_of, is_deep, recall_at_acc, success_du


def interval_metrics(threshold: float = 0.8) -> list[str]:
    t = f"{threshold:g}"
    return [f"acc_at_recall_{t}", f"recall_at_acc_{t}", *(f"success_du_{a:g}" for a in SUCCESS_THRESHOLDS)]


def has_interval(p: Any) -> bool:
    return field_of(p, "accuracy_low") is not None


def _at(points: list, bound: str) -> list[dict]:
    out = []
    for p in points:
        a = field_of(p, bound)
        a = value_of(p, "accuracy") if a is None else a
        out.append({"recall": float(value_of(p, "recall")), "accuracy": None if a is None else float(a),
                    "deep": is_deep(p)})
    return out


def target_bounds(points: Iterable[Any], threshold: float = 0.8) -> dict[str, tuple[float, float]]:
    """``{metric: (low, high)}`` of one target's trajectory (module docstring).

    >>> pts = [{"recall": 1.0, "deep": True, "accuracy": 0.82, "accuracy_low": 0.76, "accuracy_high": 0.87}]
    >>> target_bounds(pts)["success_du_0.8"], target_bounds(pts)["acc_at_recall_0.8"]
    ((0.0, 1.0), (0.76, 0.87))
    """
    points = list(points)
    ends = {b: _at(points, b) for b in ("accuracy_low", "accuracy_high")}
    out = {}
    for name in interval_metrics(threshold):
        vals = []
        for b in ("accuracy_low", "accuracy_high"):
            pts = [p for p in ends[b] if p["accuracy"] is not None]
            curve = [(p["recall"], p["accuracy"]) for p in pts]
            if name.startswith("acc_at_recall"):
                vals.append(acc_at_recall(curve, threshold))
            elif name.startswith("recall_at_acc"):
                vals.append(recall_at_acc(curve, threshold))
            else:
                vals.append(success_du(pts, float(name.rsplit("_", 1)[1])))
        out[name] = (vals[0], vals[1])
    return out


def add_intervals(summary: dict, trajectories: Mapping[tuple[str, str, int], list], threshold: float = 0.8) -> None:
    """Add ``{metric}_low`` / ``{metric}_high`` to the ``{model: {method: metrics}}`` summary of
    every (model, method) with a sampled point (in place); ``trajectories``: the points by
    ``(model, method, target)`` (:func:`.metrics.group_trajectories`)."""
    by: dict[tuple[str, str], list] = defaultdict(list)
    sampled: set[tuple[str, str]] = set()
    for (model, method, _t), traj in trajectories.items():
        by[(model, method)].append(target_bounds(traj, threshold))
        if any(has_interval(p) for p in traj):
            sampled.add((model, method))
    for key in sampled:
        s = summary.get(key[0], {}).get(key[1])
        if s is None:
            continue
        for name in interval_metrics(threshold):
            s[f"{name}_low"] = float(np.mean([b[name][0] for b in by[key]]))
            s[f"{name}_high"] = float(np.mean([b[name][1] for b in by[key]]))
