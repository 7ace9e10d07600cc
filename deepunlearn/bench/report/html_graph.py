"""The surviving derivation of a superficially forgotten target, as a graph for ``report.html``.

At a point where the model no longer answers the target but the target is not deep (still in
``Ω(K \\ forgotten, R)``), one derivation of it from the facts the model still knows survives. It is
found over the target's cone in the derivation graph of K (:meth:`~deepunlearn.rules.graph.DerivationGraph.cone`),
with the facts forgotten at that point removed: facts of K still known are born in round 0, a
derived fact in the round after its body's last fact, and each derived fact is explained by the
grounding whose body was complete earliest (as :func:`~deepunlearn.rules.survive.surviving_derivation`
does on a graph of ``K_B``). The drawing is a layered tree: the target on top, each rule
grounding a small node between its head and its body facts, facts of K at the leaves.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence


def surviving_tree(graph, target: int, removed: Iterable[int]) -> dict[str, Any] | None:
    """``{"nodes": [...], "edges": [...]}`` of one derivation of ``target`` from K minus
    ``removed`` over ``graph`` (the derivation graph of K), or None when none survives (deep).

    Nodes: ``{"id", "kind" ("target", "derived", "known", "rule"), "label", "fact"?, "x", "y"}``;
    edges ``[from, to]`` (body fact to rule, rule to head)."""
    cone = graph.cone(int(target))
    gone = set(cone.local(removed)) | {0}  # the target itself is no longer answered at such a point
    n = len(cone.nodes)
    level: list[int | None] = [0 if cone.base[f] and f not in gone else None for f in range(n)]
    changed = True
    while changed:  # rounds of the closure over the cone (small: a target's cone)
        changed = False
        for e, (h, body) in enumerate(zip(cone.heads, cone.bodies)):
            if level[h] is not None:  # a forgotten fact of K may be derived again
                continue
            if all(level[x] is not None for x in body):
                level[h] = 1 + max((level[x] for x in body), default=0)  # type: ignore[type-var]
                changed = True
    if level[0] is None:
        return None
    nodes: list[dict[str, Any]] = []
    edges: list[list[int]] = []
    seen: dict[int, int] = {}

    def fact_node(f: int, depth: int) -> int:
        gid = int(cone.nodes[f])
        s, r, o = graph.fact(gid)
        kind = "target" if f == 0 else ("known" if level[f] == 0 else "derived")
        i = len(nodes)
        nodes.append({"id": i, "kind": kind, "label": f"({s}, {r}, {o})", "fact": gid, "depth": depth,
                      "repeated": f in seen})
        if f in seen or level[f] == 0:
            return i
        seen[f] = i
        best = min((e for e in cone.by_head[f] if all(level[x] is not None and level[x] < level[f]  # type: ignore[operator]
                                                      for x in cone.bodies[e])),
                   key=lambda e: (max((level[x] for x in cone.bodies[e]), default=0), e))  # type: ignore[type-var]
        rule = graph.rules[int(graph.edge_rule[cone.edge_ids[best]])]
        j = len(nodes)
        nodes.append({"id": j, "kind": "rule", "label": rule.to_datalog(),
                      "datalog": f"{rule.label} ({graph.rules.where(rule)}): {rule.to_datalog()}", "depth": depth + 1})
        edges.append([j, i])
        for x in cone.bodies[best]:
            edges.append([fact_node(x, depth + 2), j])
        return i

    fact_node(0, 0)
    _layout(nodes, edges)
    return {"nodes": nodes, "edges": edges}


def _layout(nodes: list[dict[str, Any]], edges: Sequence[Sequence[int]]) -> None:
    """A layered tree layout: y from the depth (target on top), x the mean of the node's children,
    leaves spaced one apart in the order they were visited."""
    children: dict[int, list[int]] = {}
    for a, b in edges:
        children.setdefault(b, []).append(a)
    nxt = [0.0]

    def place(i: int) -> float:
        kids = children.get(i, [])
        x = sum(place(k) for k in kids) / len(kids) if kids else nxt[0]
        if not kids:
            nxt[0] += 1.0
        nodes[i]["x"], nodes[i]["y"] = x, -float(nodes[i]["depth"])
        return x

    if nodes:
        place(0)
