"""p_chance (deepunlearn.rules.chance): the probability that a chance-only answer set meets every
minimal deep-unlearning set, against a brute force written here and against closed forms."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deepunlearn.rules.chance import EXACT_LIMIT, p_chance
from deepunlearn.rules.errors import RulesError


def brute(sets, p) -> float:
    """Sum over every subset of the cone of its probability, where it meets every set."""
    cone = sorted(set().union(*sets)) if sets else []
    total = 0.0
    for bits in itertools.product([False, True], repeat=len(cone)):
        chosen = {f for f, b in zip(cone, bits) if b}
        w = math.prod(p[f] if b else 1 - p[f] for f, b in zip(cone, bits))
        if all(chosen & set(s) for s in sets):
            total += w
    return total


probs = st.sampled_from([0.0, 0.05, 0.2, 0.5, 0.9, 1.0]) | st.floats(0, 1)


@st.composite
def families(draw):
    n = draw(st.integers(1, 9))
    p = {f: draw(probs) for f in range(n)}
    k = draw(st.integers(1, 5))
    sets = [{0} | set(draw(st.lists(st.integers(1, max(1, n - 1)), max_size=4))) & set(range(n)) for _ in range(k)]
    return sets, p


@settings(max_examples=150, deadline=None)
@given(families())
def test_exact_matches_brute_force(fam):
    sets, p = fam
    r = p_chance(sets, p)
    assert r.method == "exact" and r.se == 0.0
    assert r.value == pytest.approx(brute(sets, p), abs=1e-12)
    assert r.cone == len(set().union(*sets))


@settings(max_examples=60, deadline=None)
@given(families())
def test_exact_without_the_target_matches_brute_force(fam):
    sets, p = fam  # sets that share nothing in general: no common fact to take out
    sets = [s - {0} or {1 % len(p)} for s in sets]
    assert p_chance(sets, p).value == pytest.approx(brute(sets, p), abs=1e-12)


def test_one_set_closed_form():
    p = {3: 0.1, 7: 0.25, 9: 0.4}
    assert p_chance([{3, 7, 9}], p).value == pytest.approx(1 - 0.9 * 0.75 * 0.6)


def test_sets_sharing_only_the_target_closed_form():
    t = 0
    sets = [{t, 1, 2}, {t, 3}, {t, 4, 5, 6}]
    p = {0: 0.1, 1: 0.2, 2: 0.3, 3: 0.4, 4: 0.05, 5: 0.5, 6: 0.15}
    expect = p[t] + (1 - p[t]) * math.prod(1 - math.prod(1 - p[f] for f in s - {t}) for s in sets)
    assert p_chance(sets, p).value == pytest.approx(expect, abs=1e-12)


def test_zero_and_one_probabilities():
    sets = [{0, 1}, {0, 2}]
    assert p_chance(sets, {0: 0.0, 1: 0.0, 2: 0.0}).value == 0.0  # nothing answered by chance
    assert p_chance(sets, {0: 1.0, 1: 0.0, 2: 0.0}).value == 1.0  # the target is always answered
    assert p_chance(sets, {0: 0.0, 1: 1.0, 2: 0.0}).value == 0.0  # {0, 2} is never met
    assert p_chance([], {}).value == 1.0 and p_chance([set()], {}).value == 0.0


def _wide(n_extra: int):
    """Sets {t, a_i, b_i} over a cone of 1 + 2 * n_extra facts, chained so no closed form applies."""
    sets = [{0, 2 * i + 1, 2 * i + 2} for i in range(n_extra)] + [{0, 2 * i + 2, 2 * i + 3} for i in range(n_extra - 1)]
    p = {f: 0.55 + 0.4 * ((f * 37) % 11) / 11 for f in range(2 * n_extra + 1)}
    return sets, p


def test_monte_carlo_within_four_standard_errors_just_over_the_limit():
    sets, p = _wide(11)  # 22 facts to enumerate after the target, just over the limit
    exact = p_chance(sets, p, exact_limit=22)
    assert exact.method == "exact" and exact.enumerated == 22 > EXACT_LIMIT
    mc = p_chance(sets, p, seed=3)
    assert mc.method == "monte-carlo" and mc.samples > 0 and mc.se > 0
    assert abs(mc.value - exact.value) <= 4 * mc.se
    assert p_chance(sets, p, seed=3) == mc  # seeded: the same estimate again


def test_bad_probabilities_are_named():
    with pytest.raises(RulesError, match="fact 1"):
        p_chance([{0, 1}], {0: 0.5})
    with pytest.raises(RulesError, match="fact 0"):
        p_chance([{0}], {0: 1.5})


def brute_of(sets, p, chosen, known) -> float:
    """Over every subset S of ``chosen``: answered = (known minus chosen) | S; count it where S
    has at least as many facts as known & chosen and answered meets every set."""
    chosen = sorted(chosen)
    k = len(set(known) & set(chosen))
    total = 0.0
    for bits in itertools.product([False, True], repeat=len(chosen)):
        s_ = {f for f, b in zip(chosen, bits) if b}
        answered = (set(known) - set(chosen)) | s_
        if len(s_) >= k and all(answered & set(m) for m in sets):
            total += math.prod(p[f] if b else 1 - p[f] for f, b in zip(chosen, bits))
    return total


@settings(max_examples=60, deadline=None)
@given(families(), st.data())
def test_p_chance_of_equals_brute_force(fam, data):
    from deepunlearn.rules.chance import p_chance_of

    sets, p = fam
    chosen = sets[0]
    cone = sorted(set().union(*sets))
    known = set(data.draw(st.lists(st.sampled_from(cone), max_size=len(cone))))
    r = p_chance_of(sets, p, chosen, known)
    assert r.method == "exact" and r.value == pytest.approx(brute_of(sets, p, chosen, known), abs=1e-9)


def test_p_chance_of_monte_carlo_is_within_four_standard_errors():
    from deepunlearn.rules.chance import p_chance_of

    chosen = set(range(22))
    p = {f: 0.5 for f in chosen}
    known = set(range(12))
    exact = p_chance_of([chosen], p, chosen, known, exact_limit=22)
    mc = p_chance_of([chosen], p, chosen, known, exact_limit=20, samples=20000, seed=3)
    assert mc.method == "monte-carlo" and abs(mc.value - exact.value) <= 4 * mc.se
