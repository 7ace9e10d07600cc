"""Randomised minimal deep-unlearning sets: DUS, RP and MDUS (paper Algorithms 1-3).

All three run over a target's cone (:class:`~.graph.Cone`) with a seeded numpy generator.
"""

from __future__ import annotations

import random
import time

import numpy as np

from .errors import RulesError
from .graph import Cone, DerivationGraph, check_removed


class _Draws:
    """Uniform draws for the Python loops of DUS and RP. A fast C-level ``random.Random`` is
    seeded from the caller's numpy Generator, so results are deterministic given that
    generator."""

    def __init__(self, rng: np.random.Generator):
        self.random = random.Random(int(rng.integers(2**63))).random

    def below(self, n: int) -> int:
        """A uniform integer in ``[0, n)``."""
        return int(self.random() * n)

    def shuffled(self, items: list[int]) -> list[int]:
        out = list(items)
        rand = self.random
        for i in range(len(out) - 1, 0, -1):  # Fisher-Yates
            j = int(rand() * (i + 1))
            out[i], out[j] = out[j], out[i]
        return out


def _dus(cone: Cone, draws: _Draws) -> list[int]:
    """Algorithm 1 (DUS) on local ids: a deep-unlearning set of the cone's target (local id 0)."""
    u = 1  # bitmask of local ids in U
    added = [0]
    todo = [0]
    by_head, bodies, masks = cone.by_head, cone.bodies, cone.body_masks
    while todo:
        j = draws.below(len(todo))  # pick k_cur uniformly from T
        cur = todo[j]
        todo[j] = todo[-1]
        todo.pop()
        edges = by_head[cur]
        if len(edges) > 1:
            edges = draws.shuffled(edges)  # its groundings in a random order
        for e in edges:
            if masks[e] & u:
                continue
            body = bodies[e]  # no body fact is in U: block this grounding with one of them
            b = body[draws.below(len(body))]
            u |= 1 << b
            added.append(b)
            todo.append(b)
    base = cone.base
    return [f for f in added if base[f]]


def _prune(cone: Cone, removed: list[int], order: list[int]) -> list[int]:
    """Algorithm 2 (RP) on local ids: drop each fact of ``removed`` (in ``order``) whose return
    leaves the target underivable.

    One pass gives a minimal set: derivability is monotone, so a fact that had to stay while
    the set was larger still has to stay once it is smaller, and the paper's second pass never
    drops anything. Each test is incremental: put the fact back into the fixpoint of
    ``K \\ removed``, propagate only its consequences, undo them if the target comes back.
    """
    true, missing = cone.fixpoint(removed, stop_at_target=False)
    if true[0]:
        raise RulesError(f"not a deep-unlearning set of fact {int(cone.target)}: the target is still derivable")
    heads, occ = cone.heads, cone.occ
    keep = []
    for x in order:
        if x == 0:  # putting the target itself back derives it
            keep.append(x)
            continue
        if true[x]:
            continue  # x is derived from the rest anyway: removing it achieves nothing
        log_facts = [x]
        log_edges = []
        true[x] = 1
        stack = [x]
        back = False
        while stack and not back:
            f = stack.pop()
            for e in occ[f]:
                missing[e] -= 1
                log_edges.append(e)
                if missing[e] == 0:
                    h = heads[e]
                    if not true[h]:
                        if h == 0:
                            back = True
                            break
                        true[h] = 1
                        log_facts.append(h)
                        stack.append(h)
        if back:  # x is needed: undo its consequences, keep it in the set
            for e in log_edges:
                missing[e] += 1
            for f in log_facts:
                true[f] = 0
            keep.append(x)
    return keep


def dus(graph: DerivationGraph, target: int, rng: np.random.Generator | None = None) -> frozenset[int]:
    """Algorithm 1: a random deep-unlearning set of ``target`` (KB fact ids, target included).

    >>> from deepunlearn.kg.kb import KnowledgeBase
    >>> from deepunlearn.rules.graph import derivation_graph, is_deep_unlearning_set
    >>> kb = KnowledgeBase.build({"A": {"gender": "female"}, "B": {"gender": "male"}},
    ...                          [("A", "husband", "B"), ("B", "wife", "A")])
    >>> g = derivation_graph(kb, "family")
    >>> sorted(dus(g, 0, np.random.default_rng(0)))
    [0, 1]
    """
    cone = graph.cone(int(target))
    check_removed(graph, [int(target)])
    draws = _Draws(rng if rng is not None else np.random.default_rng(0))
    return frozenset(int(cone.nodes[f]) for f in _dus(cone, draws))


def prune(graph: DerivationGraph, target: int, removed, rng: np.random.Generator | None = None) -> frozenset[int]:
    """Algorithm 2: a minimal deep-unlearning set inside the deep-unlearning set ``removed``,
    trying its facts in a random order."""
    removed = check_removed(graph, removed)
    cone = graph.cone(int(target))
    draws = _Draws(rng if rng is not None else np.random.default_rng(0))
    loc = cone.local(removed)  # facts outside the cone never help derive the target: they all go
    return frozenset(int(cone.nodes[f]) for f in _prune(cone, loc, draws.shuffled(sorted(loc))))


def mdus(graph: DerivationGraph, target: int, seeds: int = 100,
         rng: np.random.Generator | None = None, time_budget: float | None = None) -> list[frozenset[int]]:
    """Algorithm 3: DUS + RP with ``seeds`` random runs; the distinct minimal sets found,
    sorted by size then ids. ``time_budget``: stop after that many seconds (at least one run is
    made), so a huge ``seeds`` cannot run for ever.

    >>> from deepunlearn.kg.kb import KnowledgeBase
    >>> from deepunlearn.rules.graph import derivation_graph
    >>> kb = KnowledgeBase.build({"A": {"gender": "female"}, "B": {"gender": "male"}},
    ...                          [("A", "husband", "B"), ("B", "wife", "A")])
    >>> [sorted(s) for s in mdus(derivation_graph(kb, "family"), 0, seeds=10)]
    [[0, 1]]
    """
    cone = graph.cone(int(target))
    check_removed(graph, [int(target)])
    draws = _Draws(rng if rng is not None else np.random.default_rng(0))
    found: set[frozenset[int]] = set()
    nodes = cone.nodes
    end = None if time_budget is None else time.monotonic() + time_budget
    for _ in range(seeds):
        u = _dus(cone, draws)
        m = _prune(cone, u, draws.shuffled(u))
        found.add(frozenset(int(nodes[f]) for f in m))
        if end is not None and time.monotonic() >= end:
            break
    return sort_sets(found)


def sort_sets(sets) -> list[frozenset[int]]:
    """Sets in a canonical order: by size, then by their sorted ids."""
    return sorted(set(sets), key=lambda s: (len(s), sorted(s)))
