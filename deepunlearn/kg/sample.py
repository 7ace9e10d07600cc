"""Sample a domain's entities, background attributes and shaped relations.

:func:`sample_domain` is the random half of the declarative generator: it names the entities of
every type of a :class:`~.domain.Domain`, gives them their background attributes and draws the
relations that declare a ``shape``. What the rules derive from these facts, and which derived
facts a KB stores, is the rules layer's half (:mod:`deepunlearn.rules.generate`): kg may not
import rules.

Shapes (``o2`` is ``o1``'s relation; every object is an entity of the object type):

* ``one``: each subject one object, uniform (never the subject itself);
* ``tree``: one tree over the type: the entities in a shuffled order, the first is the root, each
  later one gets a parent uniform among the earlier ones with fewer than ``branching`` (default 3)
  children: every non-root has exactly one parent, and there is no cycle;
* ``pairs``: the entities in a shuffled order, paired two by two (an odd one is left out); the
  pair is stored both ways when the relation is ``symmetric`` (the rules say ``r(Y, X) :- r(X, Y).``);
* ``some``: each subject ``branching`` (default 2) distinct objects, uniform (never itself).

Only ``rng`` draws, in a fixed order (types, then attributes, then relations, each in file order),
so the same seed gives the same :class:`Sampled`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence
from functools import lru_cache
from importlib import resources

import numpy as np

from .domain import Domain, DomainError
from .kb import Fact, KBError

#: Default ``branching`` per shape: children per node of a tree, objects per subject of ``some``.
DEFAULT_BRANCHING = {"tree": 3, "some": 2}


@dataclass(frozen=True)
class Sampled:
    """What :func:`sample_domain` drew: ``entities`` (name -> background attributes, types in file
    order), ``types`` (name -> entity type) and ``facts`` (the shaped relations, in relation order,
    each relation's facts in subject order)."""

    entities: dict[str, dict[str, str]]
    types: dict[str, str]
    facts: list[Fact]

    def of_type(self, t: str) -> list[str]:
        """The entities of type ``t`` in sampling order."""
        return [e for e, ty in self.types.items() if ty == t]


@lru_cache(maxsize=1)
def name_lists() -> dict[str, tuple[str, ...]]:
    """The ``city``, ``country`` and ``word`` lists of ``resources/domain_names.json``."""
    raw = json.loads((resources.files(__package__) / "resources" / "domain_names.json").read_text(encoding="utf-8"))
    return {k: tuple(v) for k, v in raw.items() if not k.startswith("_")}


def _error(domain: Domain, key: str, problem: str) -> DomainError:
    path = domain.folder / "domain.toml"
    return DomainError(f"{path}: {key}: {problem}", file=path, field=key)


def _person_names(n: int, rng: np.random.Generator, used: set[str]) -> list[str]:
    """``n`` unique full names (first names of either gender, surnames of names.json), named as
    the family generator names people: a middle initial where "First Last" is taken."""
    from .domains.family.network import Draw, unique_name
    from .domains.family.params import FamilyParams, name_resources

    res = name_resources()
    d = Draw(rng, FamilyParams(), res)
    pool = res.female + res.male
    out = []
    for _ in range(n):
        for _attempt in range(8):  # a surname whose names are all taken: draw another
            try:
                full = unique_name(d, pool, d.pick(res.surnames), set(), used)
                break
            except KBError:
                continue
        else:
            raise KBError(f"ran out of unique person names after {len(out)} of {n}")
        used.add(full)
        out.append(full)
    return out


def _names(domain: Domain, t: str, count: int, rng: np.random.Generator, used: set[str],
           avoid: frozenset[str] = frozenset()) -> list[str]:
    """``count`` names of type ``t``, none in ``used`` (names taken by earlier types) or ``avoid``
    (names a holdout must not reuse)."""
    spec = domain.entities[t]
    free = " not already used" if avoid else ""
    if spec.values is not None:
        names = list(spec.values)
        key = f"entities.{t}.values"
    elif isinstance(spec.names, list):
        key = f"entities.{t}.count"
        listed = [x for x in spec.names if x not in avoid]
        if count > len(listed):
            raise _error(domain, key, f"{count} {t} entities asked for, entities.{t}.names lists {len(listed)}{free}")
        names = listed[:count]
        key = f"entities.{t}.names"
    elif spec.names == "person":
        try:
            names = _person_names(count, rng, used | avoid) if avoid else _person_names(count, rng, used)
        except KBError as e:
            raise _error(domain, f"entities.{t}.count", f"{count} is too many: {e}") from None
        used.update(names)
        return names
    else:
        pool = name_lists()[spec.names or "word"]
        order = rng.permutation(len(pool))
        names = [pool[int(i)] for i in order if pool[int(i)] not in used and pool[int(i)] not in avoid][:count]
        if len(names) < count:
            raise _error(domain, f"entities.{t}.count",
                         f"{count} {t} entities asked for, the built-in {spec.names or 'word'!r} list has "
                         f"{len(names)} free names{free} (give names = [...] instead)")
        used.update(names)
        return names
    taken = sorted(set(names) & used)
    if taken:
        raise _error(domain, key, f"{taken[0]!r} also names an entity of another type (entity names are unique)")
    used.update(names)
    return names


def _objects(n: int, k: int, exclude: int | None, rng: np.random.Generator) -> list[int]:
    """``k`` distinct indexes of ``range(n)`` without ``exclude``, uniform, in increasing order."""
    m = n - (exclude is not None)
    picks = rng.choice(m, size=k, replace=False) if k > 1 else rng.integers(m, size=1)
    return sorted(int(p) + (exclude is not None and p >= exclude) for p in picks)


def _tree(n: int, branching: int, rng: np.random.Generator) -> list[int]:
    """Parent index of each of ``n`` nodes (-1 for the root): a random recursive tree in which no
    node has more than ``branching`` children."""
    parent = [-1] * n
    order = rng.permutation(n)
    children = [0] * n
    spare = [int(order[0])]  # earlier nodes with room for another child, in visiting order
    for x in order[1:].tolist():
        j = int(rng.integers(len(spare)))
        p = spare[j]
        parent[x] = p
        children[p] += 1
        if children[p] == branching:
            spare.pop(j)
        spare.append(x)
    return parent


def sample_domain(domain: Domain, people: int | None, rng: np.random.Generator,
                  symmetric: set[str] | frozenset[str] = frozenset(), avoid: frozenset[str] = frozenset()) -> Sampled:
    """Entities, background attributes and shaped relations of ``domain``.

    ``people`` replaces the first entity type's ``count`` (``None``: keep it); ``symmetric`` names
    the ``pairs`` relations stored both ways (the rules layer knows which: ``r(Y, X) :- r(X, Y).``).
    ``avoid``: names the first type may not take (a holdout's new entities, apart from a KB's).
    Relations without a shape are not sampled. A request the domain cannot meet (more entities
    than a name list holds, more ``some`` objects than the object type has) is a
    :class:`~.domain.DomainError` naming ``domain.toml`` and the key.

    >>> from deepunlearn.kg.domain import load_domain
    >>> s = sample_domain(load_domain("org"), 12, np.random.default_rng(0), {"mentor_buddy"})
    >>> len(s.of_type("person")), sum(1 for _, r, _ in s.facts if r == "manager")  # a tree: 11 edges
    (12, 11)
    """
    used: set[str] = set()
    by_type: dict[str, list[str]] = {}
    for k, (t, spec) in enumerate(domain.entities.items()):
        count = spec.count if spec.values is None else len(spec.values)
        if k == 0 and people is not None:
            if spec.values is not None:
                raise _error(domain, f"entities.{t}", f"--people cannot change a type given by its values ({count})")
            if people < 1:
                raise _error(domain, f"entities.{t}.count", f"--people must be at least 1, got {people}")
            count = people
        by_type[t] = _names(domain, t, count, rng, used, avoid if k == 0 else frozenset())
    entities: dict[str, dict[str, str]] = {e: {} for names in by_type.values() for e in names}
    types = {e: t for t, names in by_type.items() for e in names}
    for a, spec in domain.attributes.items():
        names = by_type[spec.of]
        for e, v in zip(names, rng.integers(len(spec.values), size=len(names)).tolist()):
            entities[e][a] = spec.values[v]
    facts: list[Fact] = []
    for r, spec in domain.relations.items():
        if spec.shape is None:
            continue
        subj, obj = by_type[spec.subject], by_type[spec.object]
        same = spec.subject == spec.object
        pairs: list[tuple[int, int]] = []  # (subject index, object index)
        if spec.shape == "tree":
            parent = _tree(len(subj), spec.branching or DEFAULT_BRANCHING["tree"], rng)
            pairs = [(x, p) for x, p in enumerate(parent) if p >= 0]
        elif spec.shape == "pairs":
            order = rng.permutation(len(subj)).tolist()
            for a, b in zip(order[0::2], order[1::2]):
                pairs.append((a, b))
                if r in symmetric:
                    pairs.append((b, a))
        else:
            k = 1 if spec.shape == "one" else (spec.branching or DEFAULT_BRANCHING["some"])
            if k > len(obj) - same:
                key = f"relations.{r}." + ("branching" if spec.shape == "some" else "object")
                raise _error(domain, key, f"{k} distinct objects per subject, but type {spec.object!r} has "
                                          f"{len(obj) - same} to offer" + (" besides the subject" if same else ""))
            for x in range(len(subj)):
                pairs.extend((x, y) for y in _objects(len(obj), k, x if same else None, rng))
        pairs.sort()
        facts.extend((subj[x], r, obj[y]) for x, y in pairs)
    return Sampled(entities, types, facts)


def pick_targets(facts: Sequence[Fact], relations: Sequence[str], per_relation: int,
                 rng: np.random.Generator) -> list[int]:
    """Evaluation targets: ``per_relation`` fact ids of each of ``relations`` (all of them where
    fewer exist), drawn in ``relations`` order, each relation's sorted (both generators use it)."""
    by_rel: dict[str, list[int]] = {r: [] for r in relations}
    for i, (_, r, _) in enumerate(facts):
        if r in by_rel:
            by_rel[r].append(i)
    out: list[int] = []
    for r in relations:
        ids = by_rel[r]
        k = min(per_relation, len(ids))
        if k:
            out.extend(sorted(ids[int(i)] for i in rng.choice(len(ids), size=k, replace=False)))
    return out
