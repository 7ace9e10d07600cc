"""Graph views of a knowledge base: networkx, GraphML and family-tree pictures.

* :func:`to_networkx` — a ``MultiDiGraph`` with one node per entity and one edge ``o1 -> o2``
  per family fact (``relation``, ``fact_id``); biography values optionally become nodes.
* :func:`write_graphml` — the same graph as GraphML (every attribute a GraphML-legal
  string, integer or boolean).
* :func:`draw_family` — a PNG family tree (or one person's neighbourhood): generations
  top-down, couples side by side, colour by gender, parent -> child and spouse links
  labelled by relation, a legend. It draws what the KB *stores* about parents and
  spouses; other relations (siblings, aunts, ...) follow from the picture.
"""

from __future__ import annotations

import io
import math
import os
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx

from ..errors import atomic_write_bytes
from .figures import figure_path, save_figure
from .kb import KBError, KnowledgeBase

#: The most people :func:`draw_family` puts in one picture; larger families are cut to the
#: biggest family tree (and then to the people nearest its oldest member).
MAX_DRAWN_PEOPLE = 180

_PARENT_OF = {"father", "mother"}   # (child, father, parent)
_SPOUSE = {"husband", "wife"}


# ---------------------------------------------------------------------------------- networkx
def _value_node(kb: KnowledgeBase, attribute: str, value: str) -> str:
    """Node id of a biography value: the value itself unless it names an entity."""
    return value if value not in kb.entities else f"{attribute}={value}"


def to_networkx(kb: KnowledgeBase, include_biography: bool = False) -> nx.MultiDiGraph:
    """The KB as a ``networkx.MultiDiGraph``.

    One node per entity (its attributes as node data, plus ``kind="entity"``) and one edge
    ``o1 -> o2`` per family fact with ``relation`` and ``fact_id`` (the edge key is the fact
    id). With ``include_biography`` every biography value becomes a node (``kind="value"``,
    ``label`` the value) with an edge from the person.

    >>> kb = KnowledgeBase.build(
    ...     {"Ann": {"gender": "female"}, "Bob": {"gender": "male"}},
    ...     [("Ann", "husband", "Bob"), ("Bob", "wife", "Ann"), ("Ann", "birthyear", "1950")])
    >>> g = to_networkx(kb)
    >>> g.number_of_nodes(), g.number_of_edges(), g.edges["Ann", "Bob", 0]["relation"]
    (2, 2, 'husband')
    >>> to_networkx(kb, include_biography=True).nodes["1950"]["kind"]
    'value'
    """
    g = nx.MultiDiGraph(name=kb.name)
    for name, attrs in kb.entities.items():
        g.add_node(name, **{str(k): str(v) for k, v in attrs.items()}, kind="entity")
    for i, (s, r, o) in enumerate(kb.facts):
        if kb.relations[r].kind == "family":
            g.add_edge(s, o, key=i, relation=r, fact_id=i)
        elif include_biography:
            node = _value_node(kb, r, o)
            if node not in g:
                g.add_node(node, kind="value", label=o)
            g.add_edge(s, node, key=i, relation=r, fact_id=i)
    return g


def write_graphml(kb: KnowledgeBase, path: str | os.PathLike, include_biography: bool = False) -> Path:
    """Write :func:`to_networkx` as GraphML; ``networkx.read_graphml`` reads it back.

    Attribute values are strings and integers (GraphML has no lists or ``None``); the
    graph-level data holds the KB name.
    """
    g = to_networkx(kb, include_biography=include_biography)
    for _, data in g.nodes(data=True):
        for k, v in list(data.items()):
            if not isinstance(v, (str, int, float, bool)):
                data[k] = str(v)
    buf = io.BytesIO()
    nx.write_graphml(g, buf, encoding="utf-8")
    return atomic_write_bytes(path, buf.getvalue())


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


def _family_structure(kb: KnowledgeBase) -> _Family:
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


def _layout(fam: _Family, people: list[str]) -> tuple[dict[str, tuple[float, int]], list[_Unit]]:
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
    year = fam.year
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
    n = len(units)

    ups: list[set[int]] = [set() for _ in units]
    downs: list[set[int]] = [set() for _ in units]
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
    topo = list(nx.lexicographical_topological_sort(dag))
    # a unit's row: below its parents; a family with no drawn parents not above the row its
    # birth year suggests (rows are about one parent-child gap of the family apart)
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
    for u, lv in enumerate(level):
        units[u].level = lv

    def key(u: int) -> tuple:
        ys = [year[m] for m in units[u].members if m in year]
        return (min(ys) if ys else math.inf, min(order[m] for m in units[u].members))

    # order within rows: depth-first from the oldest founders, then barycentre sweeps,
    # keeping the order with the fewest crossings between neighbouring rows
    rows: dict[int, list[int]] = defaultdict(list)
    seen: set[int] = set()
    for start in sorted(range(n), key=lambda u: (level[u],) + key(u)):
        stack = [start]
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            rows[level[v]].append(v)
            stack.extend(sorted((w for w in downs[v] | ups[v] if w not in seen), key=key, reverse=True))
    nrows = max(rows) + 1 if rows else 0

    def crossings() -> int:
        pos = {u: i for r in rows.values() for i, u in enumerate(r)}
        total = 0
        for lv in range(nrows - 1):
            edges = sorted((pos[u], pos[d]) for u in rows[lv] for d in downs[u] if level[d] == lv + 1)
            for i, (a, b) in enumerate(edges):
                for c, d in edges[i + 1:]:
                    if c > a and d < b:
                        total += 1
        return total

    best = (crossings(), {lv: list(r) for lv, r in rows.items()})
    for _ in range(12):
        for sweep, nbrs in ((range(1, nrows), ups), (range(nrows - 2, -1, -1), downs)):
            for lv in sweep:
                pos = {u: i for r in rows.values() for i, u in enumerate(r)}

                def bary(u: int) -> tuple:
                    ns = [pos[v] for v in nbrs[u]]
                    return (sum(ns) / len(ns) if ns else pos[u], key(u))

                rows[lv].sort(key=bary)
            c = crossings()
            if c < best[0]:
                best = (c, {lv: list(r) for lv, r in rows.items()})
    rows = defaultdict(list, best[1])
    # then swap neighbours while that removes crossings with the rows above and below
    for _ in range(10):
        swapped = False
        pos = {u: i for r in rows.values() for i, u in enumerate(r)}
        for lv in range(nrows):
            row = rows[lv]
            for i in range(len(row) - 1):
                a, b = row[i], row[i + 1]
                here = there = 0
                for nb in (ups, downs):
                    for p in nb[a]:
                        for q in nb[b]:
                            here += pos[p] > pos[q]
                            there += pos[p] < pos[q]
                if there < here:
                    row[i], row[i + 1] = b, a
                    pos[a], pos[b] = i + 1, i
                    swapped = True
        if not swapped:
            break

    # x: minimise the squared horizontal length of the parent-child links, rows kept in
    # order without overlap; each row is solved exactly (weighted isotonic regression) in turn
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

    # the spouse whose parents stand further right goes on the right
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

    out: dict[str, tuple[float, int]] = {}
    for u in units:
        for i, m in enumerate(u.members):
            out[m] = (u.x + SLOT / 2 + i * (SLOT + COUPLE_GAP), u.level)
    return out, units


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


# ---------------------------------------------------------------------------------- drawing
_COLOURS = {
    "male": ("#d5e6f7", "#2f6aa8"),
    "female": ("#f9d9e3", "#b8406b"),
    "": ("#e8e8e8", "#777777"),
}
_FOCUS = "#e6a700"
_SPOUSE_COLOUR = "#7a4fa3"
_LINE_COLOUR = "#555555"
_FAMILY_COLOURS = ("#4d4d4d", "#1b7837", "#2166ac", "#b35806", "#7b3294", "#01665e", "#a6611a", "#c51b7d")


def _split_name(name: str) -> str:
    """'First M. Last' -> 'First M.\\nLast' so a box stays narrow."""
    parts = name.split(" ")
    return name if len(parts) < 2 else " ".join(parts[:-1]) + "\n" + parts[-1]


def draw_family(kb: KnowledgeBase, path: str | os.PathLike, person: str | None = None, radius: int = 2) -> Path:
    """Draw the family tree of ``kb``, or one person's neighbourhood, as a PNG at ``path``.

    Generations run top-down (by parent links, older siblings to the left); a couple stands
    side by side joined by a purple ``⚭`` (husband/wife); coloured lines run from a couple
    down to their children (father/mother/child). Boxes are blue for men, pink for women,
    and give the birth year. Only parent -> child and spouse links are drawn: siblings,
    aunts, nieces and the like follow from the picture.

    With ``person``, the picture holds the people within ``radius`` parent/child/spouse
    links of them plus everyone the KB relates to them directly; the person is framed in
    gold and each relative is captioned with the relation the KB stores ("Zoey's aunt").
    A relative the tree lines do not reach is joined to the person by a dashed, labelled
    line. Families larger than :data:`MAX_DRAWN_PEOPLE` are cut (the title says so).
    Raises :class:`KBError` for an unknown ``person``. The format follows ``path``'s suffix (no
    suffix: PNG, ``.png`` added); the file is written atomically. Returns the path written.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyBboxPatch, Patch

    figure_path(path)  # a folder or an unknown suffix is refused before any drawing
    if person is not None and person not in kb.entities:
        raise KBError(f"person {person!r} is not in knowledge base {kb.name!r}", field="--person")
    if radius < 0:
        raise KBError(f"radius must be >= 0, got {radius}", field="--radius")
    fam = _family_structure(kb)
    total = len(kb.entities)
    comps, scope, note, direct = _select(kb, fam, person, radius)

    # lay out each family on its own; set them side by side, rows matched by birth years
    pos: dict[str, tuple[float, int]] = {}
    offset = 0.0
    row_years: dict[int, list[int]] = defaultdict(list)
    for i, comp in enumerate(comps):
        p, _ = _layout(fam, comp)
        shift = 0
        if i and row_years:
            ys = [fam.year[n] for n, (_, lv) in p.items() if lv == 0 and n in fam.year]
            if ys:
                y0 = sum(ys) / len(ys)
                means = {lv: sum(v) / len(v) for lv, v in row_years.items()}
                shift = min(means, key=lambda lv: (abs(means[lv] - y0), lv))
        for n, (x, lv) in p.items():
            pos[n] = (x + offset, lv + shift)
            if n in fam.year:
                row_years[lv + shift].append(fam.year[n])
        offset += max((x for x, _ in p.values()), default=0.0) + SLOT / 2 + 2 * UNIT_GAP + 0.5
    max_level = max((lv for _, lv in pos.values()), default=0)

    header = 0.95
    title = f"{kb.name}: {scope} ({len(pos)} of {total} people{note})"
    width_in = max(offset, 7.0, 0.6 + len(title) * 7.6 * 1.35 * 0.62 / 72)
    height_in = (max_level + 1) * ROW + 0.2 + header
    scale = min(1.0, 250.0 / width_in)          # keep huge pictures within PNG limits
    fig = Figure(figsize=(width_in * scale, height_in * scale), dpi=110)   # no pyplot: no global state
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1 - header / height_in))
    ax.set_xlim(-0.3, width_in - 0.3)
    ax.set_ylim(-(max_level + 0.5) * ROW - 0.2, ROW / 2)
    ax.axis("off")
    fs = 7.6 * scale
    box_h = 0.78

    def y_of(level: float) -> float:
        return -level * ROW

    # parent -> child links: from the couple's marriage sign (or the single parent) down to a
    # bar over the children; bars that would overlap get their own height and colour
    families: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for c in pos:
        ps = tuple(sorted(p for p in fam.parents[c] if p in pos))
        if ps:
            families[ps].append(c)
    links = []
    for ps, kids in families.items():
        px = sum(pos[p][0] for p in ps) / len(ps)
        xs = [pos[k][0] for k in kids]
        links.append((min(xs + [px]), max(xs + [px]), px, ps, kids))
    links.sort(key=lambda t: (t[0], t[1]))
    track_end: dict[tuple[int, int], float] = {}
    lw = 1.1 * scale
    for i, (x0, x1, px, ps, kids) in enumerate(links):
        child_row = min(pos[k][1] for k in kids)
        track = 0
        while track_end.get((child_row, track), -math.inf) > x0 - 0.15:
            track += 1
        track_end[(child_row, track)] = x1
        colour = _FAMILY_COLOURS[i % len(_FAMILY_COLOURS)]
        py = y_of(max(pos[p][1] for p in ps))
        couple = len(ps) == 2 and pos[ps[0]][1] == pos[ps[1]][1] and \
            abs(pos[ps[0]][0] - pos[ps[1]][0]) < SLOT + COUPLE_GAP + 1e-6
        top = py if couple else py - box_h / 2
        bar_y = y_of(child_row) + box_h / 2 + 0.17 + 0.16 * (track % 5)
        ax.plot([px, px], [top, bar_y], color=colour, lw=lw, zorder=1)
        ax.plot([x0, x1], [bar_y, bar_y], color=colour, lw=lw, zorder=1)
        for k in kids:
            ax.annotate("", xy=(pos[k][0], y_of(pos[k][1]) + box_h / 2), xytext=(pos[k][0], bar_y), zorder=1,
                        arrowprops=dict(arrowstyle="-|>", color=colour, lw=lw, mutation_scale=8 * scale,
                                        shrinkA=0, shrinkB=0))
        ax.text(px + 0.04, py - box_h / 2 - 0.09, "children" if len(kids) > 1 else "child",
                fontsize=fs * 0.75, color=colour, ha="left", va="center", style="italic", zorder=2)

    # spouse links
    drawn: set[frozenset[str]] = set()
    for a in pos:
        for b in fam.spouses[a]:
            pair = frozenset((a, b))
            if b not in pos or pair in drawn:
                continue
            drawn.add(pair)
            (xa, la), (xb, lb) = pos[a], pos[b]
            if la == lb and abs(xa - xb) < SLOT + COUPLE_GAP + 1e-6:
                y = y_of(la)
                ax.plot([min(xa, xb) + SLOT / 2, max(xa, xb) - SLOT / 2], [y, y], color=_SPOUSE_COLOUR,
                        lw=2.2 * scale, zorder=1)
                ax.text((xa + xb) / 2, y, "⚭", fontsize=fs * 1.5, color=_SPOUSE_COLOUR, ha="center",
                        va="center", zorder=3, bbox=dict(boxstyle="circle,pad=0.08", fc="white", ec="none"))
            else:   # a second marriage, or a couple the rows split: a dashed arc
                ax.annotate("", xy=(xb, y_of(lb)), xytext=(xa, y_of(la)), zorder=0,
                            arrowprops=dict(arrowstyle="-", color=_SPOUSE_COLOUR, lw=1.4 * scale, ls="--",
                                            connectionstyle="arc3,rad=0.25", shrinkA=12, shrinkB=12))

    # relatives the tree lines do not reach: a dashed arc from the focus, under the boxes
    if person is not None and len(comps) > 1:
        fx, fl = pos[person]
        for comp in comps[1:]:
            for n in comp:
                if n in pos and direct.get(n):
                    x, lv = pos[n]
                    start = (fx + (SLOT / 2 if x > fx else -SLOT / 2), y_of(fl) - box_h / 4)
                    end = (x, y_of(lv) - box_h / 2 - 0.25)
                    bend = 0.25 if x > fx else -0.25
                    ax.annotate("", xy=end, xytext=start, zorder=0,
                                arrowprops=dict(arrowstyle="-|>", color=_FOCUS, lw=1.2 * scale, ls="--",
                                                connectionstyle=f"arc3,rad={bend}", shrinkA=0, shrinkB=0))

    # people
    first = person.split(" ")[0] if person else ""
    for n, (x, lv) in pos.items():
        fill, edge = _COLOURS.get(fam.gender.get(n, ""), _COLOURS[""])
        focus = n == person
        y = y_of(lv)
        ax.add_patch(FancyBboxPatch((x - SLOT / 2 + 0.04, y - box_h / 2), SLOT - 0.08, box_h,
                                    boxstyle="round,pad=0.0,rounding_size=0.1", fc=fill,
                                    ec=_FOCUS if focus else edge, lw=(3.0 if focus else 1.0) * scale, zorder=2))
        ax.text(x, y + 0.1, _split_name(n), fontsize=fs, ha="center", va="center", zorder=3,
                weight="bold" if focus else "normal", linespacing=1.05)
        if n in fam.year:
            ax.text(x, y - 0.27, f"b. {fam.year[n]}", fontsize=fs * 0.8, ha="center", va="center",
                    color="#444444", zorder=3)
        if direct.get(n):
            ax.text(x, y - box_h / 2 - 0.13, f"{first}'s {direct[n]}", fontsize=fs * 0.8, ha="center",
                    va="center", color="#8a5a00", style="italic", zorder=3)

    top = 1 - 0.3 / height_in
    fig.text(0.3 / width_in, top, title, fontsize=fs * 1.35, ha="left", va="center", weight="bold")
    handles = [
        Patch(fc=_COLOURS["male"][0], ec=_COLOURS["male"][1], label="male"),
        Patch(fc=_COLOURS["female"][0], ec=_COLOURS["female"][1], label="female"),
        Line2D([], [], color=_SPOUSE_COLOUR, lw=2.2, marker="$⚭$", markersize=9, label="husband / wife"),
        Line2D([], [], color=_LINE_COLOUR, lw=1.1, marker=">", markersize=4,
               label="parent → children (father / mother / child)"),
    ]
    if person is not None:
        handles.append(Patch(fc="white", ec=_FOCUS, lw=2.5, label=f"{person}; italics: relations the KB stores"))
    fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.3 / width_in, 1 - 0.5 / height_in),
               fontsize=fs, frameon=False, ncol=min(len(handles), max(1, int(width_in // 3.2))))
    return save_figure(fig, path, dpi=110)


def _select(kb: KnowledgeBase, fam: _Family, person: str | None, radius: int
            ) -> tuple[list[list[str]], str, str, dict[str, str]]:
    """Who is drawn: the families (connected groups, the focus's or the biggest first),
    a phrase for the title, a note if people were cut, and the focus's stored relation to
    each relative ("" where only the relative's relation to the focus is stored)."""
    direct: dict[str, str] = {}
    if person is not None:
        for s, r, o in kb.facts:
            if kb.relations[r].kind == "family" and s == person and o != person:
                direct.setdefault(o, r)
        for s, r, o in kb.facts:
            if kb.relations[r].kind == "family" and o == person and s != person:
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
