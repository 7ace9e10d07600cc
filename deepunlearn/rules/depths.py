"""How deep the deductions of a derivation graph go: :func:`derivation_depths` (the fewest rule
applications each fact needs) and :func:`deepest_chain` (the derivation of the deepest fact,
readable, one line per step). Used by the declarative generator's report and figures."""

from __future__ import annotations

import numpy as np

from .graph import DerivationGraph, csr


def derivation_depths(graph: DerivationGraph) -> np.ndarray:
    """Per node (int64): 0 for the facts of K, else the fewest rule applications that derive it
    = the least over its hyperedges of 1 + the largest depth in the edge's body; -1 for a node
    outside the closure.

    Recursion-safe: a level-by-level propagation (Knuth's generalised shortest paths with max as
    the combination): an edge fires once all its body facts have a depth, and the levels are
    visited in increasing order, so a fact's first depth is its least one; cycles never fire.

    >>> from deepunlearn.kg.kb import KnowledgeBase
    >>> from deepunlearn.rules.graph import derivation_graph
    >>> kb = KnowledgeBase.build({"Ann": {"gender": "female"}, "Bob": {"gender": "male"}, "Cy": {"gender": "male"}},
    ...     [("Ann", "husband", "Bob"), ("Cy", "mother", "Ann")])
    >>> g = derivation_graph(kb, "family")
    >>> [(g.fact(i)[1], int(d)) for i, d in enumerate(derivation_depths(g))]
    [('husband', 0), ('mother', 0), ('child', 1), ('child', 1), ('father', 1), ('wife', 1)]
    """
    n, m = graph.n_nodes, graph.n_edges
    depth = np.full(n, -1, dtype=np.int64)
    depth[np.flatnonzero(graph.base)] = 0
    if m == 0:
        return depth
    sizes = np.diff(graph.body_ptr)
    entry_edge = np.repeat(np.arange(m, dtype=np.int64), sizes)
    ptr, order = csr(graph.body.astype(np.int64), n)  # body entries by fact
    missing = sizes.astype(np.int64).copy()
    frontier = np.flatnonzero(depth == 0)
    level = 0
    while frontier.size:
        cnt = ptr[frontier + 1] - ptr[frontier]
        starts = np.repeat(ptr[frontier] - (np.cumsum(cnt) - cnt), cnt)
        edges = entry_edge[order[starts + np.arange(int(cnt.sum()))]]
        np.subtract.at(missing, edges, 1)
        fired = np.unique(edges[missing[edges] == 0])
        missing[fired] = -1  # an edge fires once
        heads = np.unique(graph.edge_head[fired])
        heads = heads[depth[heads] < 0]
        level += 1
        depth[heads] = level
        frontier = heads
    return depth


def _show(fact: tuple[str, str, str]) -> str:
    s, r, o = fact
    return f"{r}({s}, {o})"


def deepest_chain(graph: DerivationGraph, depths: np.ndarray | None = None) -> list[str]:
    """The derivation of the deepest fact (the lowest id among the deepest), one line per rule
    application, first steps first: ``"k. head :- body facts.  (rules.dl:LINE)"``, each body
    fact of K marked ``[K]``. Each step uses an edge of least depth, so the list has exactly
    ``depth`` lines along its longest branch; an empty list when nothing is derived.
    """
    depths = derivation_depths(graph) if depths is None else depths
    if depths.size == 0 or depths.max() <= 0:
        return []
    top = int(np.argmax(depths))
    steps: list[int] = []  # derived facts in post-order, each once
    edge_of: dict[int, int] = {}
    stack: list[tuple[int, bool]] = [(top, False)]
    while stack:
        f, expanded = stack.pop()
        if expanded:
            steps.append(f)
            continue
        if f in edge_of or depths[f] <= 0:
            continue
        want = depths[f] - 1
        edge_of[f] = e = next(int(e) for e in graph.edges_deriving(f)
                              if (b := graph.body_of(int(e))).size and depths[b].min() >= 0 and depths[b].max() == want)
        stack.append((f, True))
        stack.extend((int(b), False) for b in reversed(graph.body_of(e).tolist()))
    out = []
    for k, f in enumerate(steps, 1):
        e = edge_of[f]
        rule = graph.rules.rules[int(graph.edge_rule[e])]
        body = ", ".join(_show(graph.fact(b)) + (" [K]" if graph.base[b] else "") for b in graph.body_of(e).tolist())
        out.append(f"{k}. {_show(graph.fact(f))} :- {body}.  ({graph.rules.where(rule)})")
    return out
