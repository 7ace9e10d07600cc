"""The rules engine's previous fact tables, kept as the reference the faster ones are measured
and tested against (not part of the package; used by ``benchmarks/large_kb.py --compare`` and
``tests/rules/test_rules_tables.py``).

:func:`reference_engine` swaps them into :mod:`deepunlearn.rules.engine` (and the previous
hyperedge grouping into :mod:`deepunlearn.rules.graph`, the previous term interning into the engine) for the duration of a ``with`` block:
stable ``argsort`` of every index each round, ``np.searchsorted`` with queries in join order,
``np.unique`` for duplicates, a full re-sort of the key table when facts are added, and two
dict passes over every name when interning.
"""

from __future__ import annotations

import itertools
from contextlib import contextmanager

import numpy as np

import deepunlearn.rules.engine as engine
import deepunlearn.rules.graph as graph
from deepunlearn.rules.language import Const, RuleSet
from deepunlearn.rules.tables import ABSENT


# ---------------------------------------------------------------------------------------- index
class Index:
    """Known facts sorted by (relation, subject) and by (relation, object)."""

    def __init__(self, nodes: np.ndarray, node_s, node_r, node_o, T: int):
        self.T = T
        ks = node_r[nodes] * T + node_s[nodes]
        order = np.argsort(ks, kind="stable")
        self.s_keys, self.s_nodes = ks[order], nodes[order]
        ko = node_r[nodes] * T + node_o[nodes]
        order = np.argsort(ko, kind="stable")
        self.o_keys, self.o_nodes = ko[order], nodes[order]

    @staticmethod
    def _ranges(keys: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Where each query key's facts start, how many there are, and the total: the size of
        the expansion, known before anything of that size is allocated."""
        lo = np.searchsorted(keys, q, "left")
        cnt = np.searchsorted(keys, q, "right") - lo
        return lo, cnt, int(cnt.sum())

    @staticmethod
    def gather(nodes: np.ndarray, ranges: tuple[np.ndarray, np.ndarray, int]) -> tuple[np.ndarray, np.ndarray]:
        """The expansion itself: the query row of each match and the matching node."""
        lo, cnt, total = ranges
        rows = np.repeat(np.arange(len(cnt)), cnt)
        if total == 0:
            return rows, nodes[:0]
        starts = np.repeat(lo - (np.cumsum(cnt) - cnt), cnt)
        return rows, nodes[starts + np.arange(total)]

    def by_subject(self, rel: int, s: np.ndarray):
        """Ranges of the facts ``rel(s, _)`` (expand them with ``gather(s_nodes, ...)``)."""
        return self._ranges(self.s_keys, rel * self.T + s)

    def by_object(self, rel: int, o: np.ndarray):
        """Ranges of the facts ``rel(_, o)`` (expand them with ``gather(o_nodes, ...)``)."""
        return self._ranges(self.o_keys, rel * self.T + o)

    def all_of(self, rel: int) -> np.ndarray:
        lo, hi = np.searchsorted(self.s_keys, [rel * self.T, (rel + 1) * self.T])
        return self.s_nodes[lo:hi]


# ---------------------------------------------------------------------------------------- facts
class Facts:
    """Every fact the engine knows, by node id, with a sorted key table for lookups."""

    def __init__(self, node_s: np.ndarray, node_r: np.ndarray, node_o: np.ndarray, birth: np.ndarray, T: int):
        self.node_s, self.node_r, self.node_o, self.birth, self.T = node_s, node_r, node_o, birth, T
        ids = np.flatnonzero(node_r >= 0)  # KB facts of relations no rule uses are not looked up
        keys = self.key(node_r[ids], node_s[ids], node_o[ids])
        order = np.argsort(keys, kind="stable")
        self.keys, self.ids = keys[order], ids[order]

    def key(self, rel, s, o):
        return (rel * self.T + s) * self.T + o

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """Node ids of the facts with these keys, -1 where the engine has none."""
        if len(self.keys) == 0:
            return np.full(len(keys), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        return np.where(self.keys[pos] == keys, self.ids[pos], -1)

    def derive(self, keys: np.ndarray, t: int, check=None) -> tuple[np.ndarray, int]:
        """Node ids of derived heads; facts not yet in the closure are born in round ``t``
        (KB facts outside K keep their id, new facts get the next ids). Returns the ids and how
        many facts entered the closure. ``check(count, entering)``, if given, sees that count
        and a function giving the bool mask of the heads that enter, before any table grows."""
        ids = self.lookup(keys)
        known = ids >= 0
        fresh = np.zeros(len(keys), dtype=bool)
        fresh[known] = self.birth[ids[known]] == ABSENT
        entering = np.unique(ids[fresh])
        new_keys, inv = np.unique(keys[~known], return_inverse=True)
        count = len(entering) + len(new_keys)
        if check is not None:
            check(count, lambda: fresh | ~known)
        self.birth[entering] = t
        if len(new_keys):
            new_ids = len(self.birth) + np.arange(len(new_keys), dtype=np.int64)
            ids[~known] = new_ids[inv]
            T = self.T
            self.node_s = np.concatenate([self.node_s, (new_keys // T) % T])
            self.node_r = np.concatenate([self.node_r, new_keys // (T * T)])
            self.node_o = np.concatenate([self.node_o, new_keys % T])
            self.birth = np.concatenate([self.birth, np.full(len(new_keys), t, dtype=np.int32)])
            all_keys, all_ids = np.concatenate([self.keys, new_keys]), np.concatenate([self.ids, new_ids])
            order = np.argsort(all_keys, kind="stable")
            self.keys, self.ids = all_keys[order], all_ids[order]
        return ids, count


def split_by_relation(delta: np.ndarray, d_rel: np.ndarray, n_rel: int) -> list[np.ndarray]:
    d_order = np.argsort(d_rel, kind="stable")
    bounds = np.searchsorted(d_rel[d_order], np.arange(n_rel + 1))
    return [delta[d_order][bounds[r]:bounds[r + 1]] for r in range(n_rel)]


def _csr(keys: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return ptr, order


def _intern(kb, rules: RuleSet, relations: list[str]) -> tuple[dict[str, int], np.ndarray, np.ndarray, np.ndarray]:
    """Term ids (entities, rule constants, fact objects) and the KB facts as id arrays
    (-1 for facts of relations no rule uses)."""
    rel_id = {r: i for i, r in enumerate(relations)}
    term_id: dict[str, int] = {}
    for e in kb.entities:
        term_id.setdefault(e, len(term_id))
    for rule in rules.rules:
        for t in [*(x for a in (rule.head, *rule.body) for x in a.args), *(x for c in rule.neq for x in (c.left, c.right))]:
            if isinstance(t, Const):
                term_id.setdefault(t.value, len(term_id))
    n = len(kb.facts)
    node_s, node_r, node_o = (np.full(n, -1, dtype=np.int64) for _ in range(3))
    if not n:
        return term_id, node_s, node_r, node_o
    # The ids a loop over the facts would give (new names numbered in order of first appearance,
    # subject before object), by C-level passes: a KB of millions of facts interned per fact
    # spent seconds in dict.setdefault.
    subjects, rels, objects = zip(*kb.facts)
    r_ids = np.fromiter(map(rel_id.get, rels, itertools.repeat(-1)), dtype=np.int64, count=n)
    used = (r_ids >= 0).tolist()
    subs, objs = list(itertools.compress(subjects, used)), list(itertools.compress(objects, used))
    for name in dict.fromkeys(itertools.chain.from_iterable(zip(subs, objs))):
        if name not in term_id:
            term_id[name] = len(term_id)
    sel = np.flatnonzero(r_ids >= 0)
    node_r[sel] = r_ids[sel]
    node_s[sel] = np.fromiter(map(term_id.__getitem__, subs), dtype=np.int64, count=len(subs))
    node_o[sel] = np.fromiter(map(term_id.__getitem__, objs), dtype=np.int64, count=len(objs))
    return term_id, node_s, node_r, node_o


@contextmanager
def reference_engine():
    """Run the package's engine on the reference tables inside the block."""
    saved = {(m, name): getattr(m, name) for m, name in
             [(engine, "Index"), (engine, "Facts"), (engine, "split_by_relation"), (engine, "_intern"),
              (graph, "csr")]}
    engine.Index, engine.Facts, engine.split_by_relation, graph.csr = Index, Facts, split_by_relation, _csr
    engine._intern = _intern
    try:
        yield
    finally:
        for (m, name), v in saved.items():
            setattr(m, name, v)
