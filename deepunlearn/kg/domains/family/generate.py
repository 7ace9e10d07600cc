"""Synthetic family knowledge bases, grown the way EDU-RELAT is (paper section 4).

Four steps, each a plain function over a :class:`FamilyNetwork`:

1. :func:`grow_family` grows family trees over ``generations`` generations. Given a person,
   with set probabilities it adds their parents (as a couple, with more children beside
   the person), a spouse, and the couple's children (a truncated geometric number, 1-4).
   Birth years, birthplaces and surnames are drawn as each person is added: a child's birth
   year from a truncated Gaussian given the mother's (and never less than
   ``father_min_age`` after the father's), a couple's gap from a truncated Gaussian,
   birthplaces from a parent's (or spouse's) or else from the US population, surnames from
   the father. When a tree stops growing a new one starts, until exactly ``people`` exist.
2. :func:`name_people` gives every person a gendered first name and a unique full name
   (a wife takes her husband's surname with a small probability; a middle initial is added
   where a name is taken), and a job drawn by the decade in which they turned twenty.
3. :func:`true_family_relations` lists every relation among the 11 family relations that
   holds in the network (aunts and uncles by blood, as in the release and its rules).
4. :func:`choose_stored` decides which true relations the KB stores. The *backbone* (every
   ``father``, ``mother``, ``husband`` and ``wife`` relation) is always stored; from it the
   standard family rules derive every other true relation (a ``child`` from its inverse
   ``father``/``mother``, a sibling from shared parents, an aunt/uncle/niece/nephew from a
   parent's sibling). So any other relation may be dropped and stays derivable;
   ``stored_share`` says how many are kept and ``relation_keep_weights`` which kinds.
   With the defaults a 100-person KB stores about 71 % of its true relations, as the
   release (400 stored, 162 more derivable) does: over seeds 0-149, 402 family facts on
   average (sd 37; 90 % of seeds within 15 % of 400), in a mix close to the release's.

:func:`generate_family` runs the four steps and builds the :class:`KnowledgeBase`. Only
``numpy.random.default_rng(seed)`` draws, in a fixed order, so a seed fixes the file
byte for byte.

Reference data (in ``deepunlearn/kg/resources/``, with notes of origin): the release's US
population by state, the paper's 55 jobs by decade, lists of common US first names and
surnames.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from .network import FamilyNetwork, grow_family, name_people
from .params import BACKBONE_RELATIONS, FEMALE, MALE, OPTIONAL_RELATIONS, FamilyParams
from ...sample import pick_targets
from ...kb import BIOGRAPHY_ATTRIBUTES, FAMILY_RELATIONS, Fact, KBError, KnowledgeBase, Relation

# ---------------------------------------------------------------------------------- relations
IdFact = tuple[int, str, int]


def true_family_relations(net: FamilyNetwork) -> list[IdFact]:
    """Every true relation ``(a, r, b)`` ("b is a's r") among the 11 family relations, on
    person ids, in a fixed order: by person, then father, mother, spouse, children,
    siblings, aunts/uncles, nieces/nephews.

    >>> net = FamilyNetwork()
    >>> f, m = net.add("male", 0, 1900, "Ross", "Ohio", 0), net.add("female", 0, 1902, "Lee", "Ohio", 0)
    >>> net.marry(f, m)
    >>> for _ in range(2):
    ...     net.add_child(m, f, net.add("female", 1, 1930, "Ross", "Ohio", 0))
    >>> sorted(r for _, r, _ in true_family_relations(net))  # doctest: +NORMALIZE_WHITESPACE
    ['child', 'child', 'child', 'child', 'father', 'father', 'husband', 'mother', 'mother',
     'sister', 'sister', 'wife']
    """
    out: list[IdFact] = []
    g = net.gender
    for x in range(len(net)):
        if net.father[x] >= 0:
            out.append((x, "father", net.father[x]))
        if net.mother[x] >= 0:
            out.append((x, "mother", net.mother[x]))
        if net.spouse[x] >= 0:
            out.append((x, "husband" if g[x] == FEMALE else "wife", net.spouse[x]))
        out.extend((x, "child", c) for c in net.children[x])
        sibs = net.siblings(x)
        out.extend((x, "brother" if g[s] == MALE else "sister", s) for s in sibs)
        for parent in (net.father[x], net.mother[x]):
            if parent >= 0:
                out.extend((x, "uncle" if g[u] == MALE else "aunt", u) for u in net.siblings(parent))
        for s in sibs:
            out.extend((x, "nephew" if g[c] == MALE else "niece", c) for c in net.children[s])
    return out


def _quotas(counts: dict[str, int], weights: dict[str, float], total: int) -> dict[str, int]:
    """Split ``total`` kept facts over relations: relation r keeps ``n_r * min(1, s * w_r)``
    (one scale s, found by bisection), rounded by largest remainder so the sum is exact."""
    total = max(0, min(total, sum(counts.values())))
    if total == 0:
        return {r: 0 for r in counts}

    def kept(s: float) -> float:
        return sum(n * min(1.0, s * weights[r]) for r, n in counts.items())

    lo, hi = 0.0, 1.0 / min(weights[r] for r in counts)
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if kept(mid) < total else (lo, mid)
    exact = {r: n * min(1.0, hi * weights[r]) for r, n in counts.items()}
    q = {r: min(counts[r], math.floor(v)) for r, v in exact.items()}
    rest = total - sum(q.values())
    for r in sorted(counts, key=lambda r: (-(exact[r] - q[r]), OPTIONAL_RELATIONS.index(r))):
        if rest <= 0:
            break
        if q[r] < counts[r]:
            q[r] += 1
            rest -= 1
    return q


def choose_stored(truth: list[IdFact], params: FamilyParams, rng: np.random.Generator) -> list[IdFact]:
    """The true relations the KB stores: the backbone (father, mother, husband, wife) and a
    weighted share of the others, so that ``round(stored_share * len(truth))`` are stored
    (never fewer than the backbone). Every relation left out is derivable from the backbone
    by the standard family rules. Returned in a shuffled order, as in the release.
    """
    backbone = [f for f in truth if f[1] in BACKBONE_RELATIONS]
    by_rel: dict[str, list[IdFact]] = {r: [] for r in OPTIONAL_RELATIONS}
    for f in truth:
        if f[1] in by_rel:
            by_rel[f[1]].append(f)
    target = round(params.stored_share * len(truth)) - len(backbone)
    counts = {r: len(v) for r, v in by_rel.items() if v}
    quotas = _quotas(counts, params.relation_keep_weights, target)
    kept = list(backbone)
    for r in OPTIONAL_RELATIONS:
        facts = by_rel[r]
        k = quotas.get(r, 0)
        if k:
            idx = np.sort(rng.choice(len(facts), size=k, replace=False))
            kept.extend(facts[int(i)] for i in idx)
    order = rng.permutation(len(kept))
    return [kept[int(i)] for i in order]


# ---------------------------------------------------------------------------------- the KB
def family_relations() -> dict[str, Relation]:
    """The family domain's relations (``kg/domains/family/domain.toml``): the 11 family relations
    (group ``family``) and the three biography attributes (group ``biography``), each with its
    paraphrases and statements. The file is read once per process (relations are frozen)."""
    return dict(_family_relations())


@lru_cache(maxsize=1)
def _family_relations() -> dict[str, Relation]:
    from ...domain import load_domain

    rels = load_domain("family").kb_relations()
    return {r: rels[r] for r in (*FAMILY_RELATIONS, *BIOGRAPHY_ATTRIBUTES)}


def _biography(net: FamilyNetwork) -> list[Fact]:
    """Three biography facts per person: birthyear, birthplace ("<State> state") and job."""
    names = net.name
    biography: list[Fact] = []
    for x in range(len(net)):
        biography += [(names[x], "birthyear", str(net.year[x])),
                      (names[x], "birthplace", f"{net.place[x]} state"),
                      (names[x], "job", net.job[x])]
    return biography


def _family_kb(net: FamilyNetwork, params: FamilyParams, people: int, seed: int, truth_ids: list,
               stored_ids: list, rng: np.random.Generator) -> KnowledgeBase:
    """The KB of a named network: the stored family facts, then the biography; targets drawn from
    the family facts; metadata recording the generator, seed, parameters, rules and counts."""
    names = net.name
    family = [(names[a], r, names[b]) for a, r, b in stored_ids]
    facts = family + _biography(net)
    relations = family_relations()
    metadata: dict[str, Any] = {
        "generator": "deepunlearn.kg.domains.family.generate.generate_family",
        "seed": seed,
        "params": params.model_dump(mode="json"),
        "rules": "family",
        "stats": {
            "people": len(net),
            "family_trees": len(set(net.tree)),
            "true_family_facts": len(truth_ids),
            "stored_family_facts": len(family),
            "stored_share": round(len(family) / len(truth_ids), 4) if truth_ids else 1.0,
        },
    }
    return KnowledgeBase(
        entities={n: {"gender": g} for n, g in zip(names, net.gender)},
        relations=relations,
        facts=facts,
        targets=pick_targets(family, FAMILY_RELATIONS, params.targets_per_relation, rng),
        name=f"family-{people}-seed{seed}",
        metadata=metadata,
    )


def generate_family(
    people: int,
    seed: int = 0,
    params: FamilyParams | None = None,
    *,
    return_truth: bool = False,
    questions: str = "relation",
) -> KnowledgeBase | tuple[KnowledgeBase, list[Fact]]:
    """A synthetic EDU-RELAT-like family KB with exactly ``people`` people.

    Family facts ``(o1, r, o2)`` ("o2 is o1's r") over the 11 family relations, part of the true
    relations (the rest derivable by the ``family`` rules); three biography facts per person
    (birthyear, birthplace "<State> state", job); ``targets_per_relation`` targets per family
    relation.

    Parameters
    ----------
    people : int
        How many people (at least 1).
    seed : int, default 0
        Seeds every draw (at least 0): the same seed gives the same KB.
    params : FamilyParams, optional
        The generator's parameters (:class:`~deepunlearn.kg.domains.family.params.FamilyParams`);
        ``params.names`` says how people get their surnames (``inherited``, the paper's, or
        ``independent``).
    return_truth : bool, default False
        Also return every true family relation, stored or not.
    questions : {"relation", "entity"}, default "relation"
        How the functional relations are asked: ``relation``, the paper's "Who is {o2} to {o1}?"
        -> "father", or ``entity``, "Who is {o1}'s father?" -> the person (:mod:`.questions`).

    Returns
    -------
    KnowledgeBase or tuple of (KnowledgeBase, list of Fact)
        The KB, whose ``metadata`` records the generator, seed, parameters, the rule set that
        completes it (``"family"``), ``questions`` and ``stats`` (true and stored family facts,
        family trees); with ``return_truth``, also the true family facts.

    Raises
    ------
    KBError
        ``people`` below 1, ``seed`` below 0, or ``questions`` not one of the two.

    Examples
    --------
    >>> kb, truth = generate_family(40, seed=1, return_truth=True)
    >>> len(kb.entities), sum(1 for _, r, _ in kb.facts if r == "job")
    (40, 40)
    >>> set(f for f in kb.facts if kb.relations[f[1]].kind == "entity") <= set(truth)
    True
    >>> generate_family(20, seed=7).probe(18).question
    'Who is Hayden Rollins to Oscar Rollins?'
    """
    params = params or FamilyParams()
    if people < 1:
        raise KBError(f"people must be at least 1 (got {people})")
    if seed < 0:
        raise KBError(f"seed must be a non-negative integer (got {seed})")
    rng = np.random.default_rng(seed)
    net = grow_family(people, params, rng)
    name_people(net, params, rng)
    truth_ids = true_family_relations(net)
    stored_ids = choose_stored(truth_ids, params, rng)
    kb = _family_kb(net, params, people, seed, truth_ids, stored_ids, rng)
    if questions != "relation":
        from .questions import use_question_format

        use_question_format(kb, questions)
    kb.validate()
    if return_truth:
        names = net.name
        return kb, [(names[a], r, names[b]) for a, r, b in truth_ids]
    return kb
