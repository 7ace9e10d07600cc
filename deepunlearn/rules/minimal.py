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

    Parameters
    ----------
    graph : DerivationGraph
        The rules grounded over K (:func:`~deepunlearn.rules.graph.derivation_graph`).
    target : int
        A KB fact id that is in K.
    seeds : int, optional
        MDUS runs (default :data:`DEFAULT_SEEDS`, 100) when MDUS runs.
    exact : bool, default True
        Enumerate all minimal sets with clingo within ``time_budget`` seconds; if that does not
        finish, MDUS fills in and the answer says ``exact=False``. ``False`` runs MDUS only.
    time_budget : float, default 10.0
        Seconds for the exact enumeration, and for MDUS after its first run, whatever ``seeds``
        asks.
    rng : numpy.random.Generator, optional
        Seeds MDUS (default ``numpy.random.default_rng(0)``).

    Returns
    -------
    MinimalSets
        The sets (KB fact ids, each holding the target), whether they are all of them, and
        how they were found.

    Raises
    ------
    RulesError
        ``target`` is not a fact of K, or ``seeds`` is below 1.

    Examples
    --------
    Cy's mother (fact 3) follows from Ann being Cy's child's mother through either parent link:

    >>> from deepunlearn.kg.kb import KnowledgeBase
    >>> from deepunlearn.rules.graph import derivation_graph
    >>> kb = KnowledgeBase.build(
    ...     {"Ann": {"gender": "female"}, "Bob": {"gender": "male"}, "Cy": {"gender": "male"}},
    ...     [("Ann", "child", "Cy"), ("Cy", "father", "Bob"), ("Ann", "husband", "Bob"), ("Cy", "mother", "Ann")])
    >>> ms = minimal_sets(derivation_graph(kb, "family"), 0)
    >>> ms.exact, [sorted(s) for s in ms.sets]
    (True, [[0, 1, 3], [0, 2, 3]])
    >>> minimal_sets(derivation_graph(kb, "family"), 9)
    Traceback (most recent call last):
    ...
    deepunlearn.rules.errors.RulesError: target 9 is not a fact of K (the KB has 4 facts)
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
