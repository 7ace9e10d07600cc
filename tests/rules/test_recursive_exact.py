"""Exact minimal deep-unlearning sets with recursive rules, against brute force.

The org rules are recursive (superior through any number of managers; superior and subordinate
derive each other, manager and report too). On small org KBs every subset of a target's cone
facts of K is tried: removed, the target's derivability recomputed from scratch by the naive
evaluator of ``naive_datalog`` (no derivation graph), the ⊆-minimal ones kept; they must be
exactly what ``minimal_sets`` enumerates with clingo. MDUS's sets must each be a deep-unlearning
set by the same brute force.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from naive_datalog import naive_closure

from deepunlearn.kg.domain import load_domain
from deepunlearn.kg.kb import KnowledgeBase
from deepunlearn.rules import derivation_graph, load_rules, minimal_sets
from deepunlearn.rules.generate import generate_domain

ORG_RULES = load_rules("org")


def brute_minimal_sets(kb, graph, target) -> set[frozenset[int]]:
    cone_k = [int(f) for f in graph.cone(target).nodes if graph.in_k(int(f))]
    assert len(cone_k) <= 14, "brute force is for small cones"
    others = [f for i, f in enumerate(kb.facts) if i not in cone_k]
    goal = kb.facts[target]
    dus = []
    for k in range(1, len(cone_k) + 1):
        for removed in combinations(cone_k, k):
            kept = others + [kb.facts[i] for i in cone_k if i not in removed]
            if goal not in naive_closure(kept, ORG_RULES, kb.entities):
                dus.append(frozenset(removed))
    minimal: list[frozenset[int]] = []
    for s in dus:  # by size: s is minimal iff no smaller deep-unlearning set lies inside it
        if not any(m < s for m in minimal):
            minimal.append(s)
    return set(minimal)


def is_dus(kb, removed, target) -> bool:
    kept = [f for i, f in enumerate(kb.facts) if i not in removed]
    return kb.facts[target] not in naive_closure(kept, ORG_RULES, kb.entities)


def chain_kb() -> KnowledgeBase:
    """A manager chain A -> B -> C -> D -> E (B is A's manager), F beside A under B, and stored
    derived facts that give the targets several ways to be derived."""
    facts = [("A", "manager", "B"), ("B", "manager", "C"), ("C", "manager", "D"), ("D", "manager", "E"),
             ("F", "manager", "B"),
             ("A", "superior", "C"), ("B", "superior", "D"), ("C", "superior", "E"),
             ("E", "subordinate", "A"), ("D", "subordinate", "B"),
             ("B", "report", "A"), ("C", "report", "B"),
             ("A", "colleague", "F")]
    return KnowledgeBase(entities={p: {"level": "senior"} for p in "ABCDEF"},
                         relations=load_domain("org").kb_relations(), facts=facts, name="chain")


CHAIN_TARGETS = [("A", "superior", "E"), ("E", "subordinate", "A"), ("A", "superior", "C"),
                 ("F", "colleague", "A"), ("A", "colleague", "F"), ("A", "manager", "B"), ("D", "subordinate", "B")]


def chain_with(target) -> tuple[KnowledgeBase, int]:
    """The chain KB holding ``target`` (added as a stored fact where it is only derivable)."""
    kb = chain_kb()
    if target not in kb.facts:
        kb = KnowledgeBase(kb.entities, kb.relations, kb.facts + [target], name="chain+")
    return kb, kb.facts.index(target)


@pytest.mark.parametrize("target", CHAIN_TARGETS, ids=lambda t: "|".join(t))
def test_exact_sets_on_a_manager_chain_equal_brute_force(target):
    kb, t = chain_with(target)
    g = derivation_graph(kb, ORG_RULES)
    ms = minimal_sets(g, t)
    assert ms.exact
    assert set(ms.sets) == brute_minimal_sets(kb, g, t)
    assert all(t in s for s in ms.sets)


def test_the_four_step_superior_is_cut_at_one_link_of_the_chain():
    """superior(A, E) by hand: remove it and its inverse, and break the chain A-B-C-D-E at one
    link, each link being a manager fact and its stored inverse (report) or a stored shortcut."""
    kb, t = chain_with(("A", "superior", "E"))
    ms = minimal_sets(derivation_graph(kb, ORG_RULES), t)
    got = {frozenset(kb.facts[i] for i in s) for s in ms.sets}
    both = {("A", "superior", "E"), ("E", "subordinate", "A")}
    assert got == {frozenset(both | cut) for cut in (
        {("A", "manager", "B"), ("B", "report", "A")},
        {("B", "manager", "C"), ("C", "report", "B")},
        {("C", "manager", "D"), ("C", "superior", "E")},
        {("D", "manager", "E"), ("C", "superior", "E")},
    )}


@pytest.mark.parametrize("seed", range(4))
def test_exact_sets_on_generated_org_kbs_equal_brute_force(seed):
    kb = generate_domain("org", 6, seed=seed, stored_derived=0.5)
    g = derivation_graph(kb, ORG_RULES)
    checked = 0
    for t, (_, r, _) in enumerate(kb.facts):
        if r not in ("superior", "subordinate", "colleague", "works_in_country", "manager"):
            continue
        if sum(1 for f in g.cone(t).nodes if g.in_k(int(f))) > 10:
            continue
        ms = minimal_sets(g, t)
        assert ms.exact
        assert set(ms.sets) == brute_minimal_sets(kb, g, t), kb.facts[t]
        checked += 1
    assert checked >= 3


@pytest.mark.parametrize("target", CHAIN_TARGETS[:4], ids=lambda t: "|".join(t))
def test_mdus_sets_are_deep_unlearning_sets_by_brute_force(target):
    kb, t = chain_with(target)
    g = derivation_graph(kb, ORG_RULES)
    approx = minimal_sets(g, t, exact=False, seeds=20, rng=np.random.default_rng(0))
    assert approx.method == "mdus" and len(approx) >= 1
    for s in approx.sets:
        assert is_dus(kb, s, t), sorted(kb.facts[i] for i in s)
