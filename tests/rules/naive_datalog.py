"""An independent, naive Datalog evaluator for the rules tests (imported as ``from naive_datalog import
...``; not a test module): every round applies every rule to all facts known so far, by plain
backtracking over the facts, until nothing new appears. No indexes, no semi-naive deltas, no
derivation graph: slow and obviously right, the outside truth the engine is checked against."""

from __future__ import annotations

from deepunlearn.rules.language import Const, RuleSet, Var


def _match(term, value, env):
    if isinstance(term, Const):
        return env if term.value == value else None
    bound = env.get(term.name)
    if bound is None:
        return {**env, term.name: value}
    return env if bound == value else None


def _value(term, env):
    return term.value if isinstance(term, Const) else env[term.name]


def _groundings(rule, facts, attrs):
    """Every variable assignment satisfying ``rule``'s body over ``facts`` (triples)."""
    envs = [{}]
    for atom in rule.relation_atoms:
        nxt = []
        for env in envs:
            for s, r, o in facts:
                if r != atom.relation:
                    continue
                e = _match(atom.args[0], s, env)
                if e is not None:
                    e = _match(atom.args[1], o, e)
                if e is not None:
                    nxt.append(e)
        envs = nxt
    out = []
    for env in envs:
        if all(atom.relation in attrs.get(_value(atom.args[0], env), ()) for atom in rule.attribute_atoms) and \
                all(_value(c.left, env) != _value(c.right, env) for c in rule.neq):
            out.append(env)
    return out


def naive_rounds(facts, rules: RuleSet, entities: dict[str, dict[str, str]]) -> dict[tuple, int]:
    """Every fact of the closure of ``facts`` with the round of naive evaluation in which it first
    appears (0 for the given facts): the fewest rule applications that derive it."""
    attrs = {e: set(a.values()) for e, a in entities.items()}
    known = {tuple(f): 0 for f in facts}
    rnd = 0
    while True:
        rnd += 1
        current = list(known)
        new = set()
        for rule in rules.rules:
            for env in _groundings(rule, current, attrs):
                f = (_value(rule.head.args[0], env), rule.head.relation, _value(rule.head.args[1], env))
                if f not in known:
                    new.add(f)
        if not new:
            return known
        for f in new:
            known[f] = rnd


def naive_closure(facts, rules: RuleSet, entities) -> set[tuple]:
    return set(naive_rounds(facts, rules, entities))
