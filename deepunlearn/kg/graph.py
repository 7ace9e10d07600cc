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
from collections import defaultdict
from pathlib import Path

import networkx as nx

from ..errors import atomic_write_bytes
from .domains.family.layout import COUPLE_GAP, ROW, SLOT, UNIT_GAP, family_structure, family_layout, select_family
from .figures import figure_path, save_figure
from .kb import KBError, KnowledgeBase



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
        if kb.relations[r].kind == "entity":
            g.add_edge(s, o, key=i, relation=r, fact_id=i)
        elif include_biography:
            node = _value_node(kb, r, o)
            if node not in g:
                g.add_node(node, kind="value", label=o)
            g.add_edge(s, node, key=i, relation=r, fact_id=i)
    return g


def nearest_people(kb: KnowledgeBase, start: str, people: int) -> list[int]:
    """The fact ids among the ``people`` persons nearest to ``start`` by family links (breadth
    first over the undirected family graph, ties in fact order): their family facts with both
    ends inside and their biography facts. A small, connected piece of a KB for tests and
    benchmarks (``kb.subset(nearest_people(kb, "Zoey Jenkins", 25))``)."""
    g = nx.Graph()
    for s, r, o in kb.facts:
        if kb.relations[r].kind == "entity":
            g.add_edge(s, o)
    chosen = set(list(nx.bfs_tree(g, start))[:people])
    return [i for i, (s, r, o) in enumerate(kb.facts)
            if s in chosen and (kb.relations[r].kind != "entity" or o in chosen)]


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
    line. Families larger than :data:`~deepunlearn.kg.domains.family.layout.MAX_DRAWN_PEOPLE` are cut (the title says so).
    Raises :class:`KBError` for an unknown ``person``. The format follows ``path``'s suffix (no
    suffix: PNG, ``.png`` added); the file is written atomically. Returns the path written.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure_path(path)  # a folder or an unknown suffix is refused before any drawing
    if person is not None and person not in kb.entities:
        raise KBError(f"person {person!r} is not in knowledge base {kb.name!r}", field="--person")
    if radius < 0:
        raise KBError(f"radius must be >= 0, got {radius}", field="--radius")
    fam = family_structure(kb)
    total = len(kb.entities)
    comps, scope, note, direct = select_family(kb, fam, person, radius)

    pos, offset = _place_families(fam, comps)
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

    _draw_parent_links(ax, fam, pos, scale, fs, box_h)
    _draw_spouse_links(ax, fam, pos, scale, fs)
    if person is not None and len(comps) > 1:
        _draw_unreached_relatives(ax, pos, person, comps, direct, scale, box_h)
    _draw_people(ax, fam, pos, person, direct, scale, fs, box_h)
    _title_and_legend(fig, title, person, width_in, height_in, fs)
    return save_figure(fig, path, dpi=110)


def _y_of(level: float) -> float:
    """The y of a generation row in the picture."""
    return -level * ROW


def _place_families(fam, comps) -> tuple[dict[str, tuple[float, int]], float]:
    """Each family laid out on its own, set side by side, rows matched by birth years: the
    positions (x, row) by person and the total width."""
    pos: dict[str, tuple[float, int]] = {}
    offset = 0.0
    row_years: dict[int, list[int]] = defaultdict(list)
    for i, comp in enumerate(comps):
        p, _ = family_layout(fam, comp)
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
    return pos, offset


def _draw_parent_links(ax, fam, pos, scale: float, fs: float, box_h: float) -> None:
    """Parent -> child links: from the couple's marriage sign (or the single parent) down to a
    bar over the children; bars that would overlap get their own height and colour."""
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
        py = _y_of(max(pos[p][1] for p in ps))
        couple = len(ps) == 2 and pos[ps[0]][1] == pos[ps[1]][1] and \
            abs(pos[ps[0]][0] - pos[ps[1]][0]) < SLOT + COUPLE_GAP + 1e-6
        top = py if couple else py - box_h / 2
        bar_y = _y_of(child_row) + box_h / 2 + 0.17 + 0.16 * (track % 5)
        ax.plot([px, px], [top, bar_y], color=colour, lw=lw, zorder=1)
        ax.plot([x0, x1], [bar_y, bar_y], color=colour, lw=lw, zorder=1)
        for k in kids:
            ax.annotate("", xy=(pos[k][0], _y_of(pos[k][1]) + box_h / 2), xytext=(pos[k][0], bar_y), zorder=1,
                        arrowprops=dict(arrowstyle="-|>", color=colour, lw=lw, mutation_scale=8 * scale,
                                        shrinkA=0, shrinkB=0))
        ax.text(px + 0.04, py - box_h / 2 - 0.09, "children" if len(kids) > 1 else "child",
                fontsize=fs * 0.75, color=colour, ha="left", va="center", style="italic", zorder=2)


def _draw_spouse_links(ax, fam, pos, scale: float, fs: float) -> None:
    """A marriage sign between a couple side by side; a dashed arc for any other couple."""
    drawn: set[frozenset[str]] = set()
    for a in pos:
        for b in fam.spouses[a]:
            pair = frozenset((a, b))
            if b not in pos or pair in drawn:
                continue
            drawn.add(pair)
            (xa, la), (xb, lb) = pos[a], pos[b]
            if la == lb and abs(xa - xb) < SLOT + COUPLE_GAP + 1e-6:
                y = _y_of(la)
                ax.plot([min(xa, xb) + SLOT / 2, max(xa, xb) - SLOT / 2], [y, y], color=_SPOUSE_COLOUR,
                        lw=2.2 * scale, zorder=1)
                ax.text((xa + xb) / 2, y, "⚭", fontsize=fs * 1.5, color=_SPOUSE_COLOUR, ha="center",
                        va="center", zorder=3, bbox=dict(boxstyle="circle,pad=0.08", fc="white", ec="none"))
            else:   # a second marriage, or a couple the rows split: a dashed arc
                ax.annotate("", xy=(xb, _y_of(lb)), xytext=(xa, _y_of(la)), zorder=0,
                            arrowprops=dict(arrowstyle="-", color=_SPOUSE_COLOUR, lw=1.4 * scale, ls="--",
                                            connectionstyle="arc3,rad=0.25", shrinkA=12, shrinkB=12))


def _draw_unreached_relatives(ax, pos, person: str, comps, direct: dict, scale: float, box_h: float) -> None:
    """Relatives the tree lines do not reach: a dashed arc from the focus, under the boxes."""
    fx, fl = pos[person]
    for comp in comps[1:]:
        for n in comp:
            if n in pos and direct.get(n):
                x, lv = pos[n]
                start = (fx + (SLOT / 2 if x > fx else -SLOT / 2), _y_of(fl) - box_h / 4)
                end = (x, _y_of(lv) - box_h / 2 - 0.25)
                bend = 0.25 if x > fx else -0.25
                ax.annotate("", xy=end, xytext=start, zorder=0,
                            arrowprops=dict(arrowstyle="-|>", color=_FOCUS, lw=1.2 * scale, ls="--",
                                            connectionstyle=f"arc3,rad={bend}", shrinkA=0, shrinkB=0))


def _draw_people(ax, fam, pos, person: str | None, direct: dict, scale: float, fs: float, box_h: float) -> None:
    """A box per person: name, birth year, and the relation the KB stores to the focus."""
    from matplotlib.patches import FancyBboxPatch

    first = person.split(" ")[0] if person else ""
    for n, (x, lv) in pos.items():
        fill, edge = _COLOURS.get(fam.gender.get(n, ""), _COLOURS[""])
        focus = n == person
        y = _y_of(lv)
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


def _title_and_legend(fig, title: str, person: str | None, width_in: float, height_in: float, fs: float) -> None:
    """The title and the legend above the picture."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

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
