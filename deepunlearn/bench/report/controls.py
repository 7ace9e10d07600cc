"""The report's "Deep against its controls" sub-section: per model and method, the raw deep rate
beside the ``deep_oracle`` rate and the share of superficial verdicts established, each as k / n
with its 95 % Wilson interval.

It appears when points carry ``deep_oracle`` (a sweep with ``oracle = true``) or ``p_chance``
(``chance_calibration``; :mod:`deepunlearn.bench.point_controls`). Per target trajectory:

- **deep**: some grid point is deep (the headline's deep rate), over every target;
- **deep_oracle**: some grid point is deep relative to the target's oracle, over the targets whose
  points all carry the field (a point stored before ``oracle = true`` was turned on has none);
- **established**: among the targets with no deep point, those whose last grid point (the
  strongest setting) has ``p_chance < 0.05``, over those of them whose last point carries it.

>>> pts = [{"model": "A", "method": "ga", "target": t, "param": s, "deep": d, "deep_oracle": o, "p_chance": p}
...        for t, s, d, o, p in ((1, 1, False, False, 0.3), (1, 2, False, True, 0.01), (2, 1, False, False, 0.5),
...                              (2, 2, False, False, 0.2), (3, 1, True, True, None))]
>>> r, = control_rows(pts)
>>> (r["targets"], r["deep"], r["deep_oracle"], r["deep_oracle_n"], r["superficial"], r["established"])
(3, 1, 2, 3, 2, 1)
"""

from __future__ import annotations

from typing import Any, Sequence

from ...unlearn.chance_verdict import ESTABLISHED
from ...unlearn.summary import field_of, is_deep, value_of
from .tables import sort_rows

Z95 = 1.959964


def wilson(k: int, n: int, digits: int | None = 3) -> tuple[float, float] | None:
    """The 95 % Wilson interval of ``k`` successes in ``n`` trials, rounded to ``digits`` (None
    for n = 0).

    >>> wilson(0, 20), wilson(20, 20)[0] > 0.8
    ((0.0, 0.161), True)
    """
    if n <= 0:
        return None
    from ...unlearn.sampled import wilson as _wilson

    lo, hi = _wilson(k / n, n, Z95)
    return (lo, hi) if digits is None else (round(lo, digits), round(hi, digits))


def _is_baseline(p: Any) -> bool:
    from ..metrics import is_baseline

    return is_baseline(p)


def control_rows(points: Sequence[Any]) -> list[dict[str, Any]]:
    """One row per (model, method) over its target trajectories (module docstring); a run seed's
    trajectory of a target counts as one more target."""
    traj: dict[tuple, list] = {}
    for p in points:
        if _is_baseline(p):
            continue
        key = (value_of(p, "model"), value_of(p, "method"), int(value_of(p, "target")), field_of(p, "seed"))
        traj.setdefault(key, []).append(p)
    rows: dict[tuple, dict[str, Any]] = {}
    for (model, method, _t, _s), pts in traj.items():
        r = rows.setdefault((model, method), {"model": model, "method": method, "targets": 0, "deep": 0,
                                              "deep_oracle": 0, "deep_oracle_n": 0, "superficial": 0,
                                              "established": 0, "established_n": 0})
        r["targets"] += 1
        deep = any(is_deep(p) for p in pts)
        r["deep"] += deep
        flags = [field_of(p, "deep_oracle") for p in pts]
        if all(f is not None for f in flags):
            r["deep_oracle_n"] += 1
            r["deep_oracle"] += any(bool(f) for f in flags)
        if not deep:
            r["superficial"] += 1
            last = max(pts, key=lambda p: float(value_of(p, "param")))
            pc = field_of(last, "p_chance")
            if pc is not None:
                r["established_n"] += 1
                r["established"] += float(pc) < ESTABLISHED
    out = []
    for r in rows.values():
        for k, n, name in ((r["deep"], r["targets"], "deep"), (r["deep_oracle"], r["deep_oracle_n"], "deep_oracle"),
                           (r["established"], r["established_n"], "established")):
            r[f"{name}_rate"] = round(k / n, 4) if n else None
            r[f"{name}_ci95"] = wilson(k, n)
        out.append(r)
    return out


def share(k: int, n: int) -> str:
    """``k/n = rate [low, high]``, or ``–`` where n is 0."""
    if not n:
        return "–"
    lo, hi = wilson(k, n, None)
    return f"{k}/{n} = {k / n:.2f} [{lo:.2f}, {hi:.2f}]"


def control_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The rows as a markdown table."""
    out = ["| model | method | targets | deep (raw) | deep_oracle | superficial | established superficial "
           f"(p_chance < {ESTABLISHED}) |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['model']} | {r['method']} | {r['targets']} | {share(r['deep'], r['targets'])} | "
                   f"{share(r['deep_oracle'], r['deep_oracle_n'])} | {r['superficial']} | "
                   f"{share(r['established'], r['established_n'])} |")
    return out


def controls_section(points: Sequence[Any], methods: Sequence[str]) -> tuple[list[str], dict[str, Any]]:
    """Markdown lines and ``{"controls": rows}`` for summary.json; both empty when no point
    carries ``deep_oracle`` or ``p_chance``."""
    if not any(field_of(p, "deep_oracle") is not None or field_of(p, "p_chance") is not None for p in points):
        return [], {}
    rows = sort_rows(control_rows(points), methods)
    return ["### Deep against its controls", "",
            "Per target trajectory. *deep (raw)*: some grid point is deep, as in the headline's deep rate. "
            "*deep_oracle*: some grid point is deep relative to the target's exact-unlearning model (the model's "
            "recipe retrained without the target's set, `oracle = true`): an excluded fact counts as still held only "
            "where the point's evidence beats that model's by a margin calibrated on never-seen facts; n counts the "
            "targets whose points all carry it. *established superficial*: of the targets with no deep point, those "
            f"whose last grid point has p_chance < {ESTABLISHED} (chance alone, each fact answered at its relation's "
            "raw false-positive rate on never-seen facts, rarely gives a verdict as bad); n counts those whose last "
            "point carries p_chance (`chance_calibration`). Each share with its 95 % Wilson interval. The `oracle` "
            "row is exact unlearning itself: its deep_oracle is not computed, and its superficial verdicts are the "
            "probe's errors.", "",
            *control_table(rows), ""], {"controls": rows}
