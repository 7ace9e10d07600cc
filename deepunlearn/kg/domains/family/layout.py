"""Where each person goes in a family-tree picture (:func:`deepunlearn.kg.graph.draw_family`):
the family structure the KB stores (parents, spouses), its connected families, who is drawn
(a person's neighbourhood or the biggest families), and the layout: generations top-down,
couples side by side, each family's children under it."""

from __future__ import annotations

import math
from collections import defaultdict, deque
from dataclasses import dataclass, field

import networkx as nx

from ...kb import KnowledgeBase
from .row_order import order_rows

#: The most people :func:`draw_family` puts in one picture; larger families are cut to the
#: biggest family tree (and then to the people nearest its oldest member).
MAX_DRAWN_PEOPLE = 180

_PARENT_OF = {"father", "mother"}   # (child, father, parent)
_SPOUSE = {"husband", "wife"}


# ---------------------------------------------------------------------------------- structure
@dataclass
class _Family:
    """Parents and couples as the KB states them (stored facts only)."""

    people: list[str]
    gender: dict[str, str]
    year: dict[str, int]
    parents: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    children: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    spouses: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))


def family_structure(kb: KnowledgeBase) -> _Family:
    year: dict[str, int] = {}
    for s, r, o in kb.facts:
        if r == "birthyear" and o.strip().lstrip("-").isdigit():
            year[s] = int(o)
    fam = _Family(list(kb.entities), {n: kb.entities[n].get("gender", "") for n in kb.entities}, year)
    links: set[tuple[str, str]] = set()
    couples: set[frozenset[str]] = set()
    for s, r, o in kb.facts:
        if r in _PARENT_OF:
            links.add((o, s))
        elif r == "child":
            links.add((s, o))
        elif r in _SPOUSE and s != o:
            couples.add(frozenset((s, o)))
    order = {n: i for i, n in enumerate(fam.people)}
    for p, c in sorted(links, key=lambda pc: (order[pc[0]], order[pc[1]])):
        if p != c:
            fam.parents[c].append(p)
            fam.children[p].append(c)
    # two parents of a child are a couple for the picture even if the KB leaves it to the rules
    for c, ps in fam.parents.items():
        if len(ps) == 2:
            couples.add(frozenset(ps))
    for pair in sorted(couples, key=lambda q: sorted(order[x] for x in q)):
        a, b = sorted(pair, key=order.__getitem__)
        fam.spouses[a].append(b)
        fam.spouses[b].append(a)
    return fam


def _components(fam: _Family, people: set[str]) -> list[list[str]]:
    """Connected groups of ``people`` by parent and spouse links, biggest first."""
    order = {n: i for i, n in enumerate(fam.people)}
    seen: set[str] = set()
    comps = []
    for start in sorted(people, key=order.__getitem__):
        if start in seen:
            continue
        comp, queue = [], deque([start])
        seen.add(start)
        while queue:
            x = queue.popleft()
            comp.append(x)
            for y in fam.parents[x] + fam.children[x] + fam.spouses[x]:
                if y in people and y not in seen:
                    seen.add(y)
                    queue.append(y)
        comps.append(sorted(comp, key=order.__getitem__))
    comps.sort(key=lambda c: (-len(c), order[c[0]]))
    return comps


# ---------------------------------------------------------------------------------- layout
SLOT = 1.0          # width of a person's box, in data units (= inches in the picture)
COUPLE_GAP = 0.42   # room between spouses for the marriage sign
UNIT_GAP = 0.34     # room between neighbouring families
ROW = 1.75          # distance between generations


@dataclass
class _Unit:
    members: list[str]          # one person, or a couple left-to-right
    level: int = 0
    x: float = 0.0              # left edge

    @property
    def width(self) -> float:
        return SLOT * len(self.members) + COUPLE_GAP * (len(self.members) - 1)

    @property
    def center(self) -> float:
        return self.x + self.width / 2


def family_layout(fam: _Family, people: list[str]) -> tuple[dict[str, tuple[float, int]], list[_Unit]]:
    """Positions (x centre, generation row) of ``people`` (one connected family): a layered
    (Sugiyama-style) drawing of couples.

    1. Couples form units. A unit sits below its parents; one without drawn parents sits
       no higher than its birth year suggests (rows are one median parent-child gap apart)
       and right above its children.
    2. Each row is ordered by a depth-first walk from the oldest founders, then by
       barycentre sweeps and neighbour swaps, keeping the order with fewest crossings.
    3. x minimises the squared horizontal length of the parent-child links with each row
       kept in order and free of overlaps (each row solved exactly by isotonic regression,
       rows in turn until nothing moves).
    4. In a couple, the spouse whose parents stand further right goes on the right.
    """
    inside = set(people)
    order = {n: i for i, n in enumerate(people)}
    units, unit_of = _couple_units(fam, people, inside)
    ups, downs, topo = _unit_links(fam, people, inside, unit_of, len(units))
    level = _unit_levels(fam, people, inside, units, ups, downs, topo)
    for u, lv in enumerate(level):
        units[u].level = lv

    def key(u: int) -> tuple:
        ys = [fam.year[m] for m in units[u].members if m in fam.year]
        return (min(ys) if ys else math.inf, min(order[m] for m in units[u].members))

    rows, nrows = order_rows(len(units), level, ups, downs, key)
    _place_units(units, rows, nrows, ups, downs)
    _orient_couples(fam, units, unit_of, inside)
    out: dict[str, tuple[float, int]] = {}
    for u in units:
        for i, m in enumerate(u.members):
            out[m] = (u.x + SLOT / 2 + i * (SLOT + COUPLE_GAP), u.level)
    return out, units


def _couple_units(fam: _Family, people: list[str], inside: set[str]) -> tuple[list[_Unit], dict[str, int]]:
    """The units (a couple, husband first, or one person) and each person's unit."""
    unit_of: dict[str, int] = {}
    units: list[_Unit] = []
    for p in people:
        if p in unit_of:
            continue
        partner = next((s for s in fam.spouses[p] if s in inside and s not in unit_of), None)
        members = [p] if partner is None else [p, partner]
        if partner is not None and fam.gender.get(p) == "female" and fam.gender.get(partner) == "male":
            members = [partner, p]
        for m in members:
            unit_of[m] = len(units)
        units.append(_Unit(members))
    return units, unit_of


def _unit_links(fam: _Family, people: list[str], inside: set[str], unit_of: dict[str, int],
                n: int) -> tuple[list[set[int]], list[set[int]], list[int]]:
    """Each unit's parent units and child units, a link of any cycle dropped (inconsistent data),
    and the units in topological order."""
    ups: list[set[int]] = [set() for _ in range(n)]
    downs: list[set[int]] = [set() for _ in range(n)]
    for c in people:
        for p in fam.parents[c]:
            if p in inside and unit_of[p] != unit_of[c]:
                ups[unit_of[c]].add(unit_of[p])
                downs[unit_of[p]].add(unit_of[c])
    dag = nx.DiGraph()
    dag.add_nodes_from(range(n))
    dag.add_edges_from((u, d) for u in range(n) for d in downs[u])
    while not nx.is_directed_acyclic_graph(dag):   # inconsistent data: drop a link of a cycle
        u, d = nx.find_cycle(dag)[-1][:2]
        dag.remove_edge(u, d)
        downs[u].discard(d)
        ups[d].discard(u)
    return ups, downs, list(nx.lexicographical_topological_sort(dag))


def _unit_levels(fam: _Family, people: list[str], inside: set[str], units: list[_Unit],
                 ups: list[set[int]], downs: list[set[int]], topo: list[int]) -> list[int]:
    """A unit's row: below its parents; a family with no drawn parents not above the row its
    birth year suggests (rows are about one parent-child gap of the family apart)."""
    year = fam.year
    unit_year = [min((year[m] for m in u.members if m in year), default=None) for u in units]
    gaps = sorted(year[c] - year[p] for c in people for p in fam.parents[c]
                  if p in inside and c in year and p in year and year[c] > year[p])
    gap = max(15.0, float(gaps[len(gaps) // 2])) if gaps else 28.0
    known = [y for y in unit_year if y is not None]
    base = min(known) if known else 0
    level = [0 if y is None or ups[u] else max(0, math.floor((y - base) / gap + 0.3))
             for u, y in enumerate(unit_year)]
    for u in topo:
        for d in downs[u]:
            level[d] = max(level[d], level[u] + 1)
    for u in reversed(topo):   # families with no drawn parents sit right above their children
        if not ups[u] and downs[u]:
            level[u] = max(level[u], min(level[d] for d in downs[u]) - 1)
    return level


def _place_units(units: list[_Unit], rows: dict[int, list[int]], nrows: int, ups: list[set[int]],
                 downs: list[set[int]]) -> None:
    """x: minimise the squared horizontal length of the parent-child links, rows kept in order
    without overlap; each row is solved exactly (weighted isotonic regression) in turn."""
    n = len(units)
    for lv in range(nrows):
        x = 0.0
        for u in rows[lv]:
            units[u].x = x
            x += units[u].width + UNIT_GAP
    nbrs_all = [sorted(ups[u] | downs[u]) for u in range(n)]
    for it in range(40):
        sweep = range(nrows) if it % 2 == 0 else range(nrows - 1, -1, -1)
        moved = 0.0
        for lv in sweep:
            row = rows[lv]
            targets, weights, offsets = [], [], []
            off = 0.0
            for u in row:
                ns = nbrs_all[u]
                centre = sum(units[v].center for v in ns) / len(ns) if ns else units[u].center
                targets.append(centre - units[u].width / 2 - off)
                weights.append(float(len(ns)) if ns else 0.05)
                offsets.append(off)
                off += units[u].width + UNIT_GAP
            for u, y, o in zip(row, _isotonic(targets, weights), offsets):
                moved = max(moved, abs(units[u].x - (y + o)))
                units[u].x = y + o
        if moved < 1e-3:
            break
    shift = min((u.x for u in units), default=0.0)
    for u in units:
        u.x -= shift


def _orient_couples(fam: _Family, units: list[_Unit], unit_of: dict[str, int], inside: set[str]) -> None:
    """In a couple, the spouse whose parents stand further right goes on the right."""
    for u in units:
        if len(u.members) == 2:
            def parent_x(m: str) -> float | None:
                ps = [units[unit_of[q]].center for q in fam.parents[m] if q in inside]
                return sum(ps) / len(ps) if ps else None

            a, b = u.members
            pa, pb = parent_x(a), parent_x(b)
            if (pa is not None and pb is not None and pa > pb) or \
               (pa is not None and pb is None and pa > u.center) or \
               (pb is not None and pa is None and pb < u.center):
                u.members = [b, a]


def _isotonic(y: list[float], w: list[float]) -> list[float]:
    """Weighted least-squares non-decreasing fit of ``y`` (pool adjacent violators).

    >>> _isotonic([3.0, 1.0, 2.0, 5.0], [1.0, 1.0, 1.0, 1.0])
    [2.0, 2.0, 2.0, 5.0]
    """
    blocks: list[list[float]] = []   # [mean, weight, count]
    for yi, wi in zip(y, w):
        blocks.append([yi, wi, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2, c2 = blocks.pop()
            m1, w1, c1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, c1 + c2])
    out: list[float] = []
    for m, _, c in blocks:
        out.extend([m] * c)
    return out


# ---------------------------------------------------------------------------------- selection
def select_family(kb: KnowledgeBase, fam: _Family, person: str | None, radius: int
            ) -> tuple[list[list[str]], str, str, dict[str, str]]:
    """Who is drawn: the families (connected groups, the focus's or the biggest first),
    a phrase for the title, a note if people were cut, and the focus's stored relation to
    each relative ("" where only the relative's relation to the focus is stored)."""
    direct: dict[str, str] = {}
    if person is not None:
        for s, r, o in kb.facts:
            if kb.relations[r].kind == "entity" and s == person and o != person:
                direct.setdefault(o, r)
        for s, r, o in kb.facts:
            if kb.relations[r].kind == "entity" and o == person and s != person:
                direct.setdefault(s, "")
        chosen = _tree_neighbourhood(fam, person, radius) | set(direct)
        scope = f"{person} and family within {radius} parent/child/spouse link{'s' if radius != 1 else ''}"
    else:
        chosen = set(kb.entities)
        scope = "family tree"
    comps = _components(fam, chosen)
    if person is not None:   # the focus's family first
        comps.sort(key=lambda c: person not in c)
    elif len(comps) > 1:
        scope = f"{len(comps)} family trees"
    note = ""
    if sum(map(len, comps)) > MAX_DRAWN_PEOPLE:
        keep: list[list[str]] = []
        room = MAX_DRAWN_PEOPLE
        for c in comps:
            if len(c) <= room:
                keep.append(c)
                room -= len(c)
            elif not keep:   # the first family alone is too big: the people nearest its oldest
                start = person if person in c else min(c, key=lambda n: (fam.year.get(n, math.inf), c.index(n)))
                near = set(_bfs_order(fam, start, set(c))[:MAX_DRAWN_PEOPLE])
                keep.append([n for n in c if n in near])
                note = f"; cut to the {len(near)} nearest {start}, use --person to see others"
                break
        if not note:
            note = f"; the {len(keep)} largest families, use --person to see others"
        comps = keep
        scope = "part of the family tree" if len(comps) == 1 else "part of the family trees"
    return comps, scope, note, direct


def _tree_neighbourhood(fam: _Family, person: str, radius: int) -> set[str]:
    """People within ``radius`` parent/child/spouse links of ``person``."""
    seen = {person}
    frontier = [person]
    for _ in range(max(0, radius)):
        nxt = []
        for x in frontier:
            for y in fam.parents[x] + fam.children[x] + fam.spouses[x]:
                if y not in seen:
                    seen.add(y)
                    nxt.append(y)
        frontier = nxt
    return seen


def _bfs_order(fam: _Family, start: str, allowed: set[str]) -> list[str]:
    """People of ``allowed`` in breadth-first order from ``start`` over parent/child/spouse links."""
    seen, order, queue = {start}, [start], deque([start])
    while queue:
        x = queue.popleft()
        for y in fam.parents[x] + fam.children[x] + fam.spouses[x]:
            if y in allowed and y not in seen:
                seen.add(y)
                order.append(y)
                queue.append(y)
    return order
