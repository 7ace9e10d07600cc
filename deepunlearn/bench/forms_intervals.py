"""The calibrated adversarial checks with 95 % intervals, per (model, method).

At each run's LAST grid point (a run: one target under one run seed; the strongest unlearning of its
trajectory), three values per run of a sweep with ``adversarial = true`` and an
``adversarial_calibration`` (:mod:`deepunlearn.unlearn.checks_calibrated`):

* ``recall_adv_raw``: recall when a fact counts as known under any mode's raw rule (chance guesses
  count: a yes/no pair is right half the time, a relation name is guessed from the question);
* ``recall_adv``: recall under the calibrated aggregate (each mode above a threshold set on facts the
  model never saw);
* ``superficial_excess``: the calibrated superficial rate (the share of the facts the primary probe
  counts forgotten that the calibrated aggregate still knows) minus the aggregate's floor, its
  measured false-positive rate on never-seen facts: what the model still knows beyond chance. A run
  whose primary probe forgot nothing has no rate and is left out of this value's n.

Each value's mean over runs gets the 95 % percentile bootstrap interval of
:func:`.bootstrap.cluster_interval`: targets are resampled, each with all its seeds.
"""

from __future__ import annotations

import math
import numbers
from collections import defaultdict
from typing import Any, Iterable

from .bootstrap import cluster_interval
from .metrics import value_of, field_of, is_baseline

#: the values of the table, in column order
VALUES = ("recall", "recall_adv_raw", "recall_adv", "superficial_excess")


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(float(x)):
        return None
    return float(x)


def run_values(p: Any) -> dict[str, float | None]:
    """The table's values of one (last) point.

    >>> run_values({"recall": 1.0, "recall_adv_raw": 0.0, "recall_adv": 0.5, "superficial": 0.5, "adv_floor": 0.05})
    {'recall': 1.0, 'recall_adv_raw': 0.0, 'recall_adv': 0.5, 'superficial_excess': 0.45}
    """
    sup, floor = _num(field_of(p, "superficial")), _num(field_of(p, "adv_floor"))
    return {"recall": _num(value_of(p, "recall")), "recall_adv_raw": _num(field_of(p, "recall_adv_raw")),
            "recall_adv": _num(field_of(p, "recall_adv")),
            "superficial_excess": None if sup is None or floor is None else round(sup - floor, 12)}


def last_points(points: Iterable[Any]) -> dict[tuple[str, str, int, Any], Any]:
    """Each run's last grid point: ``(model, method, target, seed) -> point`` (baseline rows left out)."""
    out: dict[tuple[str, str, int, Any], Any] = {}
    for p in points:
        if is_baseline(p):
            continue
        key = (value_of(p, "model"), value_of(p, "method"), int(value_of(p, "target")), field_of(p, "seed"))
        if key not in out or float(value_of(p, "param")) > float(value_of(out[key], "param")):
            out[key] = p
    return out


def adversarial_intervals(points: Iterable[Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{model: {method: {VALUE: mean, VALUE_ci_lo, VALUE_ci_hi, VALUE_ci_n, n_targets, n_seeds,
    adv_floor}}}`` over the runs whose last point carries the calibrated keys; empty without them."""
    runs: dict[tuple[str, str], list[tuple[int, Any]]] = defaultdict(list)
    for (model, method, target, _seed), p in last_points(points).items():
        if _num(field_of(p, "recall_adv_raw")) is not None:
            runs[(model, method)].append((target, p))
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for (model, method), rows in runs.items():
        s: dict[str, Any] = {"n_targets": len({t for t, _ in rows}),
                             "n_seeds": len({field_of(p, "seed") for _, p in rows})}
        vals = [(t, run_values(p)) for t, p in rows]
        for name in VALUES:
            xs = [(t, v[name]) for t, v in vals if v[name] is not None]
            s[name] = sum(x for _, x in xs) / len(xs) if xs else None
            lo, hi, n = cluster_interval([x for _, x in xs], [t for t, _ in xs])
            s[f"{name}_ci_lo"], s[f"{name}_ci_hi"], s[f"{name}_ci_n"] = lo, hi, n
        floors = [_num(field_of(p, "adv_floor")) for _, p in rows]
        s["adv_floor"] = max((f for f in floors if f is not None), default=None)
        out.setdefault(model, {})[method] = s
    return out
