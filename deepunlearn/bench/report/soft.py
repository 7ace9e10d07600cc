"""The report's "Under soft rules" sub-section: per model and method, at each target's last grid
point, the exact verdict beside ``deep_p``, the probability that the rules, each grounding
holding with its rule's probability, still derive the target from what the model knows
(:mod:`deepunlearn.rules.soft`).

It appears only when points carry ``deep_p`` (a sweep or ``evaluate`` whose rule set has
probabilities). *Expected deep* is the sum over the targets of ``1 - deep_p``: how many of them
the soft rules leave underivable, on average.

>>> pts = [{"model": "A", "method": "ga", "target": t, "param": 1.0, "deep": d, "deep_p": p}
...        for t, d, p in ((1, True, 0.0), (2, False, 0.25), (3, False, 1.0))]
>>> r = soft_rows(pts)[0]
>>> r["targets"], r["deep"], r["expected_deep"], r["mean_deep_p"], r["certain"]
(3, 1, 1.75, 0.4166666666666667, 1)
"""

from __future__ import annotations

from typing import Any, Sequence

from ...unlearn.summary import field_of, value_of
from .tables import number, record_table, sort_rows

_COLUMNS = (("model", "model", str), ("method", "method", str), ("targets", "targets", str),
            ("deep (exact)", "deep", str), ("expected deep (soft)", "expected_deep", number),
            ("mean deep_p", "mean_deep_p", number), ("deep_p = 1", "certain", str))


def soft_rows(points: Sequence[Any]) -> list[dict[str, Any]]:
    """One row per (model, method) over the targets' last grid points that carry ``deep_p``."""
    last: dict[tuple, Any] = {}
    for p in points:
        if field_of(p, "deep_p") is None:
            continue
        key = (value_of(p, "model"), value_of(p, "method"), int(value_of(p, "target")))
        if key not in last or float(value_of(p, "param")) >= float(value_of(last[key], "param")):
            last[key] = p
    rows: dict[tuple, dict[str, Any]] = {}
    for (model, method, _), p in last.items():
        r = rows.setdefault((model, method), {"model": model, "method": method, "targets": 0, "deep": 0,
                                              "expected_deep": 0.0, "certain": 0, "_p": 0.0})
        dp = float(field_of(p, "deep_p"))
        r["targets"] += 1
        r["deep"] += bool(field_of(p, "deep"))
        r["expected_deep"] += 1.0 - dp
        r["certain"] += dp == 1.0
        r["_p"] += dp
    out = []
    for r in rows.values():
        r["mean_deep_p"] = r.pop("_p") / r["targets"]
        out.append(r)
    return out


def soft_section(points: Sequence[Any], methods: Sequence[str]) -> tuple[list[str], dict[str, Any]]:
    """Markdown lines and ``{"soft": rows}`` for summary.json; both empty when no point carries
    ``deep_p``."""
    if not any(field_of(p, "deep_p") is not None for p in points):
        return [], {}
    rows = sort_rows(soft_rows(points), methods)
    return ["### Under soft rules", "",
            "At each target's last grid point. *deep_p*: the probability that the rules, each grounding holding "
            "on its own with its rule's probability (ProbLog's semantics), still derive the target from what the "
            "model knows; *expected deep*: the sum of 1 - deep_p over the targets. A target the exact verdict "
            "calls deep has deep_p 0; one the model still answers has deep_p 1.", "",
            *record_table(rows, _COLUMNS), ""], {"soft": rows}
