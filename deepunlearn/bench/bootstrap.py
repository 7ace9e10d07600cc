"""95 % bootstrap intervals over targets for the headline deep-unlearning metrics.

Acc@Recall>=t, Recall@Acc>=t, Success-DU@0.8, Success-DU@0.9 and the deep rate are means over
targets of per-target values (:func:`deepunlearn.unlearn.summary.target_metrics`); each gets the
95 % interval of that mean by ``scipy.stats.bootstrap`` with the **percentile** method, 9,999
resamples and ``numpy.random.default_rng(0)``. Percentile rather than BCa: Success-DU and the deep
rate are 0/1 per target and the best-of metrics take few distinct values, where BCa's jackknife
acceleration is often undefined (scipy then warns and returns NaN); the percentile interval is
always defined and stays inside [0, 1].

In a summary (:func:`add_intervals`) each such metric ``NAME`` gains ``NAME_ci_lo``,
``NAME_ci_hi`` and ``NAME_ci_n`` (the number of targets behind the interval; NaN values are left
out). Degenerate samples, documented and never a warning:

* no value: low and high None, n 0;
* one value: low and high None, n 1 (one target says nothing about the spread);
* every value equal (n >= 2): the point itself, ``[v, v]`` (every resample's mean is v).

Summaries written before intervals have no ``_ci_`` keys: :func:`format_value` then prints the
mean (with ``± std`` where asked), as before.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Mapping, Sequence

import numpy as np

from ..unlearn.summary import metric_columns

#: the interval's confidence level, resamples, seed and scipy method
LEVEL = 0.95
N_RESAMPLES = 9999
SEED = 0
METHOD = "percentile"


def interval_keys(threshold: float = 0.8) -> list[str]:
    """The metrics that get an interval, in report order.

    >>> interval_keys()
    ['acc_at_recall_0.8', 'recall_at_acc_0.8', 'success_du_0.8', 'success_du_0.9', 'deep_rate']
    """
    return [name for name, _, m in metric_columns(threshold, ()) if m.interval]


def _finite(values: Sequence[Any]) -> np.ndarray:
    return np.asarray([float(x) for x in values if isinstance(x, numbers.Real) and not isinstance(x, bool)
                       and math.isfinite(float(x))], dtype=float)


def bootstrap_interval(values: Sequence[Any], *, level: float = LEVEL, n_resamples: int = N_RESAMPLES,
                       seed: int = SEED) -> tuple[float | None, float | None, int]:
    """``(low, high, n)``: the ``level`` percentile bootstrap interval of the mean of ``values``
    (None and NaN left out; ``n`` the values used) by ``scipy.stats.bootstrap`` with
    ``numpy.random.default_rng(seed)``. Fewer than two values: ``(None, None, n)``; all equal:
    ``(v, v, n)``.

    >>> bootstrap_interval([1.0]), bootstrap_interval([0.0, 0.0, None]), bootstrap_interval([])
    ((None, None, 1), (0.0, 0.0, 2), (None, None, 0))
    >>> lo, hi, n = bootstrap_interval([0, 1, 1, 0, 1])
    >>> (lo, hi, n)
    (0.2, 1.0, 5)
    """
    x = _finite(values)
    n = len(x)
    if n < 2:
        return None, None, n
    if np.all(x == x[0]):
        return float(x[0]), float(x[0]), n
    from scipy.stats import bootstrap

    res = bootstrap((x,), np.mean, confidence_level=level, n_resamples=n_resamples, method=METHOD,
                    rng=np.random.default_rng(seed), vectorized=True)
    return float(res.confidence_interval.low), float(res.confidence_interval.high), n


def add_intervals(out: dict[str, Any], rows: Sequence[Mapping[str, float]], threshold: float = 0.8) -> None:
    """Add ``NAME_ci_lo`` / ``NAME_ci_hi`` / ``NAME_ci_n`` to an aggregated summary ``out`` for
    each of :func:`interval_keys`, from the per-target ``rows``."""
    for name in interval_keys(threshold):
        lo, hi, n = bootstrap_interval([r.get(name) for r in rows])
        out[f"{name}_ci_lo"], out[f"{name}_ci_hi"], out[f"{name}_ci_n"] = lo, hi, n


def meta() -> dict[str, Any]:
    """How the intervals were made, for summary.json's ``intervals`` key."""
    return {"level": LEVEL, "method": METHOD, "n_resamples": N_RESAMPLES, "seed": SEED, "over": "targets",
            "metrics": "acc_at_recall, recall_at_acc, success_du_*, deep_rate"}


def interval_note(summary: Mapping[str, Mapping[str, Mapping[str, Any]]], methods: Sequence[str]) -> str:
    """The line under a table with intervals: what the brackets are and n (targets) per method.

    >>> print(interval_note({"tiny": {"ga": {"n_targets": 11}, "tv": {"n_targets": 9}}}, ["ga", "tv"]))
    [low, high]: 95 % bootstrap interval over targets (percentile, 9999 resamples, seed 0); n: tiny GA 11, TV 9
    """
    ns = "; ".join(f"{model} " + ", ".join(f"{m.upper()} {per[m].get('n_targets', '?')}" for m in methods if m in per)
                   for model, per in summary.items())
    return (f"[low, high]: {LEVEL:.0%} bootstrap interval over targets ({METHOD}, {N_RESAMPLES} resamples, "
            f"seed {SEED}); n: {ns}").replace("95%", "95 %")


def _missing(x: Any) -> bool:
    return not isinstance(x, numbers.Real) or isinstance(x, bool) or not math.isfinite(x)


def has_interval(s: Mapping[str, Any], key: str) -> bool:
    """Whether summary ``s`` has an interval for ``key`` (even a degenerate one: its ``_ci_n``)."""
    return not _missing(s.get(f"{key}_ci_n"))


def format_value(s: Mapping[str, Any], key: str, digits: int = 2, show_spread: bool = True,
                 n_targets: Any = None) -> str:
    """A cell: ``0.45 [0.20, 0.70]`` with the interval, plus ``, n=K`` when its n differs from
    ``n_targets`` (or ``n_targets`` is not given); ``0.45, n=1`` with a degenerate one; without
    interval keys (an older summary) ``0.45±0.12`` when ``show_spread`` and a std is there, else
    ``0.45``; ``-`` when the value is missing.

    >>> s = {"a": 0.45, "a_ci_lo": 0.2, "a_ci_hi": 0.7, "a_ci_n": 11}
    >>> format_value(s, "a"), format_value(s, "a", n_targets=11)
    ('0.45 [0.20, 0.70], n=11', '0.45 [0.20, 0.70]')
    >>> format_value({"a": 1.0, "a_ci_lo": None, "a_ci_hi": None, "a_ci_n": 1}, "a", n_targets=1)
    '1.00, n=1'
    >>> format_value({"a": 0.5, "a_std": 0.1}, "a"), format_value({}, "a")
    ('0.50±0.10', '-')
    """
    v = s.get(key)
    if _missing(v):
        return "-"
    text = f"{v:.{digits}f}"
    if has_interval(s, key):
        n = int(s[f"{key}_ci_n"])
        lo, hi = s.get(f"{key}_ci_lo"), s.get(f"{key}_ci_hi")
        if not (_missing(lo) or _missing(hi)):
            text += f" [{lo:.{digits}f}, {hi:.{digits}f}]"
            return text if n_targets is not None and n == n_targets else f"{text}, n={n}"
        return f"{text}, n={n}"
    e = s.get(f"{key}_std")
    return f"{text}±{e:.{digits}f}" if show_spread and not _missing(e) else text
