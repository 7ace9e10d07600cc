"""What :mod:`.tracking` logs: the tags runs are found by, a point's metrics and its step (its grid
index), the configuration as flat parameters and the summary as metrics; shared by the backends."""

from __future__ import annotations

import math
import re
from typing import Any, Iterable, Mapping, Sequence

from ..errors import UserError

#: the tags runs are found by
SWEEP_TAG, TRAJECTORY_TAG, KIND_TAG = "deepunlearn.sweep", "deepunlearn.trajectory", "deepunlearn.kind"
#: the store's meta key of the sweep's id
SWEEP_ID_KEY = "sweep_id"
#: a point's keys that identify it (tags and params of its run, not metrics)
_ID_KEYS = {"model", "target", "method", "param", "seed", "base_method", "batch", "batch_targets", "request"}


class TrackerError(UserError):
    """A tracker that cannot be used (unknown, not installed, a store it cannot open)."""


# ---------------------------------------------------------------------------- what is logged
def trajectory_key(p: Any) -> str:
    """``MODEL/TARGET/METHOD/seed-S``: the tag of a point's trajectory run."""
    return f"{p.model}/{int(p.target)}/{p.method}/seed-{0 if p.seed is None else int(p.seed)}"


def grid_step(grid: Sequence[float] | None, param: float) -> int:
    """The index of ``param`` in its trajectory's grid (a baseline row, with no grid, is step 0).

    >>> grid_step([1, 2, 4], 4), grid_step(None, 0), grid_step([0.5, 5], 1)
    (2, 0, 1)
    """
    if not grid:
        return 0
    for i, g in enumerate(grid):
        if math.isclose(float(g), float(param), rel_tol=1e-12, abs_tol=0.0):
            return i
    return sorted({float(g) for g in grid} | {float(param)}).index(float(param))  # not in the grid: its rank


_BAD = re.compile(r"[^A-Za-z0-9_\-. /:]")


def metric_name(name: str) -> str:
    """A name MLflow accepts (letters, digits, ``_-. /:``; anything else becomes ``_``)."""
    return _BAD.sub("_", str(name))[:250]


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        f = float(v)
        return f if math.isfinite(f) else None
    return None


def point_metrics(p: Any) -> dict[str, float]:
    """A point's numbers as metrics: every numeric (or true/false) value it holds, the accuracy per
    group as ``accuracy_GROUP``, its measures as ``measures.NAME``, plus ``deep``, ``n_forgotten``
    and ``grid_value``. Keys that identify the point (model, target, method, seed) are left out.

    >>> from deepunlearn.bench.store import Point
    >>> m = point_metrics(Point("m", 3, "ga", 2, recall=0.5, accuracy=0.9, forgotten=(3,), target_forgotten=True,
    ...                   extra={"deep": False, "seconds": 1.5}))
    >>> m["recall"], m["deep"], m["grid_value"], m["n_forgotten"], m["target_forgotten"], "target" in m
    (0.5, 0.0, 2.0, 1.0, 1.0, False)
    """
    from .metrics import is_deep

    d = p.to_dict()
    out: dict[str, float] = {}
    for k, v in d.items():
        if k in _ID_KEYS:
            continue
        if isinstance(v, Mapping):
            prefix = "accuracy_" if k == "accuracy_groups" else f"{k}."
            for kk, vv in _flat(v):
                if (n := _number(vv)) is not None:
                    out[metric_name(prefix + kk)] = n
        elif (n := _number(v)) is not None:
            out[metric_name(k)] = n
    out["deep"] = float(is_deep(d))
    out["n_forgotten"] = float(len(p.forgotten))
    out["grid_value"] = float(p.param)
    return out


def _flat(d: Mapping, prefix: str = "") -> Iterable[tuple[str, Any]]:
    for k, v in d.items():
        if isinstance(v, Mapping):
            yield from _flat(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def config_params(config: Mapping[str, Any]) -> dict[str, str]:
    """The resolved configuration as flat parameters: nested keys joined with dots, lists of
    numbers or names as JSON (``methods.ga = [1, 2, 4]``), lists of tables by index
    (``models.0.path``); values cut at MLflow's 6000 characters.

    >>> config_params({"kb": "kb.json", "methods": {"ga": [1, 2]}, "models": [{"name": "tiny"}], "lr": None})
    {'kb': 'kb.json', 'methods.ga': '[1, 2]', 'models.0.name': 'tiny', 'lr': 'None'}
    """
    import json

    out: dict[str, str] = {}

    def walk(v: Any, key: str) -> None:
        if isinstance(v, Mapping) and v:
            for k, vv in v.items():
                walk(vv, f"{key}.{k}" if key else str(k))
        elif isinstance(v, list) and v and all(isinstance(x, Mapping) for x in v):
            for i, vv in enumerate(v):
                walk(vv, f"{key}.{i}")
        else:
            text = json.dumps(v, default=str) if isinstance(v, (list, Mapping)) else str(v)
            out[metric_name(key)] = text[:6000]

    walk(dict(config), "")
    return out


def summary_metrics(summary: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, float]:
    """The summary's numbers as ``MODEL/METHOD/METRIC`` metrics (intervals and lists left out).

    >>> summary_metrics({"tiny": {"ga": {"acc_at_recall_0.8": 0.5, "n_targets": 2, "ci": [0, 1]}}})
    {'tiny/ga/acc_at_recall_0.8': 0.5, 'tiny/ga/n_targets': 2.0}
    """
    out = {}
    for model, per in summary.items():
        for method, vals in per.items():
            for k, v in vals.items():
                if (n := _number(v)) is not None:
                    out[metric_name(f"{model}/{method}/{k}")] = n
    return out
