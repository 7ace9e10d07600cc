"""The report's "Has it really forgotten?" section: the primary probe against the
adversarial aggregate and the attacks after unlearning, per (model, method).

A sweep with ``adversarial = true`` stores with every point ``recall_adv``, ``accuracy_adv``
(the same metrics with "known" = known under any mode on any selected form), ``superficial``
(the share of the facts the primary probe counts forgotten that the aggregate still knows; None
when the primary probe forgot nothing) and ``superficial_n`` = ``[superficial facts,
primary-forgotten facts]``. A sweep with ``[attacks]`` stores on the attacked points
``recall_relearn`` / ``accuracy_relearn`` (``{"N": value}`` per relearning step count N) and
``recall_quant`` / ``accuracy_quant``. The keys sit in a dict's top level or a store point's
``extra`` (:func:`.metrics.field_of` reads both).

:func:`forgetting_table` gives, per (model, method), two scopes:

* ``last``: each target's LAST grid point (the strongest unlearning of its trajectory);
* ``all``: every point of every trajectory.

In each scope: ``n_points``, ``n_targets`` and the means of ``recall``, ``recall_adv``,
``accuracy``, ``accuracy_adv``, ``superficial_mean`` (the mean of the per-point rates, over the
points that have one), ``superficial`` (pooled: sum of superficial facts / sum of primary-forgotten
facts; None when no point forgot anything), ``recall_relearn`` / ``accuracy_relearn`` (``{"N":
mean}``) and ``recall_quant`` / ``accuracy_quant``. Every mean is over the points that carry the
value (``n_adv``, ``n_relearn``, ``n_quant`` count them): attacks made at the last grid point only
(``at = "last"``) have the same points in both scopes. Baseline rows are left out.

The section (with ``adversarial.png``, :mod:`.forms_plots`) and the ``forgetting_checks`` key of
``summary.json`` exist only when some point carries one of these keys: the report of any other
sweep has neither.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..bootstrap import format_value
from ..forms_intervals import VALUES, adversarial_intervals
from ..metrics import value_of, field_of, group_trajectories
from .tables import in_order, md_table, number

#: keys whose presence on a point makes the section appear
CHECK_KEYS = ("recall_adv", "recall_relearn", "recall_quant")
SCOPES = ("last", "all")


def has_forgetting_checks(points: Iterable[Any]) -> bool:
    """Whether any point carries the adversarial aggregate or an attack's result.

    >>> has_forgetting_checks([{"method": "ga", "recall": 1.0}]), has_forgetting_checks([{"recall_quant": 0.5}])
    (False, True)
    """
    return any(field_of(p, k) is not None for p in points for k in CHECK_KEYS)


def _num(x: Any) -> float | None:
    if x is None or isinstance(x, bool):
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _mean(xs: Iterable[Any]) -> float | None:
    v = [f for f in (_num(x) for x in xs) if f is not None]
    return float(np.mean(v)) if v else None


def _steps(points: Sequence[Any], key: str) -> list[str]:
    """The relearning step counts present under ``key``, in numeric order."""
    return sorted({str(k) for p in points for k in (field_of(p, key) or {})}, key=_step_key)


def _step_key(k: str) -> tuple[float, str]:
    return (_num(k) if _num(k) is not None else math.inf, k)


def scope_stats(points: Sequence[Any]) -> dict[str, Any]:
    """The means of one scope's points (see the module docstring).

    >>> s = scope_stats([{"target": 1, "recall": 1.0, "accuracy": 0.8, "recall_adv": 0.5, "accuracy_adv": 0.9,
    ...                   "superficial": 0.5, "superficial_n": [1, 2]},
    ...                  {"target": 2, "recall": 0.5, "accuracy": 0.6, "recall_adv": 0.0, "accuracy_adv": 0.7,
    ...                   "superficial": 1.0, "superficial_n": [2, 2]}])
    >>> s["recall"], s["recall_adv"], s["superficial"], s["superficial_mean"]
    (0.75, 0.25, 0.75, 0.75)
    """
    sup, forgotten = _pooled(points, "superficial_n")
    out: dict[str, Any] = {
        "n_points": len(points), "n_targets": len({int(value_of(p, "target")) for p in points}),
        "recall": _mean(value_of(p, "recall") for p in points),
        "accuracy": _mean(value_of(p, "accuracy") for p in points),
        "n_adv": sum(1 for p in points if _num(field_of(p, "recall_adv")) is not None),
        "recall_adv": _mean(field_of(p, "recall_adv") for p in points),
        "accuracy_adv": _mean(field_of(p, "accuracy_adv") for p in points),
        "superficial": sup / forgotten if forgotten else None,
        "superficial_n": [sup, forgotten],
        "superficial_mean": _mean(field_of(p, "superficial") for p in points),
    }
    if any(_num(field_of(p, "recall_adv_raw")) is not None for p in points):
        out.update(_calibrated_stats(points))
    steps = _steps(points, "recall_relearn")
    if steps:
        out["n_relearn"] = sum(1 for p in points if field_of(p, "recall_relearn"))
        for key in ("recall_relearn", "accuracy_relearn"):
            out[key] = {n: _mean((field_of(p, key) or {}).get(n) for p in points) for n in steps}
    if any(_num(field_of(p, "recall_quant")) is not None for p in points):
        out["n_quant"] = sum(1 for p in points if _num(field_of(p, "recall_quant")) is not None)
        out["recall_quant"] = _mean(field_of(p, "recall_quant") for p in points)
        out["accuracy_quant"] = _mean(field_of(p, "accuracy_quant") for p in points)
    return out


def _pooled(points: Sequence[Any], key: str) -> tuple[int, int]:
    """The sums of the ``[superficial facts, primary-forgotten facts]`` pairs stored under ``key``."""
    sup, forgotten = 0, 0
    for p in points:
        n = field_of(p, key)
        if isinstance(n, (list, tuple)) and len(n) == 2 and all(_num(x) is not None for x in n):
            sup, forgotten = sup + int(n[0]), forgotten + int(n[1])
    return sup, forgotten


def _calibrated_stats(points: Sequence[Any]) -> dict[str, Any]:
    """A calibrated aggregate's raw values beside its calibrated ones, and its floor (the
    calibrated any's FPR on never-seen facts)."""
    sup, forgotten = _pooled(points, "superficial_raw_n")
    return {"recall_adv_raw": _mean(field_of(p, "recall_adv_raw") for p in points),
            "superficial_raw": sup / forgotten if forgotten else None, "superficial_raw_n": [sup, forgotten],
            "adv_floor": _mean(field_of(p, "adv_floor") for p in points)}


def forgetting_table(points: Iterable[Any]) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """``{model: {method: {"last": stats, "all": stats}}}`` (:func:`scope_stats`), models and
    methods in order of first appearance."""
    groups = group_trajectories(points)
    by: dict[tuple[str, str], list[list[Any]]] = {}
    for (model, method, _t), traj in groups.items():
        by.setdefault((model, method), []).append(traj)
    out: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for (model, method), trajs in by.items():
        out.setdefault(model, {})[method] = {
            "last": scope_stats([t[-1] for t in trajs]),
            "all": scope_stats([p for t in trajs for p in t]),
        }
    return out


def scope_table(table: Mapping, methods: Sequence[str], scope: str) -> list[str]:
    """The markdown table of one scope (``last`` or ``all``) of :func:`forgetting_table`."""
    stats = [(model, m, per[m][scope]) for model, per in table.items() for m in in_order(per, methods)]
    steps = sorted({n for *_, s in stats for n in s.get("recall_relearn", {})}, key=_step_key)
    quant = any("recall_quant" in s for *_, s in stats)
    header = ["model", "method", "targets", "points", "recall", "recall_adv", "accuracy", "accuracy_adv",
              "superficial (pooled)", "superficial (mean)", *[f"relearn@{n}" for n in steps],
              *(["quantised"] if quant else [])]
    cal = any("recall_adv_raw" in s for *_, s in stats)
    if cal:
        header[6:6] = ["recall_adv raw", "superficial raw (pooled)", "floor (FPR)"]
    rows = []
    for model, m, s in stats:
        pooled = number(s["superficial"]) + (f" ({s['superficial_n'][0]}/{s['superficial_n'][1]})"
                                         if s["superficial_n"][1] else "")
        rows.append([model, m.upper(), str(s["n_targets"]), str(s["n_points"]), number(s["recall"]),
                     number(s["recall_adv"]), number(s["accuracy"]), number(s["accuracy_adv"]), pooled,
                     number(s["superficial_mean"]),
                     *[number(s.get("recall_relearn", {}).get(n)) for n in steps],
                     *([number(s.get("recall_quant"))] if quant else [])])
        if cal:
            n = s.get("superficial_raw_n") or [0, 0]
            rows[-1][6:6] = [number(s.get("recall_adv_raw")),
                             number(s.get("superficial_raw")) + (f" ({n[0]}/{n[1]})" if n[1] else ""),
                             number(s.get("adv_floor"), 3)]
    return md_table(header, rows)


def forgetting_section(points: Sequence[Any], methods: Sequence[str], out) -> tuple[list[str], dict[str, Any]]:
    """Markdown lines of the section and ``{"forgetting_checks": table}`` for summary.json; both
    empty when no point carries the keys. Draws ``adversarial.png`` into ``out``."""
    from pathlib import Path

    from .forms_plots import plot_adversarial

    points = list(points)
    if not has_forgetting_checks(points):
        return [], {}
    table = forgetting_table(points)
    plot_adversarial(table, Path(out) / "adversarial.png", methods)
    md = ["## Has it really forgotten?", "",
          "The primary probe (one form, one mode) against the *adversarial aggregate* (a fact is known if it is "
          "known under any of the modes exact, yes/no, rank and generate on any selected form) and against the "
          "attacks after unlearning: *relearn@N* = recall after finetuning N steps on facts the method did not "
          "target (K minus the target and its chosen minimal set), *quantised* = recall after quantising the "
          "Linear layers (int8 dynamic on CPU, int4 / nf4 4-bit round-to-nearest); the weights are restored after every attack. "
          "*recall_adv* ≤ recall: what the aggregate still knows was not forgotten. *Superficial forgetting "
          "rate*: of the facts the primary probe counts forgotten, the share the aggregate still knows; pooled = "
          "superficial facts / primary-forgotten facts over all the points (the counts in brackets), mean = the "
          "mean of the per-point rates. Means over the points that carry each value."
          + (" With a calibration (adversarial_calibration) a mode counts only above thresholds set on facts the "
             "model never saw; the raw columns count chance guesses as known, and *floor* is the calibrated "
             "aggregate's measured false-positive rate on never-seen facts: a superficial rate near it is chance."
             if any(field_of(p, "recall_adv_raw") is not None for p in points) else ""), "",
          "### At each target's last grid point", "", *scope_table(table, methods, "last"), "",
          "### Over every grid point", "", *scope_table(table, methods, "all"), "",
          "![adversarial](adversarial.png)", "",
          "*Mean recall at the last grid point: the primary probe, the adversarial aggregate, after each relearning "
          "step count and after quantisation. A bar lower than the primary one: forgetting the primary probe "
          "overstated (adversarial) or undid (attacks).*", ""]
    return md, {"forgetting_checks": table}


def interval_table(table: Mapping[str, Mapping[str, Mapping[str, Any]]], methods: Sequence[str]) -> list[str]:
    """The markdown table of :func:`~deepunlearn.bench.forms_intervals.adversarial_intervals`
    (``0.12 [0.05, 0.20]``, n per cell)."""
    rows = [[str(model), str(m), *(format_value(per[m], k, 2, False) for k in VALUES),
             number(per[m].get("adv_floor"), 3), f"{per[m]['n_targets']} × {per[m]['n_seeds']}"]
            for model, per in table.items() for m in in_order(per, methods)]
    return md_table(["model", "method", "recall", "recall_adv raw", "recall_adv calibrated", "superficial − floor",
                     "floor", "targets × seeds"], rows)


def calibrated_section(points: Sequence[Any], methods: Sequence[str]) -> tuple[list[str], dict[str, Any]]:
    """The "Calibrated against raw" sub-section over every run seed's points
    (:func:`~deepunlearn.bench.forms_intervals.adversarial_intervals`) and
    ``{"adversarial_intervals": table}`` for summary.json; both empty without a calibrated aggregate."""
    adv = adversarial_intervals(points)
    if not adv:
        return [], {}
    return ["### Calibrated against raw, with 95 % intervals", "",
            "At each run's last grid point (a run: one target under one seed); 95 % percentile bootstrap "
            "intervals resampling targets with all their seeds, n = runs carrying the value. *superficial − "
            "floor*: the calibrated superficial rate minus the aggregate's false-positive rate on never-seen "
            "facts.", "", *interval_table(adv, methods), ""], {"adversarial_intervals": adv}


def console_lines(table: Mapping, methods: Sequence[str] | None = None) -> list[str]:
    """One line per (model, method) for the ``bench`` console summary, at the last grid point.

    >>> t = {"m": {"ga": {"last": {"recall": 0.8, "recall_adv": 0.5, "superficial": 0.25,
    ...                             "superficial_n": [1, 4], "recall_relearn": {"1": 0.4}, "recall_quant": 0.6}}}}
    >>> console_lines(t)
    ['m GA: recall 0.80  recall_adv 0.50  superficial 0.25 (1/4)  relearn@1 0.40  quantised 0.60']
    """
    out = []
    for model, per in table.items():
        for m in in_order(per, methods or []):
            s = per[m]["last"]
            line = f"{model} {m.upper()}: recall {number(s.get('recall'))}  recall_adv {number(s.get('recall_adv'))}"
            n = s.get("superficial_n") or [0, 0]
            line += f"  superficial {number(s.get('superficial'))}" + (f" ({n[0]}/{n[1]})" if n[1] else "")
            line += "".join(f"  relearn@{k} {number(v)}" for k, v in (s.get("recall_relearn") or {}).items())
            if "recall_quant" in s:
                line += f"  quantised {number(s['recall_quant'])}"
            out.append(line)
    return out
