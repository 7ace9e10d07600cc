"""Property tests on random small KBs and random rule sets: the engines agree, closure is
idempotent, every set returned is a deep-unlearning set and minimal, and exact enumeration
equals brute force over all subsets of K (checked with fresh closures, not the hypergraph)."""

from __future__ import annotations

from itertools import combinations

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from deepunlearn.kg.kb import KnowledgeBase
from deepunlearn.rules import (
    closure,
    derivation_graph,
    is_deep_unlearning_set,
    is_minimal,
    load_rules,
    mdus,
    minimal_sets,
    parse_datalog,
)

FAMILY = load_rules("family")
RELS = ("child", "father", "mother", "husband", "wife", "brother", "sister")
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


@st.composite
def family_kbs(draw, max_facts: int = 7):
    """Up to ``max_facts`` facts of a small generated family (genders and relations consistent,
    so the rules fire), sometimes with a random extra fact that need not be true."""
    from deepunlearn.kg.generate import generate_family

    kb0 = generate_family(draw(st.integers(4, 8)), seed=draw(st.integers(0, 200)))
    family = [f for f in kb0.facts if kb0.relations[f[1]].kind == "entity"]
    assume(family)
    facts = draw(st.lists(st.sampled_from(family), min_size=1, max_size=max_facts, unique=True))
    people = sorted(kb0.entities)
    if draw(st.booleans()):
        extra = (draw(st.sampled_from(people)), draw(st.sampled_from(RELS)), draw(st.sampled_from(people)))
        if extra not in facts:
            facts.append(extra)
    if draw(st.booleans()):
        facts.append((people[0], "birthyear", "1950"))
    return KnowledgeBase.build(kb0.entities, facts)


def pick_target(data, g) -> int:
    """A fact of K, preferably one the rules can derive (those have interesting sets)."""
    derivable = [t for t in range(g.n_kb) if len(g.edges_deriving(t))]
    return data.draw(st.sampled_from(derivable or list(range(g.n_kb))))


VARS, CONSTS = ("X", "Y", "Z"), ('"e0"',)


@st.composite
def rule_programs(draw):
    """A KB over entities e0..e2 (attribute kind x or y) with relations p, q and a random safe
    rule set using repeated variables, constants, attribute atoms and !=."""
    ents = [f"e{i}" for i in range(3)]
    kinds = draw(st.lists(st.sampled_from(["x", "y"]), min_size=3, max_size=3))
    triples = draw(st.lists(st.tuples(st.sampled_from(ents), st.sampled_from("pq"), st.sampled_from(ents)),
                            min_size=2, max_size=7, unique=True))
    kb = KnowledgeBase.build({e: {"kind": k} for e, k in zip(ents, kinds)}, triples)
    term = st.sampled_from(VARS * 3 + CONSTS)
    rules = []
    for _ in range(draw(st.integers(1, 3))):
        atoms = [(draw(st.sampled_from("pq")), draw(term), draw(term)) for _ in range(draw(st.integers(1, 3)))]
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


def brute_force_minimal_sets(kb, rules, target: int) -> set[frozenset[int]]:
    """All ⊆-minimal U ⊆ K with target ∉ Ω(K \\ U), by fresh closures over every subset."""
    ids = range(len(kb.facts))
    fact = kb.facts[target]

    def dus(u: frozenset[int]) -> bool:
        return fact not in closure(kb, rules, known=[i for i in ids if i not in u])

    all_dus = [frozenset(c) for k in range(1, len(kb.facts) + 1) for c in combinations(ids, k)
               if target in c and dus(frozenset(c))]
    return {u for u in all_dus if not any(v < u for v in all_dus)}


@settings(max_examples=25, **SETTINGS)
@given(family_kbs())
def test_family_engines_agree_and_closure_is_idempotent(kb):
    native = closure(kb, FAMILY)
    assert set(native.facts) == set(closure(kb, FAMILY, engine="pydatalog").facts)
    again = closure(KnowledgeBase.build(kb.entities, native.facts), FAMILY)
    assert again.derived == []


@settings(max_examples=30, **SETTINGS)
@given(rule_programs())
def test_random_rules_engines_agree_and_closure_is_idempotent(program):
    kb, rules = program
    native = closure(kb, rules)
    assert set(native.facts) == set(closure(kb, rules, engine="pydatalog").facts)
    closed = KnowledgeBase.build(kb.entities, native.facts)
    assert closure(closed, rules).derived == []


@settings(max_examples=15, **SETTINGS)
@given(family_kbs(max_facts=7), st.data())
def test_family_exact_equals_brute_force_and_mdus_is_minimal(kb, data):
    g = derivation_graph(kb, FAMILY)
    target = pick_target(data, g)
    truth = brute_force_minimal_sets(kb, FAMILY, target)
    ms = minimal_sets(g, target)
    assert ms.exact and set(ms.sets) == truth and len(ms.sets) == len(truth)
    for s in mdus(g, target, seeds=10, rng=np.random.default_rng(0)):
        assert s in truth and is_deep_unlearning_set(g, target, s) and is_minimal(g, target, s)


@settings(max_examples=20, **SETTINGS)
@given(rule_programs(), st.data())
def test_random_rules_exact_equals_brute_force(program, data):
    kb, rules = program
    g = derivation_graph(kb, rules)
    target = pick_target(data, g)
    truth = brute_force_minimal_sets(kb, rules, target)
    assert set(minimal_sets(g, target).sets) == truth
    for s in minimal_sets(g, target, exact=False, seeds=10).sets:
        assert s in truth


@settings(max_examples=20, **SETTINGS)
@given(family_kbs(max_facts=12), st.data())
def test_known_subset_graph_equals_subset_kb_closure(kb, data):
    known = data.draw(st.lists(st.integers(0, len(kb.facts) - 1), unique=True))
    g = derivation_graph(kb, FAMILY, known=known)
    ours = {g.fact(i) for i in np.flatnonzero(g.in_closure)}
    assert ours == set(closure(kb.subset(known), FAMILY).facts) | {kb.facts[i] for i in known}
