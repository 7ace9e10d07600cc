"""``minimal_sets``: all minimal deep-unlearning sets of a target when the exact enumeration
finishes within its budget, else the MDUS approximation (paper Algorithm 3); every answer says
which it is."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .errors import RulesError
from .exact import enumerate_minimal
from .graph import DerivationGraph
from .sampling import mdus, sort_sets

DEFAULT_SEEDS = 100


@dataclass(frozen=True)
class MinimalSets:
    """Minimal deep-unlearning sets of one target (KB fact ids; the target is in each).

    ``exact``: these are all of them (``M(k)``). Otherwise they come from MDUS, plus any sets
    the exact enumeration found before its budget ran out. ``method``: ``"exact"``, ``"mdus"``
    or ``"exact-partial+mdus"``.
    """

    target: int
    sets: list[frozenset[int]]
    exact: bool
    method: str
    seconds: float

    def __len__(self) -> int:
        return len(self.sets)

    def __iter__(self):
        return iter(self.sets)


def minimal_sets(graph: DerivationGraph, target: int, *, seeds: int | None = None, exact: bool = True,
                 time_budget: float = 10.0, rng: np.random.Generator | None = None) -> MinimalSets:
    """Minimal deep-unlearning sets of ``target`` (a fact of K).

    ``exact=True`` (the default) enumerates all of them with clingo within ``time_budget``
    seconds; if that does not finish, MDUS with ``seeds`` runs (default 100) fills in and the
    answer says ``exact=False``. ``exact=False`` runs MDUS only. MDUS stops after ``time_budget``
    seconds of its own too (after its first run), whatever ``seeds`` asks. ``rng`` seeds MDUS
    (default: ``numpy.random.default_rng(0)``).

    >>> from deepunlearn.kg.kb import KnowledgeBase
    >>> from deepunlearn.rules.graph import derivation_graph
    >>> kb = KnowledgeBase.build(
    ...     {"Ann": {"gender": "female"}, "Bob": {"gender": "male"}, "Cy": {"gender": "male"}},
    ...     [("Ann", "child", "Cy"), ("Cy", "father", "Bob"), ("Ann", "husband", "Bob"), ("Cy", "mother", "Ann")])
    >>> ms = minimal_sets(derivation_graph(kb, "family"), 0)
    >>> ms.exact, [sorted(s) for s in ms.sets]
    (True, [[0, 1, 3], [0, 2, 3]])
    """
    target = int(target)
    if not graph.in_k(target):
        raise RulesError(f"target {target} is not a fact of K" + (
            "" if 0 <= target < graph.n_kb else f" (the KB has {graph.n_kb} facts)"))
    if seeds is not None and seeds < 1:
        raise RulesError(f"seeds must be at least 1, got {seeds}")
    start = time.perf_counter()
    cone = graph.cone(target)
    partial: list[frozenset[int]] = []
    if exact:
        sets, complete = enumerate_minimal(cone, time_budget)
        if complete:
            return MinimalSets(target, sort_sets(sets), True, "exact", time.perf_counter() - start)
        partial = sets
    found = mdus(graph, target, seeds=seeds or DEFAULT_SEEDS, rng=rng, time_budget=time_budget)
    method = "exact-partial+mdus" if exact else "mdus"
    return MinimalSets(target, sort_sets([*partial, *found]), False, method, time.perf_counter() - start)
