"""The derivation hypergraph of ``Ω(K, R)`` and derivability checks over it (docs/concepts.md).

Every rule grounding inside the closure is a hyperedge ``head <- body facts``. Whether a fact is
derivable from ``K \\ U`` is then linear-time Horn propagation (one counter per hyperedge),
never a re-run of the closure. Checks for one target only look at its *cone*: the facts and
hyperedges from which the target can be reached backwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable

import numpy as np

from .budget import DEFAULT_MAX_GROUNDINGS
from .engine import ABSENT, Grounded, forward_chain
from .errors import RulesError
from .language import RuleSet
from .load import load_rules
from .tables import stable_order


def csr(keys: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Group positions ``0..len(keys)-1`` by key: ``items[ptr[k]:ptr[k+1]]`` hold key k's
    (in position order: the order of a stable argsort, by one sort of (key, position) pairs)."""
    order = stable_order(keys, n)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return ptr, order


@dataclass(eq=False)
class DerivationGraph:
    """``Ω(K, R)`` with its rule groundings as hyperedges, in numpy arrays (CSR-like).

    Node ids ``0..n_kb-1`` are the KB's fact ids; facts the rules derive that the KB does not
    hold get ids ``n_kb, n_kb+1, ...``. ``base[i]``: fact i is in K (the starting knowledge).
    ``birth[i]``: 0 for K, the round a derived fact appeared, -1 if i is not in the closure.
    Hyperedge ``e`` derives ``edge_head[e]`` by rule ``edge_rule[e]`` (index into
    ``rules.rules``) from ``body[body_ptr[e]:body_ptr[e+1]]`` (body order of the rule).
    """

    kb: object
    rules: RuleSet
    n_kb: int
    terms: list[str]
    relation_names: list[str]
    node_s: np.ndarray
    node_r: np.ndarray
    node_o: np.ndarray
    birth: np.ndarray
    base: np.ndarray
    edge_head: np.ndarray
    edge_rule: np.ndarray
    body_ptr: np.ndarray
    body: np.ndarray
    rounds: int
    peak_groundings: int = 0  # the most groundings held at once while grounding: the least budget that closes
    _cones: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_grounded(cls, kb, rules: RuleSet, g: Grounded) -> "DerivationGraph":
        birth = g.birth.astype(np.int32)
        birth[birth == ABSENT] = -1
        return cls(kb, rules, g.n_kb, g.terms, g.relations, g.node_s, g.node_r, g.node_o, birth, g.base,
                   g.edge_head, g.edge_rule, g.body_ptr, g.body, g.rounds, g.peak_groundings)

    # ------------------------------------------------------------------ facts
    @property
    def n_nodes(self) -> int:
        return len(self.birth)

    @property
    def n_edges(self) -> int:
        return len(self.edge_head)

    @cached_property
    def in_closure(self) -> np.ndarray:
        """Bool over node ids: the fact is in ``Ω(K, R)`` (K's facts no rule uses included)."""
        return self.birth >= 0

    @cached_property
    def uses(self) -> np.ndarray:
        """Bool over KB fact ids: the fact's relation is one the rules use."""
        rel = self.rules.relations
        return np.fromiter((r in rel for _, r, _ in self.kb.facts), dtype=bool, count=self.n_kb)

    def fact(self, i: int) -> tuple[str, str, str]:
        """The ``(o1, r, o2)`` triple of node ``i``."""
        i = int(i)
        if i < self.n_kb:
            return self.kb.facts[i]
        if not 0 <= i < self.n_nodes:
            raise RulesError(f"fact id {i} out of range (graph has {self.n_nodes} facts)")
        return (self.terms[self.node_s[i]], self.relation_names[self.node_r[i]], self.terms[self.node_o[i]])

    def in_k(self, i: int) -> bool:
        return 0 <= i < self.n_kb and bool(self.base[i])

    # ------------------------------------------------------------------ hyperedges
    def body_of(self, e: int) -> np.ndarray:
        return self.body[self.body_ptr[e]:self.body_ptr[e + 1]]

    @cached_property
    def _by_head(self) -> tuple[np.ndarray, np.ndarray]:
        return csr(self.edge_head, self.n_nodes)

    def edges_deriving(self, f: int) -> np.ndarray:
        """Hyperedges whose head is fact ``f``."""
        ptr, order = self._by_head
        return order[ptr[f]:ptr[f + 1]]

    def cone(self, target: int) -> "Cone":
        """The part of the graph that can reach ``target`` (cached)."""
        c = self._cones.get(target)
        if c is None:
            if len(self._cones) > 4096:
                self._cones.clear()
            c = self._cones[target] = Cone.build(self, target)
        return c


def derivation_graph(kb, rules: str | RuleSet = "family", known: Iterable[int] | None = None,
                     progress: bool = False, max_groundings: int | None = DEFAULT_MAX_GROUNDINGS,
                     time_budget: float | None = None) -> DerivationGraph:
    """Ground ``rules`` over ``Ω(K, R)``: every rule application that derives a fact.

    Parameters
    ----------
    kb : KnowledgeBase
        The knowledge base; K is its facts, or those with ids in ``known``.
    rules : str or RuleSet, default "family"
        Anything :func:`~.load.load_rules` takes.
    known : iterable of int, optional
        The fact ids that make up K (the model's estimated KB); ``None``: the whole KB.
    progress : bool, default False
        A progress bar on stderr.
    max_groundings : int or None
        Bounds the groundings held at once (:mod:`.budget`; ``None``: no bound).
    time_budget : float or None
        Seconds of evaluation (``None``: no bound).

    Returns
    -------
    DerivationGraph
        The closure's facts as nodes (the KB's fact ids first, then the facts only the rules
        derive) and the rule groundings as hyperedges; :func:`~.minimal.minimal_sets` and
        :func:`~.closure.closure` read it.

    Raises
    ------
    RuleBudgetError
        A rule would pass ``max_groundings``; the message names the rule.
    RuleTimeError
        Evaluation passed ``time_budget``; the message names the rule file.

    Examples
    --------
    >>> from deepunlearn.kg.kb import KnowledgeBase
    >>> kb = KnowledgeBase.build({"Ann": {"gender": "female"}, "Bob": {"gender": "male"}, "Cy": {"gender": "male"}},
    ...     [("Ann", "husband", "Bob"), ("Cy", "mother", "Ann")])
    >>> g = derivation_graph(kb, "family")
    >>> g.n_kb, g.n_nodes, g.n_edges
    (2, 6, 14)
    >>> [g.fact(i) for i in range(g.n_kb, g.n_nodes)]  # derived facts the KB does not hold
    [('Ann', 'child', 'Cy'), ('Bob', 'child', 'Cy'), ('Cy', 'father', 'Bob'), ('Bob', 'wife', 'Ann')]
    >>> derivable(g, 1, removed=[1])  # Cy's mother needs Cy's father, who needs Cy's mother
    False
    """
    rs = load_rules(rules)
    return DerivationGraph.from_grounded(kb, rs, forward_chain(kb, rs, known, progress=progress,
                                                               max_groundings=max_groundings,
                                                               time_budget=time_budget))


# ---------------------------------------------------------------------------------------- cones
@dataclass(eq=False)
class Cone:
    """A target's backward cone with local ids (the target is local id 0), as Python lists:
    the hot loops of DUS, pruning and derivability run over it.

    ``heads[e]``/``bodies[e]``: hyperedge e (bodies deduplicated; groundings that need their own
    head and repeated groundings are dropped: they never change what is derivable).
    ``by_head[f]``: edges deriving f. ``occ[f]``: edges whose body holds f. ``base[f]``: f in K.
    """

    graph: DerivationGraph
    target: int
    nodes: np.ndarray  # local -> global id
    base: list[bool]
    heads: list[int]
    bodies: list[tuple[int, ...]]
    by_head: list[list[int]]
    occ: list[list[int]]
    edge_ids: list[int] = field(default_factory=list)  # local edge -> one global hyperedge id

    @classmethod
    def build(cls, g: DerivationGraph, target: int) -> "Cone":
        if not 0 <= target < g.n_nodes:
            raise RulesError(f"fact id {target} out of range (graph has {g.n_nodes} facts)")
        ptr, order = g._by_head
        seen = np.zeros(g.n_nodes, dtype=bool)
        seen[target] = True
        frontier = np.array([target], dtype=np.int64)
        edge_parts = []
        while frontier.size:
            cnt = ptr[frontier + 1] - ptr[frontier]
            total = int(cnt.sum())
            if total == 0:
                break
            starts = np.repeat(ptr[frontier] - (np.cumsum(cnt) - cnt), cnt)
            edges = order[starts + np.arange(total)]
            edge_parts.append(edges)
            bp = g.body_ptr
            bcnt = bp[edges + 1] - bp[edges]
            bstart = np.repeat(bp[edges] - (np.cumsum(bcnt) - bcnt), bcnt)
            facts = np.unique(g.body[bstart + np.arange(int(bcnt.sum()))])
            frontier = facts[~seen[facts]]
            seen[frontier] = True
        nodes = np.flatnonzero(seen)
        # target first, then the rest in id order
        nodes = np.concatenate([[target], nodes[nodes != target]]).astype(np.int64)
        local = {int(f): i for i, f in enumerate(nodes)}
        base = [bool(g.base[f]) for f in nodes]
        heads: list[int] = []
        bodies: list[tuple[int, ...]] = []
        edge_ids: list[int] = []
        seen_edges: set[tuple[int, tuple[int, ...]]] = set()
        all_edges = np.concatenate(edge_parts) if edge_parts else np.zeros(0, dtype=np.int64)
        for e in np.sort(all_edges).tolist():
            h = local[int(g.edge_head[e])]
            b = tuple(sorted({local[x] for x in g.body[g.body_ptr[e]:g.body_ptr[e + 1]].tolist()}))
            if h in b or (h, b) in seen_edges:
                continue
            seen_edges.add((h, b))
            heads.append(h)
            bodies.append(b)
            edge_ids.append(e)
        m = len(nodes)
        by_head: list[list[int]] = [[] for _ in range(m)]
        occ: list[list[int]] = [[] for _ in range(m)]
        for e, (h, b) in enumerate(zip(heads, bodies)):
            by_head[h].append(e)
            for x in b:
                occ[x].append(e)
        return cls(g, target, nodes, base, heads, bodies, by_head, occ, edge_ids)

    def __len__(self) -> int:
        return len(self.nodes)

    @cached_property
    def body_masks(self) -> list[int]:
        """Each hyperedge's body as a bitmask of local ids (a Python int)."""
        return [sum(1 << x for x in b) for b in self.bodies]

    def local(self, global_ids: Iterable[int]) -> list[int]:
        """Local ids of those global ids that lie in the cone."""
        pos = {int(f): i for i, f in enumerate(self.nodes)}
        return [pos[int(f)] for f in global_ids if int(f) in pos]

    @cached_property
    def _start(self) -> tuple[bytes, list[int], list[int]]:
        """Propagation state with all of K true: base facts as bytes, each edge's count of
        non-base body facts, and the edges whose bodies are all base facts."""
        base = bytes(self.base)
        missing0 = [sum(1 for x in b if not base[x]) for b in self.bodies]
        return base, missing0, [e for e, m in enumerate(missing0) if m == 0]

    def fixpoint(self, removed: Iterable[int], stop_at_target: bool = True) -> tuple[bytearray, list[int]]:
        """Horn propagation from ``K \\ removed`` (local ids) over the cone: which facts are
        derived, and each hyperedge's count of body facts not (yet) derived.

        Starts from "all of K true" and only walks the removed facts and derived facts, so the
        cost is the size of the derived part of the cone, not of the whole cone.
        """
        base, missing0, ready0 = self._start
        true = bytearray(base)
        missing = list(missing0)
        occ, heads = self.occ, self.heads
        for f in set(removed):
            if true[f]:
                true[f] = 0
                for e in occ[f]:
                    missing[e] += 1
        stack = []
        for e in ready0:
            if missing[e] == 0:
                h = heads[e]
                if not true[h]:
                    true[h] = 1
                    if h == 0 and stop_at_target:
                        return true, missing
                    stack.append(h)
        while stack:
            f = stack.pop()
            for e in occ[f]:
                missing[e] -= 1
                if missing[e] == 0:
                    h = heads[e]
                    if not true[h]:
                        true[h] = 1
                        if h == 0 and stop_at_target:
                            return true, missing
                        stack.append(h)
        return true, missing


def check_removed(g: DerivationGraph, removed: Iterable[int]) -> list[int]:
    out = []
    for f in removed:
        f = int(f)
        if not g.in_k(f):
            raise RulesError(f"fact {f} is not in K: a deep-unlearning set holds facts of K only")
        out.append(f)
    return out


def derivable(graph: DerivationGraph, target: int, removed: Iterable[int] = ()) -> bool:
    """Is ``target`` in ``Ω(K \\ removed, R)``? Linear-time propagation over the target's cone.

    >>> from deepunlearn.kg.kb import KnowledgeBase
    >>> kb = KnowledgeBase.build({"A": {"gender": "female"}, "B": {"gender": "male"}},
    ...                          [("A", "husband", "B"), ("B", "wife", "A")])
    >>> g = derivation_graph(kb, "family")
    >>> derivable(g, 0, removed=[0]), derivable(g, 0, removed=[0, 1])
    (True, False)
    """
    target = int(target)
    if not 0 <= target < graph.n_nodes or not graph.in_closure[target]:
        return False
    removed = check_removed(graph, removed)
    cone = graph.cone(target)
    true, _ = cone.fixpoint(cone.local(removed))
    return bool(true[0])


def is_deep_unlearning_set(graph: DerivationGraph, target: int, removed: Iterable[int]) -> bool:
    """``removed ⊆ K`` and ``target ∉ Ω(K \\ removed, R)`` (docs/concepts.md)."""
    return not derivable(graph, target, removed)


def is_minimal(graph: DerivationGraph, target: int, removed: Iterable[int]) -> bool:
    """A deep-unlearning set none of whose facts can be put back (so no proper subset is one:
    derivability is monotone, so checking the subsets one fact smaller suffices)."""
    removed = set(int(f) for f in removed)
    if not is_deep_unlearning_set(graph, target, removed):
        return False
    return all(derivable(graph, target, removed - {f}) for f in removed)
