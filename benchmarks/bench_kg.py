"""Speed of the kg layer's generator and graph views (pytest-benchmark).

* generating a synthetic family KB of 100 (release size), 10,000 and 100,000 people
  (the rules layer benchmarks its closure on the 100k KB),
* writing a 10,000-person KB as JSON and as GraphML,
* drawing a 100-person family tree to PNG.

Run: ``python -m pytest benchmarks/bench_kg.py --benchmark-only -q``.
"""

import pytest

from deepunlearn.kg.domains.family.generate import generate_family
from deepunlearn.kg.graph import draw_family, write_graphml
from deepunlearn.kg.io import dumps_kb


@pytest.mark.parametrize("people", [100, 10_000])
def test_generate(benchmark, people):
    kb = benchmark.pedantic(generate_family, args=(people, 0), rounds=3, iterations=1)
    assert len(kb.entities) == people


def test_generate_100k(benchmark):
    kb = benchmark.pedantic(generate_family, args=(100_000, 0), rounds=1, iterations=1)
    assert len(kb.entities) == 100_000
    benchmark.extra_info["family_facts"] = kb.metadata["stats"]["stored_family_facts"]


@pytest.fixture(scope="module")
def kb10k():
    return generate_family(10_000, 0)


def test_dumps_10k(benchmark, kb10k):
    text = benchmark.pedantic(dumps_kb, args=(kb10k,), rounds=3, iterations=1)
    assert text.startswith("{")


def test_graphml_10k(benchmark, kb10k, tmp_path):
    out = benchmark.pedantic(write_graphml, args=(kb10k, tmp_path / "kb.graphml"), rounds=1, iterations=1)
    assert out.stat().st_size > 0


def test_draw_100(benchmark, tmp_path):
    kb = generate_family(100, 7)
    out = benchmark.pedantic(draw_family, args=(kb, tmp_path / "tree.png"), rounds=2, iterations=1)
    assert out.stat().st_size > 0
