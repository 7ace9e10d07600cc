"""The engine's fact tables (sorting packed int64 keys, sorted queries, merges) give the same
closure and derivation graph, array for array, as the previous tables kept in
``benchmarks/closure_reference.py``, and the same facts, rounds and groundings as the independent
naive evaluator; the table helpers equal the numpy calls they replace."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "benchmarks"))
from closure_reference import reference_engine  # noqa: E402
from naive_datalog import _groundings, _value, naive_rounds  # noqa: E402

from deepunlearn.kg.domains.family.generate import generate_family  # noqa: E402
from deepunlearn.kg.kb import KnowledgeBase  # noqa: E402
from deepunlearn.rules import derivation_graph, load_rules, parse_datalog  # noqa: E402
from deepunlearn.rules import tables  # noqa: E402

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
                derandomize=True)
ARRAYS = ("node_s", "node_r", "node_o", "birth", "base", "edge_head", "edge_rule", "body_ptr", "body")


def assert_same_graph(kb, rules, known=None):
    """The graph with the package's tables equals the reference tables' graph, array for array,
    and so do its hyperedges grouped by head."""
    new = derivation_graph(kb, rules, known=known, max_groundings=None)
    with reference_engine():
        old = derivation_graph(kb, rules, known=known, max_groundings=None)
        old_by_head = old._by_head
    for name in ARRAYS:
        a, b = getattr(new, name), getattr(old, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert new.rounds == old.rounds and new.terms == old.terms and new.peak_groundings == old.peak_groundings
    for a, b in zip(new._by_head, old_by_head):
        assert np.array_equal(a, b)
    return new


def assert_naive_truth(kb, rules, g):
    """Facts and birth rounds equal the naive evaluator's, and the hyperedges are exactly the
    rule groundings over the closure, each once."""
    rounds = naive_rounds(kb.facts, rules, kb.entities)
    rels = rules.relations
    assert {g.fact(i): int(g.birth[i]) for i in np.flatnonzero(g.in_closure)} == rounds
    closed = [f for f in rounds if f[1] in rels]
    attrs = {e: set(a.values()) for e, a in kb.entities.items()}
    expect = set()
    for q, rule in enumerate(rules.rules):
        for env in _groundings(rule, closed, attrs):
            head = (_value(rule.head.args[0], env), rule.head.relation, _value(rule.head.args[1], env))
            body = tuple((_value(a.args[0], env), a.relation, _value(a.args[1], env)) for a in rule.relation_atoms)
            expect.add((q, head, body))
    edges = [(int(g.edge_rule[e]), g.fact(g.edge_head[e]), tuple(g.fact(b) for b in g.body_of(e)))
             for e in range(g.n_edges)]
    assert len(edges) == len(set(edges)) and set(edges) == expect


@pytest.fixture(params=["as-shipped", "always-sorted"])
def sorted_queries(request, monkeypatch):
    """Small KBs make small queries; ``always-sorted`` sends even those down the sorted path."""
    if request.param == "always-sorted":
        monkeypatch.setattr(tables, "_SORT_QUERIES", 0)
    return request.param


@st.composite
def family_kbs(draw):
    """A generated family's facts, some dropped, sometimes a random (possibly false) extra fact."""
    kb0 = generate_family(draw(st.integers(4, 12)), seed=draw(st.integers(0, 500)))
    facts = [f for f in kb0.facts if draw(st.integers(0, 3))]
    people = sorted(kb0.entities)
    if draw(st.booleans()):
        extra = (draw(st.sampled_from(people)), draw(st.sampled_from(["child", "wife", "brother"])),
                 draw(st.sampled_from(people)))
        if extra not in facts:
            facts.append(extra)
    assume(facts)
    return KnowledgeBase.build(kb0.entities, facts)


@settings(max_examples=40, **SETTINGS)
@given(family_kbs(), st.data())
def test_family_graph_equals_reference_and_naive(sorted_queries, kb, data):
    rules = load_rules("family")
    g = assert_same_graph(kb, rules)
    assert_naive_truth(kb, rules, g)
    known = data.draw(st.lists(st.integers(0, len(kb.facts) - 1), unique=True))
    assert_same_graph(kb, rules, known=known)


VARS = ("X", "Y", "Z")


@st.composite
def rule_programs(draw):
    """Random safe rules over p, q (entity relations) and a (its objects values or entities, so
    terms are interned beyond the entities) with repeated variables, constants, attribute atoms
    and !=."""
    ents = [f"e{i}" for i in range(4)]
    kinds = draw(st.lists(st.sampled_from(["x", "y"]), min_size=4, max_size=4))
    a_first = st.tuples(st.sampled_from(ents), st.just("a"), st.sampled_from(["v0", "v1", "v2"]))  # a's kind: value
    a_more = st.tuples(st.sampled_from(ents), st.just("a"), st.sampled_from(["v0", "v1", "v2", "e1"]))
    a_facts = [draw(a_first), *draw(st.lists(a_more, max_size=3))] if draw(st.booleans()) else []
    triples = list(dict.fromkeys(a_facts + draw(st.lists(
        st.tuples(st.sampled_from(ents), st.sampled_from("pq"), st.sampled_from(ents)), min_size=1, max_size=10))))
    kb = KnowledgeBase.build({e: {"kind": k} for e, k in zip(ents, kinds)}, triples)
    term = st.sampled_from(VARS * 3 + ('"e0"',))
    rules = []
    for _ in range(draw(st.integers(1, 4))):
        atoms = [(draw(st.sampled_from("pqa")), draw(term), draw(term)) for _ in range(draw(st.integers(1, 3)))]
        body = [f"{r}({a}, {b})" for r, a, b in atoms]
        bound = sorted({t for _, a, b in atoms for t in (a, b) if t in VARS})
        if bound and draw(st.booleans()):
            body.append(f"{draw(st.sampled_from('xy'))}({draw(st.sampled_from(bound))})")
        if len(bound) > 1 and draw(st.booleans()):
            a, b = draw(st.permutations(bound))[:2]
            body.append(f"{a} != {b}")
        head_term = st.sampled_from(bound + ['"e2"'])
        rules.append(f"{draw(st.sampled_from('pq'))}({draw(head_term)}, {draw(head_term)}) :- {', '.join(body)}.")
    return kb, parse_datalog("\n".join(rules), name="random")


@settings(max_examples=60, **SETTINGS)
@given(rule_programs())
def test_random_rules_graph_equals_reference_and_naive(sorted_queries, program):
    kb, rules = program
    g = assert_same_graph(kb, rules)
    assert_naive_truth(kb, rules, g)


@pytest.mark.parametrize("people,seed", [(300, 0), (2_000, 3)])
def test_generated_family_graph_equals_reference(people, seed):
    """Large enough for the sorted-query path and merges of thousands of new facts."""
    kb = generate_family(people, seed)
    assert_same_graph(kb, load_rules("family"))
    rng = np.random.default_rng(seed)
    assert_same_graph(kb, load_rules("family"), known=np.flatnonzero(rng.random(len(kb.facts)) < 0.7).tolist())


def test_release_graph_equals_reference(edu_kb):
    assert_same_graph(edu_kb, load_rules("edu-relat"))


@pytest.mark.parametrize("n,hi", [(0, 5), (1, 5), (300, 7), (5_000, 10**12)])
def test_helpers_equal_numpy(n, hi):
    rng = np.random.default_rng(n)
    keys = np.sort(rng.integers(0, hi, 4_000))
    q = rng.integers(-1, hi + 1, n)
    for side in ("left", "right"):
        assert np.array_equal(tables.search(keys, q, side), np.searchsorted(keys, q, side))
    assert np.array_equal(tables.unique(q), np.unique(q))
    u, inv = tables.unique_inverse(q)
    u0, inv0 = np.unique(q, return_inverse=True)
    assert np.array_equal(u, u0) and np.array_equal(inv, inv0)
    lo, cnt, total = tables.Index._ranges(keys, q)
    assert np.array_equal(lo, np.searchsorted(keys, q)) and int(cnt.sum()) == total
    assert np.array_equal(cnt, np.searchsorted(keys, q, "right") - np.searchsorted(keys, q))


@pytest.mark.parametrize("n_keys", [7, 10**6, 2**62])  # 2**62: the pair does not fit one int64
def test_sort_by_key_is_a_stable_argsort(n_keys):
    rng = np.random.default_rng(1)
    nodes = np.sort(rng.choice(50_000, 3_000, replace=False))
    keys = rng.integers(0, min(n_keys, 2**62), len(nodes))
    keys[::3] = keys[0]  # many ties
    k, v = tables.sort_by_key(keys, nodes, n_keys, 50_000)
    order = np.argsort(keys, kind="stable")
    assert np.array_equal(k, keys[order]) and np.array_equal(v, nodes[order])


@pytest.mark.parametrize("n_keys", [1, 9, 10**5, 2**62])
def test_stable_order_is_a_stable_argsort(n_keys):
    keys = np.random.default_rng(2).integers(0, min(n_keys, 2**62), 5_000)
    assert np.array_equal(tables.stable_order(keys, n_keys), np.argsort(keys, kind="stable"))
    assert len(tables.stable_order(keys[:0], n_keys)) == 0
