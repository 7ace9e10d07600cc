"""Steps 1 and 2 of the family generator (:mod:`deepunlearn.kg.domains.family.generate`): grow the family
network (:func:`grow_family`) and name its people and give them jobs (:func:`name_people`)."""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import accumulate

import numpy as np

from .params import FEMALE, MALE, FamilyParams, NameResources, name_resources
from ...kb import KBError

# ---------------------------------------------------------------------------------- the network
@dataclass
class FamilyNetwork:
    """People as parallel lists indexed by person id (creation order); -1 means "none"."""

    gender: list[str] = field(default_factory=list)
    generation: list[int] = field(default_factory=list)
    year: list[int] = field(default_factory=list)
    father: list[int] = field(default_factory=list)
    mother: list[int] = field(default_factory=list)
    spouse: list[int] = field(default_factory=list)
    children: list[list[int]] = field(default_factory=list)
    surname: list[str] = field(default_factory=list)   # birth surname
    place: list[str] = field(default_factory=list)
    tree: list[int] = field(default_factory=list)
    name: list[str] = field(default_factory=list)      # filled by name_people
    job: list[str] = field(default_factory=list)       # filled by name_people

    def __len__(self) -> int:
        return len(self.gender)

    def add(self, gender: str, generation: int, year: int, surname: str, place: str, tree: int) -> int:
        self.gender.append(gender)
        self.generation.append(generation)
        self.year.append(year)
        self.father.append(-1)
        self.mother.append(-1)
        self.spouse.append(-1)
        self.children.append([])
        self.surname.append(surname)
        self.place.append(place)
        self.tree.append(tree)
        return len(self.gender) - 1

    def marry(self, a: int, b: int) -> None:
        self.spouse[a], self.spouse[b] = b, a

    def add_child(self, mother: int, father: int, child: int) -> None:
        self.mother[child], self.father[child] = mother, father
        self.children[mother].append(child)
        self.children[father].append(child)

    def siblings(self, p: int) -> list[int]:
        """Brothers and sisters (children of the same couple), in id order."""
        f = self.father[p]
        return [] if f < 0 else [c for c in self.children[f] if c != p]


@lru_cache(maxsize=4096)
def _gauss_cdf(offset: float, width: int, sd: float) -> tuple[float, ...] | None:
    """Cumulative weights of the integers ``lo .. lo + width`` under a Gaussian whose mean
    lies ``-offset`` from ``lo`` (windows recur, so they are cached)."""
    w = [math.exp(-0.5 * ((offset + k) / sd) ** 2) for k in range(width + 1)]
    total = sum(w)
    if total <= 0.0:
        return None
    return tuple(accumulate(x / total for x in w))


class Draw:
    """All random draws of the generator, from one ``numpy`` generator in a fixed order."""

    def __init__(self, rng: np.random.Generator, params: FamilyParams, res: NameResources):
        self.rng, self.p, self.res = rng, params, res
        ks = range(params.min_children, params.max_children + 1)
        w = [(1 - params.p_child) ** (k - params.min_children) for k in ks]
        self._n_children = (tuple(ks), tuple(accumulate(x / sum(w) for x in w)))

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def gender(self) -> str:
        return MALE if self.rng.random() < 0.5 else FEMALE

    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def n_children(self) -> int:
        """Truncated geometric number of children on [min_children, max_children]."""
        ks, cum = self._n_children
        return ks[min(bisect_right(cum, self.rng.random()), len(ks) - 1)]

    def gauss_int(self, mean: float, sd: float, lo: float, hi: float) -> int | None:
        """An integer from the Gaussian (mean, sd) truncated to [lo, hi]; None if empty."""
        lo_i, hi_i = math.ceil(lo), math.floor(hi)
        if lo_i > hi_i:
            return None
        cum = _gauss_cdf(lo_i - mean, hi_i - lo_i, sd)
        u = self.rng.random()
        if cum is None:  # the window is far in a tail: take its end nearest the mean
            return lo_i if mean < lo_i else hi_i
        return lo_i + min(bisect_right(cum, u), hi_i - lo_i)

    def state(self) -> str:
        res = self.res
        return res.states[min(bisect_right(res.state_cum, self.rng.random()), len(res.states) - 1)]

    def place_near(self, place: str, p_same: float) -> str:
        return place if self.chance(p_same) else self.state()


class _Grower:
    """One network as it grows: the draws, and the queue of people still to visit in the order
    they were added. Each step adds people only while there is room for them."""

    def __init__(self, people: int, params: FamilyParams, rng: np.random.Generator):
        self.people, self.p = people, params
        self.d = Draw(rng, params, name_resources())
        self.net = FamilyNetwork()
        self.queue: deque[int] = deque()

    def room(self) -> int:
        return self.people - len(self.net)

    def new_child(self, mother: int, father: int) -> int | None:
        """A child of the couple, born within the mother's age bounds; None when no year fits."""
        p, d, net = self.p, self.d, self.net
        m, f = net.year[mother], net.year[father]
        year = d.gauss_int(m + p.mother_age_mean, p.mother_age_sd,
                           max(m + p.mother_age_min, f + p.father_min_age, p.min_year),
                           min(m + p.mother_age_max, p.max_year))
        if year is None:
            return None
        parent = mother if d.chance(0.5) else father
        place = d.place_near(net.place[parent], p.p_birthplace_from_parent)
        c = net.add(d.gender(), net.generation[mother] + 1, year, net.surname[father], place, net.tree[mother])
        net.add_child(mother, father, c)
        return c

    def add_children(self, mother: int, father: int, count: int) -> None:
        """Up to ``count`` children of the couple, queued; stops at the first that cannot be born."""
        for _ in range(count):
            if self.room() < 1:
                return
            c = self.new_child(mother, father)
            if c is None:  # the mother is too old (or it is past max_year): no more children
                return
            self.queue.append(c)

    def add_parents(self, x: int) -> None:
        """A married father and mother for ``x`` (and more children of theirs), when their years fit."""
        p, d, net = self.p, self.d, self.net
        y = net.year[x]
        age = d.gauss_int(p.mother_age_mean, p.mother_age_sd, p.mother_age_min,
                          min(p.mother_age_max, y - p.min_year))
        if age is None:
            return
        m_year = y - age
        gap = d.gauss_int(p.spouse_gap_mean, p.spouse_gap_sd, max(p.spouse_gap_min, p.father_min_age - age),
                          min(p.spouse_gap_max, m_year - p.min_year))
        if gap is None:
            return
        g, t = net.generation[x] - 1, net.tree[x]
        f = net.add(MALE, g, m_year - gap, net.surname[x],
                    d.place_near(net.place[x], p.p_birthplace_from_parent), t)
        m = net.add(FEMALE, g, m_year, d.pick(d.res.surnames),
                    d.place_near(net.place[x], p.p_birthplace_from_parent), t)
        net.marry(f, m)
        net.add_child(m, f, x)
        self.queue.extend((f, m))
        if p.parents_have_more_children:
            self.add_children(m, f, d.n_children() - 1)

    def add_spouse(self, x: int) -> None:
        """A spouse for ``x`` and, before the last generation, their children, when a year fits."""
        p, d, net = self.p, self.d, self.net
        y = net.year[x]
        if net.gender[x] == MALE:   # the wife is born `gap` years after her husband
            gap = d.gauss_int(p.spouse_gap_mean, p.spouse_gap_sd, max(p.spouse_gap_min, p.min_year - y),
                              min(p.spouse_gap_max, p.max_year - y))
            year = None if gap is None else y + gap
        else:
            gap = d.gauss_int(p.spouse_gap_mean, p.spouse_gap_sd, max(p.spouse_gap_min, y - p.max_year),
                              min(p.spouse_gap_max, y - p.min_year))
            year = None if gap is None else y - gap
        if year is None:
            return
        s = net.add(FEMALE if net.gender[x] == MALE else MALE, net.generation[x], year,
                    d.pick(d.res.surnames), d.place_near(net.place[x], p.p_birthplace_from_spouse), net.tree[x])
        net.marry(x, s)
        self.queue.append(s)
        if net.generation[x] < p.generations - 1:
            mother, father = (x, s) if net.gender[x] == FEMALE else (s, x)
            self.add_children(mother, father, d.n_children())


def grow_family(people: int, params: FamilyParams, rng: np.random.Generator) -> FamilyNetwork:
    """Grow family trees breadth-first until exactly ``people`` people exist.

    A tree starts with one person in generation 0 (the oldest). Taking people in the order
    they were added, a person without parents (and not in generation 0) gets a father and a
    mother with probability ``p_parents`` (plus brothers and sisters when
    ``parents_have_more_children``); an unmarried person gets a spouse with probability
    ``p_spouse``, and the couple gets their children unless they are in the last generation.
    Nobody is added whose birth year would leave [min_year, max_year] or the age bounds.

    >>> net = grow_family(30, FamilyParams(), np.random.default_rng(0))
    >>> len(net), all(net.year[net.mother[c]] + 18 <= net.year[c] for c in range(30) if net.mother[c] >= 0)
    (30, True)
    """
    if people < 0:
        raise KBError(f"people must be >= 0 (got {people})")
    p = params
    grower = _Grower(people, params, rng)
    d, net, queue = grower.d, grower.net, grower.queue
    trees = 0
    while len(net) < people:
        if not queue:
            year = int(d.rng.integers(p.founder_years[0], p.founder_years[1] + 1))
            queue.append(net.add(d.gender(), 0, year, d.pick(d.res.surnames), d.state(), trees))
            trees += 1
            continue
        x = queue.popleft()
        if net.father[x] < 0 and net.generation[x] > 0 and d.chance(p.p_parents) and grower.room() >= 2:
            grower.add_parents(x)
        last = net.generation[x] >= p.generations - 1
        if (net.spouse[x] < 0 and d.chance(p.p_spouse_last_generation if last else p.p_spouse)
                and grower.room() >= 1):
            grower.add_spouse(x)
    return net


# ---------------------------------------------------------------------------------- names, jobs
def _job_decade(year: int, decades: dict[int, tuple[str, ...]]) -> int:
    """The decade in which someone born in ``year`` turns twenty (the reference's rule),
    clamped to the decades the job list covers."""
    return min(max(year // 10 * 10 + 20, min(decades)), max(decades))


def name_people(net: FamilyNetwork, params: FamilyParams, rng: np.random.Generator) -> None:
    """Fill ``net.name`` (unique full names) and ``net.job``.

    A surname is the birth surname (the father's), except that a wife goes by her husband's
    with probability ``p_wife_takes_surname``; with ``params.names == "independent"`` every person
    draws a surname from the list on their own instead (a name then says nothing of kinship). First names are drawn by gender, different
    from the siblings'; where "First Last" is taken a middle initial is added
    ("Mary J. Smith"); names are unique in the KB.
    """
    d = Draw(rng, params, name_resources())
    res = d.res
    if params.names == "independent":  # names carry no kinship: every surname drawn on its own
        shown = [d.pick(res.surnames) for _ in range(len(net))]
    else:
        shown = list(net.surname)
        for x in range(len(net)):
            s = net.spouse[x]
            if net.gender[x] == FEMALE and s >= 0 and d.chance(params.p_wife_takes_surname):
                shown[x] = net.surname[s]
    used: set[str] = set()
    first: list[str] = []
    net.name = []
    for x in range(len(net)):
        pool = res.male if net.gender[x] == MALE else res.female
        avoid = {first[c] for c in net.siblings(x) if c < x}
        full = unique_name(d, pool, shown[x], avoid, used)
        used.add(full)
        first.append(full.split(" ", 1)[0])
        net.name.append(full)
    net.job = [d.pick(res.jobs_by_decade[_job_decade(y, res.jobs_by_decade)]) for y in net.year]


def unique_name(d: Draw, pool: tuple[str, ...], surname: str, avoid: set[str], used: set[str]) -> str:
    for _ in range(16):
        fn = d.pick(pool)
        if fn not in avoid and f"{fn} {surname}" not in used:
            return f"{fn} {surname}"
    initials = [chr(ord("A") + int(i)) for i in d.rng.permutation(26)]
    for _ in range(16):
        fn = d.pick(pool)
        if fn in avoid:
            continue
        for ini in initials:
            if (full := f"{fn} {ini}. {surname}") not in used:
                return full
    for fn in pool:  # exhaustive and deterministic: only reached in enormous KBs
        if fn in avoid:
            continue
        if (full := f"{fn} {surname}") not in used:
            return full
        for ini in initials:
            if (full := f"{fn} {ini}. {surname}") not in used:
                return full
    raise KBError(f"ran out of unique names for surname {surname!r}: too many people for the name lists")
