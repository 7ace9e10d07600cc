"""Closure and derivation graph: the release's numbers, the reference's semantics, the
generator's ground truth, the pyDatalog cross-check and ``known`` (the model's K)."""

from __future__ import annotations

from collections import defaultdict
from itertools import product

import numpy as np
import pytest

from deepunlearn.kg.edu_relat import load_release_rules
from deepunlearn.kg.kb import KnowledgeBase
from deepunlearn.rules import RulesError, closure, derivable, derivation_graph, load_rules

MALE_OBJECT = {"husband", "uncle", "father", "brother", "nephew"}
FEMALE_OBJECT = {"wife", "aunt", "mother", "sister", "niece"}


def reference_semantics(kb, release_rules):
    """The release's closure and groundings, written from the release's rule semantics in docs/rules.md (independent of
    the engine): rules are the raw tuples of family_rule.pt; a *newly* derived fact is rejected
    if it is a self loop or has the wrong gender; a grounding of a closure fact is any
    assignment with its body and head in the closure (no filter)."""
    gender = {e: a["gender"] for e, a in kb.entities.items()}
    rels = {r for body, head in release_rules for _, r, _ in body + [head]}
    facts = {f for f in kb.facts if f[1] in rels}

    def assignments(body, facts):
        by_rel = defaultdict(list)
        for s, r, o in facts:
            by_rel[r].append((s, o))

        def extend(i, env):
            if i == len(body):
                yield dict(env)
                return
            a, r, b = body[i]
            for s, o in by_rel[r]:
                if env.get(a, s) == s and env.get(b, o) == o and (a != b or s == o):
                    new = dict(env)
                    new[a], new[b] = s, o
                    yield from extend(i + 1, new)

        yield from extend(0, {})

    def accepted(s, r, o):
        if s == o:
            return False
        if r in MALE_OBJECT and (gender[o] != "male" or (r == "husband" and gender[s] != "female")):
            return False
        if r in FEMALE_OBJECT and (gender[o] != "female" or (r == "wife" and gender[s] != "male")):
            return False
        return True

    while True:
        new = set()
        for body, (hi, hr, hj) in release_rules:
            for env in assignments(body, facts):
                f = (env[hi], hr, env[hj])
                if f not in facts and accepted(*f):
                    new.add(f)
        if not new:
            break
        facts |= new
    groundings = set()
    for k, (body, (hi, hr, hj)) in enumerate(release_rules):
        for env in assignments(body, facts):
            head = (env[hi], hr, env[hj])
            if head in facts:
                groundings.add((k, head, tuple((env[i], r, env[j]) for i, r, j in body)))
    return facts, groundings


def test_release_closure_counts(edu_kb):
    c = closure(edu_kb, "edu-relat")
    d = c.to_dict()
    assert (d["facts"], d["closure"], d["derived"], d["passthrough"]) == (400, 562, 162, 300)
    assert len(set(c.facts)) == 562 and set(c.facts[:400]) == {f for f in edu_kb.facts[:400]}


def test_explicit_atoms_equal_the_reference_filter(edu_kb, edu_dir, edu_graph):
    """Same closure and the same groundings (hence the same minimal sets) as the reference."""
    facts, groundings = reference_semantics(edu_kb, load_release_rules(edu_dir))
    assert len(facts) == 562
    g = edu_graph
    ours_facts = {g.fact(i) for i in np.flatnonzero(g.in_closure) if g.fact(i)[1] in g.rules.relations}
    assert ours_facts == facts
    ours = {(int(g.edge_rule[e]), g.fact(g.edge_head[e]), tuple(g.fact(b) for b in g.body_of(e)))
            for e in range(g.n_edges)}
    assert len(ours) == g.n_edges  # each grounding found exactly once
    assert ours == groundings
    # the reference identifies a fact by its (subject, object) pair alone: no two closure facts
    # share a pair, so that shortcut changes nothing
    assert len({(s, o) for s, _, o in facts}) == len(facts)


@pytest.mark.parametrize("seed, people", [(0, 100), (3, 250), (11, 60)])
def test_family_rules_derive_exactly_the_generators_truth(seed, people):
    from deepunlearn.kg.domains.family.generate import generate_family

    kb, truth = generate_family(people, seed=seed, return_truth=True)
    c = closure(kb, "family")
    assert set(c.facts) == set(truth)


@pytest.mark.parametrize("rules", ["edu-relat", "family", "raw"])
def test_pydatalog_engine_agrees(edu_kb, edu_dir, rules):
    rs = load_rules(edu_dir / "family_rule_raw.txt" if rules == "raw" else rules)
    native, pyd = closure(edu_kb, rs), closure(edu_kb, rs, engine="pydatalog")
    assert set(native.facts) == set(pyd.facts)
    assert native.n_base == pyd.n_base == 400


def test_closure_is_idempotent(edu_kb):
    c = closure(edu_kb, "family")
    closed = KnowledgeBase.build(edu_kb.entities, c.facts)
    again = closure(closed, "family")
    assert again.derived == [] and len(again) == len(c)


def test_known_restricts_k_and_keeps_kb_ids(edu_kb):
    # K = every third fact of the release: the rules derive some of the others back, under their
    # KB ids, and not all of them
    known = list(range(0, len(edu_kb.facts), 3))
    g = derivation_graph(edu_kb, "edu-relat", known=known)
    unknown = [i for i in range(400) if i % 3]
    assert not g.base[unknown].any()
    rederived = [i for i in unknown if g.in_closure[i]]
    assert 0 < len(rederived) < len(unknown)
    # the same closure as the KB cut down to K
    sub = closure(edu_kb.subset(known), "edu-relat")
    ours = {g.fact(i) for i in np.flatnonzero(g.in_closure) if g.fact(i)[1] in g.rules.relations}
    assert ours == set(sub.facts)
    assert closure(edu_kb, "edu-relat", known=known).to_dict()["closure"] == len(sub)
    with pytest.raises(RulesError, match="out of range"):
        derivation_graph(edu_kb, "edu-relat", known=[0, 700])


def test_derivability_is_propagation_over_the_graph(edu_kb, edu_graph):
    t = 272
    assert derivable(edu_graph, t)
    assert derivable(edu_graph, t, removed=[t])  # the rest derives it back
    assert not derivable(edu_graph, t, removed=[75, 272, 347, 379])
    with pytest.raises(RulesError, match="not in K"):
        derivable(edu_graph, t, removed=[edu_graph.n_kb + 3])
    # a derived fact (not in the KB) is derivable until its support goes
    new = edu_graph.n_kb  # first derived fact
    assert not edu_graph.in_k(new) and derivable(edu_graph, new)
    assert not derivable(edu_graph, new, removed=range(edu_graph.n_kb))


def test_engine_joins_constants_repeated_variables_and_products():
    from deepunlearn.rules import parse_datalog

    kb = KnowledgeBase.build(
        {"a": {"kind": "x"}, "b": {"kind": "y"}, "c": {"kind": "x"}},
        [("a", "p", "b"), ("b", "p", "b"), ("c", "q", "a"), ("a", "born", "Ohio"), ("c", "born", "Ohio")])
    rs = parse_datalog("""
        loop(X, X) :- p(X, X).                          % repeated variable
        same_place(X, Y) :- born(X, P), born(Y, P), X != Y.
        ohioan(X, "yes") :- born(X, "Ohio"), x(X).      % constants, attribute atom
        pair(X, Y) :- p(X, Z), q(Y, W), y(Z).           % a product of two unrelated atoms
    """)
    c = closure(kb, rs)
    assert set(c.derived) == {("b", "loop", "b"), ("a", "same_place", "c"), ("c", "same_place", "a"),
                              ("a", "ohioan", "yes"), ("c", "ohioan", "yes"), ("a", "pair", "c"),
                              ("b", "pair", "c")}
    assert set(closure(kb, rs, engine="pydatalog").facts) == set(c.facts)


def test_unknown_engine(edu_kb):
    with pytest.raises(RulesError, match="unknown closure engine"):
        closure(edu_kb, "family", engine="souffle")


def test_brute_force_groundings_on_a_tiny_kb():
    """Every grounding the engine records is a real rule instance, and none is missing."""
    from deepunlearn.rules import parse_datalog

    kb = KnowledgeBase.build({n: {} for n in "abcd"},
                             [("a", "e", "b"), ("b", "e", "c"), ("c", "e", "a"), ("c", "e", "d")])
    rs = parse_datalog("t(X, Z) :- e(X, Y), e(Y, Z).\nt(X, Z) :- t(X, Y), e(Y, Z).")
    g = derivation_graph(kb, rs)
    closed = {g.fact(i) for i in np.flatnonzero(g.in_closure)}
    expect = set()
    for x, y, z in product("abcd", repeat=3):
        if (x, "e", y) in closed and (y, "e", z) in closed:
            expect.add((0, (x, "t", z), ((x, "e", y), (y, "e", z))))
        if (x, "t", y) in closed and (y, "e", z) in closed:
            expect.add((1, (x, "t", z), ((x, "t", y), (y, "e", z))))
    got = [(int(g.edge_rule[e]), g.fact(g.edge_head[e]), tuple(g.fact(b) for b in g.body_of(e)))
           for e in range(g.n_edges)]
    assert len(got) == len(set(got)) and set(got) == expect
