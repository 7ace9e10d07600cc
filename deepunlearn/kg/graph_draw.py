"""``data draw`` for a KB of any domain that is not a family: the entity graph around one entity.

A family KB is drawn as a family tree (:func:`deepunlearn.kg.graph.draw_family`). Another domain's
KB (an org chart, an academic genealogy) is drawn here as a plain graph: the entities within
``radius`` links of one entity (by default the subject of the KB's first target), one arrow
``o1 -> o2`` per fact of an entity relation, labelled with the relation, laid out by networkx
(seeded, so the same KB gives the same picture).
"""

from __future__ import annotations

import os
from pathlib import Path

import networkx as nx

from .figures import figure_path, save_figure
from .kb import KBError, KnowledgeBase

#: Above this many entities the picture is cut to the nearest ones (the title says so).
MAX_DRAWN = 60


def draw_graph(kb: KnowledgeBase, path: str | os.PathLike, person: str | None = None, radius: int = 1) -> Path:
    """Draw the entities within ``radius`` links of ``person`` (default: the first target's
    subject, else the first entity) and the entity facts among them, as a figure at ``path``."""
    from matplotlib.figure import Figure

    figure_path(path)
    if person is not None and person not in kb.entities:
        raise KBError(f"entity {person!r} is not in knowledge base {kb.name!r}", field="--person")
    if radius < 0:
        raise KBError(f"radius must be >= 0, got {radius}", field="--radius")
    g = nx.MultiDiGraph()
    for i, (s, r, o) in enumerate(kb.facts):
        if kb.relations[r].kind == "entity":
            g.add_edge(s, o, relation=r, fact_id=i)
    start = person or (kb.facts[kb.targets[0]][0] if kb.targets else next(iter(kb.entities)))
    g.add_node(start)
    near = list(nx.bfs_tree(g.to_undirected(as_view=True), start, depth_limit=radius))
    cut = len(near) > MAX_DRAWN
    sub = g.subgraph(near[:MAX_DRAWN])
    pos = nx.spring_layout(sub, seed=0)
    fig = Figure(figsize=(11, 8.5))
    ax = fig.add_subplot()
    ax.set_axis_off()
    colours = ["#e6a700" if n == start else "#d5e6f7" for n in sub.nodes]
    nx.draw_networkx_nodes(sub, pos, ax=ax, node_color=colours, node_size=500, edgecolors="#2f6aa8")
    nx.draw_networkx_labels(sub, pos, ax=ax, font_size=7)
    nx.draw_networkx_edges(sub, pos, ax=ax, arrows=True, edge_color="#555555", width=0.8,
                           connectionstyle="arc3,rad=0.08")
    labels = {}
    for a, b, d in sub.edges(data=True):
        labels.setdefault((a, b), []).append(d["relation"])
    nx.draw_networkx_edge_labels(sub, pos, ax=ax, edge_labels={k: ", ".join(v) for k, v in labels.items()},
                                 font_size=6, connectionstyle="arc3,rad=0.08")
    ax.set_title(f"{kb.name}: {start} and the entities within {radius} link(s)"
                 + (f" (the nearest {MAX_DRAWN} of {len(near)})" if cut else "")
                 + "; an arrow o1 -> o2 reads 'o2 is o1's relation'", fontsize=9)
    return save_figure(fig, path)
