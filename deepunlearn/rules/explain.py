"""Why a fact is hard to unlearn: the rule groundings that derive it (recursively, down to facts
of K) and its minimal deep-unlearning sets, as text and as a figure in the spirit of the paper's
Figure 2 (left: the derivations; right: each minimal set on the family graph).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .graph import Cone, DerivationGraph
from .minimal import MinimalSets


@dataclass
class Derivation:
    """One rule grounding: ``head <- body`` by rule ``rule`` (index into the rule set)."""

    rule: int
    body: list[int]


@dataclass
class FactNode:
    """A fact in the derivation tree. ``derivations`` is None when the fact was expanded
    higher up (``repeated``) or the depth limit was reached."""

    fact: int
    in_k: bool
    derivations: list[tuple[Derivation, list["FactNode"]]] | None = None
    more: int = 0  # groundings not shown (over max_groundings)
    repeated: bool = False


@dataclass
class Explanation:
    target: int
    tree: FactNode
    sets: MinimalSets
    graph: DerivationGraph = field(repr=False)

    def to_dict(self) -> dict:
        g = self.graph

        def node(n: FactNode) -> dict:
            d = {"fact": list(g.fact(n.fact)), "id": n.fact, "in_k": n.in_k}
            if n.repeated:
                d["repeated"] = True
            if n.derivations is not None:
                d["derivations"] = [{"rule": g.rules[der.rule].label, "body": [node(c) for c in kids]}
                                    for der, kids in n.derivations]
                if n.more:
                    d["more"] = n.more
            return d

        return {"target": list(g.fact(self.target)), "target_id": self.target, "exact": self.sets.exact,
                # none at --depth 0, or for a target no rule derives (was a KeyError, exit 70)
                "derivations": node(self.tree).get("derivations", []),
                "sets": [[list(g.fact(f)) for f in sorted(s)] for s in self.sets.sets]}


def derivation_tree(graph: DerivationGraph, target: int, depth: int = 2, max_groundings: int = 12) -> FactNode:
    """The groundings deriving ``target``, and recursively those of their body facts, down to
    ``depth`` levels. Each fact is expanded once (later mentions are marked ``repeated``)."""
    cone: Cone = graph.cone(int(target))
    expanded: set[int] = set()

    def visit(local: int, level: int) -> FactNode:
        f = int(cone.nodes[local])
        n = FactNode(f, graph.in_k(f))
        if local in expanded:
            n.repeated = True
            return n
        if level >= depth or not cone.by_head[local]:
            return n
        expanded.add(local)
        edges = sorted(cone.by_head[local], key=lambda e: (len(cone.bodies[e]), cone.edge_ids[e]))
        n.more = max(len(edges) - max_groundings, 0)
        n.derivations = []
        for e in edges[:max_groundings]:
            der = Derivation(int(graph.edge_rule[cone.edge_ids[e]]), [int(cone.nodes[x]) for x in cone.bodies[e]])
            n.derivations.append((der, [visit(x, level + 1) for x in cone.bodies[e]]))
        return n

    return visit(0, 0)


def describe(graph: DerivationGraph, f: int) -> str:
    """``[id] (s, r, o)`` with where the fact comes from."""
    s, r, o = graph.fact(f)
    where = "K" if graph.in_k(f) else ("KB, derived" if f < graph.n_kb else "derived")
    return f"[{f}] ({s}, {r}, {o})  {where}"


def explain_text(ex: Explanation) -> str:
    g = ex.graph
    s, r, o = g.fact(ex.target)
    lines = [f"target {describe(g, ex.target)}: {o} is {s}'s {r}", "derivations (rule groundings deriving it):"]

    def walk(n: FactNode, indent: str) -> None:
        if not n.derivations:
            return
        for der, kids in n.derivations:
            lines.append(f"{indent}<= {g.rules[der.rule].label}: {g.rules[der.rule].to_datalog()}")
            for k in kids:
                tag = "  (expanded above)" if k.repeated else ""
                lines.append(f"{indent}     {describe(g, k.fact)}{tag}")
                walk(k, indent + "       ")
        if n.more:
            lines.append(f"{indent}   ... and {n.more} more groundings")

    if not ex.tree.derivations:
        lines.append("  none: only K holds it, so removing the fact itself is enough")
    walk(ex.tree, "  ")
    kind = "exact: all of them" if ex.sets.exact else f"approximate ({ex.sets.method})"
    lines.append(f"minimal deep-unlearning sets ({len(ex.sets.sets)}, {kind}):")
    for i, st in enumerate(ex.sets.sets, start=1):
        lines.append(f"  {i}. {{{', '.join(str(x) for x in sorted(st))}}}")
        for x in sorted(st):
            lines.append(f"       {describe(g, x)}")
    return "\n".join(lines)


def explain(graph: DerivationGraph, target: int, sets: MinimalSets, depth: int = 2,
            max_groundings: int = 12) -> Explanation:
    """Derivations and minimal sets of ``target``, ready for :func:`explain_text` /
    :func:`draw_explanation`."""
    return Explanation(int(target), derivation_tree(graph, target, depth, max_groundings), sets, graph)


# ---------------------------------------------------------------------------------------- figure
RAD = 0.2  # curvature of the family-graph arrows (keeps a pair like husband/wife apart)


def _short(name: str) -> str:
    return name if len(name) <= 18 else name[:17] + "…"


def _rows(n: FactNode) -> int:
    """Rows the tree layout of ``n`` takes (leaves plus "+N more" notes)."""
    if not n.derivations:
        return 1
    return sum(_rows(k) for _, kids in n.derivations for k in kids) + (1 if n.more else 0)


def _layout_tree(g: DerivationGraph, tree: FactNode) -> tuple[list, list, list, list, float]:
    """Places of a derivation tree: target on the left, the facts each grounding needs to its
    right. Returns the fact boxes ``(x, y, node)``, the grounding dots ``(x, y, label)``, the
    links body box -> dot and dot -> head box, and the rows used."""
    boxes: list[tuple[float, float, FactNode]] = []
    dots: list[tuple[float, float, str]] = []
    links: list[tuple[int, tuple[float, float]]] = []  # body box -> grounding dot
    heads: list[tuple[tuple[float, float], int]] = []  # grounding dot -> head box
    next_y = [0.0]

    def place(n: FactNode, x: float) -> tuple[float, int]:
        """Lay out the subtree of ``n`` with ``n`` at column ``x``; returns its row and box."""
        grounding_rows = []
        for der, kids in n.derivations or []:
            placed = [place(k, x + 2.0) for k in kids]
            gy = sum(y for y, _ in placed) / len(placed)
            dots.append((x + 1.0, gy, g.rules[der.rule].label.replace("rule ", "r")))
            links.extend((b, (x + 1.0, gy)) for _, b in placed)
            grounding_rows.append(gy)
        if n.more:
            dots.append((x + 1.0, next_y[0], f"+{n.more} more"))
            next_y[0] += 1.0
        if grounding_rows:
            y = sum(grounding_rows) / len(grounding_rows)
        else:
            y = next_y[0]
            next_y[0] += 1.0
        boxes.append((x, y, n))
        heads.extend(((x + 1.0, gy), len(boxes) - 1) for gy in grounding_rows)
        return y, len(boxes) - 1

    place(tree, 0.0)
    return boxes, dots, links, heads, next_y[0]


def _draw_tree(ax, ex: Explanation, tree: FactNode, note: str) -> None:
    """Panel (a): the derivations unfolded as a tree (a fact expanded elsewhere is a leaf marked "see above")."""
    g = ex.graph
    boxes, dots, links, heads, rows = _layout_tree(g, tree)
    fontsize = 7 if rows <= 24 else 5
    artists = []
    for x, y, n in boxes:
        s, r, o = g.fact(n.fact)
        color = "#f4c7c3" if n.fact == ex.target else ("#d9ead3" if n.in_k else "#fff2cc")
        text = f"[{n.fact}] {_short(s)}\n—{r}→ {_short(o)}" + ("  (see above)" if n.repeated else "")
        artists.append(ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, zorder=3,
                               bbox=dict(boxstyle="round,pad=0.25", fc=color, ec="#666666", lw=0.6)))
    arrow = dict(arrowstyle="-|>", color="#999999", lw=0.6, shrinkA=2, shrinkB=2)
    for b, dot in links:  # a body fact feeds a grounding (from the box's left edge)
        ax.annotate("", xy=dot, xycoords="data", xytext=(0, 0.5), textcoords=artists[b], arrowprops=arrow)
    for dot, b in heads:  # the grounding derives its head (to the box's right edge)
        ax.annotate("", xy=(1, 0.5), xycoords=artists[b], xytext=dot, textcoords="data", arrowprops=arrow)
    for x, y, label in dots:
        ax.plot([x], [y], "o", color="#555555", ms=4, zorder=2)
        ax.text(x, y - 0.15, label, ha="center", va="bottom", fontsize=fontsize - 1, color="#333333")
    xmax = max(x for x, _, _ in boxes)
    ax.set_xlim(-0.8, xmax + 0.8)
    ax.set_ylim(rows - 0.3, -0.7)
    s, r, o = g.fact(ex.target)
    ax.set_title(f"(a) derivations{note} of ({s}, {r}, {o})\ngreen: in K, yellow: derived, red: target; "
                 "dots: rule groundings (rule number)", fontsize=9)
    ax.axis("off")


def _draw_sets(fig, grid, ex: Explanation, sets: list) -> None:
    """Panels (b), (c), ...: each minimal set in red on the family graph of the target's cone."""
    import networkx as nx

    g = ex.graph
    cone = g.cone(ex.target)
    people = nx.MultiDiGraph()
    kb_facts = [int(f) for f in cone.nodes if g.in_k(int(f))]
    for f in kb_facts:
        a, rel, b = g.fact(f)
        people.add_edge(a, b, fact=f, relation=rel)
    ppos = nx.spring_layout(nx.Graph(people.to_undirected()), seed=7) if len(people) else {}
    for i, st in enumerate(sets or [frozenset()]):
        ax = fig.add_subplot(grid[0, 1 + i])
        if len(people):
            for u, v, d in people.edges(data=True):
                f = d["fact"]
                inset = f in st
                color = "#cc0000" if inset else "#bbbbbb"
                nx.draw_networkx_edges(people, ppos, edgelist=[(u, v)], ax=ax, edge_color=color,
                                       width=2.2 if inset else 0.7, style="dashed" if f == ex.target else "solid",
                                       arrows=True, arrowsize=8, connectionstyle=f"arc3,rad={RAD}", node_size=120)
                # the middle of matplotlib's arc3 curve: midpoint + rad/2 * (dy, -dx)
                (x1, y1), (x2, y2) = ppos[u], ppos[v]
                mx, my = (x1 + x2) / 2 + RAD / 2 * (y2 - y1), (y1 + y2) / 2 - RAD / 2 * (x2 - x1)
                ax.text(mx, my, d["relation"], fontsize=6.5 if inset else 5.5, color="#990000" if inset else "#888888",
                        fontweight="bold" if inset else "normal", ha="center", va="center",
                        bbox=dict(fc="white", ec="none", pad=0.2, alpha=0.8))
            nx.draw_networkx_labels(people, ppos, labels={p: _short(p).replace(" ", "\n") for p in people}, ax=ax,
                                    font_size=6, bbox=dict(fc="#cfe2f3", ec="#3d85c6", boxstyle="round,pad=0.2"))
        title = f"({chr(ord('b') + i)}) minimal set {i + 1} of {len(ex.sets.sets)}" if sets else "(b) no minimal sets"
        ax.set_title(f"{title}\n{len(st)} facts in red (target dashed)", fontsize=9)
        ax.axis("off")


def draw_explanation(ex: Explanation, path: str | Path, max_sets: int = 4, max_rows: int = 48) -> Path:
    """Write the figure: the target's derivations as a tree (left) and up to ``max_sets``
    minimal sets on the family graph of the target's cone (right). A tree taller than
    ``max_rows`` rows is drawn shallower (and with fewer groundings per fact) than the text.
    Returns the path written (see :func:`deepunlearn.kg.figures.save_figure`)."""
    from ..kg.figures import figure_path

    figure_path(path)  # a folder or an unknown suffix is refused before any drawing
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import networkx as nx  # noqa: F401  (imported before drawing, as the panels need it)

    g = ex.graph
    tree, note = ex.tree, ""
    if _rows(tree) > max_rows:
        tree, note = derivation_tree(g, ex.target, depth=1, max_groundings=max_rows // 2), " (first level)"
    sets = ex.sets.sets[:max_sets]
    ncols = 1 + max(len(sets), 1)
    fig = plt.figure(figsize=(7.5 + 4.2 * (ncols - 1), max(7.5, 0.22 * _rows(tree) + 1.5)))
    grid = fig.add_gridspec(1, ncols, width_ratios=[1.8] + [1] * (ncols - 1))
    _draw_tree(fig.add_subplot(grid[0, 0]), ex, tree, note)
    _draw_sets(fig, grid, ex, sets)
    kind = "exact" if ex.sets.exact else "approximate"
    fig.suptitle(f"Deep unlearning of fact [{ex.target}] with rules {g.rules.name!r}: "
                 f"{len(ex.sets.sets)} minimal sets ({kind})", fontsize=11)
    fig.tight_layout()
    from ..kg.figures import save_figure

    try:  # the format follows the suffix (none: .png added); written atomically, folders created
        return save_figure(fig, path, dpi=150)
    finally:
        plt.close(fig)
