"""Speed of the rules layer (pytest-benchmark).

* closure + grounding (the derivation graph) of the EDU-RELAT release, and of generated family
  KBs of 10,000 and 100,000 people (the 100k one once, with the process's peak RSS),
* MDUS with 100 seeds for all 55 release targets, and exact enumeration of all their minimal
  sets (each round on a fresh graph, so building the targets' cones is timed too),
* the native closure against the pyDatalog engine on the same 1,000-person generated KB.

Run: ``python -m pytest benchmarks/bench_rules.py --benchmark-only -q``
(the release is found as in the tests: the copy shipped in ``deepunlearn/kg/resources/edu-relat``,
or the folder ``DEEPUNLEARN_EDU_RELAT`` names).
"""

from __future__ import annotations

import resource

import numpy as np
import pytest

from deepunlearn.kg.domains.family.generate import generate_family
from deepunlearn.rules import closure, derivation_graph, minimal_sets
from deepunlearn.rules.budget import DEFAULT_MAX_GROUNDINGS
from deepunlearn.rules.closure import closure_of_graph



def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def test_graph_release(benchmark, edu_kb):
    g = benchmark.pedantic(derivation_graph, args=(edu_kb, "edu-relat"), rounds=20, iterations=1)
    assert len(closure_of_graph(g)) == 562
    benchmark.extra_info.update(closure=562, groundings=g.n_edges)


@pytest.fixture(scope="module")
def kb10k():
    return generate_family(10_000, 0)


def test_graph_10k(benchmark, kb10k):
    g = benchmark.pedantic(derivation_graph, args=(kb10k, "family"), rounds=3, iterations=1)
    benchmark.extra_info.update(kb_facts=len(kb10k.facts), closure_nodes=int(g.in_closure.sum()),
                                groundings=g.n_edges)


def test_graph_100k(benchmark):
    kb = generate_family(100_000, 0)
    before = _peak_rss_mb()
    g = benchmark.pedantic(derivation_graph, args=(kb, "family"), rounds=1, iterations=1)
    benchmark.extra_info.update(kb_facts=len(kb.facts), family_facts=int(kb.entity_mask.sum()),
                                closure_nodes=int(g.in_closure.sum()), groundings=g.n_edges,
                                body_slots=len(g.body), peak_rss_mb_before=round(before),
                                peak_rss_mb=round(_peak_rss_mb()), peak_groundings=g.peak_groundings)
    assert g.peak_groundings < DEFAULT_MAX_GROUNDINGS  # closes under the default grounding budget
    assert _peak_rss_mb() < 4096


def test_mdus_100_seeds_55_targets(benchmark, edu_kb):
    def fresh_graph():
        return (derivation_graph(edu_kb, "edu-relat"),), {}

    def run(g):
        return [minimal_sets(g, t, exact=False, seeds=100, rng=np.random.default_rng(t)) for t in edu_kb.targets]

    out = benchmark.pedantic(run, setup=fresh_graph, rounds=5, iterations=1)
    benchmark.extra_info["sets"] = sum(len(m.sets) for m in out)


def test_exact_55_targets(benchmark, edu_kb):
    def fresh_graph():
        return (derivation_graph(edu_kb, "edu-relat"),), {}

    def run(g):
        return [minimal_sets(g, t) for t in edu_kb.targets]

    out = benchmark.pedantic(run, setup=fresh_graph, rounds=5, iterations=1)
    assert all(m.exact for m in out)
    benchmark.extra_info["sets"] = sum(len(m.sets) for m in out)


@pytest.fixture(scope="module")
def kb1k():
    return generate_family(1_000, 0)


def test_closure_native_1k(benchmark, kb1k):
    c = benchmark.pedantic(closure, args=(kb1k, "family"), rounds=10, iterations=1)
    benchmark.extra_info["closure"] = len(c)


def test_closure_pydatalog_1k(benchmark, kb1k):
    c = benchmark.pedantic(closure, args=(kb1k, "family"), kwargs={"engine": "pydatalog"}, rounds=1, iterations=1)
    assert set(c.facts) == set(closure(kb1k, "family").facts)
    benchmark.extra_info["closure"] = len(c)
