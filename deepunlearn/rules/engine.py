"""The native forward-chaining engine: semi-naive, indexed, vectorised with numpy.

Facts are interned to integers (terms, relations) and a fact is one int64 key
``(relation * T + subject) * T + object``. Each round joins, for every rule and every body
position ``i``, the facts new in the previous round (delta) at position ``i`` with the older
facts at positions ``< i`` and all known facts at positions ``> i``; so every rule grounding is
found exactly once, in the round its last body fact appeared. Each grounding is recorded as a
hyperedge ``head <- body facts``: that is the derivation graph (DESIGN.md section 3).

Node ids: ``0..n-1`` are the KB's own fact ids (a KB fact outside ``K`` that the rules derive
keeps its id), new facts get ``n, n+1, ...`` in the order they are found.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from .errors import RulesError
from .language import Atom, Const, RuleSet, Term, Var

ABSENT = np.int32(np.iinfo(np.int32).max)  # birth round of a fact not (yet) in the closure


@dataclass
class Grounded:
    """Raw output of :func:`forward_chain` (wrapped by :class:`~.graph.DerivationGraph`)."""

    n_kb: int
    terms: list[str]
    relations: list[str]
    node_s: np.ndarray  # term id of each node's subject (-1: KB fact of a relation no rule uses)
    node_r: np.ndarray
    node_o: np.ndarray
    birth: np.ndarray  # int32: 0 for facts of K, round derived, ABSENT if not in the closure
    base: np.ndarray  # bool over nodes: the fact is in K
    edge_head: np.ndarray
    edge_rule: np.ndarray
    body_ptr: np.ndarray
    body: np.ndarray
    rounds: int


# ---------------------------------------------------------------------------------------- plans
@dataclass
class _CAtom:
    rel: int
    s: tuple[str, int]  # ("v", var index) or ("c", term id)
    o: tuple[str, int]


@dataclass
class _CRule:
    index: int
    atoms: list[_CAtom]
    head: _CAtom
    attrs: list[tuple[int, np.ndarray]]  # (var index, mask over terms)
    neq: list[tuple[tuple[str, int], tuple[str, int]]]
    plans: list[list[int]]  # per delta position: atom order
    filters_after: list[list[list[int]]]  # per delta position, per step: filter ids to apply


def _compile(rules: RuleSet, rel_id: dict[str, int], term_id: dict[str, int], attr_masks: dict[str, np.ndarray]) -> list[_CRule]:
    out = []
    for q, rule in enumerate(rules.rules):
        var_id: dict[str, int] = {}

        def term(t: Term) -> tuple[str, int]:
            if isinstance(t, Var):
                return ("v", var_id.setdefault(t.name, len(var_id)))
            return ("c", term_id[t.value])

        atoms = [_CAtom(rel_id[a.relation], term(a.args[0]), term(a.args[1])) for a in rule.relation_atoms]
        head = _CAtom(rel_id[rule.head.relation], term(rule.head.args[0]), term(rule.head.args[1]))
        attrs: list[tuple[int, np.ndarray]] = []
        never = False
        for a in rule.attribute_atoms:
            kind, v = term(a.args[0])
            mask = attr_masks[a.relation]
            if kind == "c":
                never |= not bool(mask[v])  # a constant attribute atom is decided now
            else:
                attrs.append((v, mask))
        neq = []
        for c in rule.neq:
            left, right = term(c.left), term(c.right)
            if left[0] == "c" and right[0] == "c":
                never |= left[1] == right[1]
            else:
                neq.append((left, right))
        if never:
            continue
        # filters: attribute atoms first (ids 0..), then neq (ids len(attrs)..)
        filter_vars = [{v} for v, _ in attrs] + [{x[1] for x in pair if x[0] == "v"} for pair in neq]
        plans, filters_after = [], []
        for i in range(len(atoms)):
            order, bound = [i], set(_vars(atoms[i]))
            rest = [j for j in range(len(atoms)) if j != i]
            while rest:
                # most bound positions first: checks, then expansions, then products
                j = max(rest, key=lambda j: (_nbound(atoms[j], bound), -j))
                order.append(j)
                rest.remove(j)
                bound |= set(_vars(atoms[j]))
            steps, done, bound = [], set(), set()
            for j in order:
                bound |= set(_vars(atoms[j]))
                now = [f for f, fv in enumerate(filter_vars) if f not in done and fv <= bound]
                done |= set(now)
                steps.append(now)
            plans.append(order)
            filters_after.append(steps)
        out.append(_CRule(q, atoms, head, attrs, neq, plans, filters_after))
    return out


def _vars(a: _CAtom) -> list[int]:
    return [x[1] for x in (a.s, a.o) if x[0] == "v"]


def _nbound(a: _CAtom, bound: set[int]) -> int:
    return sum(1 for x in (a.s, a.o) if x[0] == "c" or x[1] in bound)


# ---------------------------------------------------------------------------------------- index
class _Index:
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
    def _expand(keys: np.ndarray, nodes: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lo = np.searchsorted(keys, q, "left")
        hi = np.searchsorted(keys, q, "right")
        cnt = hi - lo
        total = int(cnt.sum())
        rows = np.repeat(np.arange(len(q)), cnt)
        if total == 0:
            return rows, nodes[:0]
        starts = np.repeat(lo - (np.cumsum(cnt) - cnt), cnt)
        return rows, nodes[starts + np.arange(total)]

    def by_subject(self, rel: int, s: np.ndarray):
        return self._expand(self.s_keys, self.s_nodes, rel * self.T + s)

    def by_object(self, rel: int, o: np.ndarray):
        return self._expand(self.o_keys, self.o_nodes, rel * self.T + o)

    def all_of(self, rel: int) -> np.ndarray:
        lo, hi = np.searchsorted(self.s_keys, [rel * self.T, (rel + 1) * self.T])
        return self.s_nodes[lo:hi]


# ---------------------------------------------------------------------------------------- engine
def forward_chain(kb, rules: RuleSet, known: Iterable[int] | None = None, progress: bool = False) -> Grounded:
    """Compute ``Ω(K, R)`` and every rule grounding inside it.

    ``K`` is the whole KB, or only the facts whose ids are in ``known``.
    """
    n_kb = len(kb.facts)
    base = np.ones(n_kb, dtype=bool)
    if known is not None:
        ids = np.fromiter((int(i) for i in known), dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= n_kb):
            bad = ids[(ids < 0) | (ids >= n_kb)][0]
            raise RulesError(f"known fact index {bad} out of range (KB {kb.name!r} has {n_kb} facts)")
        base = np.zeros(n_kb, dtype=bool)
        base[ids] = True

    relations = sorted(rules.relations)
    rel_id = {r: i for i, r in enumerate(relations)}
    term_id: dict[str, int] = {}
    for e in kb.entities:
        term_id.setdefault(e, len(term_id))
    for rule in rules.rules:
        for a in (rule.head, *rule.body):
            for t in a.args:
                if isinstance(t, Const):
                    term_id.setdefault(t.value, len(term_id))
        for c in rule.neq:
            for t in (c.left, c.right):
                if isinstance(t, Const):
                    term_id.setdefault(t.value, len(term_id))

    node_s = np.full(n_kb, -1, dtype=np.int64)
    node_r = np.full(n_kb, -1, dtype=np.int64)
    node_o = np.full(n_kb, -1, dtype=np.int64)
    in_rules = np.zeros(n_kb, dtype=bool)
    for i, (s, r, o) in enumerate(kb.facts):
        ri = rel_id.get(r)
        if ri is None:
            continue
        in_rules[i] = True
        node_s[i] = term_id.setdefault(s, len(term_id))
        node_r[i] = ri
        node_o[i] = term_id.setdefault(o, len(term_id))
    T = max(len(term_id), 1)
    if (len(relations) + 1) * T * T >= 2**62:
        raise RulesError(f"KB {kb.name!r} has too many terms ({T}) for 64-bit fact keys")
    terms = list(term_id)

    attr_masks: dict[str, np.ndarray] = {}
    for name in rules.attributes:
        attr_masks[name] = np.zeros(T, dtype=bool)
    if attr_masks:
        for e, attrs in kb.entities.items():
            for v in attrs.values():
                m = attr_masks.get(v)
                if m is not None:
                    m[term_id[e]] = True

    crules = _compile(rules, rel_id, term_id, attr_masks)

    birth = np.full(n_kb, ABSENT, dtype=np.int32)
    birth[in_rules & base] = 0
    kb_rule_ids = np.flatnonzero(in_rules)
    keys = (node_r[kb_rule_ids] * T + node_s[kb_rule_ids]) * T + node_o[kb_rule_ids]
    order = np.argsort(keys, kind="stable")
    lk_keys, lk_ids = keys[order], kb_rule_ids[order]

    blocks: list[tuple[int, np.ndarray, np.ndarray]] = []  # (rule, head ids, body matrix)
    t = 1
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(desc=f"closure {kb.name}", unit=" round", file=None, leave=False)
    while True:
        delta = np.flatnonzero(birth == t - 1)
        if delta.size == 0:
            break
        known_nodes = np.flatnonzero(birth <= t - 1)
        index = _Index(known_nodes, node_s, node_r, node_o, T)
        d_rel = node_r[delta]
        d_order = np.argsort(d_rel, kind="stable")
        d_sorted = delta[d_order]
        bounds = np.searchsorted(d_rel[d_order], np.arange(len(relations) + 1))
        delta_by_rel = [d_sorted[bounds[r]:bounds[r + 1]] for r in range(len(relations))]

        round_blocks: list[tuple[int, np.ndarray, np.ndarray]] = []
        for cr in crules:
            for i in range(len(cr.atoms)):
                if t == 1 and i > 0:
                    continue  # positions before i need facts older than the first delta: none
                seed = delta_by_rel[cr.atoms[i].rel]
                if seed.size == 0:
                    continue
                res = _join(cr, i, seed, t, index, birth, node_s, node_o, lk_keys, lk_ids, T)
                if res is not None:
                    round_blocks.append((cr.index, *res))
        # resolve the heads of this round: existing facts, KB facts now derived, or new facts
        new_count = 0
        if round_blocks:
            hkeys = np.concatenate([b[1] for b in round_blocks])
            pos = np.searchsorted(lk_keys, hkeys)
            pos_c = np.minimum(pos, max(len(lk_keys) - 1, 0))
            found = (pos < len(lk_keys)) & (lk_keys[pos_c] == hkeys) if len(lk_keys) else np.zeros(len(hkeys), bool)
            hid = np.where(found, lk_ids[pos_c] if len(lk_ids) else -1, -1)
            newly = hid[found]
            newly = newly[birth[newly] == ABSENT]
            birth[newly] = t  # KB facts outside K that the rules derive
            new_count += len(np.unique(newly))
            if not found.all():
                nk, inv = np.unique(hkeys[~found], return_inverse=True)
                first = len(birth)
                new_ids = first + np.arange(len(nk), dtype=np.int64)
                hid[~found] = new_ids[inv]
                node_o = np.concatenate([node_o, nk % T])
                node_s = np.concatenate([node_s, (nk // T) % T])
                node_r = np.concatenate([node_r, nk // (T * T)])
                birth = np.concatenate([birth, np.full(len(nk), t, dtype=np.int32)])
                all_keys = np.concatenate([lk_keys, nk])
                all_ids = np.concatenate([lk_ids, new_ids])
                order = np.argsort(all_keys, kind="stable")
                lk_keys, lk_ids = all_keys[order], all_ids[order]
                new_count += len(nk)
            at = 0
            for q, hk, bm in round_blocks:
                blocks.append((q, hid[at:at + len(hk)], bm))
                at += len(hk)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(new=new_count, facts=int((birth != ABSENT).sum()))
        if new_count == 0:
            break
        t += 1
    if bar is not None:
        bar.close()

    if blocks:
        edge_head = np.concatenate([b[1] for b in blocks]).astype(np.int64)
        edge_rule = np.concatenate([np.full(len(b[1]), b[0], dtype=np.int32) for b in blocks])
        sizes = np.concatenate([np.full(len(b[1]), b[2].shape[1], dtype=np.int64) for b in blocks])
        body = np.concatenate([b[2].ravel() for b in blocks]).astype(np.int64)
    else:
        edge_head = np.zeros(0, dtype=np.int64)
        edge_rule = np.zeros(0, dtype=np.int32)
        sizes = np.zeros(0, dtype=np.int64)
        body = np.zeros(0, dtype=np.int64)
    body_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    full_base = np.zeros(len(birth), dtype=bool)
    full_base[:n_kb] = base
    birth_out = birth.copy()
    birth_out[:n_kb][base & ~in_rules] = 0  # facts no rule uses pass through
    return Grounded(n_kb, terms, relations, node_s, node_r, node_o, birth_out, full_base,
                    edge_head, edge_rule, body_ptr, body, t)


def _value(term: tuple[str, int], cols: dict[int, np.ndarray], n: int) -> np.ndarray | None:
    if term[0] == "c":
        return np.full(n, term[1], dtype=np.int64)
    return cols.get(term[1])


def _join(cr: _CRule, i: int, seed: np.ndarray, t: int, index: _Index, birth, node_s, node_o,
          lk_keys, lk_ids, T) -> tuple[np.ndarray, np.ndarray] | None:
    """All groundings of rule ``cr`` whose atom ``i`` is a delta fact. Returns the head keys and
    the body fact matrix (one column per relation atom, body order), or None if there are none."""
    atoms = cr.atoms
    k = len(atoms)
    fids: list[np.ndarray | None] = [None] * k
    cols: dict[int, np.ndarray] = {}
    n = len(seed)
    old = t - 1  # facts of positions before i must be older than the delta

    def keep(mask: np.ndarray) -> None:
        nonlocal n
        for v in list(cols):
            cols[v] = cols[v][mask]
        for j in range(k):
            if fids[j] is not None:
                fids[j] = fids[j][mask]
        n = int(mask.sum()) if mask.dtype == bool else len(mask)

    def take(rows: np.ndarray) -> None:
        nonlocal n
        for v in list(cols):
            cols[v] = cols[v][rows]
        for j in range(k):
            if fids[j] is not None:
                fids[j] = fids[j][rows]
        n = len(rows)

    def apply_filters(ids: list[int]) -> None:
        if not ids or n == 0:
            return
        mask = np.ones(n, dtype=bool)
        na = len(cr.attrs)
        for f in ids:
            if f < na:
                v, m = cr.attrs[f]
                mask &= m[cols[v]]
            else:
                left, right = cr.neq[f - na]
                mask &= _value(left, cols, n) != _value(right, cols, n)
        keep(mask)

    order = cr.plans[i]
    steps = cr.filters_after[i]
    for step, j in enumerate(order):
        a = atoms[j]
        if step == 0:
            s_val, o_val = node_s[seed], node_o[seed]
            mask = np.ones(n, dtype=bool)
            if a.s[0] == "c":
                mask &= s_val == a.s[1]
            if a.o[0] == "c":
                mask &= o_val == a.o[1]
            if a.s[0] == "v" and a.o[0] == "v" and a.s[1] == a.o[1]:
                mask &= s_val == o_val
            fids[j] = seed
            if a.s[0] == "v":
                cols[a.s[1]] = s_val
            if a.o[0] == "v":
                cols[a.o[1]] = o_val
            keep(mask)
        else:
            sb, ob = _value(a.s, cols, n), _value(a.o, cols, n)
            if sb is not None and ob is not None:
                q = (a.rel * T + sb) * T + ob
                pos = np.searchsorted(lk_keys, q)
                pos_c = np.minimum(pos, len(lk_keys) - 1)
                hit = (pos < len(lk_keys)) & (lk_keys[pos_c] == q)
                ids = np.where(hit, lk_ids[pos_c], 0)
                b = birth[ids]
                ok = hit & ((b < old) if j < i else (b <= old))
                fids[j] = ids
                keep(ok)
            elif sb is not None or ob is not None:
                if sb is not None:
                    rows, nodes = index.by_subject(a.rel, sb)
                else:
                    rows, nodes = index.by_object(a.rel, ob)
                take(rows)
                fids[j] = nodes
                if sb is not None and a.o[0] == "v":
                    cols[a.o[1]] = node_o[nodes]
                if ob is not None and a.s[0] == "v":
                    cols[a.s[1]] = node_s[nodes]
                if j < i:
                    keep(birth[nodes] < old)
            else:
                allr = index.all_of(a.rel)
                rows = np.repeat(np.arange(n), len(allr))
                nodes = np.tile(allr, n)
                take(rows)
                fids[j] = nodes
                cols[a.s[1]] = node_s[nodes]
                cols[a.o[1]] = node_o[nodes]
                mask = np.ones(len(nodes), dtype=bool)
                if a.s[1] == a.o[1]:
                    mask &= node_s[nodes] == node_o[nodes]
                if j < i:
                    mask &= birth[nodes] < old
                keep(mask)
        apply_filters(steps[step])
        if n == 0:
            return None
    hs, ho = _value(cr.head.s, cols, n), _value(cr.head.o, cols, n)
    head_keys = (cr.head.rel * T + hs) * T + ho
    return head_keys, np.stack([f for f in fids], axis=1)
