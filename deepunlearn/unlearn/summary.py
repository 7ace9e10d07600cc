"""Per-target summary metrics of one trajectory (paper section 5.1, Table 3), for ``unlearn``'s
output; the bench layer's :mod:`deepunlearn.bench.metrics` has the same definitions (a test
checks they agree) and may call these.

A *curve* is one target's ``(recall, accuracy)`` points along one method's grid. Following the
reference, every curve gets the two end points ``(recall 0, accuracy 1)`` (do nothing) and
``(recall 1, accuracy 0)`` (forget everything) before any best-of is taken, so each metric is
defined for every target:

* **Acc@Recall>=t** (:func:`acc_at_recall`): the best accuracy among points with recall >= t.
* **Recall@Acc>=t** (:func:`recall_at_acc`): the best recall among points with accuracy >= t.
* **AUC** (:func:`auc`): the area under the upper envelope ``A(r) = max{acc_i : recall_i >= r}``
  over r in [0, 1], end points included: a step function, no interpolation between points (so
  points under the envelope do not count).
* **Acc@Superficial** (:func:`acc_at_superficial`): the best accuracy among points where the
  target itself is forgotten; the end point (1, 0) forgets it too, so the floor is 0.
* **Success-DU@a** (:func:`success_du`): 1 when some grid point of the trajectory is
  *deep* (the target is no longer derivable, t not in Omega(K_after, R)) with accuracy >= a, else 0;
  the end points never count (the end point (1, 0) is deep but keeps nothing). Averaged over
  targets it is the fraction of targets deeply unlearned at accuracy >= a (a = 0.8 and 0.9).
  A point's ``deep`` flag is read as stored; points written before the flag existed fall back
  to ``recall >= 1 - EPS`` (with exact minimal sets, recall 1 is the same thing).
* **Deep rate**: 1 when any grid point is deep, whatever its accuracy.
* **Model-derived** (``success_du_model_{a}``, ``deep_model_rate``): the same two with a point's
  ``deep_model`` (the model answers the target neither directly nor through any of its compose
  questions, :mod:`deepunlearn.unlearn.derived`) in place of the rules' ``deep``; NaN for a
  trajectory none of whose points has ``deep_model`` (a sweep without ``model_derived = true``).
* **Per group** (``acc_at_recall_{t}_{group}``, paper Figure 6): Acc@Recall>=t with the accuracy
  over one relation group's facts (:func:`group_accuracy`) in place of the overall accuracy, for
  every group of the KB's domain (``family`` and ``biography`` in the family domain).
* **Seconds** (:func:`seconds_per_target`): the wall seconds the trajectory took (the largest
  ``seconds`` of its points: each counts from the start of the job), NaN when no point has it. A
  batch row's seconds are its batch's, spent on ``batch_size`` targets at once, so they are
  divided by ``batch_size`` to stay seconds per target.

Thresholds compare with a tolerance of :data:`EPS` (recall 4/5 counts as >= 0.8).
This module (with :mod:`.point_fields`, which reads a point's fields) imports nothing but the
standard library. A metric is one :class:`Metric` in :data:`METRICS` (:func:`register_metric`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

# how a point's fields and group accuracies are read (re-exported: callers import them from here)
from .point_fields import (  # noqa: F401
    DEFAULT_GROUPS, EPS, LEGACY_GROUPS, field_of, group_accuracy, group_fields, is_deep, legacy_groups, point_groups,
    seconds_per_target, value_of,
)

#: The reference's end points: (recall, accuracy) of doing nothing and of forgetting everything.
ENDPOINTS: tuple[tuple[float, float], ...] = ((0.0, 1.0), (1.0, 0.0))
#: the paper's threshold
THRESHOLD = 0.8
#: accuracy thresholds of Success-DU (a method's goal is Success-DU@0.9 >= 0.9); always both
SUCCESS_THRESHOLDS: tuple[float, ...] = (0.8, 0.9)


def with_endpoints(curve: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The curve's points plus the two end points, sorted by recall then accuracy.

    >>> with_endpoints([(0.5, 0.9)])
    [(0.0, 1.0), (0.5, 0.9), (1.0, 0.0)]
    """
    return sorted([(float(r), float(a)) for r, a in curve] + list(ENDPOINTS))


def acc_at_recall(curve: Iterable[tuple[float, float]], threshold: float = THRESHOLD) -> float:
    """Best accuracy among points with recall >= ``threshold``, end points included.

    >>> acc_at_recall([(0.5, 0.9), (0.9, 0.4), (0.8, 0.3)])
    0.4
    >>> acc_at_recall([(0.5, 0.9)])          # only the end point (1, 0) reaches recall 0.8
    0.0
    """
    return max(a for r, a in with_endpoints(curve) if r >= threshold - EPS)


def recall_at_acc(curve: Iterable[tuple[float, float]], threshold: float = THRESHOLD) -> float:
    """Best recall among points with accuracy >= ``threshold``, end points included.

    >>> recall_at_acc([(0.5, 0.9), (0.9, 0.4)])
    0.5
    >>> recall_at_acc([(0.5, 0.7)])          # only the end point (0, 1) keeps accuracy 0.8
    0.0
    """
    return max(r for r, a in with_endpoints(curve) if a >= threshold - EPS)


def envelope(curve: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The upper envelope as steps ``(r_j, A_j)``: for recall in ``(r_{j-1}, r_j]`` the best
    accuracy reachable is ``A_j`` (r_0 = 0). End points included.

    >>> envelope([(0.5, 0.9), (0.9, 0.4), (0.6, 0.2)])
    [(0.0, 1.0), (0.5, 0.9), (0.6, 0.4), (0.9, 0.4), (1.0, 0.0)]
    """
    pts = with_endpoints(curve)
    best_at: dict[float, float] = {}
    for r, a in pts:
        best_at[r] = max(a, best_at.get(r, -math.inf))
    steps, best = [], -math.inf
    for r in sorted(best_at, reverse=True):
        best = max(best, best_at[r])
        steps.append((r, best))
    return steps[::-1]


def auc(curve: Iterable[tuple[float, float]]) -> float:
    """Area under the upper envelope of the accuracy-recall curve over recall in [0, 1]: the
    mean over thresholds r of Acc@Recall>=r.

    >>> round(auc([(0.5, 0.9), (0.9, 0.4)]), 10)   # 0.5*0.9 + 0.4*0.4 + 0.1*0
    0.61
    >>> auc([]), auc([(1.0, 1.0)])
    (0.0, 1.0)
    """
    area, prev = 0.0, 0.0
    for r, a in envelope(curve):
        area += (r - prev) * a
        prev = r
    return area


def acc_at_superficial(points: Iterable[tuple[float, bool]]) -> float:
    """Best accuracy among ``(accuracy, target_forgotten)`` points where the target is forgotten;
    0 when none is (the end point (1, 0) forgets it).

    >>> acc_at_superficial([(0.95, False), (0.9, True), (0.5, True)])
    0.9
    """
    return max([0.0] + [float(a) for a, forgotten in points if forgotten])


def success_du(points: Iterable[Any], threshold: float = THRESHOLD) -> float:
    """1.0 when some point is deep with accuracy >= ``threshold`` (tolerance :data:`EPS`), else
    0.0. No end point is added: forgetting everything is deep but is no success.

    >>> pts = [{"recall": 1.0, "deep": True, "accuracy": 0.85}, {"recall": 0.4, "deep": False, "accuracy": 0.99}]
    >>> success_du(pts, 0.8), success_du(pts, 0.9), success_du([])
    (1.0, 0.0, 0.0)
    """
    return float(any(is_deep(p) and value_of(p, "accuracy") is not None and float(value_of(p, "accuracy")) >= threshold - EPS
                     for p in points))


def _model_derived(points: Sequence[Any], threshold: float | None) -> float:
    """Success-DU (``threshold``: an accuracy) or the deep rate (None) by ``deep_model``; NaN when
    no point has it.

    >>> pts = [{"accuracy": 0.95, "deep_model": False}, {"accuracy": 0.85, "deep_model": True}]
    >>> _model_derived(pts, 0.8), _model_derived(pts, 0.9), _model_derived(pts, None), _model_derived([{}], None)
    (1.0, 0.0, 1.0, nan)
    """
    verdicts = [(field_of(p, "deep_model"), field_of(p, "accuracy")) for p in points]
    verdicts = [(bool(d), a) for d, a in verdicts if d is not None]
    if not verdicts:
        return math.nan
    return float(any(d and (threshold is None or (a is not None and float(a) >= threshold - EPS))
                     for d, a in verdicts))


def curve_of(points: Sequence[Any], acc_key: str = "accuracy") -> list[tuple[float, float]]:
    """``(recall, accuracy)`` of points (objects or dicts); points whose ``acc_key`` is None
    (a part with no facts to measure) are left out."""
    return [(float(value_of(p, "recall")), float(value_of(p, acc_key))) for p in points if value_of(p, acc_key) is not None]


@dataclass(frozen=True)
class Metric:
    """One per-target metric: the one declaration that :func:`metric_names`,
    :func:`target_metrics`, the bench layer's aggregates, bootstrap intervals and tables read.

    ``key``: its name, with ``{t}`` for the threshold, and one column per relation group
    (``each="group"``, ``{g}``: the KB's groups) or per Success-DU threshold (``each="success"``,
    ``{a}``); ``label``: how the deep-unlearning table heads it; ``fn(points, curve, threshold,
    arg) -> float`` (``arg``: the group or the Success-DU threshold); ``spread``: aggregated with
    ``_std``/``_sem`` (a share of targets such as the deep rate is not); ``interval``: a 95 %
    bootstrap interval over targets; ``du_table``: a column of the deep-unlearning (Success-DU)
    table (``optional``: only when some row has a value); ``higher``: higher is better.

    The headline table (the paper's Table 3 shape) has a column for each metric whose
    ``headline`` is a number, in ascending order of it (ties: this table's order), headed
    ``title`` (default: ``label``). ``digits``: decimals of its cells (default: each table's own,
    3 in the headline table and 2 in the deep-unlearning table); a cell shows the bootstrap
    interval where the summary has one, else ± the standard deviation where the metric has a
    spread (headline table).
    """

    key: str
    label: str
    fn: Callable[[Sequence[Any], list, float, Any], float]
    each: str = ""
    spread: bool = True
    interval: bool = False
    du_table: bool = False
    higher: bool = True
    optional: bool = False
    title: str = ""
    headline: float | None = None
    digits: int | None = None

    def heading(self, threshold: float, arg: Any = None) -> str:
        """The headline table's heading of the column for ``arg`` (a group or a threshold)."""
        return _fill(self.title or self.label, threshold, arg)

    def expand(self, threshold: float, groups: Sequence[str]) -> list[tuple[str, str, Any]]:
        """``(name, label, arg)`` of each column this metric gives."""
        args = groups if self.each == "group" else SUCCESS_THRESHOLDS if self.each == "success" else [None]
        return [(_fill(self.key, threshold, a), _fill(self.label, threshold, a), a) for a in args]


def _fill(text: str, threshold: float, arg: Any) -> str:
    """``text`` with ``{t}`` (the threshold), ``{g}`` (a group) and ``{a}`` (a threshold) filled in."""
    return text.format(t=f"{threshold:g}", g=arg, a=f"{arg:g}" if isinstance(arg, float) else arg)


def _group_acc_at_recall(points, curve, threshold, g) -> float:
    pc = [(float(value_of(p, "recall")), float(a)) for p in points if (a := group_accuracy(p, g)) is not None]
    return acc_at_recall(pc, threshold) if pc else math.nan


#: every per-target metric, in report order (:func:`register_metric` adds one)
METRICS: tuple[Metric, ...] = (
    Metric("acc_at_recall_{t}", "Acc@R≥{t}", lambda pts, c, t, _: acc_at_recall(c, t), interval=True, du_table=True,
           title="Acc@Recall≥{t}", headline=2),
    Metric("recall_at_acc_{t}", "R@A≥{t}", lambda pts, c, t, _: recall_at_acc(c, t), interval=True, du_table=True,
           title="Recall@Acc≥{t}", headline=1),
    Metric("auc", "AUC", lambda pts, c, t, _: auc(c), du_table=True, headline=3),
    Metric("acc_at_superficial", "Acc@superficial",
           lambda pts, c, t, _: acc_at_superficial((value_of(p, "accuracy"), value_of(p, "target_forgotten")) for p in pts),
           title="Acc@Superficial", headline=4),
    Metric("superficial_rate", "target forgotten", lambda pts, c, t, _: float(any(value_of(p, "target_forgotten") for p in pts)),
           spread=False, title="superficial rate", headline=5, digits=2),
    Metric("acc_at_recall_{t}_{g}", "Acc@R≥{t} ({g})", _group_acc_at_recall, each="group", title="Acc@Recall≥{t} {g}",
           headline=6),
    Metric("success_du_{a}", "Success-DU@{a}", lambda pts, c, t, a: success_du(pts, a), each="success",
           interval=True, du_table=True),
    Metric("deep_rate", "deep rate", lambda pts, c, t, _: float(any(is_deep(p) for p in pts)), spread=False,
           interval=True, du_table=True),
    Metric("success_du_model_{a}", "Success-DU@{a} (model)", lambda pts, c, t, a: _model_derived(pts, a),
           each="success", du_table=True, optional=True),
    Metric("deep_model_rate", "deep rate (model)", lambda pts, c, t, _: _model_derived(pts, None), spread=False,
           du_table=True, optional=True),
    Metric("seconds", "s/target", lambda pts, c, t, _: seconds_per_target(pts), higher=False, du_table=True, digits=1),
)


def check_metric(metric: Metric, others: Sequence[Metric] = ()) -> None:
    """Raise ``ValueError`` naming ``metric`` when it is not complete: a key or label that is empty,
    ``fn`` not callable, ``each`` other than ``""``, ``"group"`` or ``"success"`` (or a key without
    its ``{g}`` / ``{a}``), a field other than ``{t}``, ``{g}``, ``{a}`` in its key, label or title, a key
    one of ``others`` has, ``headline`` not a number, ``digits`` not a count.

    >>> check_metric(Metric("auc", "AUC again", lambda pts, c, t, _: 0.0), METRICS)
    Traceback (most recent call last):
    ...
    ValueError: metric 'auc': its key is taken by another metric
    """
    m, name = metric, repr(getattr(metric, "key", metric))
    if not isinstance(m, Metric):
        raise ValueError(f"metric {name}: not a Metric (deepunlearn.unlearn.summary.Metric)")
    problems = [
        "its key is empty" if not str(m.key).strip() else None,
        "its label is empty" if not str(m.label).strip() else None,
        "fn is not callable" if not callable(m.fn) else None,
        f"each must be '', 'group' or 'success', not {m.each!r}" if m.each not in ("", "group", "success") else None,
        "a per-group key needs {g}" if m.each == "group" and "{g}" not in m.key else None,
        "a per-threshold key needs {a}" if m.each == "success" and "{a}" not in m.key else None,
        "headline must be a number or None" if m.headline is not None and (
            isinstance(m.headline, bool) or not isinstance(m.headline, (int, float))) else None,
        "digits must be a count (0 or more) or None" if m.digits is not None and (
            isinstance(m.digits, bool) or not isinstance(m.digits, int) or m.digits < 0) else None,
        "its key is taken by another metric" if any(o.key == m.key for o in others) else None,
    ]
    problem = next((p for p in problems if p), None)
    if problem is None:
        try:
            m.expand(THRESHOLD, ["g"])
            m.heading(THRESHOLD, "g")
        except (KeyError, IndexError, ValueError) as e:
            problem = f"its key, label or title has a field other than {{t}}, {{g}} and {{a}} ({e})"
    if problem:
        raise ValueError(f"metric {name}: {problem}")


def register_metric(metric: Metric) -> Metric:
    """Add ``metric`` to :data:`METRICS` (after the others): every table, aggregate and
    per-target output that reads the table then has it. Checked complete first
    (:func:`check_metric`; the built-in table is checked the same way when this module loads).
    Returns ``metric``."""
    global METRICS
    check_metric(metric, METRICS)
    METRICS = (*METRICS, metric)
    return metric


for _i, _m in enumerate(METRICS):  # the built-in table, as a registered metric would be
    check_metric(_m, METRICS[:_i])
del _i, _m


def headline_columns(threshold: float = THRESHOLD, groups: Sequence[str] = DEFAULT_GROUPS,
                     metrics: Sequence[Metric] | None = None) -> list[tuple[str, str, Metric]]:
    """``(name, heading, metric)`` of the headline table's columns: the metrics with a
    ``headline`` place, in its order (one column per group of a per-group metric).

    >>> [h for _, h, _ in headline_columns(groups=["reporting"])]
    ['Recall@Acc≥0.8', 'Acc@Recall≥0.8', 'AUC', 'Acc@Superficial', 'superficial rate', 'Acc@Recall≥0.8 reporting']
    """
    ms = [m for m in (METRICS if metrics is None else metrics) if m.headline is not None]
    ms = sorted(ms, key=lambda m: m.headline)  # stable: ties keep the table's order
    return [(name, m.heading(threshold, arg), m) for m in ms for name, _, arg in m.expand(threshold, groups)]


def metric_columns(threshold: float = THRESHOLD, groups: Sequence[str] = DEFAULT_GROUPS,
                   metrics: Sequence[Metric] | None = None) -> list[tuple[str, str, Metric]]:
    """``(name, label, metric)`` of every column of :data:`METRICS`, in report order."""
    return [(name, label, m) for m in (METRICS if metrics is None else metrics)
            for name, label, _ in m.expand(threshold, groups)]


def metric_names(threshold: float = THRESHOLD, groups: Sequence[str] = DEFAULT_GROUPS) -> list[str]:
    """Names of :func:`target_metrics`' keys, in report order; one ``acc_at_recall_{t}_{group}``
    per relation group.

    >>> metric_names()[:3]
    ['acc_at_recall_0.8', 'recall_at_acc_0.8', 'auc']
    >>> metric_names()[5:]
    ['acc_at_recall_0.8_family', 'acc_at_recall_0.8_biography', 'success_du_0.8', 'success_du_0.9', 'deep_rate', \
'success_du_model_0.8', 'success_du_model_0.9', 'deep_model_rate', 'seconds']
    >>> metric_names(groups=["reporting", "location"])[5:7]
    ['acc_at_recall_0.8_reporting', 'acc_at_recall_0.8_location']
    """
    return [name for name, _, _ in metric_columns(threshold, groups)]


def target_metrics(points: Sequence[Any], threshold: float = THRESHOLD,
                   groups: Sequence[str] | None = None) -> dict[str, float]:
    """Every metric of one target's trajectory, keyed by :func:`metric_names`. ``points`` have
    ``recall``, ``accuracy``, ``accuracy_groups`` (or, older, ``accuracy_family`` and
    ``accuracy_biography``) and ``target_forgotten`` (objects or dicts), optionally ``deep`` and
    ``seconds`` (see :func:`field_of`); a part with no facts (accuracy None) gives NaN, as do
    seconds never recorded. ``groups``: the relation groups to report (default: the points' own,
    :func:`point_groups`).

    >>> pts = [dict(recall=0.5, accuracy=0.9, accuracy_family=0.85, accuracy_biography=1.0, target_forgotten=True),
    ...        dict(recall=0.9, accuracy=0.4, accuracy_family=0.2, accuracy_biography=0.7, target_forgotten=True)]
    >>> [round(v, 4) for v in target_metrics(pts).values()]
    [0.4, 0.5, 0.61, 0.9, 1.0, 0.2, 0.7, 0.0, 0.0, 0.0, nan, nan, nan, nan]
    """
    curve = curve_of(points)
    groups = point_groups(points) if groups is None else groups
    return {name: m.fn(points, curve, threshold, arg) for m in METRICS for name, _, arg in m.expand(threshold, groups)}


def format_summary(metrics: Mapping[str, float], threshold: float = THRESHOLD) -> str:
    """The headline metrics on one line.

    >>> format_summary({"acc_at_recall_0.8": 0.4, "recall_at_acc_0.8": 0.5, "auc": 0.61})
    'Acc@Recall>=0.8 0.400  Recall@Acc>=0.8 0.500  AUC 0.610'
    """
    t = f"{threshold:g}"

    def f(x: Any) -> str:
        return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"

    return (f"Acc@Recall>={t} {f(metrics.get(f'acc_at_recall_{t}'))}  "
            f"Recall@Acc>={t} {f(metrics.get(f'recall_at_acc_{t}'))}  AUC {f(metrics.get('auc'))}")


def point_json(point, kb) -> dict:
    """A :class:`~deepunlearn.unlearn.loop.Point` for JSON: facts as ``[s, r, o]``."""
    d = point.to_dict()
    d.pop("target", None)
    d.pop("method", None)
    d["forgotten"] = [list(kb.facts[i]) for i in point.forgotten]
    d["set"] = [list(kb.facts[i]) for i in point.set]
    return d


def mean_summary(summaries: list[dict]) -> dict:
    """Each metric averaged over targets (NaN and None left out; None where no target has it)."""
    out: dict = {"n_targets": len(summaries)}
    for k in (summaries[0] if summaries else {}):
        vals = [s[k] for s in summaries if s.get(k) is not None and not math.isnan(s[k])]
        out[k] = sum(vals) / len(vals) if vals else None
    return out
