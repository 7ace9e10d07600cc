"""The KB as the rule miner reads it: integer ids, per-relation sorted keys and CSR indexes, and
vectorised joins of rule bodies (:mod:`.mine`).

Entities and values get ids ``0..n-1`` (sorted names); a fact ``(s, r, o)`` is the key ``s * n + o``
of relation ``r``. A *table* maps variable ids to equal-length int64 columns (one row per
binding); every join step checks the rows it is about to build against the grounding budget
before it allocates them (:class:`JoinTooLarge`), and drops the variables no later atom needs,
keeping distinct rows only, so the tables stay as small as the rule allows.

Variables are ints: ``0`` is the head's subject X, ``1`` its object Y, ``2, 3, ...`` the body's
fresh variables. An atom is ``(relation, a, b)``: the fact ``(a, relation, b)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

#: An attribute value can be an atom (``male(X)``) when it is a lower-case name, as the parser reads.
_ATOM_NAME = re.compile(r"^[a-z][A-Za-z0-9_]*$")

#: Most attribute values that guards may test (the most frequent ones; 2 genders in the family domain).
MAX_VALUES = 20

Table = dict[int, np.ndarray]
BodyAtom = tuple[str, int, int]


class JoinTooLarge(Exception):
    """A join step would build more rows than the grounding budget allows (``rows``)."""

    def __init__(self, rows: int):
        super().__init__(rows)
        self.rows = rows


@dataclass
class _Rel:
    keys: np.ndarray      # sorted unique s * n + o
    out_ptr: np.ndarray   # CSR by subject: objects of subject e are out_obj[out_ptr[e]:out_ptr[e + 1]]
    out_obj: np.ndarray
    in_ptr: np.ndarray    # CSR by object: subjects of object e
    in_subj: np.ndarray
    has_subj: np.ndarray  # bool per entity: is the subject of some fact
    has_obj: np.ndarray

    @property
    def size(self) -> int:
        return len(self.keys)

    @property
    def functional(self) -> bool:
        """AMIE's choice of the PCA's side: the subject if functionality (distinct subjects per
        fact) is at least the inverse functionality (distinct objects per fact), else the object."""
        return int(self.has_subj.sum()) >= int(self.has_obj.sum())


def _csr(first: np.ndarray, second: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((second, first))
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(first, minlength=n), out=ptr[1:])
    return ptr, second[order]


class MineIndex:
    """Indexes of a KB for mining: relations (every relation of its facts) and attribute values
    (``male``, ``female``: unary predicates on entities, as rules use them)."""

    def __init__(self, kb):
        names = sorted({s for s, _, _ in kb.facts} | {o for _, _, o in kb.facts} | set(kb.entities))
        self.names = names
        self.n = n = max(len(names), 1)
        ids = {name: i for i, name in enumerate(names)}
        by_rel: dict[str, list[int]] = {}
        for s, r, o in kb.facts:
            by_rel.setdefault(r, []).append(ids[s] * n + ids[o])
        self.rel: dict[str, _Rel] = {}
        for r in sorted(by_rel):
            keys = uniq(np.asarray(by_rel[r], dtype=np.int64))
            s, o = keys // n, keys % n
            out_ptr, out_obj = _csr(s, o, n)
            in_ptr, in_subj = _csr(o, s, n)
            self.rel[r] = _Rel(keys, out_ptr, out_obj, in_ptr, in_subj, np.diff(out_ptr) > 0, np.diff(in_ptr) > 0)
        self.relations = tuple(self.rel)
        freq: dict[str, int] = {}
        for attrs in kb.entities.values():
            for v in attrs.values():
                if isinstance(v, str) and _ATOM_NAME.match(v) and v not in self.rel:
                    freq[v] = freq.get(v, 0) + 1
        values = sorted(sorted(freq, key=lambda v: (-freq[v], v))[:MAX_VALUES])
        self.attr: dict[str, np.ndarray] = {v: np.zeros(n, dtype=bool) for v in values}
        for e, attrs in kb.entities.items():
            for v in attrs.values():
                if v in self.attr:
                    self.attr[v][ids[e]] = True
        self.values = tuple(values)
        # all relations together, for counting a new atom's support for every relation at once
        rid = {r: i for i, r in enumerate(self.relations)}
        allk = [self.rel[r].keys for r in self.relations]
        keys = np.concatenate(allk) if allk else np.zeros(0, dtype=np.int64)
        rels = np.concatenate([np.full(len(k), rid[r], dtype=np.int64) for r, k in zip(self.relations, allk)]) \
            if allk else np.zeros(0, dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        self.pair_keys, self.pair_rel = keys[order], rels[order]
        # per entity, the distinct relations it is the subject (object) of
        s, o = keys // n, keys % n
        self.out_rel_ptr, self.out_rels = _csr_unique(s, rels, n)
        self.in_rel_ptr, self.in_rels = _csr_unique(o, rels, n)

    def facts_table(self, r: str) -> Table:
        keys = self.rel[r].keys
        return {0: keys // self.n, 1: keys % self.n}


def _csr_unique(first: np.ndarray, second: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    m = int(second.max()) + 1 if len(second) else 1
    pairs = uniq(first * m + second)
    return _csr(pairs // m, pairs % m, n)


def expand(ptr: np.ndarray, vals: np.ndarray, at: np.ndarray, budget: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``i`` repeated once per value of ``at[i]`` in a CSR index: (row numbers, values)."""
    starts = ptr[at]
    counts = ptr[at + 1] - starts
    total = int(counts.sum())
    if budget is not None and total > budget:
        raise JoinTooLarge(total)
    rows = np.repeat(np.arange(len(at), dtype=np.int64), counts)
    offsets = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    return rows, vals[np.repeat(starts, counts) + offsets]


def uniq(a: np.ndarray) -> np.ndarray:
    """The sorted distinct values of ``a`` (a sort, faster than ``np.unique``'s hashing here)."""
    if len(a) < 2:
        return a.copy()
    a = np.sort(a)
    keep = np.empty(len(a), dtype=bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


def member(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Whether each of ``keys`` is in ``sorted_keys``."""
    if len(sorted_keys) == 0:
        return np.zeros(len(keys), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return sorted_keys[at] == keys


def unique_rows(table: Table, keep: list[int], n: int) -> Table:
    """The distinct rows of ``table`` over the variables ``keep`` (sorted)."""
    keep = sorted(keep)
    if not keep:
        return {}
    cols = [table[v] for v in keep]
    if len(cols) == 1:
        return {keep[0]: uniq(cols[0])}
    if n ** len(cols) < 2 ** 62:
        key = cols[0].copy()
        for c in cols[1:]:
            key = key * n + c
        key = uniq(key)
        out = {}
        for v in reversed(keep):
            out[v] = key % n
            key = key // n
        return out
    arr = np.unique(np.stack(cols, axis=1), axis=0)
    return {v: arr[:, i] for i, v in enumerate(keep)}


def join(ix: MineIndex, table: Table, atom: BodyAtom, budget: int | None) -> Table:
    """``table`` joined with the facts of ``atom`` (at least one of its variables bound)."""
    r, a, b = atom
    rel = ix.rel[r]
    if a in table and b in table:
        mask = member(rel.keys, table[a] * ix.n + table[b])
        return {v: c[mask] for v, c in table.items()}
    if a in table:
        rows, new = expand(rel.out_ptr, rel.out_obj, table[a], budget)
        out = {v: c[rows] for v, c in table.items()}
        out[b] = new
        return out
    rows, new = expand(rel.in_ptr, rel.in_subj, table[b], budget)
    out = {v: c[rows] for v, c in table.items()}
    out[a] = new
    return out


def bindings(ix: MineIndex, atoms: tuple[BodyAtom, ...], table: Table | None, keep: set[int],
             budget: int | None) -> Table:
    """The distinct bindings of ``keep`` under all ``atoms``, starting from ``table`` (bindings of
    some variables, e.g. the head's facts) or, if None, from the smallest atom's facts. Atoms
    are joined greedily: first those whose variables are all bound (filters), then one sharing
    a bound variable; each step keeps only the variables later atoms or ``keep`` need."""
    rest = list(atoms)
    if table is None:
        first = min(rest, key=lambda t: (ix.rel[t[0]].size, t))
        rest.remove(first)
        r, a, b = first
        facts = ix.facts_table(r)
        table = {a: facts[0], b: facts[1]}
    while rest:
        bound = [t for t in rest if t[1] in table and t[2] in table]
        step = bound[0] if bound else next((t for t in rest if t[1] in table or t[2] in table), None)
        if step is None:
            raise ValueError("rule body is not connected")
        rest.remove(step)
        table = join(ix, table, step, budget)
        need = set(keep) | {v for t in rest for v in t[1:]}
        if set(table) - need:
            table = unique_rows(table, [v for v in table if v in need], ix.n)
    if set(table) <= set(keep):  # joins keep rows distinct; only dropping a variable can repeat them
        return table
    return unique_rows(table, [v for v in table if v in keep], ix.n)
