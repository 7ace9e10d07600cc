"""Calibration of the probe modes (deepunlearn.probe.calibration), on scripted evidence: a model
that guesses a relation name uniformly is known at about the set FPR once calibrated, not at
the chance rate of the raw rule."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import binom

from deepunlearn.probe.calibration import Calibration, CalibrationError, calibrate, raw_rates, table, threshold

N_CAND = 11  # a relation-name answer among 11 names


def guesser(n: int, rng: np.random.Generator, *, skill: float = 0.0) -> np.ndarray:
    """Rank evidence of a model scoring 11 candidates at random (``skill`` added to the gold's
    normalised log-probability): the margin over the best wrong one where gold ranks first."""
    scores = rng.normal(size=(n, N_CAND))
    scores[:, 0] += skill
    margin = scores[:, 0] - scores[:, 1:].max(axis=1)
    return np.where(margin > 0, margin, -math.inf)


def yesno_coin(n: int, rng: np.random.Generator) -> np.ndarray:
    """Yes/no evidence of a model that answers at random: right half the time, no skill."""
    m = rng.normal(size=n)
    return np.where(m > 0, m, -math.inf)


def _sets(seed: int, n_neg: int = 400, n_pos: int = 200):
    rng = np.random.default_rng(seed)
    groups = ["family", "biography"]
    ng = [groups[i % 2] for i in range(n_neg)]
    pg = [groups[i % 2] for i in range(n_pos)]
    neg = {"rank": guesser(n_neg, rng), "yesno": yesno_coin(n_neg, rng)}
    pos = {"rank": guesser(n_pos, rng, skill=3.0), "yesno": yesno_coin(n_pos, rng)}
    return neg, ng, pos, pg


def test_threshold_rule_ties_and_small_n():
    # k = floor(0.05 * 40) = 2 negatives may pass; ties at the threshold all fail
    neg = [-math.inf] * 30 + [1.0] * 5 + [2.0, 3.0, 4.0, 5.0, 6.0]
    t = threshold(neg, 0.05)
    assert t == 4.0 and (np.asarray(neg) > t).sum() == 2  # the 3rd largest
    tied = [-math.inf] * 37 + [2.0] * 3
    assert threshold(tied, 0.05) == 2.0  # three tied at the top, only two may pass: none does
    assert threshold([0.1, 0.2, 0.3], 0.05) == 0.3  # n < 1/fpr: nothing of the negatives passes
    assert threshold([-math.inf] * 100, 0.05) == -math.inf  # the raw rule passes none: unchanged
    with pytest.raises(CalibrationError):
        threshold([], 0.05)


def test_uniform_guesser_is_known_at_the_set_fpr_not_at_chance():
    neg, ng, pos, pg = _sets(0)
    cal = calibrate(neg, ng, pos, pg, fpr=0.05)
    # fresh never-seen facts from the same guesser
    rng = np.random.default_rng(99)
    fresh, fg = guesser(2000, rng), ["family", "biography"] * 1000
    raw = (fresh > -math.inf).mean()
    assert raw == pytest.approx(1 / N_CAND, abs=0.02)  # the raw rule: chance, 1 in 11
    got = cal.known("rank", fresh, fg).sum()
    # the calibrated share stays under the FPR plus binomial slack (99.9 % quantile)
    assert got <= binom.ppf(0.999, len(fresh), 0.05)
    assert cal.known("rank", fresh, fg).mean() < raw
    for g in ("family", "biography"):
        assert cal.entry("rank", g).fpr <= 0.05


def test_raw_any_high_calibrated_any_at_fpr():
    neg, ng, pos, pg = _sets(1)
    cal = calibrate(neg, ng, pos, pg, fpr=0.05)
    raw = raw_rates(neg, ng, pos, pg)
    assert all(raw["any_raw"][g][0] > 0.45 for g in ("family", "biography"))  # yes/no coin + rank guess
    assert cal.floor() <= 0.05
    for g in ("family", "biography"):
        assert cal.entries["any"][g].fpr <= 0.05


def test_uninformative_mode_left_out_of_any_with_reason():
    neg, ng, pos, pg = _sets(2)
    cal = calibrate(neg, ng, pos, pg, fpr=0.05)
    e = cal.entry("yesno", "family")
    assert not e.informative and "below 50%" in e.reason
    assert cal.entry("rank", "family").informative
    assert cal.informative("family") == ["rank"]
    # a fact only yesno calls known is not known under the calibrated any
    ev = {"rank": np.array([-math.inf]), "yesno": np.array([50.0])}
    assert not cal.known_any(ev, ["family"])[0]
    assert "uninformative: TPR" in table(cal)


def test_thresholds_reproduce_from_a_seed_and_round_trip():
    a = calibrate(*_sets(3)[:2], *_sets(3)[2:], fpr=0.05)
    b = calibrate(*_sets(3)[:2], *_sets(3)[2:], fpr=0.05)
    assert json.dumps(a.to_json()) == json.dumps(b.to_json())
    back = Calibration.from_json(json.loads(json.dumps(a.to_json())))
    assert back.to_json() == a.to_json()
    # a probe -o file holding the calibration reads back too
    assert Calibration.from_json({"known": 3, "calibration": a.to_json()}).to_json() == a.to_json()


def test_bad_calibration_input_names_the_field():
    with pytest.raises(CalibrationError) as e:
        Calibration.from_json({"format": "x"}, source="c.json")
    assert e.value.field == "format" and "c.json" in str(e.value)
    neg, ng, pos, pg = _sets(4)
    with pytest.raises(CalibrationError) as e:
        calibrate(neg, ng, pos, pg, fpr=1.5)
    assert e.value.field == "fpr"
    with pytest.raises(CalibrationError) as e:
        calibrate(neg, ["family"] * len(ng), pos, pg)
    assert e.value.field == "groups"
    cal = calibrate(neg, ng, pos, pg)
    with pytest.raises(CalibrationError) as e:
        cal.known("rank", np.zeros(1), ["geo"])
    assert "geo" in str(e.value)


def test_small_groups_are_flagged_in_the_table():
    rng = np.random.default_rng(5)
    neg = {"rank": guesser(30, rng)}
    pos = {"rank": guesser(30, rng, skill=3.0)}
    cal = calibrate(neg, ["family"] * 25 + ["biography"] * 5, pos, ["family"] * 15 + ["biography"] * 15)
    assert cal.entry("rank", "biography").threshold == max(neg["rank"][25:])
    text = table(cal)
    assert "group biography has 5 never-seen facts" in text and "group family" not in text
