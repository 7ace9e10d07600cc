"""The native engine's fact tables (see :mod:`.engine`): the known facts indexed by
(relation, subject) and (relation, object) for joins, and every fact by its integer key.

A fact is one int64 key ``(relation * T + subject) * T + object`` over interned term ids.

Sorting is the engine's main cost on large KBs, so the tables sort single int64 arrays
(``np.sort``, much faster than a stable ``argsort``): an index entry packs its join key and
its node id into one int64, which orders ties by node id exactly as a stable sort of the keys
would. Queries are sorted before ``np.searchsorted`` (a sequential pass over the table instead
of one cache miss per step of each binary search), and duplicates are removed by sorting, not
by ``np.unique`` (which hashes, and is slow on millions of distinct values).
"""

from __future__ import annotations

import numpy as np

ABSENT = np.int32(np.iinfo(np.int32).max)  # birth round of a fact not (yet) in the closure
_I64 = np.iinfo(np.int64).max
_SORT_QUERIES = 256  # fewer queries than this are searched as they come


# ---------------------------------------------------------------------------------------- helpers
def search(keys: np.ndarray, q: np.ndarray, side: str = "left") -> np.ndarray:
    """``np.searchsorted(keys, q, side)`` for queries in any order: the queries are sorted first."""
    if len(q) < _SORT_QUERIES:
        return np.searchsorted(keys, q, side)
    order = np.argsort(q)
    out = np.empty(len(q), dtype=np.int64)
    out[order] = np.searchsorted(keys, q[order], side)
    return out


def unique(x: np.ndarray) -> np.ndarray:
    """The sorted distinct values of ``x`` (``np.unique(x)``)."""
    x = np.sort(x)
    if len(x) < 2:
        return x
    keep = np.empty(len(x), dtype=bool)
    keep[0] = True
    np.not_equal(x[1:], x[:-1], out=keep[1:])
    return x[keep]


def unique_inverse(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(x, return_inverse=True)`` for a 1-d array."""
    order = np.argsort(x)
    xs = x[order]
    first = np.empty(len(x), dtype=bool)
    first[:1] = True
    np.not_equal(xs[1:], xs[:-1], out=first[1:])
    inv = np.empty(len(x), dtype=np.int64)
    inv[order] = np.cumsum(first) - 1
    return xs[first], inv


def sort_by_key(keys: np.ndarray, nodes: np.ndarray, n_keys: int, n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """``keys`` and ``nodes`` ordered by (key, node): with ``nodes`` ascending, the order of
    ``np.argsort(keys, kind="stable")``. ``0 <= keys < n_keys``, ``0 <= nodes < n_nodes``."""
    n_nodes = max(int(n_nodes), 1)
    if n_keys > _I64 // n_nodes:  # the pair does not fit one int64: sort the keys, ties by node
        order = np.lexsort((nodes, keys))
        return keys[order], nodes[order]
    packed = keys * n_nodes
    packed += nodes
    packed.sort()
    k = packed // n_nodes
    np.remainder(packed, n_nodes, out=packed)
    return k, packed


def stable_order(keys: np.ndarray, n_keys: int) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` for ``0 <= keys < n_keys``, by one sort of packed
    (key, position) pairs."""
    n = max(len(keys), 1)
    if n_keys > _I64 // n:
        return np.argsort(keys, kind="stable")
    packed = keys.astype(np.int64) * n
    packed += np.arange(len(keys), dtype=np.int64)
    packed.sort()
    np.remainder(packed, n, out=packed)
    return packed


def split_by_relation(delta: np.ndarray, d_rel: np.ndarray, n_rel: int) -> list[np.ndarray]:
    """The facts ``delta`` (with relations ``d_rel``) grouped by relation, each group in
    ``delta``'s order."""
    return [delta[d_rel == r] for r in range(n_rel)]


# ---------------------------------------------------------------------------------------- index
class Index:
    """Known facts sorted by (relation, subject) and by (relation, object), ties by node id."""

    def __init__(self, nodes: np.ndarray, node_s, node_r, node_o, T: int):
        self.T = T
        n_keys, n_nodes = (int(node_r.max(initial=0)) + 1) * T, len(node_s)
        r = node_r[nodes] * T
        self.s_keys, self.s_nodes = sort_by_key(r + node_s[nodes], nodes, n_keys, n_nodes)
        self.o_keys, self.o_nodes = sort_by_key(r + node_o[nodes], nodes, n_keys, n_nodes)

    @staticmethod
    def _ranges(keys: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Where each query key's facts start, how many there are, and the total: the size of
        the expansion, known before anything of that size is allocated."""
        if len(q) < _SORT_QUERIES:
            lo = np.searchsorted(keys, q, "left")
            cnt = np.searchsorted(keys, q, "right") - lo
        else:
            order = np.argsort(q)
            qs = q[order]
            lo_s = np.searchsorted(keys, qs, "left")
            lo, cnt = np.empty(len(q), dtype=np.int64), np.empty(len(q), dtype=np.int64)
            lo[order] = lo_s
            cnt[order] = np.searchsorted(keys, qs, "right") - lo_s
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
        order = np.argsort(keys)
        keys, ids = keys[order], ids[order]
        if len(keys) > 1 and bool((keys[1:] == keys[:-1]).any()):  # a KB fact twice: the first id wins
            order = np.lexsort((ids, keys))
            keys, ids = keys[order], ids[order]
        self.keys, self.ids = keys, ids

    def key(self, rel, s, o):
        return (rel * self.T + s) * self.T + o

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """Node ids of the facts with these keys, -1 where the engine has none."""
        if len(self.keys) == 0:
            return np.full(len(keys), -1, dtype=np.int64)
        pos = np.minimum(search(self.keys, keys), len(self.keys) - 1)
        return np.where(self.keys[pos] == keys, self.ids[pos], -1)

    def derive(self, keys: np.ndarray, t: int, check=None) -> tuple[np.ndarray, int]:
        """Node ids of derived heads; facts not yet in the closure are born in round ``t``
        (KB facts outside K keep their id, new facts get the next ids in key order). Returns the
        ids and how many facts entered the closure. ``check(count, entering)``, if given, sees
        that count and a function giving the bool mask of the heads that enter, before any table
        grows."""
        ids = self.lookup(keys)
        known = ids >= 0
        fresh = np.zeros(len(keys), dtype=bool)
        fresh[known] = self.birth[ids[known]] == ABSENT
        entering = unique(ids[fresh])
        unknown = ~known
        new_keys, inv = unique_inverse(keys[unknown])
        count = len(entering) + len(new_keys)
        if check is not None:
            check(count, lambda: fresh | unknown)
        self.birth[entering] = t
        if len(new_keys):
            new_ids = len(self.birth) + np.arange(len(new_keys), dtype=np.int64)
            ids[unknown] = new_ids[inv]
            T = self.T
            self.node_s = np.concatenate([self.node_s, (new_keys // T) % T])
            self.node_r = np.concatenate([self.node_r, new_keys // (T * T)])
            self.node_o = np.concatenate([self.node_o, new_keys % T])
            self.birth = np.concatenate([self.birth, np.full(len(new_keys), t, dtype=np.int32)])
            # new keys are sorted and none is in the table: merge them in place of a re-sort
            at = np.searchsorted(self.keys, new_keys)
            self.keys, self.ids = np.insert(self.keys, at, new_keys), np.insert(self.ids, at, new_ids)
        return ids, count
