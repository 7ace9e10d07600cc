"""The rules layer's half of the domain warnings (:mod:`deepunlearn.kg.domain_check`): how many
objects a subject has per relation, counted on the closure of a sampled KB (derived relations such
as a tree's inverse have no shape to read it from)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..kg.domain import VALUE, Domain, DomainError
from ..kg.domain_check import DomainWarning, check_domain, several_warnings, template_warnings
from ..kg.kb import KnowledgeBase


def closure_objects(graph, relations) -> dict[str, int]:
    """The most distinct objects one subject has, per relation of ``relations``, over the graph's
    closure (stored and derived facts)."""
    wanted = set(relations)
    objs: dict[tuple[str, str], set[str]] = defaultdict(set)
    for i in np.flatnonzero(graph.in_closure):
        s, r, o = graph.fact(int(i))
        if r in wanted:
            objs[(r, s)].add(o)
    out: dict[str, int] = {}
    for (r, _), os_ in objs.items():
        out[r] = max(out.get(r, 0), len(os_))
    return out


def _asked_for_objects(dom: Domain) -> list[str]:
    return [r for r, s in dom.relations.items() if s.answer == "{o2}" and s.object != VALUE]


def sampled_objects(dom: Domain, people: int | None = None, seed: int = 0) -> dict[str, int] | None:
    """:func:`closure_objects` on a KB sampled from ``dom`` (its own counts, or ``people`` of its
    first type); ``None`` when it cannot be sampled (a name pool too small: its own warning)."""
    from .generate import domain_rules, domain_sampler, symmetric_relations
    from .graph import derivation_graph

    asked = _asked_for_objects(dom)
    if not asked:
        return {}
    rules = domain_rules(dom)
    try:
        s = domain_sampler(dom)(dom, people, np.random.default_rng(seed), symmetric_relations(rules))
    except DomainError:
        return None
    base = KnowledgeBase(entities=s.entities, relations=dom.kb_relations(), facts=list(s.facts), name=dom.name,
                         background=tuple(dom.attributes))
    return closure_objects(derivation_graph(base, rules), asked)


def domain_warnings(dom: Domain, *, people: int | None = None, graph=None) -> list[DomainWarning]:
    """Every warning on ``dom``; ``graph``: the derivation graph of a KB generated from it (else
    one is sampled)."""
    from ..kg.sample import sample_domain
    from .generate import domain_sampler

    objects = closure_objects(graph, _asked_for_objects(dom)) if graph is not None else sampled_objects(dom, people)
    return check_domain(dom, objects=objects, people=people, pools=domain_sampler(dom) is sample_domain)


def name_pool_warnings(dom: Domain, people: int | None = None) -> list[DomainWarning]:
    """The name pools' warnings, for a domain the declarative sampler names (not geo's own)."""
    from ..kg.domain_check import pool_warnings
    from ..kg.sample import sample_domain
    from .generate import domain_sampler

    return pool_warnings(dom, people) if domain_sampler(dom) is sample_domain else []


def relation_warnings(dom: Domain, graph) -> list[DomainWarning]:
    """The relations' warnings on a KB generated from ``dom`` (``graph``: its derivation graph)."""
    return template_warnings(dom) + several_warnings(dom, closure_objects(graph, _asked_for_objects(dom)))
