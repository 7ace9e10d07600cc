"""Batch and sequential unlearning requests (MUSE's scalability and sustainability) as
JSON-able tables, computed from a sweep's points.

* **Batch rows** forget N targets in one run: method label ``f"{base}@b{N}"`` (``ga@b5``), one
  row per target of the batch, with ``base_method``, ``batch_size``, ``batch`` (0-based index)
  and ``batch_targets`` (in a dict's top level or a store point's ``extra``). :func:`batch_table`
  reads each batch at its last (strongest) grid point: accuracy (shared by the batch's rows),
  recall and the ``deep`` flag of each of its targets; the same base method's single-target rows
  of the same model, read at each trajectory's last grid point, give the batch size 1 row.
* **Sequential rows** serve requests one after another without restoring the weights: label
  ``f"{base}@seq"``, ``request`` (0-based serving order of the row's target); the last grid
  point of each request carries ``earlier`` (``{"target", "recall", "deep"}`` of every target
  served so far, this one included, measured after this request) and ``accuracy_after``.
  :func:`sequential_table` gives one row per request served: accuracy, mean recall and the share
  still deep over the targets served so far, and the targets that *came back* (deep right after
  their own request, not deep now: forgotten again through the rules' derivations).

Points without ``deep`` (older stores) fall back to ``recall >= 1 - EPS`` (:func:`is_deep`).
The figures of these tables are drawn by :mod:`.du_plots`.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..metrics import value_of, field_of, group_trajectories, is_deep, success_du

_BATCH = re.compile(r"^(?P<base>.+)@b(?P<n>[0-9]+)$")
_SEQ = re.compile(r"^(?P<base>.+)@seq$")


def batch_info(p: Any) -> tuple[str, int] | None:
    """``(base method, batch size)`` of a batch row, None for any other row: the ``base_method``
    and ``batch_size`` fields, else the ``@bN`` suffix of the method label.

    >>> batch_info({"method": "ga@b5"}), batch_info({"method": "npo", "base_method": "npo", "batch_size": 3})
    (('ga', 5), ('npo', 3))
    >>> batch_info({"method": "ga"}) is None
    True
    """
    m = _BATCH.match(str(value_of(p, "method")))
    n = field_of(p, "batch_size")
    if n is None and m is None:
        return None
    base = field_of(p, "base_method") or (m.group("base") if m else str(value_of(p, "method")))
    return str(base), int(n if n is not None else m.group("n"))


def seq_base(p: Any) -> str | None:
    """The base method of a sequential row (label ``X@seq``), None for any other row.

    >>> seq_base({"method": "npo@seq"}), seq_base({"method": "npo"})
    ('npo', None)
    """
    m = _SEQ.match(str(value_of(p, "method")))
    if m is None:
        return None
    return str(field_of(p, "base_method") or m.group("base"))


def has_batch(points: Iterable[Any]) -> bool:
    """Whether any point is a batch row."""
    return any(batch_info(p) is not None for p in points)


def has_sequential(points: Iterable[Any]) -> bool:
    """Whether any point is a sequential row."""
    return any(seq_base(p) is not None for p in points)


def _mean(xs: Sequence[float]) -> float:
    xs = [float(x) for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return float(np.mean(xs)) if xs else math.nan


def _row(model: str, method: str, base: str, size: int, lasts: list[Any], trajectories: list[list[Any]],
         n_batches: int) -> dict[str, Any]:
    return {"model": model, "method": method, "base_method": base, "batch_size": size, "n_batches": n_batches,
            "n_targets": len(lasts), "accuracy": _mean([value_of(p, "accuracy") for p in lasts]),
            "recall": _mean([value_of(p, "recall") for p in lasts]), "deep": _mean([float(is_deep(p)) for p in lasts]),
            "success_du_0.8": _mean([success_du(t, 0.8) for t in trajectories])}


def batch_table(points: Iterable[Any]) -> list[dict[str, Any]]:
    """One row per (model, base method, batch size): ``{model, method, base_method, batch_size,
    n_batches, n_targets, accuracy, recall, deep, success_du_0.8}``, the means over the batch's
    targets at each batch's last grid point (``deep``: the share of deep targets; Success-DU@0.8
    over each target's whole trajectory). Batch size 1 comes from the base method's single-target
    rows of the same model when there are any. Sorted by model, base method, batch size.

    >>> pts = [dict(model="m", method="ga@b2", target=t, param=p, recall=r, accuracy=a, batch=0, deep=r == 1)
    ...        for p, a, rs in [(1, 0.9, (0.5, 1.0)), (2, 0.7, (1.0, 1.0))] for t, r in zip((3, 4), rs)]
    >>> [(r["method"], r["batch_size"], r["n_targets"], r["accuracy"], r["recall"], r["deep"], r["success_du_0.8"])
    ...  for r in batch_table(pts)]
    [('ga@b2', 2, 2, 0.7, 1.0, 1.0, 0.5)]
    """
    points = list(points)
    groups = group_trajectories(points)
    batched: dict[tuple[str, str, int], dict[str, list[list[Any]]]] = defaultdict(lambda: defaultdict(list))
    for (model, method, _t), traj in groups.items():
        info = batch_info(traj[0])
        if info is not None:
            batched[(model, *info)][method].append(traj)
    rows = []
    for (model, base, size), by_label in batched.items():
        for method, trajs in by_label.items():
            lasts, n_batches = _batch_lasts(trajs)
            rows.append(_row(model, method, base, size, lasts, trajs, n_batches))
    for model, base in sorted({(m, b) for (m, b, _n) in batched}):
        if any(n == 1 for (m, b, n) in batched if (m, b) == (model, base)):
            continue
        singles = [traj for (mo, me, _t), traj in groups.items() if mo == model and me == base]
        if singles:
            rows.append(_row(model, base, base, 1, [t[-1] for t in singles], singles, len(singles)))
    return sorted(rows, key=lambda r: (r["model"], r["base_method"], r["batch_size"], r["method"]))


def _batch_lasts(trajs: list[list[Any]]) -> tuple[list[Any], int]:
    """Each target's point at the last grid point of its batch (the largest param any row of that
    batch reached), and the number of batches; rows without a ``batch`` index form one batch."""
    by_batch: dict[Any, list[list[Any]]] = defaultdict(list)
    for traj in trajs:
        by_batch[field_of(traj[0], "batch")].append(traj)
    lasts = []
    for members in by_batch.values():
        last = max(float(value_of(p, "param")) for traj in members for p in traj)
        lasts += [p for traj in members for p in traj if float(value_of(p, "param")) == last]
    return lasts, len(by_batch)


def _own_deep(requests: Mapping[int, Any]) -> dict[int, bool]:
    """Whether each served target was deep right after its own request (its own entry in that
    request's ``earlier`` list, else the request point's own flag)."""
    own: dict[int, bool] = {}
    for p in requests.values():
        t = int(value_of(p, "target"))
        entry = next((e for e in field_of(p, "earlier") or () if int(e["target"]) == t), None)
        own[t] = bool(entry["deep"]) if entry is not None and entry.get("deep") is not None else is_deep(p)
    return own


def sequential_table(points: Iterable[Any]) -> list[dict[str, Any]]:
    """One row per (model, sequential method, number of requests served): ``{model, method,
    base_method, requests, target, accuracy, mean_recall_earlier, deep_earlier, came_back}`` from the
    last grid point of each request (the one with ``earlier``): ``accuracy`` is its
    ``accuracy_after``; recall and the share of deep targets are over every target served so far
    (this request's included); ``came_back`` lists the served targets that were deep right after
    their own request but are not deep now. Sorted by model, method, requests.

    >>> def pt(req, t, earlier, acc):
    ...     return dict(model="m", method="ga@seq", target=t, param=2, recall=1.0, accuracy=acc, request=req,
    ...                 accuracy_after=acc, earlier=[dict(target=u, recall=r, deep=d) for u, r, d in earlier])
    >>> rows = sequential_table([pt(0, 5, [(5, 1.0, True)], 0.9), pt(1, 6, [(5, 0.5, False), (6, 1.0, True)], 0.8)])
    >>> [(r["requests"], r["accuracy"], r["mean_recall_earlier"], r["deep_earlier"], r["came_back"]) for r in rows]
    [(1, 0.9, 1.0, 1.0, []), (2, 0.8, 0.75, 0.5, [5])]
    """
    seqs: dict[tuple[str, str], dict[int, Any]] = defaultdict(dict)
    for p in points:
        if seq_base(p) is None or field_of(p, "earlier") is None:
            continue
        key, req = (str(value_of(p, "model")), str(value_of(p, "method"))), int(field_of(p, "request", 0))
        prev = seqs[key].get(req)
        if prev is None or float(value_of(p, "param")) > float(value_of(prev, "param")):
            seqs[key][req] = p
    rows = []
    for (model, method), requests in sorted(seqs.items()):
        own = _own_deep(requests)
        for req in sorted(requests):
            p = requests[req]
            earlier = list(field_of(p, "earlier") or ())
            acc = field_of(p, "accuracy_after")
            rows.append({
                "model": model, "method": method, "base_method": seq_base(p), "requests": req + 1,
                "target": int(value_of(p, "target")), "accuracy": math.nan if acc is None else float(acc),
                "mean_recall_earlier": _mean([e.get("recall") for e in earlier]),
                "deep_earlier": _mean([float(bool(e["deep"])) for e in earlier if e.get("deep") is not None]),
                "came_back": sorted(int(e["target"]) for e in earlier
                                    if e.get("deep") is False and own.get(int(e["target"])) is True),
            })
    return rows
