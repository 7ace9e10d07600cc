"""Soft rules: the probability that a fact is derivable when rules hold only with a probability.

A rule may carry a probability, written as ProbLog writes it::

    0.8 :: lives_in(Y, C) :- spouse(X, Y), lives_in(X, C).

The semantics are ProbLog's: every grounding of a soft rule (every assignment of its variables)
holds on its own, independently of the others, with the rule's probability; a rule without one
always holds, and the facts of K are certain. ``deep_p`` is then the probability that the
target lies in the least fixpoint Ω(K, R) of the groundings that hold: the chance that what the
model still knows derives the target. With every rule certain it is 1 where the exact verdict
says "derivable" and 0 where it says "deep".

:func:`deep_p` computes it exactly on the target's cone of the derivation graph
(:mod:`.graph`): groundings of the same head and body are merged (``1 - Π(1 - p)``), facts that
certain rules derive from K are set to true, facts no grounding can reach to false; what is
left is solved exactly, with the least-fixpoint meaning of cycles that ProbLog gives them (a
fact never supports itself): for up to :data:`MAX_SUBSET_FACTS` uncertain facts by the
distribution of the set of derived facts over their subsets, beyond by a binary decision
diagram (:mod:`.bdd`) of the cone's rules iterated to their least fixpoint. The diagram is
bounded (``max_nodes``); past it :class:`SoftBudgetError` is one line naming the target and
the budget.

``with_rule_probs`` gives every mined rule the probability of one of its measures
(``pca_confidence`` or ``std_confidence``, from the ``% support=...`` line that follows it).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Iterable

from .bdd import AND, FALSE, OR, TRUE, BDD, BudgetExceeded
from .errors import RulesError
from .graph import DerivationGraph, check_removed
from .language import RuleSet

#: Most decision-diagram nodes and memo entries one ``deep_p`` may build (about 100 bytes each).
DEFAULT_MAX_NODES = 2_000_000
#: The flag that sets it (named in the error).
FLAG = "--soft-budget"
#: Most uncertain facts in a cone for which ``deep_p`` goes over their subsets (at most 3^n
#: steps; 0.5 s at 14 facts of a generated family on one core, about 5 s at 16) rather than
#: building a decision diagram.
MAX_SUBSET_FACTS = 16
#: The measures of a mined rule that may serve as its probability (``--rule-prob``).
MEASURES = ("pca_confidence", "std_confidence")


class SoftBudgetError(RulesError):
    """The exact probability of a target needs a larger decision diagram than the budget allows."""


def is_soft(rules: RuleSet) -> bool:
    """Some rule of the set carries a probability (so verdicts get a ``deep_p``)."""
    return any(r.prob is not None for r in rules)


def with_rule_probs(rules: RuleSet, measure: str) -> RuleSet:
    """``rules`` with each rule's probability read from its ``measure`` (a mined rule's
    ``% ... pca_confidence=0.95`` line); a rule without the measure keeps the probability written
    before it, and a rule with neither is refused (one line naming its file and line).

    >>> from deepunlearn.rules.parser import parse_datalog
    >>> with_rule_probs(parse_datalog("0.5 :: r(X, Y) :- s(X, Y)."), "pca_confidence")[0].prob
    0.5
    >>> with_rule_probs(parse_datalog("r(X, Y) :- s(X, Y).", source="m.dl"), "pca_confidence")
    Traceback (most recent call last):
    ...
    deepunlearn.rules.errors.RulesError: m.dl:1: rule 1 has no pca_confidence measure and no written probability; give it one ('p :: head :- body.') or mine the rules again
    """
    if measure not in MEASURES:
        raise RulesError(f"--rule-prob {measure!r}: expected one of {', '.join(MEASURES)}", field="--rule-prob")
    out = []
    for r in rules:
        value = (getattr(r, "measures", None) or {}).get(measure)
        if value is not None:
            p = float(value)
            if not 0.0 <= p <= 1.0:
                raise RulesError(f"{rules.where(r)}: {r.label or 'a rule'}'s {measure} {value} is outside [0, 1]",
                                 file=rules.source, field="--rule-prob")
            r = dataclasses.replace(r, prob=p)
        elif r.prob is None:
            raise RulesError(f"{rules.where(r)}: {r.label or 'a rule'} has no {measure} measure and no written "
                             "probability; give it one ('p :: head :- body.') or mine the rules again",
                             file=rules.source, field="--rule-prob")
        out.append(r)
    return dataclasses.replace(rules, rules=tuple(out))


def _horn(nodes: Iterable[int], edges: list[tuple[int, tuple[int, ...]]], true: set[int]) -> set[int]:
    """``true`` closed under ``edges`` (head, body) over ``nodes``: plain Horn propagation."""
    missing = [sum(1 for x in b if x not in true) for _, b in edges]
    occ: dict[int, list[int]] = {}
    for e, (_, b) in enumerate(edges):
        for x in b:
            occ.setdefault(x, []).append(e)
    out = set(true)
    stack = [h for (h, b), m in zip(edges, missing) if m == 0 and h not in out]
    out.update(stack)
    while stack:
        f = stack.pop()
        for e in occ.get(f, ()):
            missing[e] -= 1
            if missing[e] == 0 and edges[e][0] not in out:
                out.add(edges[e][0])
                stack.append(edges[e][0])
    return out


def cone_groundings(graph: DerivationGraph, target: int) -> list[tuple[int, tuple[int, ...], float]]:
    """Every grounding in ``target``'s cone as ``(head, body facts, probability)`` (global ids;
    a grounding whose body holds its own head is left out: it never derives anything)."""
    rules = graph.rules.rules
    out = []
    for f in graph.cone(target).nodes.tolist():
        for e in graph.edges_deriving(f).tolist():
            body = tuple(sorted(set(graph.body_of(e).tolist())))
            if f in body:
                continue
            p = rules[int(graph.edge_rule[e])].prob
            out.append((f, body, 1.0 if p is None else float(p)))
    return out


def deep_p(graph: DerivationGraph, target: int, removed: Iterable[int] = (),
           max_nodes: int | None = DEFAULT_MAX_NODES, method: str = "auto") -> float:
    """The probability that ``target`` is derivable from ``K \\ removed`` (K: the graph's
    known facts) when each grounding of a soft rule holds independently with its rule's
    probability (see the module docstring). Exact; past ``max_nodes`` decision-diagram nodes
    :class:`SoftBudgetError`. ``method``: ``"subsets"`` (over the subsets of the uncertain facts,
    the default up to :data:`MAX_SUBSET_FACTS` of them), ``"bdd"`` (a decision diagram, the default
    beyond), ``"auto"``.

    Two independent derivations, with probabilities 0.8 and 0.5: 1 - 0.2 * 0.5 = 0.9.

    >>> from deepunlearn.kg.kb import KnowledgeBase
    >>> from deepunlearn.rules.graph import derivation_graph
    >>> from deepunlearn.rules.parser import parse_datalog
    >>> kb = KnowledgeBase.build({"A": {}, "B": {}}, [("A", "s", "B"), ("A", "t", "B"), ("A", "r", "B")])
    >>> rs = parse_datalog("0.8 :: r(X, Y) :- s(X, Y).\\n0.5 :: r(X, Y) :- t(X, Y).")
    >>> g = derivation_graph(kb, rs, known=[0, 1])
    >>> round(deep_p(g, 2), 12), deep_p(g, 2, removed=[0, 1]), deep_p(g, 0)
    (0.9, 0.0, 1.0)
    """
    target = int(target)
    if not 0 <= target < graph.n_nodes or not graph.in_closure[target]:
        return 0.0
    gone = set(check_removed(graph, removed))
    if graph.in_k(target) and target not in gone:
        return 1.0
    raw = cone_groundings(graph, target)
    base = {f for f in graph.cone(target).nodes.tolist() if graph.in_k(f) and f not in gone}
    nodes = {h for h, _, _ in raw} | {x for _, b, _ in raw for x in b}
    certain = _horn(nodes, [(h, b) for h, b, p in raw if p >= 1.0], base)
    if target in certain:
        return 1.0
    possible = _horn(nodes, [(h, b) for h, b, p in raw if p > 0.0], base)
    if target not in possible:
        return 0.0
    # merge the groundings of one head and one uncertain body: q = 1 - Π(1 - p)
    fail: dict[tuple[int, tuple[int, ...]], float] = {}
    for h, b, p in raw:
        if p > 0.0 and h not in certain and all(x in possible for x in b):
            key = (h, tuple(x for x in b if x not in certain))
            fail[key] = fail.get(key, 1.0) * (1.0 - p)
    by_head: dict[int, list[tuple[tuple[int, ...], float]]] = {}
    for (h, b), q in fail.items():
        by_head.setdefault(h, []).append((b, 1.0 - q))
    if method not in ("auto", "subsets", "bdd"):
        raise RulesError(f"deep_p method {method!r}: expected auto, subsets or bdd")
    reach = _reach(target, by_head)
    if method == "subsets" or (method == "auto" and len(reach) <= MAX_SUBSET_FACTS):
        return _by_subsets(target, reach, by_head)
    return _compile(target, by_head, max_nodes, graph)


def soft_deep_p(graph: DerivationGraph, target: int, removed: Iterable[int] = (),
                max_nodes: int | None = None) -> float | None:
    """:func:`deep_p` when the graph's rule set is soft (:func:`is_soft`), else None (a verdict or a
    sweep's point records it only then); ``max_nodes`` None: :data:`DEFAULT_MAX_NODES`."""
    if not is_soft(graph.rules):
        return None
    return deep_p(graph, target, removed, max_nodes=max_nodes or DEFAULT_MAX_NODES)


def _reach(target: int, by_head: dict[int, list[tuple[tuple[int, ...], float]]]) -> list[int]:
    """The uncertain facts the target depends on, depth-first from it."""
    order, seen, stack = [], {target}, [target]
    while stack:
        h = stack.pop()
        order.append(h)
        for b, _ in by_head.get(h, ()):
            for x in reversed(b):
                if x not in seen:
                    seen.add(x)
                    stack.append(x)
    return order


def _by_subsets(target: int, nodes: list[int], by_head: dict[int, list[tuple[tuple[int, ...], float]]]) -> float:
    r"""The probability by the distribution of the derived set D over the subsets S of the n
    uncertain facts: ``P(D = S) = R(S) · Π_{v ∉ S} f_S(v)``, where ``f_S(v)`` is the chance that
    every grounding deriving v from S fails and ``R(S) = 1 - Σ_{T ⊊ S} R(T) Π_{v ∈ S \ T} f_T(v)``
    the chance that S derives all of itself (groundings inside S are independent of those
    leaving it). 3^n steps, vectorised per S."""
    import numpy as np

    n = len(nodes)
    bit = {f: i for i, f in enumerate(nodes)}
    heads, masks, fails = [], [], []
    for h in nodes:
        for b, q in by_head.get(h, ()):
            heads.append(bit[h])
            masks.append(sum(1 << bit[x] for x in b))
            fails.append(1.0 - q)
    heads_a, masks_a, fails_a = np.array(heads, dtype=np.int64), np.array(masks, dtype=np.int64), np.array(fails)
    acc = np.zeros(1 << n)
    answer = 0.0
    t_bit = 1 << bit[target]
    for s in range(1 << n):
        r = 1.0 - acc[s]
        if r == 0.0:
            continue
        on = ((masks_a & ~s) == 0) & ((np.left_shift(1, heads_a) & s) == 0)
        f = np.ones(n)
        np.multiply.at(f, heads_a[on], fails_a[on])
        idx, w = np.array([s], dtype=np.int64), np.array([r])
        for v in range(n):
            if not s >> v & 1:
                idx, w = np.concatenate([idx, idx | (1 << v)]), np.concatenate([w, w * f[v]])
        acc[idx[1:]] += w[1:]
        if s & t_bit:
            answer += w[-1]  # P(D = s): s derives itself and nothing leaves it
    return float(min(1.0, max(0.0, answer)))


def _compile(target: int, by_head: dict[int, list[tuple[tuple[int, ...], float]]], max_nodes: int | None,
             graph: DerivationGraph) -> float:
    """The least fixpoint of the cone's uncertain part as a BDD, and its probability."""
    # variables in depth-first order from the target (groundings near each other stay near)
    order = _reach(target, by_head)
    level: dict[tuple[int, int], int] = {}
    probs: list[float] = []
    for h in order:
        for k, (b, q) in enumerate(by_head.get(h, ())):
            if q < 1.0:
                level[(h, k)] = len(probs)
                probs.append(q)
    users: dict[int, list[int]] = {}
    for h in order:
        for b, _ in by_head.get(h, ()):
            for x in b:
                users.setdefault(x, []).append(h)
    bdd = BDD(max_nodes)
    phi = {h: FALSE for h in order}
    queue = deque(reversed(order))  # the leaves' side first
    queued = set(order)
    try:
        while queue:
            h = queue.popleft()
            queued.discard(h)
            new = FALSE
            for k, (b, q) in enumerate(by_head.get(h, ())):
                term = bdd.conjoin(phi[x] for x in b)
                if q < 1.0 and term != FALSE:
                    term = bdd.apply(AND, bdd.var(level[(h, k)]), term)
                new = bdd.apply(OR, new, term)
                if new == TRUE:
                    break
            if new != phi[h]:
                phi[h] = new
                for u in users.get(h, ()):
                    if u not in queued:
                        queued.add(u)
                        queue.append(u)
    except BudgetExceeded:
        s, r, o = graph.fact(target)
        raise SoftBudgetError(
            f"target [{target}] ({s}, {r}, {o}): its exact probability under the soft rules needs more than "
            f"{max_nodes:,} decision-diagram nodes ({len(probs):,} uncertain groundings in its cone); raise it with "
            f"{FLAG} N (max_nodes=N in Python)", field=FLAG) from None
    return bdd.probability(phi[target], probs)
