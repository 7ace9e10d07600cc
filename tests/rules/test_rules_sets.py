"""Minimal deep-unlearning sets on the release: the cached sets, exact enumeration, MDUS."""

from __future__ import annotations

import numpy as np
import pytest

from deepunlearn.rules import (
    RulesError,
    dus,
    is_deep_unlearning_set,
    is_minimal,
    mdus,
    minimal_sets,
    prune,
)


def test_every_cached_release_set_is_valid_and_minimal(edu_graph, edu_cached):
    assert sum(len(v) for v in edu_cached.values()) == 593
    for t, sets in edu_cached.items():
        for s in sets:
            assert t in s
            assert is_deep_unlearning_set(edu_graph, t, s), (t, sorted(s))
            assert is_minimal(edu_graph, t, s), (t, sorted(s))


def test_exact_sets_are_760_and_contain_the_cached_593(edu_kb, edu_exact, edu_cached):
    assert sorted(edu_exact) == sorted(edu_kb.targets)
    assert sum(len(v) for v in edu_exact.values()) == 760
    for t in edu_kb.targets:
        assert set(edu_cached[t]) <= edu_exact[t]
    missed = sum(1 for t in edu_kb.targets if set(edu_cached[t]) != edu_exact[t])
    assert missed > 0  # the release's 100 seeds did not find every set


def test_exact_sets_are_valid_minimal_and_contain_the_target(edu_graph, edu_exact):
    for t, sets in edu_exact.items():
        for s in sets:
            assert t in s and is_minimal(edu_graph, t, s)


def test_mdus_sets_are_valid_minimal_and_exact_ones(edu_kb, edu_graph, edu_exact):
    total = 0
    for t in edu_kb.targets:
        ms = minimal_sets(edu_graph, t, exact=False, seeds=100, rng=np.random.default_rng(t))
        assert not ms.exact and ms.method == "mdus"
        assert len(set(ms.sets)) == len(ms.sets)  # deduplicated
        for s in ms.sets:
            assert is_minimal(edu_graph, t, s)
        assert set(ms.sets) <= edu_exact[t]
        total += len(ms.sets)
    assert 500 < total <= 760


def test_dus_then_prune(edu_graph):
    rng = np.random.default_rng(5)
    for t in (272, 311, 45):
        u = dus(edu_graph, t, rng)
        assert t in u and is_deep_unlearning_set(edu_graph, t, u)
        m = prune(edu_graph, t, u, rng)
        assert m <= u and is_minimal(edu_graph, t, m)
    with pytest.raises(RulesError, match="still derivable"):
        prune(edu_graph, 272, [272], rng)


def test_mdus_is_seeded(edu_graph):
    a = mdus(edu_graph, 311, seeds=20, rng=np.random.default_rng(1))
    b = mdus(edu_graph, 311, seeds=20, rng=np.random.default_rng(1))
    assert a == b


def test_exact_falls_back_to_mdus_past_its_budget(edu_graph, edu_exact):
    ms = minimal_sets(edu_graph, 311, exact=True, time_budget=0.0, seeds=30)
    assert not ms.exact and ms.method == "exact-partial+mdus"
    assert ms.sets and set(ms.sets) <= edu_exact[311]


def test_target_must_be_in_k(edu_kb, edu_graph):
    from deepunlearn.rules import derivation_graph

    with pytest.raises(RulesError, match="not a fact of K"):
        minimal_sets(edu_graph, 700)
    g = derivation_graph(edu_kb, "edu-relat", known=[i for i in range(700) if i != 272])
    with pytest.raises(RulesError, match="target 272 is not a fact of K"):
        minimal_sets(g, 272)
    with pytest.raises(RulesError, match="seeds must be at least 1"):
        minimal_sets(edu_graph, 272, exact=False, seeds=0)


def test_biography_target_is_its_own_only_set(edu_graph):
    ms = minimal_sets(edu_graph, 450)
    assert ms.exact and ms.sets == [frozenset({450})]
