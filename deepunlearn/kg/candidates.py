"""The answers a probe question could have: candidates of the answer's *type*.

Per-fact likelihood scores (rank, exposure, TOFU's multiple-choice probability and truth ratio)
compare the gold answer with the other answers of its type. Which answers those are follows
from the relation's answer template (:class:`~deepunlearn.kg.kb.Relation`):

``"{r}"`` (the release's "Who is X to Y?" form, the answer is the relation name)
    the names of every relation of the same kind whose question template is the same;
``"{o2}"`` with an entity as object (a family relation asked for the person)
    every entity name of the KB;
``"{o2}"`` with a value as object (biography)
    every value the KB holds for that relation;
any other template
    the template formatted with ``o1`` and ``r`` fixed: over ``o2`` in the object domain above
    when it names ``{o2}``, else over ``r`` in the relations of the ``"{r}"`` rule.

A fact with a ``probe_overrides`` wording adds its own answer and the override answers of the
other facts of its relation. A canary relation (``kb.metadata["canaries"]["relation"]``: random
strings outside every rule) takes the KB's values of that relation plus
``metadata["canaries"]["references"]`` (Baluta et al.'s reference strings).

Candidates are sorted and deduplicated and always hold the gold answer. They are computed once
per (KB object, relation) and kept on the KB object (``kb.__dict__``); a KB changed in place
after its first use keeps its old candidates.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from .canaries import canary_info
from .kb import KBError, KnowledgeBase

_CACHE = "_answer_candidates_cache"


def _cache(kb: KnowledgeBase) -> dict:
    return kb.__dict__.setdefault(_CACHE, {})


def _check(kb: KnowledgeBase, fact_id) -> int:
    if isinstance(fact_id, bool) or not isinstance(fact_id, (int, np.integer)):
        raise KBError(f"fact id must be an integer, got {fact_id!r}")
    i = int(fact_id)
    if not 0 <= i < len(kb.facts):
        raise KBError(f"fact index {i} out of range (KB has {len(kb.facts)} facts)")
    return i


def _objects(kb: KnowledgeBase, relation: str) -> list[str]:
    """The ``o2`` domain of a relation: every entity for a family relation, else its values."""
    if kb.relations[relation].kind == "entity":
        return list(kb.entities)
    return sorted({o for _, r, o in kb.facts if r == relation})


def _relation_candidates(kb: KnowledgeBase, relation: str, subject: str) -> set[str]:
    """The candidates of a fact of ``relation`` about ``subject`` from the templates alone."""
    rel = kb.relations[relation]
    canaries = canary_info(kb)
    if canaries is not None and relation == canaries.get("relation"):
        return {o for _, r, o in kb.facts if r == relation} | set(canaries.get("references", []))
    if rel.answer == "{o2}":
        return set(_objects(kb, relation))
    if "{o2}" in rel.answer:
        return {rel.answer.format(o1=subject, r=relation, o2=o) for o in _objects(kb, relation)}
    peers = [n for n, x in kb.relations.items() if x.kind == rel.kind and x.question == rel.question]
    return {rel.answer.format(o1=subject, r=n, o2="") for n in peers}


def answer_candidates(kb: KnowledgeBase, fact_id: int) -> list[str]:
    """The answers of fact ``fact_id``'s type, gold included, sorted and deduplicated (see the
    module docstring for the rules).

    >>> kb = KnowledgeBase.build({"A": {}, "B": {}}, [("A", "child", "B"), ("B", "father", "A"),
    ...                          ("A", "birthyear", "1950"), ("B", "birthyear", "1980")])
    >>> answer_candidates(kb, 0), answer_candidates(kb, 2)
    (['child', 'father'], ['1950', '1980'])
    """
    i = _check(kb, fact_id)
    s, r, _ = kb.facts[i]
    cache = _cache(kb)
    rel = kb.relations[r]
    # Only templates naming {o1} depend on the subject; the rest are cached per relation.
    key = (r, s if "{o1}" in rel.answer else None)
    if key not in cache:
        cache[key] = _relation_candidates(kb, r, s)
    out = set(cache[key])
    if kb.probe_overrides:
        okey = ("overrides", r)
        if okey not in cache:
            cache[okey] = {kb.probe_overrides[j][1] for j in kb.probe_overrides if kb.facts[j][1] == r}
        out |= cache[okey]
    out.add(kb.probe(i).answer)
    return sorted(out)


def _question_index(kb: KnowledgeBase) -> dict[str, set[str]]:
    cache = _cache(kb)
    if "questions" not in cache:
        index: dict[str, set[str]] = defaultdict(set)
        for p in kb.probes():
            index[p.question].add(p.answer)
        cache["questions"] = dict(index)
    return cache["questions"]


def true_answers(kb: KnowledgeBase, fact_id: int) -> set[str]:
    """Every answer the KB makes true for fact ``fact_id``'s probe question (the same question
    text): never a "wrong" candidate.

    >>> kb = KnowledgeBase.build({"A": {}, "B": {}}, [("A", "child", "B"), ("A", "son", "B")])
    >>> sorted(true_answers(kb, 0))
    ['child', 'son']
    """
    i = _check(kb, fact_id)
    return set(_question_index(kb)[kb.probe(i).question])


def perturbed(kb: KnowledgeBase, fact_id: int, n: int = 5, seed: int = 0) -> list[str]:
    """``n`` wrong answers of fact ``fact_id`` (its candidates minus its true answers) drawn
    without replacement by ``numpy.random.default_rng((seed, fact_id))``, in draw order; fewer
    when fewer exist. The same (KB, fact, n, seed) always gives the same answers."""
    i = _check(kb, fact_id)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n must be an integer >= 0, got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    true = true_answers(kb, i)
    wrong = [c for c in answer_candidates(kb, i) if c not in true]
    if not wrong or n == 0:
        return []
    rng = np.random.default_rng((int(seed), i))
    picks = rng.choice(len(wrong), size=min(int(n), len(wrong)), replace=False)
    return [wrong[j] for j in picks]
