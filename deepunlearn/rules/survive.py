"""Is a target deeply forgotten, and if not, which known facts still derive it?

A model that no longer answers the target but still knows facts from which the rules derive it
has forgotten it only superficially. :func:`surviving_derivation` gives one derivation of the
target from the facts still known, rule by rule down to facts of K: the proof a reader checks by
hand. It follows the rounds of the closure (each step uses facts derived strictly earlier), so it
always ends in facts of K. The text form is that of ``rules explain``
(:func:`~deepunlearn.rules.explain.describe`), with each rule's ``file:line``.
"""

from __future__ import annotations

from .explain import Derivation, FactNode, describe
from .graph import DerivationGraph


def is_deep(graph: DerivationGraph, target: int) -> bool:
    """The target is outside ``Ω(K, R)`` of the graph's K (deeply forgotten from K)."""
    return not bool(graph.in_closure[int(target)])


def surviving_derivation(graph: DerivationGraph, target: int) -> FactNode | None:
    """One derivation of ``target`` from the graph's K (``None`` when the target is not in the
    closure). A fact of K is a leaf; a derived fact gets the grounding whose body was complete
    earliest, so every body fact was born in an earlier round and the tree is finite. A fact
    already proven higher up is a leaf marked ``repeated``."""
    t = int(target)
    if not graph.in_closure[t]:
        return None
    birth = graph.birth
    done: set[int] = set()

    def visit(f: int) -> FactNode:
        node = FactNode(f, graph.in_k(f))
        if f in done:
            node.repeated = True
            return node
        done.add(f)
        if node.in_k or birth[f] <= 0:  # K, or a fact no rule uses passing through
            return node
        edges = graph.edges_deriving(f)
        best = min(edges, key=lambda e: (int(birth[graph.body_of(e)].max(initial=0)), int(e)))
        body = [int(x) for x in graph.body_of(best)]
        node.derivations = [(Derivation(int(graph.edge_rule[best]), body), [visit(x) for x in body])]
        return node

    return visit(t)


def leaves(node: FactNode | None) -> list[int]:
    """The facts of K a derivation rests on (sorted, each once)."""
    out: set[int] = set()

    def walk(n: FactNode) -> None:
        if n.in_k:
            out.add(n.fact)
        for _, kids in n.derivations or []:
            for k in kids:
                walk(k)

    if node is not None:
        walk(node)
    return sorted(out)


def steps(graph: DerivationGraph, node: FactNode | None) -> list[dict]:
    """The derivation as a list of steps, body facts before the facts they derive: each
    ``{"fact", "id", "rule", "where" (file:line), "datalog", "body" (ids)}``."""
    out: list[dict] = []

    def walk(n: FactNode) -> None:
        for der, kids in n.derivations or []:
            for k in kids:
                walk(k)
            rule = graph.rules[der.rule]
            out.append({"fact": list(graph.fact(n.fact)), "id": n.fact, "rule": rule.label,
                        "where": graph.rules.where(rule), "datalog": rule.to_datalog(), "body": der.body})

    if node is not None:
        walk(node)
    return out


def derivation_text(graph: DerivationGraph, node: FactNode | None, indent: str = "  ") -> str:
    """The derivation as ``rules explain`` prints derivations, each rule with its ``file:line``."""
    if node is None:
        return f"{indent}none: the rules do not derive it from the facts still known"
    lines = [f"{indent}{describe(graph, node.fact)}"]

    def walk(n: FactNode, pad: str) -> None:
        for der, kids in n.derivations or []:
            rule = graph.rules[der.rule]
            lines.append(f"{pad}<= {rule.label} ({graph.rules.where(rule)}): {rule.to_datalog()}")
            for k in kids:
                lines.append(f"{pad}     {describe(graph, k.fact)}" + ("  (derived above)" if k.repeated else ""))
                walk(k, pad + "       ")

    walk(node, indent + "  ")
    return "\n".join(lines)

