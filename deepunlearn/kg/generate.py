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

import json
import math
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from itertools import accumulate
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from .kb import BIOGRAPHY_ATTRIBUTES, FAMILY_RELATIONS, Fact, KBError, KnowledgeBase, Relation

#: Relations that are always stored: every other true relation is derivable from them.
BACKBONE_RELATIONS = ("father", "mother", "husband", "wife")
#: Relations the generator may leave to the rules.
OPTIONAL_RELATIONS = ("child", "brother", "sister", "uncle", "aunt", "nephew", "niece")

MALE, FEMALE = "male", "female"


# ---------------------------------------------------------------------------------- parameters
class FamilyParams(BaseModel):
    """Parameters of the synthetic family generator (defaults give EDU-RELAT-like data).

    Probabilities of growth follow the reference notebook (parents 0.8, geometric children
    with p = 0.4 truncated to 1-4, 4 generations). The notebook marries everyone; here 80 %
    marry and the youngest generation stays single (their children would fall outside the
    four generations), which gives 100 people about as many couples (34) and parent links
    (65) as the release. ``stored_share`` and ``relation_keep_weights`` reproduce the
    release's share and mix of stored relations.

    >>> FamilyParams().stored_share
    0.71
    >>> FamilyParams(p_spouse=1.5)
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for FamilyParams
    p_spouse
      Input should be less than or equal to 1 ...
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # --- growth of the network
    generations: int = Field(4, ge=1, le=12, description="generations in a family tree")
    p_parents: float = Field(0.8, ge=0, le=1, description="chance a person without parents gets them")
    p_spouse: float = Field(0.8, ge=0, le=1, description="chance an unmarried person gets a spouse")
    p_spouse_last_generation: float = Field(
        0.0, ge=0, le=1, description="the same in the youngest generation (who get no children)")
    p_child: float = Field(0.4, gt=0, le=1, description="parameter of the geometric number of children")
    min_children: int = Field(1, ge=1, le=20)
    max_children: int = Field(4, ge=1, le=20)
    parents_have_more_children: bool = Field(
        True, description="parents added above a person also get that person's brothers and sisters")
    # --- birth years
    min_year: int = Field(1890, description="earliest birth year")
    max_year: int = Field(2000, description="latest birth year")
    founder_years: tuple[int, int] = Field((1892, 1912), description="birth years of a tree's first person")
    mother_age_mean: float = Field(28.0, description="mother's age at a birth: mean of the Gaussian")
    mother_age_sd: float = Field(5.0, gt=0)
    mother_age_min: int = Field(18, ge=10)
    mother_age_max: int = Field(45)
    father_min_age: int = Field(18, ge=15, description="a father is at least this much older than his child")
    spouse_gap_mean: float = Field(2.5, description="years a husband is older than his wife: mean of the Gaussian")
    spouse_gap_sd: float = Field(3.5, gt=0)
    spouse_gap_min: int = Field(-5, description="the wife may be up to 5 years older")
    spouse_gap_max: int = Field(12)
    # --- birthplaces and names
    p_birthplace_from_parent: float = Field(0.85, ge=0, le=1,
                                            description="a child is born where a parent was")
    p_birthplace_from_spouse: float = Field(0.5, ge=0, le=1,
                                            description="a spouse married in was born where their partner was")
    p_wife_takes_surname: float = Field(0.2, ge=0, le=1,
                                        description="small chance a wife goes by her husband's surname")
    # --- what the KB stores
    stored_share: float = Field(0.71, gt=0, le=1, description=(
        "share of true family relations stored (never less than the father/mother/husband/wife backbone)"))
    relation_keep_weights: dict[str, float] = Field(
        default_factory=lambda: {"child": 0.77, "brother": 0.69, "sister": 0.69,
                                 "uncle": 0.24, "aunt": 0.24, "nephew": 0.24, "niece": 0.24},
        description="relative chance of keeping a relation of each optional kind (the release's rates)")
    targets_per_relation: int = Field(5, ge=0, description="targets per family relation")

    @model_validator(mode="after")
    def _consistent(self) -> "FamilyParams":
        if self.min_children > self.max_children:
            raise ValueError("min_children must not exceed max_children")
        if not self.min_year <= self.founder_years[0] <= self.founder_years[1] <= self.max_year:
            raise ValueError("founder_years must lie within [min_year, max_year]")
        if not self.mother_age_min <= self.mother_age_max:
            raise ValueError("mother_age_min must not exceed mother_age_max")
        if not self.spouse_gap_min <= self.spouse_gap_max:
            raise ValueError("spouse_gap_min must not exceed spouse_gap_max")
        missing = set(OPTIONAL_RELATIONS) - set(self.relation_keep_weights)
        unknown = set(self.relation_keep_weights) - set(OPTIONAL_RELATIONS)
        if missing or unknown:
            raise ValueError(f"relation_keep_weights needs exactly {list(OPTIONAL_RELATIONS)} "
                             f"(missing {sorted(missing)}, unknown {sorted(unknown)})")
        if any(not (w > 0) for w in self.relation_keep_weights.values()):
            raise ValueError("relation_keep_weights must be positive")
        return self


# ---------------------------------------------------------------------------------- resources
@dataclass(frozen=True)
class _Resources:
    male: tuple[str, ...]
    female: tuple[str, ...]
    surnames: tuple[str, ...]
    states: tuple[str, ...]
    state_cum: tuple[float, ...]
    jobs_by_decade: dict[int, tuple[str, ...]]


@lru_cache(maxsize=1)
def _resources() -> _Resources:
    base = resources.files(__package__) / "resources"

    def read(name: str) -> dict:
        return json.loads((base / name).read_text(encoding="utf-8"))

    names, pop, jobs = read("names.json"), read("us_population.json"), read("jobs.json")
    states = tuple(pop["population"])
    weights = np.array([pop["population"][s] for s in states], dtype=float)
    cum = tuple(float(x) for x in np.cumsum(weights / weights.sum()))
    by_decade = {int(k[:4]): tuple(v) for k, v in jobs["jobs_by_decade"].items()}
    return _Resources(tuple(names["male"]), tuple(names["female"]), tuple(names["surnames"]),
                      states, cum, by_decade)


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


class _Draw:
    """All random draws of the generator, from one ``numpy`` generator in a fixed order."""

    def __init__(self, rng: np.random.Generator, params: FamilyParams, res: _Resources):
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
    d = _Draw(rng, p, _resources())
    net = FamilyNetwork()
    queue: deque[int] = deque()
    trees = 0

    def room() -> int:
        return people - len(net)

    def new_child(mother: int, father: int) -> int | None:
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

    def add_children(mother: int, father: int, count: int) -> None:
        for _ in range(count):
            if room() < 1:
                return
            c = new_child(mother, father)
            if c is None:  # the mother is too old (or it is past max_year): no more children
                return
            queue.append(c)

    def add_parents(x: int) -> None:
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
        queue.extend((f, m))
        if p.parents_have_more_children:
            add_children(m, f, d.n_children() - 1)

    def add_spouse(x: int) -> None:
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
        queue.append(s)
        if net.generation[x] < p.generations - 1:
            mother, father = (x, s) if net.gender[x] == FEMALE else (s, x)
            add_children(mother, father, d.n_children())

    while len(net) < people:
        if not queue:
            year = int(d.rng.integers(p.founder_years[0], p.founder_years[1] + 1))
            queue.append(net.add(d.gender(), 0, year, d.pick(d.res.surnames), d.state(), trees))
            trees += 1
            continue
        x = queue.popleft()
        if net.father[x] < 0 and net.generation[x] > 0 and d.chance(p.p_parents) and room() >= 2:
            add_parents(x)
        last = net.generation[x] >= p.generations - 1
        if net.spouse[x] < 0 and d.chance(p.p_spouse_last_generation if last else p.p_spouse) and room() >= 1:
            add_spouse(x)
    return net


# ---------------------------------------------------------------------------------- names, jobs
def _job_decade(year: int, decades: dict[int, tuple[str, ...]]) -> int:
    """The decade in which someone born in ``year`` turns twenty (the reference's rule),
    clamped to the decades the job list covers."""
    return min(max(year // 10 * 10 + 20, min(decades)), max(decades))


def name_people(net: FamilyNetwork, params: FamilyParams, rng: np.random.Generator) -> None:
    """Fill ``net.name`` (unique full names) and ``net.job``.

    A surname is the birth surname (the father's), except that a wife goes by her husband's
    with probability ``p_wife_takes_surname``. First names are drawn by gender, different
    from the siblings'; where "First Last" is taken a middle initial is added
    ("Mary J. Smith"); names are unique in the KB.
    """
    d = _Draw(rng, params, _resources())
    res = d.res
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
        full = _unique_name(d, pool, shown[x], avoid, used)
        used.add(full)
        first.append(full.split(" ", 1)[0])
        net.name.append(full)
    net.job = [d.pick(res.jobs_by_decade[_job_decade(y, res.jobs_by_decade)]) for y in net.year]


def _unique_name(d: _Draw, pool: tuple[str, ...], surname: str, avoid: set[str], used: set[str]) -> str:
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


def _pick_targets(facts: list[Fact], per_relation: int, rng: np.random.Generator) -> list[int]:
    """``per_relation`` family facts of each relation (all of them where fewer exist)."""
    by_rel: dict[str, list[int]] = {r: [] for r in FAMILY_RELATIONS}
    for i, (_, r, _) in enumerate(facts):
        if r in by_rel:
            by_rel[r].append(i)
    out: list[int] = []
    for r in FAMILY_RELATIONS:
        ids = by_rel[r]
        k = min(per_relation, len(ids))
        if k:
            out.extend(sorted(ids[int(i)] for i in rng.choice(len(ids), size=k, replace=False)))
    return out


# ---------------------------------------------------------------------------------- the KB
def generate_family(
    people: int,
    seed: int = 0,
    params: FamilyParams | None = None,
    *,
    return_truth: bool = False,
) -> KnowledgeBase | tuple[KnowledgeBase, list[Fact]]:
    """A synthetic EDU-RELAT-like family KB with exactly ``people`` people.

    Family facts ``(o1, r, o2)`` ("o2 is o1's r") over the 11 family relations, part of
    the true relations (the rest derivable by the ``family`` rules); three biography facts
    per person (birthyear, birthplace "<State> state", job); ``targets_per_relation``
    targets per family relation. ``metadata`` records the generator, seed, parameters,
    the rule set that completes the KB (``"family"``) and ``stats`` (true and stored
    family facts, family trees). With ``return_truth`` also return every true family
    relation (stored or not) as a list of facts.

    >>> kb, truth = generate_family(40, seed=1, return_truth=True)
    >>> len(kb.entities), sum(1 for _, r, _ in kb.facts if r == "job")
    (40, 40)
    >>> set(f for f in kb.facts if kb.relations[f[1]].kind == "family") <= set(truth)
    True
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
    names = net.name
    family = [(names[a], r, names[b]) for a, r, b in stored_ids]
    biography: list[Fact] = []
    for x in range(len(net)):
        biography += [(names[x], "birthyear", str(net.year[x])),
                      (names[x], "birthplace", f"{net.place[x]} state"),
                      (names[x], "job", net.job[x])]
    facts = family + biography
    relations = {r: Relation.default(r, "family") for r in FAMILY_RELATIONS}
    relations.update({a: Relation.default(a, "biography") for a in BIOGRAPHY_ATTRIBUTES})
    metadata: dict[str, Any] = {
        "generator": "deepunlearn.kg.generate.generate_family",
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
    kb = KnowledgeBase(
        entities={n: {"gender": g} for n, g in zip(names, net.gender)},
        relations=relations,
        facts=facts,
        targets=_pick_targets(family, params.targets_per_relation, rng),
        name=f"family-{people}-seed{seed}",
        metadata=metadata,
    )
    kb.validate()
    if return_truth:
        return kb, [(names[a], r, names[b]) for a, r, b in truth_ids]
    return kb
