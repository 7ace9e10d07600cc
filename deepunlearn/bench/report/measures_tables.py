"""How much remains: the per-grid-point table of likelihood, membership and
reference-model measures with bootstrap intervals over targets, the stopping rules, the
in-distribution vs canary comparison, and what the retain model still answers.

Inputs are stored points (objects or dicts) whose ``measures`` follow the runner's contract::

    {"target" | "forget" | "retain": {"prob", "truth_ratio", "exposure", "rouge_l", "mc_prob"},
     "forget_quality", "model_utility", "privleak", "min_k_auc", "genex": float | None,
     "canary": bool, "forget_truth_ratios": [float, ...] (optional)}

plus the baseline rows "original" (before unlearning) and "retrain" (the retain model). A value
that was not measured (no retain model, no holdout) is None here and stays empty in every table:
it is never averaged in as 0. Means are over the targets that have the value; intervals are
scipy's bootstrap (BCa, 9,999 resamples) of that mean.

Stopping rules, per method and target, along the grid in parameter order:

* ``first_forgotten``: the first grid point where the target is forgotten (the last grid point
  when no point forgets it, so ``target_forgotten`` < 1 shows the rule never fired there);
* ``muse`` (MUSE): the last grid point before the retain facts' ``model_utility`` falls below the
  retain model's for that target; the model before unlearning (recall 0, accuracy 1) when the
  first point already falls below, the last grid point when none does; None without retrain rows;
* ``oracle``: best-of-grid as in the paper's Acc@Recall>=0.8 (the best accuracy among points with
  recall >= 0.8, else the end point (recall 1, accuracy 0)).
"""

from __future__ import annotations

import math
import numbers
from collections import defaultdict
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ...unlearn.summary import EPS, THRESHOLD, value_of, acc_at_recall, curve_of
from ..metrics import BASELINES, group_trajectories, is_baseline

PARTS = ("target", "forget", "retain")
PART_KEYS = ("prob", "truth_ratio", "exposure", "rouge_l", "mc_prob")
SCALAR_KEYS = ("forget_quality", "model_utility", "privleak", "min_k_auc", "genex")
#: the table's value columns: the paper's two, then ``part.key`` for every part, then the scalars
COLUMNS = ("recall", "accuracy", *[f"{p}.{k}" for p in PARTS for k in PART_KEYS], *SCALAR_KEYS)
RULES = ("first_forgotten", "muse", "oracle")


def measures_of(p: Any) -> Mapping[str, Any] | None:
    """A point's ``measures`` (object or dict), None when it has none."""
    m = p.get("measures") if isinstance(p, Mapping) else getattr(p, "measures", None)
    return m if isinstance(m, Mapping) else None


def has_measures(points: Iterable[Any]) -> bool:
    """Whether any point carries measures (the report's new sections appear only then)."""
    return any(measures_of(p) is not None for p in points)


def _finite(v: Any) -> float | None:
    if v is None or isinstance(v, bool) or not isinstance(v, numbers.Real):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def value(p: Any, column: str) -> float | None:
    """One of :data:`COLUMNS` of a point: ``recall``, ``accuracy``, ``"forget.prob"``,
    ``"privleak"``...; None when not measured.

    >>> value({"recall": 0.5, "measures": {"forget": {"prob": 0.25}, "privleak": None}}, "forget.prob")
    0.25
    >>> value({"recall": 0.5, "measures": {"privleak": None}}, "privleak") is None
    True
    """
    if column in ("recall", "accuracy"):
        return _finite(value_of(p, column))
    m = measures_of(p)
    if m is None:
        return None
    if "." in column:
        part, key = column.split(".", 1)
        sub = m.get(part)
        return _finite(sub.get(key)) if isinstance(sub, Mapping) else None
    return _finite(m.get(column))


def bootstrap_ci(values: Sequence[float], level: float = 0.95, n_resamples: int = 9999,
                 seed: int = 0) -> tuple[float | None, float | None]:
    """``level`` bootstrap interval of the mean of ``values`` (None/NaN left out), by
    ``scipy.stats.bootstrap`` (BCa) with ``numpy.random.default_rng(seed)``. (None, None) for
    fewer than two values; (v, v) when every value is v (each resample's mean is v; BCa itself
    is undefined there).

    >>> bootstrap_ci([1.0]), bootstrap_ci([2.0, 2.0])
    ((None, None), (2.0, 2.0))
    """
    from ...probe.measures import bootstrap_ci as interval  # scipy.stats.bootstrap, BCa

    v = [x for x in (_finite(x) for x in values) if x is not None]
    if len(v) < 2:
        return None, None
    lo, hi = interval(v, level, n_resamples, seed)
    return _finite(lo), _finite(hi)


def _order(points: Sequence[Any]) -> tuple[list[str], list[str]]:
    models = list(dict.fromkeys(value_of(p, "model") for p in points))
    methods = list(dict.fromkeys(value_of(p, "method") for p in points if not is_baseline(p)))
    return models, methods


def measures_table(points: Iterable[Any], *, level: float = 0.95, n_resamples: int = 9999,
                   seed: int = 0) -> list[dict[str, Any]]:
    """One row per (model, method, grid point), the baseline rows first: the mean over targets of
    every :data:`COLUMNS` value (None when no target has it) with its bootstrap interval
    (``COL_lo``, ``COL_hi``) and the number of targets behind it (``COL_n``)."""
    points = list(points)
    groups: dict[tuple[str, str, Any], list[Any]] = defaultdict(list)
    for p in points:
        groups[(value_of(p, "model"), value_of(p, "method"), value_of(p, "param"))].append(p)
    models, methods = _order(points)
    rank = {m: i for i, m in enumerate([*BASELINES, *methods])}
    keys = sorted(groups, key=lambda k: (models.index(k[0]), rank[k[1]], float(k[2])))
    rows = []
    for model, method, param in keys:
        pts = groups[(model, method, param)]
        row: dict[str, Any] = {"model": model, "method": method, "param": param, "baseline": method in BASELINES,
                               "n_targets": len({int(value_of(p, "target")) for p in pts})}
        for c in COLUMNS:
            vals = [v for v in (value(p, c) for p in pts) if v is not None]
            row[c] = float(np.mean(vals)) if vals else None
            row[f"{c}_lo"], row[f"{c}_hi"] = bootstrap_ci(vals, level, n_resamples, seed)
            row[f"{c}_n"] = len(vals)
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------
# stopping rules


def _baseline_rows(points: Iterable[Any], method: str) -> dict[tuple[str, int], Any]:
    return {(value_of(p, "model"), int(value_of(p, "target"))): p for p in points if value_of(p, "method") == method}


def _oracle(traj: Sequence[Any], threshold: float) -> Any | None:
    """The best-of-grid point of Acc@Recall>=t, None for the end point (recall 1, accuracy 0)."""
    best = acc_at_recall(curve_of(traj), threshold)
    for p in traj:
        if float(value_of(p, "recall")) >= threshold - EPS and float(value_of(p, "accuracy")) == best:
            return p
    return None


def _muse(traj: Sequence[Any], reference: float) -> tuple[Any | None, bool]:
    """(chosen point, fired): the last point before model_utility < reference; None = stop
    before the first point (the model before unlearning)."""
    for i, p in enumerate(traj):
        mu = value(p, "model_utility")
        if mu is not None and mu < reference:
            return (traj[i - 1] if i else None), True
    return traj[-1], False


_BEFORE = {"recall": 0.0, "accuracy": 1.0, "target_forgotten": False, "param": None}   # do nothing
_END = {"recall": 1.0, "accuracy": 0.0, "target_forgotten": True, "param": None}       # forget everything


def choose(traj: Sequence[Any], rule: str, *, reference: float | None = None,
           threshold: float = THRESHOLD) -> tuple[Any, bool] | None:
    """The point ``rule`` (one of :data:`RULES`) stops at on one target's trajectory (params
    ascending) and whether the rule fired; None for ``muse`` without a reference utility. The
    chosen point is a stored point or a dict (recall, accuracy, target_forgotten, param None)
    for "before unlearning" and the end point."""
    if rule == "first_forgotten":
        for p in traj:
            if value_of(p, "target_forgotten"):
                return p, True
        return traj[-1], False
    if rule == "muse":
        if reference is None:
            return None
        p, fired = _muse(traj, reference)
        return (_BEFORE if p is None else p), fired
    if rule == "oracle":
        p = _oracle(traj, threshold)
        return (_END if p is None else p), p is not None
    raise ValueError(f"unknown stopping rule {rule!r}")


def stopping_rules(points: Iterable[Any], threshold: float = THRESHOLD) -> dict[str, dict[str, dict[str, Any]]]:
    """``{model: {method: {rule: summary | None}}}``: per rule, the mean recall, accuracy and
    share of targets forgotten at the points it chose, how many targets it covered and fired on,
    and each target's chosen param (None: before unlearning or the end point). ``muse`` is None
    for a method none of whose targets has a retrain row with a model utility."""
    points = list(points)
    retrain = _baseline_rows(points, "retrain")
    chosen: dict[tuple[str, str], dict[str, dict[int, tuple[Any, bool]]]] = defaultdict(lambda: defaultdict(dict))
    for (model, method, target), traj in group_trajectories(points).items():
        ref = value(retrain[(model, target)], "model_utility") if (model, target) in retrain else None
        for rule in RULES:
            c = choose(traj, rule, reference=ref, threshold=threshold)
            if c is not None:
                chosen[(model, method)][rule][target] = c
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for (model, method), per_rule in chosen.items():
        out.setdefault(model, {})[method] = {rule: _rule_summary(per_rule.get(rule, {})) for rule in RULES}
    return out


def _rule_summary(picks: Mapping[int, tuple[Any, bool]]) -> dict[str, Any] | None:
    if not picks:
        return None
    pts = [p for p, _ in picks.values()]
    return {"n_targets": len(picks), "n_fired": sum(f for _, f in picks.values()),
            "recall": float(np.mean([float(value_of(p, "recall")) for p in pts])),
            "accuracy": float(np.mean([float(value_of(p, "accuracy")) for p in pts])),
            "target_forgotten": float(np.mean([bool(value_of(p, "target_forgotten")) for p in pts])),
            "params": {str(t): value_of(p, "param") for t, (p, _) in sorted(picks.items())}}


def stop_points(points: Iterable[Any], rule: str = "first_forgotten",
                threshold: float = THRESHOLD) -> dict[tuple[str, str, int], Any]:
    """``(model, method, target) -> chosen stored point`` of one rule (targets where it chose
    "before unlearning" or the end point, or has no reference, are left out): the points the
    figures show "after unlearning"."""
    points = list(points)
    retrain = _baseline_rows(points, "retrain")
    out = {}
    for (model, method, target), traj in group_trajectories(points).items():
        ref = value(retrain[(model, target)], "model_utility") if (model, target) in retrain else None
        c = choose(traj, rule, reference=ref, threshold=threshold)
        if c is not None and c[0] is not _BEFORE and c[0] is not _END:
            out[(model, method, target)] = c[0]
    return out


# ---------------------------------------------------------------------------------------------
# in-distribution vs canary targets; what the retain model still answers


def is_canary(points: Iterable[Any]) -> dict[tuple[str, int], bool]:
    """``(model, target) -> measures["canary"]`` of the target's points that carry measures."""
    out: dict[tuple[str, int], bool] = {}
    for p in points:
        m = measures_of(p)
        if m is not None and "canary" in m:
            key = (value_of(p, "model"), int(value_of(p, "target")))
            out[key] = out.get(key, False) or bool(m["canary"])
    return out


def _mean(vals: Iterable[float | None]) -> float | None:
    v = [x for x in vals if x is not None]
    return float(np.mean(v)) if v else None


def canary_comparison(points: Iterable[Any]) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """``{model: {method: {"id" | "canary": {...}}}}``: per group of targets, how many there are
    and were ever forgotten, the mean grid param (steps) at which each was first forgotten, the
    target's exposure before unlearning (the "original" row), at that point and at the last grid
    point, and the collateral accuracy at that point (means over the forgotten targets)."""
    points = list(points)
    canary = is_canary(points)
    original = _baseline_rows(points, "original")
    acc: dict[tuple[str, str, str], dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for (model, method, target), traj in group_trajectories(points).items():
        if (model, target) not in canary:
            continue
        g = acc[(model, method, "canary" if canary[(model, target)] else "id")]
        g["targets"].append(target)
        first = next((p for p in traj if value_of(p, "target_forgotten")), None)
        before = original.get((model, target))
        g["exposure_before"].append(value(before, "target.exposure") if before is not None else None)
        g["exposure_last"].append(value(traj[-1], "target.exposure"))
        if first is not None:
            g["steps"].append(float(value_of(first, "param")))
            g["exposure_at_forgotten"].append(value(first, "target.exposure"))
            g["accuracy_at_forgotten"].append(value(first, "accuracy"))
    out: dict = {}
    for (model, method, group), g in acc.items():
        out.setdefault(model, {}).setdefault(method, {})[group] = {
            "n_targets": len(g["targets"]), "n_forgotten": len(g["steps"]),
            **{k: _mean(g[k]) for k in ("steps", "exposure_before", "exposure_at_forgotten", "exposure_last",
                                        "accuracy_at_forgotten")}}
    return out


def retrain_inference(points: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Per model, over the retrain rows: how many targets the retain model (never trained on the
    target nor its minimal set) still answers, and the mean number of facts of U* it answers:
    knowledge inferred from what it kept, which no rule set captures."""
    by: dict[str, list[Any]] = defaultdict(list)
    for p in points:
        if value_of(p, "method") == "retrain":
            by[value_of(p, "model")].append(p)
    out = {}
    for model, rows in by.items():
        d = [r if isinstance(r, Mapping) else r.to_dict() for r in rows]
        known = [r for r in d if "answers_target" in r]
        sets = [len(r["answers_set"]) for r in d if isinstance(r.get("answers_set"), list)]
        out[model] = {"n_targets": len(d), "answers_target": sum(bool(r["answers_target"]) for r in known),
                      "n_recorded": len(known), "answers_set_mean": _mean(sets)}
    return out
