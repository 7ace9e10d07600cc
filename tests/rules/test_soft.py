"""Soft rules: ``deep_p`` against ProbLog (the reference implementation of the semantics), on
drawn small KBs, rule sets with probabilities (recursive ones included) and known-fact subsets;
hand-computed cases; certain rules give the exact verdict; the parser's ``p ::`` prefix."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from problog import get_evaluatable  # imported here: it raises the recursion limit once, on import
from problog.program import PrologString

from deepunlearn.kg.kb import KnowledgeBase
from deepunlearn.rules import derivable, derivation_graph, parse_datalog, RulesError
from deepunlearn.rules.errors import RuleSyntaxError
from deepunlearn.rules.soft import SoftBudgetError, deep_p, is_soft, with_rule_probs


# ------------------------------------------------------------------------------ the reference
def problog_probabilities(kb, rules, known, facts) -> dict[tuple[str, str, str], float]:
    """ProbLog's probability of each of ``facts`` under ``rules`` from the KB facts ``known``
    (certain), each entity's attribute values as certain unary facts."""
    names = {}

    def c(name: str) -> str:  # every constant as a plain ProbLog atom e0, e1, ...
        return names.setdefault(name, f"e{len(names)}")

    def term(t) -> str:
        return f"V{t.name}" if hasattr(t, "name") else c(t.value)

    def atom(a) -> str:
        return f"{'a' if a.is_attribute else 'r'}_{a.relation}({','.join(term(t) for t in a.args)})"

    lines = [f"r_{r}(none,none)." for r in sorted(set(rules.relations) | {r for _, r, _ in kb.facts})]
    lines += [f"a_{a}(none)." for a in sorted(rules.attributes)]  # no relation is unknown to ProbLog
    lines += [f"a_{v}({c(e)})." for e, attrs in kb.entities.items() for v in attrs.values() if v in rules.attributes]
    lines += [f"r_{kb.facts[i][1]}({c(kb.facts[i][0])},{c(kb.facts[i][2])})." for i in known]
    for rule in rules:
        body = [atom(a) for a in rule.body] + [f"{term(n.left)} \\= {term(n.right)}" for n in rule.neq]
        prefix = "" if rule.prob is None else f"{rule.prob!r}::"
        lines.append(f"{prefix}{atom(rule.head)} :- {', '.join(body)}.")
    queries = {f"r_{r}({c(s)},{c(o)})": (s, r, o) for s, r, o in facts}
    lines += [f"query({q})." for q in queries]
    result = get_evaluatable().create_from(PrologString("\n".join(lines))).evaluate()
    out = {f: 0.0 for f in facts}
    for k, p in result.items():
        out[queries[str(k)]] = float(p)
    return out


# ------------------------------------------------------------------------------ drawn cases
ENTITIES = {"Ann": {"gender": "female"}, "Bob": {"gender": "male"}, "Cy": {"gender": "male"}}
NAMES = sorted(ENTITIES)
RELS = ["a", "b", "c"]
PROBS = st.one_of(st.none(), st.sampled_from([0.0, 0.3, 0.5, 0.9, 1.0]), st.floats(0.01, 0.99))


#: body shapes over the head's X, Y (and a third variable Z): inverses, chains, joins
SHAPES = [["X", "Y"], ["Y", "X"], ["X", "Z", "Z", "Y"], ["Z", "X", "Z", "Y"], ["X", "Z", "Y", "Z"],
          ["X", "Y", "Y", "X"], ["X", "Y", "X", "Z"]]


@st.composite
def rule_text(draw):
    """A rule ``r(X, Y) :- ...`` (often recursive: heads and bodies share the relations a, b, c)."""
    shape = draw(st.sampled_from(SHAPES))
    rel = st.sampled_from(RELS)
    body = [f"{draw(rel)}({shape[i]}, {shape[i + 1]})" for i in range(0, len(shape), 2)]
    if draw(st.booleans()):
        body.append(f"{draw(st.sampled_from(['male', 'female']))}({draw(st.sampled_from(['X', 'Y']))})")
    if len(body) > 1 or draw(st.booleans()):  # joins without it derive self loops, on which ProbLog's
        body.append("X != Y")                 # cycle breaking takes minutes
    p = draw(PROBS)
    prefix = "" if p is None else f"{p!r} :: "
    return f"{prefix}{draw(rel)}(X, Y) :- {', '.join(body)}."


@st.composite
def case(draw):
    pairs = [(s, r, o) for s in NAMES for r in RELS for o in NAMES if s != o]
    facts = draw(st.lists(st.sampled_from(pairs), min_size=2, max_size=10, unique=True))
    kb = KnowledgeBase.build(ENTITIES, facts)
    rules = parse_datalog("\n".join(draw(st.lists(rule_text(), min_size=1, max_size=4))), name="drawn")
    keep = draw(st.lists(st.booleans() | st.just(True), min_size=len(facts), max_size=len(facts)))
    known = [i for i, k in enumerate(keep) if k]  # most of K kept, as after unlearning
    return kb, rules, known


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case())
def test_deep_p_equals_problog(drawn):
    kb, rules, known = drawn
    g_known = derivation_graph(kb, rules, known=known)  # evaluate's graph: over what B knows
    g_all = derivation_graph(kb, rules)  # a sweep's graph: over K, the forgotten facts removed
    removed = sorted(set(range(len(kb.facts))) - set(known))
    queried = [g_all.fact(i) for i in range(g_all.n_nodes)]
    ref = problog_probabilities(kb, rules, known, queried)
    for i in range(g_all.n_nodes):
        f = g_all.fact(i)
        for method in ("subsets", "bdd"):
            assert deep_p(g_all, i, removed=removed, method=method) == pytest.approx(ref[f], abs=1e-9), (
                f, method, rules.to_datalog())
            if i < len(kb.facts):
                assert deep_p(g_known, i, method=method) == pytest.approx(ref[f], abs=1e-9), (
                    f, method, rules.to_datalog())


@settings(max_examples=40, deadline=None)
@given(case())
def test_certain_rules_give_the_exact_verdict(drawn):
    kb, rules, known = drawn
    certain = dataclasses.replace(rules, rules=tuple(dataclasses.replace(r, prob=None) for r in rules))
    ones = dataclasses.replace(rules, rules=tuple(dataclasses.replace(r, prob=1.0) for r in rules))
    for rs in (certain, ones):
        g = derivation_graph(kb, rs, known=known)
        for i in range(len(kb.facts)):
            assert deep_p(g, i) == float(derivable(g, i))


@pytest.mark.parametrize("people,seed", [(5, 2), (6, 2), (6, 4)])
def test_family_rules_agree_with_problog(people, seed):
    """The 48 family rules (attributes, ``!=``, cycles through inverse relations), each certain or
    soft at random, on a generated family of which B knows about 75 %: every fact B lost, through
    both methods. (Families on which ProbLog's cycle breaking finishes in about a second; on some
    others it takes minutes.)"""
    import random

    from deepunlearn import generate_family
    from deepunlearn.rules import load_rules

    rnd = random.Random(seed)
    kb = generate_family(people, seed=seed)
    family = load_rules("family")
    rules = dataclasses.replace(family, rules=tuple(dataclasses.replace(r, prob=rnd.choice([None, 0.9, 0.6, 0.8]))
                                                    for r in family))
    known = [i for i in range(len(kb.facts)) if rnd.random() < 0.75]
    lost = [i for i in range(len(kb.facts)) if i not in set(known)]
    ref = problog_probabilities(kb, rules, known, [kb.facts[i] for i in lost])
    g = derivation_graph(kb, rules, known=known)
    assert any(0.0 < p < 1.0 for p in ref.values())
    for i in lost:
        for method in ("subsets", "bdd"):
            assert deep_p(g, i, method=method) == pytest.approx(ref[kb.facts[i]], abs=1e-9), (kb.facts[i], method)


# ------------------------------------------------------------------------------ by hand
KB3 = KnowledgeBase.build({"A": {}, "B": {}, "C": {}}, [("A", "s", "B"), ("A", "t", "B"), ("A", "r", "B"),
                                                        ("B", "s", "C"), ("A", "q", "C")])


def test_two_independent_derivations():
    rs = parse_datalog("0.7 :: r(X, Y) :- s(X, Y).\n0.4 :: r(X, Y) :- t(X, Y).")
    g = derivation_graph(KB3, rs, known=[0, 1])
    assert deep_p(g, 2) == pytest.approx(1 - 0.3 * 0.6, abs=1e-12)
    assert deep_p(g, 2, removed=[1]) == pytest.approx(0.7, abs=1e-12)
    assert is_soft(rs) and not is_soft(parse_datalog("r(X, Y) :- s(X, Y)."))


def test_chain_multiplies_and_groundings_are_independent():
    # q(A, C) through s(A, B) and s(B, C): both groundings of the 0.5 rule and the 0.8 rule
    rs = parse_datalog("0.5 :: p(X, Y) :- s(X, Y).\n0.8 :: q(X, Z) :- p(X, Y), p(Y, Z).")
    g = derivation_graph(KB3, rs, known=[0, 3])
    assert deep_p(g, 4) == pytest.approx(0.5 * 0.5 * 0.8, abs=1e-12)
    # one rule, two groundings with the same head: 1 - (1 - p)^2 (ProbLog: a choice per grounding)
    kb = KnowledgeBase.build({"A": {}, "B": {}, "C": {}}, [("A", "s", "B"), ("A", "s", "C"), ("A", "h", "A")])
    rs = parse_datalog("0.5 :: h(X, X) :- s(X, Y).")
    assert deep_p(derivation_graph(kb, rs, known=[0, 1]), 2) == pytest.approx(0.75, abs=1e-12)


def test_a_cycle_does_not_support_itself():
    # a(A, B) and b(A, B) derive each other; only a's own base fact starts the cycle
    kb = KnowledgeBase.build({"A": {}, "B": {}}, [("A", "a", "B"), ("A", "b", "B"), ("A", "c", "B")])
    rs = parse_datalog("0.9 :: a(X, Y) :- b(X, Y).\n0.6 :: b(X, Y) :- a(X, Y).\n0.5 :: a(X, Y) :- c(X, Y).")
    g = derivation_graph(kb, rs, known=[2])
    assert deep_p(g, 0) == pytest.approx(0.5, abs=1e-12)
    assert deep_p(g, 1) == pytest.approx(0.5 * 0.6, abs=1e-12)


def test_budget_is_one_line():
    rs = parse_datalog("0.5 :: r(X, Y) :- s(X, Y).\n0.5 :: r(X, Y) :- t(X, Y).\n0.5 :: t(X, Y) :- s(X, Y).")
    g = derivation_graph(KB3, rs, known=[0])
    assert deep_p(g, 2, max_nodes=None) == pytest.approx(1 - 0.5 * 0.75, abs=1e-12)
    assert deep_p(g, 2, method="subsets") == pytest.approx(1 - 0.5 * 0.75, abs=1e-12)
    with pytest.raises(SoftBudgetError) as e:
        deep_p(g, 2, max_nodes=4, method="bdd")
    msg = str(e.value)
    assert "\n" not in msg and "target [2] (A, r, B)" in msg and "--soft-budget" in msg


def test_rule_prob_from_measures():
    rs = parse_datalog("r(X, Y) :- s(X, Y).\n0.3 :: r(X, Y) :- t(X, Y).", source="mined.dl")
    first = rs[0]
    object.__setattr__(first, "measures", {"pca_confidence": 0.9, "std_confidence": 0.6})
    assert [r.prob for r in with_rule_probs(rs, "pca_confidence")] == [0.9, 0.3]
    assert [r.prob for r in with_rule_probs(rs, "std_confidence")] == [0.6, 0.3]
    with pytest.raises(RulesError, match="--rule-prob 'support'"):
        with_rule_probs(rs, "support")
    with pytest.raises(RulesError, match=r"^mined.dl:1: rule 1 has no pca_confidence measure"):
        with_rule_probs(parse_datalog("r(X, Y) :- s(X, Y).", source="mined.dl"), "pca_confidence")


# ------------------------------------------------------------------------------ the parser
def test_parser_reads_and_writes_probabilities():
    rs = parse_datalog("0.8::r(X, Y) :- s(X, Y).\n1 :: r(X, Y) :- t(X, Y).\n0.00001 :: q(X, Y) :- s(Y, X).\n"
                       "q(X, Y) :- t(Y, X).")
    assert [r.prob for r in rs] == [0.8, 1.0, 1e-05, None]
    again = parse_datalog(rs.to_datalog())
    assert again == rs and [r.prob for r in again] == [0.8, 1.0, 1e-05, None]
    assert rs[0].to_datalog() == "0.8 :: r(X, Y) :- s(X, Y)."


@pytest.mark.parametrize("text,col,problem", [
    ("1.5 :: r(X, Y) :- s(X, Y).", 1, "rule probability 1.5 is outside [0, 1]"),
    ("-0.2 :: r(X, Y) :- s(X, Y).", 1, "rule probability -0.2 is outside [0, 1]"),
    ("0.5 r(X, Y) :- s(X, Y).", 1, "expected a relation name (lower-case), found '0.5'"),
    ("r(X, Y) :- 0.5 :: s(X, Y).", 16, "expected '!=' (a body holds atoms and 'X != Y' conditions), found '::'"),
])
def test_parser_bad_probability_is_one_line(tmp_path, text, col, problem):
    from deepunlearn.rules import load_rules

    f = tmp_path / "soft.dl"
    f.write_text("% soft rules\nr(X, Y) :- t(X, Y).\n" + text + "\n")
    with pytest.raises(RuleSyntaxError) as e:
        load_rules(str(f))
    assert str(e.value) == f"{f}:3:{col}: {problem}"
