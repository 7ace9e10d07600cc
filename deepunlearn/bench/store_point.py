"""One evaluated point of a sweep (:class:`Point`), as the results store keeps it.

A point is one (model, target, method, parameter) of a trajectory: the paper's recall and
accuracy, the accuracy's parts, the facts forgotten, the accuracy per relation group of the KB's
domain (``accuracy_groups``, :mod:`deepunlearn.unlearn.point_fields`), and optionally its measures
and the bounds of a sampled accuracy. A point dict written before per-group accuracies
(``accuracy_family`` / ``accuracy_biography`` only) reads as the family domain's two groups. :mod:`.store` writes and reads them. A point's
``seed`` is its run seed (``[run] seeds``, :mod:`.config_run`); None stands for the sweep's seed,
which is what a store written before the seed column holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..unlearn.point_fields import LEGACY_GROUPS, group_fields, group_key, legacy_groups

__all__ = ["METRIC_COLUMNS", "TIMING_KEYS", "Point"]

#: Columns of a point besides its key, in the order of ``TargetRunner`` point dicts (the accuracy per
#: relation group, ``accuracy_{group}`` flat, follows ``accuracy``).
METRIC_COLUMNS = ("recall", "accuracy", "accuracy_rule", "accuracy_other")

#: extra keys that are wall-clock times, not results (a rerun gives other values)
TIMING_KEYS = ("seconds",)


@dataclass(frozen=True)
class Point:
    """One evaluated point of a trajectory (the paper's (recall, accuracy) plus its parts)."""

    model: str
    target: int
    method: str
    param: float
    recall: float
    accuracy: float
    accuracy_rule: float | None = None
    accuracy_other: float | None = None
    target_forgotten: bool = False
    forgotten: tuple[int, ...] = ()
    exact: bool = True
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    #: likelihood / membership / reference-model scores of the point, None when off
    measures: dict[str, Any] | None = field(default=None, compare=False)
    #: accuracy per relation group, the KB's groups in order (a point written before per-group
    #: accuracies: ``family`` / ``biography``); None when the point has none
    accuracy_groups: dict[str, float | None] | None = None
    #: 95 % bounds of a sampled accuracy; None for a full probe (and in older stores)
    accuracy_low: float | None = None
    accuracy_high: float | None = None
    #: the run seed (``[run] seeds``); None: the sweep's seed (what a store without the column holds)
    seed: int | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any], model: str | None = None) -> "Point":
        """From a ``TargetRunner`` point dict (``point.to_dict()``), keeping unknown keys in ``extra``."""
        measures, groups = d.get("measures"), d.get("accuracy_groups")
        for name, v in (("measures", measures), ("accuracy_groups", groups)):
            if v is not None and not isinstance(v, dict):
                raise TypeError(f"point {d.get('method')}/{d.get('target')}/{d.get('param')}: {name} must be "
                                f"a dict or None, not {type(v).__name__}")
        if groups is None:  # written before per-group accuracies: the family domain's two
            groups = legacy_groups(d)
        known = {"model", "target", "method", "param", "target_forgotten", "forgotten", "exact", "measures",
                 "accuracy_groups", "accuracy_low", "accuracy_high", "seed", *METRIC_COLUMNS,
                 *(group_key(g) for g in (*LEGACY_GROUPS, *(groups or ())))}  # flat copies of the groups
        return cls(
            model=str(model if model is not None else d["model"]),
            target=int(d["target"]),
            method=str(d["method"]),
            param=param_value(d["param"]),
            **{c: _opt_float(d.get(c)) for c in METRIC_COLUMNS},
            target_forgotten=bool(d.get("target_forgotten", False)),
            forgotten=tuple(sorted(int(i) for i in d.get("forgotten", ()))),
            exact=bool(d.get("exact", True)),
            extra={k: v for k, v in d.items() if k not in known},
            measures=measures,
            accuracy_groups=None if groups is None else {str(g): _opt_float(a) for g, a in groups.items()},
            accuracy_low=_opt_float(d.get("accuracy_low")), accuracy_high=_opt_float(d.get("accuracy_high")),
            seed=None if d.get("seed") is None else int(d["seed"]),
        )

    def to_dict(self, timing: bool = True) -> dict[str, Any]:
        """The point as a dict, each group's accuracy also flat as ``accuracy_{group}`` after
        ``accuracy`` (:func:`~deepunlearn.unlearn.point_fields.group_fields`); ``timing=False``
        leaves out the wall-clock keys (:data:`TIMING_KEYS`), which differ between two runs that
        give the same results."""
        d = {
            "model": self.model, "target": self.target, "method": self.method, "param": self.param,
            "recall": self.recall, "accuracy": self.accuracy, **group_fields(self.accuracy_groups),
            "accuracy_rule": self.accuracy_rule, "accuracy_other": self.accuracy_other,
            **({} if self.accuracy_groups is None else {"accuracy_groups": dict(self.accuracy_groups)}),
            "target_forgotten": self.target_forgotten, "forgotten": list(self.forgotten), "exact": self.exact,
        }
        d.update({k: getattr(self, k) for k in ("accuracy_low", "accuracy_high", "seed") if getattr(self, k) is not None})
        d.update({k: v for k, v in self.extra.items() if timing or k not in TIMING_KEYS})
        if self.measures is not None:  # absent, not null, when scores were off (older outputs unchanged)
            d["measures"] = self.measures
        return d


def param_value(x: Any) -> float:
    f = float(x)
    return int(f) if f.is_integer() and abs(f) < 2**53 else f


def _opt_float(x: Any) -> float | None:
    if x is None:
        return None
    f = float(x)
    return None if math.isnan(f) else f
