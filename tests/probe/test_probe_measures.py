"""Reference statistics against hand computations and scipy on random data."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from deepunlearn.probe import measures as M


def test_forget_quality_is_the_ks_p_value():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=80), rng.normal(size=60)
    assert M.forget_quality(a, b) == scipy.stats.ks_2samp(a, b).pvalue
    assert M.forget_quality(a, b) > 0.05  # same distribution: high
    assert M.forget_quality(a, b + 3) < 1e-10  # shifted: about 0
    assert M.forget_quality([], b) is None and M.forget_quality(a, [np.nan]) is None


def test_ks_p_value_by_hand():
    # samples [1, 2] and [3, 4]: D = 1; the exact two-sided p-value is 2 / C(4, 2) = 1/3
    assert M.forget_quality([1.0, 2.0], [3.0, 4.0]) == pytest.approx(1 / 3)


def test_model_utility_harmonic_mean():
    got = M.model_utility([0.5, 0.5], [1.0, 0.0], [0.5, 1.5])  # means 0.5, 0.5, mean(0.5, 0) = 0.25
    assert got == pytest.approx(3 / (1 / 0.5 + 1 / 0.5 + 1 / 0.25))
    assert M.model_utility([0.5], [0.0], [0.2]) == 0.0
    assert M.model_utility([0.5], [1.0], [3.0]) == 0.0  # truth ratio above 1 everywhere


def test_privleak():
    assert M.privleak(0.9, 0.6) == pytest.approx(0.5)
    assert M.privleak(0.3, 0.6) == pytest.approx(-0.5)
    assert M.privleak(0.9, None) is None and M.privleak(None, 0.5) is None


def test_genex_by_hand():
    # retain: L(x) = 2, refs 2 and 6 -> g = (1/2 + 1/4) / 2 = 3/8
    # unlearned: L(x) = 1, refs 3 and 7 -> g = (1/4 + 1/8) / 2 = 3/16
    assert M.genex(2.0, [2.0, 6.0], 1.0, [3.0, 7.0]) == pytest.approx(math.log2(3 / 8) - math.log2(3 / 16))
    assert M.genex(2.0, [2.0, 6.0], 2.0, [2.0, 6.0]) == 0.0
    assert math.isnan(M.genex(1.0, [], 1.0, [1.0]))


def test_bootstrap_ci_matches_scipy():
    rng = np.random.default_rng(1)
    x = rng.normal(size=40)
    lo, hi = M.bootstrap_ci(x, n_resamples=999, seed=3)
    ref = scipy.stats.bootstrap((x,), np.mean, n_resamples=999, random_state=np.random.default_rng(3))
    assert (lo, hi) == (ref.confidence_interval.low, ref.confidence_interval.high)
    assert lo < x.mean() < hi
    assert M.bootstrap_ci([0.7]) == (0.7, 0.7) and M.bootstrap_ci([2, 2, 2]) == (2.0, 2.0)
    assert M.bootstrap_ci([]) is None
