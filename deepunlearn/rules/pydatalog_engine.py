"""A second, independent closure engine on pyDatalog (a cross-check of the native engine, and
``closure(..., engine="pydatalog")``). It computes facts only, no groundings.

pyDatalog evaluates every rule body (joins, attribute atoms, ``!=``) as a non-recursive query
over the facts asserted so far; the loop here asserts the new heads and repeats until nothing
new appears (naive bottom-up evaluation). pyDatalog's own recursive resolution is not used: with
the family rules it does not terminate even on a one-fact KB (pyDatalog 0.22.4; e.g. the four
rules ``wife <- father, mother``, ``mother <- father, wife``, ``father <- child``,
``child <- husband, mother`` loop forever; reordering body atoms changes whether it does).

Predicates are prefixed (``e_child`` holds the facts of relation ``child``, ``a_male`` the
entities with attribute value ``male``, ``q3`` the body of rule 3) so that no relation name can
clash with Python or pyDatalog names; variables are renamed ``V0, V1, ...``.
"""

from __future__ import annotations

import threading
from typing import Iterable

from .language import Atom, RuleSet, Term, Var

_LOCK = threading.Lock()  # pyDatalog keeps one global (thread-local) logic database


def _term(t: Term, names: dict[str, str]) -> str:
    if isinstance(t, Var):
        return names[t.name]
    return repr(t.value)


def _atom(a: Atom, names: dict[str, str]) -> str:
    prefix = "a_" if a.is_attribute else "e_"
    return f"{prefix}{a.relation}({', '.join(_term(t, names) for t in a.args)})"


def body_queries(rules: RuleSet) -> list[tuple[str, list[str]]]:
    """For each rule, a pyDatalog clause ``q<k>(vars) <= body`` and the rule's variable names
    in the order of ``vars``.

    >>> from deepunlearn.rules.parser import parse_datalog
    >>> body_queries(parse_datalog("child(A, B) :- father(B, A), male(A), A != B."))
    [('q0(V0, V1) <= e_father(V0, V1) & a_male(V1) & (V1 != V0)', ['B', 'A'])]
    """
    out = []
    for k, rule in enumerate(rules.rules):
        order: list[str] = []
        for a in rule.relation_atoms:
            for t in a.args:
                if isinstance(t, Var) and t.name not in order:
                    order.append(t.name)
        names = {v: f"V{i}" for i, v in enumerate(order)}
        body = [_atom(a, names) for a in rule.body]
        body += [f"({_term(c.left, names)} != {_term(c.right, names)})" for c in rule.neq]
        head_vars = [names[v] for v in order] or ["V0"]
        if not order:  # a ground rule: give the query one (constant) column
            body.append("(V0 == 0)")
        out.append((f"q{k}({', '.join(head_vars)}) <= {' & '.join(body)}", order))
    return out


def pydatalog_closure(kb, rules: RuleSet, known: Iterable[int] | None = None) -> set[tuple[str, str, str]]:
    """Every fact of ``Ω(K, R)`` over the rules' relations, as ``(o1, r, o2)`` triples."""
    from pyDatalog import pyDatalog

    k = range(len(kb.facts)) if known is None else sorted(set(int(i) for i in known))
    rels = rules.relations
    facts: set[tuple[str, str, str]] = {kb.facts[i] for i in k if kb.facts[i][1] in rels}
    queries = body_queries(rules)
    with _LOCK:
        pyDatalog.clear()
        try:
            for s, r, o in facts:
                pyDatalog.assert_fact(f"e_{r}", s, o)
            attrs = rules.attributes
            for e, values in kb.entities.items():
                for v in set(values.values()) & attrs:
                    pyDatalog.assert_fact(f"a_{v}", e)
            pyDatalog.load("\n".join(q for q, _ in queries))
            while True:
                new: set[tuple[str, str, str]] = set()
                for k_rule, (rule, (_, order)) in enumerate(zip(rules.rules, queries)):
                    ans = pyDatalog.ask(f"q{k_rule}({', '.join(f'V{i}' for i in range(max(len(order), 1)))})")
                    if ans is None:
                        continue
                    for row in ans.answers:
                        binding = dict(zip(order, row))
                        s, o = (binding[t.name] if isinstance(t, Var) else t.value for t in rule.head.args)
                        fact = (s, rule.head.relation, o)
                        if fact not in facts:
                            new.add(fact)
                if not new:
                    return facts
                for s, r, o in new:
                    pyDatalog.assert_fact(f"e_{r}", s, o)
                facts |= new
        finally:
            pyDatalog.clear()
