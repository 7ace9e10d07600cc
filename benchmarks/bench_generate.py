"""Speed of the declarative generator (pytest-benchmark): a 2,000-person org KB (sample, closure,
stored share, targets), its derivation graph, and the exact minimal sets of its 55 targets.

Run: ``python -m pytest benchmarks/bench_generate.py --benchmark-only -q``
"""

from __future__ import annotations

import pytest

from deepunlearn.rules import derivation_graph, minimal_sets
from deepunlearn.rules.generate import generate_domain


@pytest.fixture(scope="module")
def org2000():
    return generate_domain("org", 2000, seed=1)


def test_generate_org_2000(benchmark):
    kb = benchmark.pedantic(generate_domain, args=("org", 2000), kwargs={"seed": 1}, rounds=3, iterations=1)
    assert kb.metadata["people"] == 2000


def test_exact_sets_of_the_org_2000_targets(benchmark, org2000):
    def run():
        g = derivation_graph(org2000, "org")
        return [minimal_sets(g, t) for t in org2000.targets]

    out = benchmark.pedantic(run, rounds=3, iterations=1)
    assert len(out) == 55 and all(ms.exact for ms in out)
