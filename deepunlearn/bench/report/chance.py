"""The report's "Could chance explain it?" sub-section: per model and method, at each target's last
grid point, how many verdicts that are not deep stand against a model answering only by chance.

It appears only when points carry ``p_chance`` (``evaluate --calibration``, then
``evaluate-report``; see :mod:`deepunlearn.unlearn.chance_verdict`): a verdict that is not deep
is *established* when its p_chance is below 0.05, else *not established*.

>>> pts = [{"model": "A", "method": "ga", "target": t, "param": 1.0, "deep": d, "p_chance": p}
...        for t, d, p in ((1, False, 0.01), (2, False, 0.4), (3, True, None))]
>>> rows = chance_rows(pts)
>>> [(r["targets"], r["not_deep"], r["established"], r["not_established"]) for r in rows]
[(3, 2, 1, 1)]
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence

from ...unlearn.chance_verdict import ESTABLISHED
from ...unlearn.summary import field_of, value_of
from .tables import number, record_table, sort_rows

_COLUMNS = (("model", "model", str), ("method", "method", str), ("targets", "targets", str),
            ("deep", "deep", str), ("not deep", "not_deep", str),
            (f"established (p_chance < {ESTABLISHED})", "established", str),
            ("not established", "not_established", str), ("median p_chance", "median", number))


def chance_rows(points: Sequence[Any]) -> list[dict[str, Any]]:
    """One row per (model, method) over the targets' last grid points (module docstring)."""
    last: dict[tuple, Any] = {}
    for p in points:
        key = (value_of(p, "model"), value_of(p, "method"), int(value_of(p, "target")))
        if key not in last or float(value_of(p, "param")) >= float(value_of(last[key], "param")):
            last[key] = p
    rows: dict[tuple, dict[str, Any]] = {}
    for (model, method, _), p in last.items():
        r = rows.setdefault((model, method), {"model": model, "method": method, "targets": 0, "deep": 0,
                                              "not_deep": 0, "established": 0, "not_established": 0, "_p": []})
        r["targets"] += 1
        if field_of(p, "deep"):
            r["deep"] += 1
            continue
        r["not_deep"] += 1
        pc = field_of(p, "p_chance")
        if pc is not None:
            r["_p"].append(float(pc))
            r["established" if pc < ESTABLISHED else "not_established"] += 1
    out = []
    for r in rows.values():
        ps = r.pop("_p")
        r["median"] = statistics.median(ps) if ps else None
        out.append(r)
    return out


def chance_section(points: Sequence[Any], methods: Sequence[str]) -> tuple[list[str], dict[str, Any]]:
    """Markdown lines and ``{"chance": rows}`` for summary.json; both empty when no point carries
    ``p_chance``."""
    if not any(field_of(p, "p_chance") is not None for p in points):
        return [], {}
    rows = sort_rows(chance_rows(points), methods)
    return ["### Could chance explain it?", "",
            "At each target's last grid point. *p_chance*: the probability that a model answering the target's "
            "facts only by chance (each at the raw false-positive rate of its relation on never-seen facts) is "
            f"judged not deep too; a verdict that is not deep is *established* when p_chance < {ESTABLISHED}. "
            "Not deep without p_chance: a verdict judged without a calibration.", "",
            *record_table(rows, _COLUMNS), ""], {"chance": rows}
