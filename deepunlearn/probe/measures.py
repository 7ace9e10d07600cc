"""Reference-model statistics of unlearning, on plain arrays: TOFU's forget quality and
model utility, MUSE's PrivLeak, Baluta et al.'s generalised exposure, bootstrap intervals.

Statistics come from scipy (``ks_2samp``, ``hmean``, ``bootstrap``), never hand-rolled. Each
function documents what it returns on empty or degenerate input: ``None`` where a measure needs a
reference that is missing (never 0).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np


def _finite(values) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64).ravel()
    return x[np.isfinite(x)]


def forget_quality(tr_unlearned: Sequence[float], tr_retain: Sequence[float]) -> float | None:
    """TOFU's forget quality: the p-value of the two-sample Kolmogorov-Smirnov test
    (``scipy.stats.ks_2samp``, two-sided) between the truth ratios of the forget set under the
    unlearned model and under the retain model. High (>= 0.05) = indistinguishable from a model
    that never saw the facts. Non-finite values are dropped; ``None`` if either side is then empty."""
    from scipy.stats import ks_2samp

    a, b = _finite(tr_unlearned), _finite(tr_retain)
    if not len(a) or not len(b):
        return None
    return float(ks_2samp(a, b).pvalue)


def model_utility(prob: Sequence[float], rouge_l: Sequence[float], truth_ratio: Sequence[float]) -> float:
    """TOFU's model utility on the retain facts: the harmonic mean (``scipy.stats.hmean``) of the
    mean probability, the mean ROUGE-L recall and the mean ``max(0, 1 - truth ratio)``; 0 if any
    of the three is 0 (the harmonic mean's limit) or has no finite value."""
    from scipy.stats import hmean

    parts = []
    for values in (prob, rouge_l, np.maximum(0.0, 1.0 - np.asarray(truth_ratio, dtype=np.float64))):
        x = _finite(values)
        parts.append(float(x.mean()) if len(x) else 0.0)
    if min(parts) <= 0:
        return 0.0
    return float(hmean(parts))


def privleak(auc_unlearned: float | None, auc_retain: float | None) -> float | None:
    """MUSE's PrivLeak ``(AUC_unlearned - AUC_retain) / AUC_retain``: about 0 is right, large
    negative over-unlearning, large positive under-unlearning. ``None`` without a retain AUC
    (or with a non-finite or zero one)."""
    if auc_unlearned is None or auc_retain is None:
        return None
    u, r = float(auc_unlearned), float(auc_retain)
    if not (math.isfinite(u) and math.isfinite(r)) or r == 0:
        return None
    return (u - r) / r


def _g(nll_x: float, nll_refs) -> float:
    """Baluta et al.'s g(x; theta, R) with one sample: mean_j L(x) / (L(x) + L(r_j))."""
    refs = np.asarray(nll_refs, dtype=np.float64).ravel()
    with np.errstate(divide="ignore", invalid="ignore"):  # 0/0 (every loss 0) is NaN: no genex, no warning
        return float(np.mean(nll_x / (nll_x + refs)))


def genex(nll_x_retain: float, nll_refs_retain, nll_x_unlearned: float, nll_refs_unlearned) -> float:
    """Baluta et al.'s generalised exposure (their eq. 3-4 with one sample of x):
    ``log2 g_retain - log2 g_unlearned`` with ``g(x; theta, R) = mean_j L(x) / (L(x) + L(r_j))``
    and ``L`` the per-token NLL under model theta. ``g`` is about 1/2 when x is no more likely than
    the references, small when x is much more likely; genex > 0 means the unlearned model still
    finds x relatively more likely than the retain model does. NaN when the references are
    empty or a g is 0."""
    if not len(np.ravel(nll_refs_retain)) or not len(np.ravel(nll_refs_unlearned)):
        return math.nan
    g_r, g_u = _g(float(nll_x_retain), nll_refs_retain), _g(float(nll_x_unlearned), nll_refs_unlearned)
    if not (g_r > 0 and g_u > 0):
        return math.nan
    return math.log2(g_r) - math.log2(g_u)


def bootstrap_ci(values: Sequence[float], level: float = 0.95, n_resamples: int = 9999,
                 seed: int = 0) -> tuple[float, float] | None:
    """The ``level`` confidence interval of the mean by ``scipy.stats.bootstrap`` (BCa, as scipy's
    default; MUSE reports 95 % intervals over 9,999 resamples). Non-finite values are dropped;
    one value, or values all equal, give ``(v, v)``; none give ``None``."""
    from scipy.stats import bootstrap

    x = _finite(values)
    if not len(x):
        return None
    if len(x) == 1 or np.all(x == x[0]):
        return (float(x[0]), float(x[0]))
    res = bootstrap((x,), np.mean, confidence_level=level, n_resamples=n_resamples,
                    random_state=np.random.default_rng(seed), vectorized=True)
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(lo) and math.isfinite(hi)):  # BCa can fail on nearly degenerate data
        res = bootstrap((x,), np.mean, confidence_level=level, n_resamples=n_resamples, method="percentile",
                        random_state=np.random.default_rng(seed), vectorized=True)
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return (lo, hi)
