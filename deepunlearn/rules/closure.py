"""``closure(kb, rules)``: the deductive closure ``Ω(K, R)`` (docs/concepts.md).

Facts of relations no rule uses (the biographies) pass through unchanged; they are counted
apart (``passthrough``), so the closure of the EDU-RELAT release is 562 facts = 400 + 162.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from typing import Iterable

import numpy as np

from .budget import DEFAULT_MAX_GROUNDINGS
from .engine import forward_chain
from .errors import RulesError
from .graph import DerivationGraph, derivation_graph
from .language import RuleSet
from .load import load_rules

ENGINES = ("native", "pydatalog")


@dataclass
class Closure:
    """``Ω(K, R)`` over the relations the rules use.

    ``facts``: K's facts of those relations (KB id order), then the derived facts. ``ids``: the
    graph id of each (a KB fact id, or ``n_kb + j`` for the j-th fact the KB does not hold).
    """

    facts: list[tuple[str, str, str]]
    ids: list[int]
    n_base: int
    passthrough: int
    engine: str
    groundings: int | None = None
    rounds: int | None = None

    @property
    def derived(self) -> list[tuple[str, str, str]]:
        return self.facts[self.n_base:]

    def __len__(self) -> int:
        return len(self.facts)

    def __contains__(self, fact) -> bool:
        return tuple(fact) in self._fact_set

    @cached_property
    def _fact_set(self) -> set:
        return set(self.facts)

    def to_dict(self) -> dict:
        """The CLI's JSON: ``facts`` = K's facts the rules can use, ``closure``, ``derived``, ..."""
        out = {"facts": self.n_base, "closure": len(self.facts), "derived": len(self.derived),
               "passthrough": self.passthrough, "engine": self.engine,
               "derived_by_relation": dict(sorted(Counter(r for _, r, _ in self.derived).items()))}
        if self.groundings is not None:
            out["groundings"] = self.groundings
            out["rounds"] = self.rounds
        return out


def closure_of_graph(g: DerivationGraph) -> Closure:
    """The :class:`Closure` a derivation graph already holds."""
    n = g.n_kb
    base_ids = np.flatnonzero(g.base[:n] & g.uses)
    derived_kb = np.flatnonzero(~g.base[:n] & g.in_closure[:n])
    new = np.arange(n, g.n_nodes)[g.in_closure[n:]]
    ids = np.concatenate([base_ids, derived_kb, new]).tolist()
    passthrough = int((g.base[:n] & ~g.uses).sum())
    return Closure([g.fact(i) for i in ids], ids, len(base_ids), passthrough, "native", g.n_edges, g.rounds)


def closure(kb, rules: str | RuleSet = "family", engine: str = "native", known: Iterable[int] | None = None,
            progress: bool = False, max_groundings: int | None = DEFAULT_MAX_GROUNDINGS,
            time_budget: float | None = None) -> Closure:
    """The closure ``Ω(K, R)``: every fact the rules derive from K.

    Parameters
    ----------
    kb : KnowledgeBase
        The knowledge base; K is its facts, or those with ids in ``known``.
    rules : str or RuleSet, default "family"
        Anything :func:`~.load.load_rules` takes.
    engine : {"native", "pydatalog"}, default "native"
        The native semi-naive engine, or pyDatalog (a cross-check; slower).
    known : iterable of int, optional
        The fact ids that make up K (the model's estimated KB); ``None``: the whole KB.
    progress : bool, default False
        A progress bar on stderr.
    max_groundings : int or None
        Bounds the groundings held at once (:mod:`.budget`; ``None``: no bound), checked before
        the memory is taken. With pyDatalog (which has no such bound of its own) the native engine
        checks the budget first.
    time_budget : float or None
        Seconds the native engine may evaluate (``None``: no bound).

    Returns
    -------
    Closure
        K's facts of the relations the rules use, then the derived facts, with their graph ids,
        the count of K's facts no rule uses (``passthrough``) and the engine.

    Raises
    ------
    RuleBudgetError
        A rule would pass ``max_groundings``; the message names the rule.
    RuleTimeError
        Evaluation passed ``time_budget``; the message names the rule file.
    RulesError
        An unknown engine or rule set.

    Examples
    --------
    >>> from deepunlearn.kg.kb import KnowledgeBase
    >>> kb = KnowledgeBase.build({"Ann": {"gender": "female"}, "Bob": {"gender": "male"}},
    ...                          [("Ann", "husband", "Bob"), ("Ann", "birthyear", "1950")])
    >>> c = closure(kb, "family")
    >>> c.n_base, c.derived, c.passthrough
    (1, [('Bob', 'wife', 'Ann')], 1)
    >>> closure(kb, "family", engine="pydatalog").derived
    [('Bob', 'wife', 'Ann')]
    """
    rs = load_rules(rules)
    known = None if known is None else list(known)
    if engine == "native":
        return closure_of_graph(derivation_graph(kb, rs, known=known, progress=progress, max_groundings=max_groundings,
                                                 time_budget=time_budget))
    if engine != "pydatalog":
        raise RulesError(f"unknown closure engine {engine!r}: expected one of {', '.join(ENGINES)}")
    from .pydatalog_engine import pydatalog_closure

    if max_groundings is not None or time_budget is not None:  # the native engine's bounds, before pyDatalog starts
        forward_chain(kb, rs, known, max_groundings=max_groundings, time_budget=time_budget)

    n = len(kb.facts)
    k = np.ones(n, dtype=bool) if known is None else np.isin(np.arange(n), np.fromiter(known, dtype=np.int64))
    rels = rs.relations
    uses = np.fromiter((r in rels for _, r, _ in kb.facts), dtype=bool, count=n)
    base_ids = np.flatnonzero(k & uses).tolist()
    facts = pydatalog_closure(kb, rs, known=np.flatnonzero(k).tolist())
    index = {f: i for i, f in enumerate(kb.facts)}
    base = set(kb.facts[i] for i in base_ids)
    derived = sorted(facts - base, key=lambda f: (index.get(f, n), f))
    ids, extra = list(base_ids), 0
    for f in derived:
        if f in index:
            ids.append(index[f])
        else:
            ids.append(n + extra)
            extra += 1
    return Closure([kb.facts[i] for i in base_ids] + derived, ids, len(base_ids), int((k & ~uses).sum()), "pydatalog")
