"""Compose questions round-trip to their rule bodies.

For every rule of the built-in family, geo and org rule sets: a rule with two or more relation
atoms has a chain, its question (built from the domain's templates) parses back to exactly that
chain and the entity it names, and the chain's relations are the body's. On generated KBs, every
grounding's question is checked against the KB's own facts: the named entity is the derived
fact's subject, the answer its object, and the body facts walk from one to the other along the
steps (brute force over the facts, not the generator's bookkeeping)."""

from __future__ import annotations

from collections import Counter

import pytest

from deepunlearn.kg.compose import (
    ComposeError, ComposeQuestion, Step, chain, compose_text, parse_compose, phrase, read_compose,
)
from deepunlearn.kg.domains.family.generate import generate_family
from deepunlearn.kg.kb import KnowledgeBase, Relation
from deepunlearn.rules.compose import compose_set, rule_steps
from deepunlearn.rules.generate import generate_domain
from deepunlearn.rules.load import load_rules


@pytest.fixture(scope="module")
def kbs():
    return {"family": generate_family(30, seed=7), "geo": generate_domain("geo"), "org": generate_domain("org", 30),
            "regions": generate_domain("regions", 4)}


def _walk(rule, steps: tuple[Step, ...]) -> bool:
    """The steps, read against the rule's variables, lead from the head's subject to its object
    using every relation atom once (independent of :func:`chain`)."""
    atoms = list(rule.relation_atoms)
    at = rule.head.args[0]
    for s in steps:
        match = [a for a in atoms if a.relation == s.relation and a.args[0 if s.forward else 1] == at]
        if not match:
            return False
        atoms.remove(match[0])
        at = match[0].args[1 if s.forward else 0]
    return not atoms and at == rule.head.args[1]


@pytest.mark.parametrize("name", ["family", "geo", "org", "regions"])
def test_every_rule_round_trips(kbs, name):
    kb, rules = kbs[name], load_rules(name)
    start = next(iter(kb.entities))
    chained = 0
    for rule in rules:
        if len(rule.relation_atoms) < 2:
            with pytest.raises(ComposeError, match="one atom"):
                rule_steps(kb, rule)
            continue
        steps, order = rule_steps(kb, rule)
        chained += 1
        assert _walk(rule, steps), rule
        assert Counter(s.relation for s in steps) == Counter(a.relation for a in rule.relation_atoms)
        assert sorted(order) == list(range(len(rule.relation_atoms)))
        text = compose_text(kb, steps, start)
        assert start in text
        assert parse_compose(kb, text) == [(start, steps)], (rule, text)
    assert chained == sum(len(r.relation_atoms) >= 2 for r in rules) > 0


@pytest.mark.parametrize("name", ["family", "geo", "org", "regions"])
def test_grounded_questions_walk_the_kb(kbs, name):
    kb = kbs[name]
    cs = compose_set(kb, name)
    assert cs.questions
    facts = set(kb.facts)
    for q in cs.questions:
        s, _, o = kb.facts[q.fact_id]
        assert (q.start, q.answer) == (s, o)
        assert parse_compose(kb, q.text) == [(s, q.steps)], q.text
        at = s
        for step, b in zip(q.steps, q.body, strict=True):
            bs, br, bo = kb.facts[b]
            assert br == step.relation and (bs, br, bo) in facts and b != q.fact_id
            assert (bs if step.forward else bo) == at
            at = bo if step.forward else bs
        assert at == o
        assert ComposeQuestion.from_json(q.to_json()) == q


def test_family_questions_read_as_in_words(kbs):
    kb = kbs["family"]
    mother = next(r for r in load_rules("family") if str(r).startswith("mother(X0, X1) :- father(X0, X2), wife"))
    steps, _ = rule_steps(kb, mother)
    assert compose_text(kb, steps, "Ann Lee") == "Who is the wife of the father of Ann Lee?"
    geo = kbs["geo"]
    rule = next(r for r in load_rules("geo") if r.head.relation == "on_continent")
    assert compose_text(geo, rule_steps(geo, rule)[0], "Lyon") == "On which continent is the country that Lyon lies in?"


def test_chain_refuses_what_is_no_chain():
    with pytest.raises(ComposeError, match="one atom"):
        chain(("X", "Y"), [("r", "X", "Y")])
    with pytest.raises(ComposeError, match="no chain"):
        chain(("X", "Y"), [("r", "X", "Z"), ("s", "W", "Y")])


def test_a_relation_without_a_phrase_is_named():
    kb = KnowledgeBase(entities={"A": {}, "B": {}}, facts=[("A", "likes", "B")],
                       relations={"likes": Relation("likes", "entity", "Whom does {o1} like?", "{o2}")})
    with pytest.raises(ComposeError, match="relation 'likes': no statement to phrase it"):
        phrase(kb, Step("likes"))


def test_read_compose_names_the_flag_and_checks_the_kb(kbs, tmp_path):
    import json

    kb = kbs["geo"]
    cs = compose_set(kb, "geo")
    f = tmp_path / "c.json"
    f.write_text(json.dumps(cs.to_json()))
    assert read_compose(kb, f) == cs.questions
    with pytest.raises(ComposeError, match="--compose .*another KB"):
        read_compose(kbs["family"], f)
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ComposeError, match="--compose .*not a compose file"):
        read_compose(kb, tmp_path / "bad.json")
