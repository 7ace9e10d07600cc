"""The native forward-chaining engine: semi-naive, indexed, vectorised with numpy.

Facts are interned to integers (terms, relations) and a fact is one int64 key
``(relation * T + subject) * T + object``. Each round joins, for every rule and every body
position ``i``, the facts new in the previous round (delta) at position ``i`` with the older
facts at positions ``< i`` and all known facts at positions ``> i``; so every rule grounding is
found exactly once, in the round its last body fact appeared. Each grounding is recorded as a
hyperedge ``head <- body facts``: that is the derivation graph (docs/concepts.md).

Node ids: ``0..n-1`` are the KB's own fact ids (a KB fact outside ``K`` that the rules derive
keeps its id), new facts get ``n, n+1, ...`` in the order they are found.
"""

from __future__ import annotations

import itertools
from operator import itemgetter
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from .budget import DEFAULT_MAX_GROUNDINGS, Guard, check_budget, row_weight
from .errors import RulesError
from .language import Const, RuleSet, Term, Var
from .tables import ABSENT, Facts, Index, split_by_relation


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
    peak_groundings: int = 0  # the most groundings held at once: the least budget that closes


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
    weight: int = 1  # groundings one row of this rule's join table counts as (see budget.py)


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
        out.append(_CRule(q, atoms, head, attrs, neq, plans, filters_after, row_weight(len(var_id) + len(atoms))))
    return out


def _vars(a: _CAtom) -> list[int]:
    return [x[1] for x in (a.s, a.o) if x[0] == "v"]


def _nbound(a: _CAtom, bound: set[int]) -> int:
    return sum(1 for x in (a.s, a.o) if x[0] == "c" or x[1] in bound)


# ---------------------------------------------------------------------------------------- engine
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
    # subject before object), by C-level passes: one dict lookup per name (most are entities,
    # already numbered), then the few names still missing in the order they first appear.
    # (zip(*facts) would build three tuples of n; itemgetter streams)
    r_ids = np.fromiter(map(rel_id.get, map(itemgetter(1), kb.facts), itertools.repeat(-1)), dtype=np.int64, count=n)
    used = list(itertools.compress(kb.facts, (r_ids >= 0).tolist()))
    m = len(used)
    codes = np.empty(2 * m, dtype=np.int64)  # subject, object, subject, object, ...
    for k, at in ((0, 0), (1, 2)):
        codes[k::2] = np.fromiter(map(term_id.get, map(itemgetter(at), used), itertools.repeat(-1)), dtype=np.int64,
                                  count=m)
    missing = np.flatnonzero(codes < 0).tolist()
    if missing:
        names = [used[i >> 1][2 * (i & 1)] for i in missing]
        for name in dict.fromkeys(names):
            term_id[name] = len(term_id)
        codes[missing] = np.fromiter(map(term_id.__getitem__, names), dtype=np.int64, count=len(names))
    sel = np.flatnonzero(r_ids >= 0)
    node_r[sel] = r_ids[sel]
    node_s[sel], node_o[sel] = codes[0::2], codes[1::2]
    return term_id, node_s, node_r, node_o


def check_head_constants(kb, rules: RuleSet) -> None:
    """Refuse a rule whose head names, where an entity goes, a constant that is no entity of
    ``kb``: every fact it derived would name an entity the KB lacks (and reach ``rules closure
    -o``). Entities go in a head's subject, and in its object when the KB holds the relation as
    one between entities; a value relation's object, or a relation the KB does not hold, may name
    a new value (``ohioan(X, "yes")``)."""
    def entity_slots(rule):
        rel = kb.relations.get(rule.head.relation)
        entity_object = rel is not None and getattr(rel, "kind", None) != "value"
        return [t for k, t in enumerate(rule.head.args) if isinstance(t, Const) and (k == 0 or entity_object)]

    consts = [(r, t.value) for r in rules.rules for t in entity_slots(r)]
    for rule, value in consts:
        if value not in kb.entities:
            where = f"{rules.source or rules.name}:{rule.line}: " if rule.line else f"{rules.name}: "
            raise RulesError(f"{where}the head {rule.head} names {value!r}, which is no entity of the KB "
                             f"{kb.name!r}: the facts it derives would name an entity the KB lacks",
                             file=rules.source)


def _known_mask(kb, known: Iterable[int] | None) -> np.ndarray:
    """Which KB facts are in ``K``: all, or those whose ids are in ``known`` (checked)."""
    n_kb = len(kb.facts)
    base = np.ones(n_kb, dtype=bool)
    if known is not None:
        ids = np.fromiter((int(i) for i in known), dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= n_kb):
            bad = ids[(ids < 0) | (ids >= n_kb)][0]
            raise RulesError(f"known fact index {bad} out of range (KB {kb.name!r} has {n_kb} facts)")
        base = np.zeros(n_kb, dtype=bool)
        base[ids] = True
    return base


def _round(crules: list, t: int, facts: Facts, n_rel: int, T: int, guard: Guard,
           blocks: list[tuple[int, np.ndarray, np.ndarray]]) -> int | None:
    """Round ``t``: join every rule on the facts born in round ``t - 1``, add the heads (their groundings
    to ``blocks``). Returns how many facts entered the closure, None when there was no delta."""
    delta = np.flatnonzero(facts.birth == t - 1)
    if delta.size == 0:
        return None
    index = Index(np.flatnonzero(facts.birth <= t - 1), facts.node_s, facts.node_r, facts.node_o, T)
    delta_by_rel = split_by_relation(delta, facts.node_r[delta], n_rel)
    round_blocks: list[tuple[int, np.ndarray, np.ndarray]] = []
    guard.round = t
    for cr in crules:
        guard.clock(cr.index)
        for i in range(len(cr.atoms)):
            if t == 1 and i > 0:
                continue  # positions before i need facts older than the first delta: none
            seed = delta_by_rel[cr.atoms[i].rel]
            if seed.size:
                res = _join(cr, i, seed, t, index, facts, guard)
                if res is not None:
                    round_blocks.append((cr.index, *res))
                    guard.record(len(res[0]))
    # the heads of this round: facts already in the closure, KB facts now derived, new facts
    entered = 0
    if round_blocks:
        head_keys = np.concatenate([b[1] for b in round_blocks])
        head_ids, entered = facts.derive(head_keys, t, lambda count, mask: guard.derive(
            count, mask, head_keys, [(q, len(hk)) for q, hk, _ in round_blocks]))
        at = 0
        for q, hk, bm in round_blocks:
            blocks.append((q, head_ids[at:at + len(hk)], bm))
            at += len(hk)
    return entered


def forward_chain(kb, rules: RuleSet, known: Iterable[int] | None = None, progress: bool = False,
                  max_groundings: int | None = DEFAULT_MAX_GROUNDINGS, time_budget: float | None = None) -> Grounded:
    """Compute ``Ω(K, R)`` and every rule grounding inside it.

    ``K`` is the whole KB, or only the facts whose ids are in ``known``. ``max_groundings``
    bounds the groundings held at once (:mod:`.budget`; ``None``: no bound): past it,
    :class:`~.budget.RuleBudgetError` is raised before the join that would pass it allocates.
    ``time_budget`` (seconds; ``None``: no bound) stops evaluation with
    :class:`~.budget.RuleTimeError` naming the rule file.
    """
    guard = Guard(rules, check_budget(max_groundings), time_budget)
    n_kb = len(kb.facts)
    base = _known_mask(kb, known)

    check_head_constants(kb, rules)
    relations = sorted(rules.relations)
    term_id, node_s, node_r, node_o = _intern(kb, rules, relations)
    T = max(len(term_id), 1)
    if (len(relations) + 1) * T * T >= 2**62:
        raise RulesError(f"KB {kb.name!r} has too many terms ({T}) for 64-bit fact keys")
    attr_masks = {name: np.zeros(T, dtype=bool) for name in rules.attributes}
    for e, attrs in kb.entities.items():
        for v in attrs.values():
            if v in attr_masks:
                attr_masks[v][term_id[e]] = True
    crules = _compile(rules, {r: i for i, r in enumerate(relations)}, term_id, attr_masks)

    in_rules = node_r >= 0
    birth = np.full(n_kb, ABSENT, dtype=np.int32)
    birth[in_rules & base] = 0
    facts = Facts(node_s, node_r, node_o, birth, T)

    blocks: list[tuple[int, np.ndarray, np.ndarray]] = []  # (rule, head ids, body matrix)
    t = 1
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(desc=f"closure {kb.name}", unit=" round", leave=False)
    while True:
        entered = _round(crules, t, facts, len(relations), T, guard, blocks)
        if entered is None:
            break
        if bar is not None:
            bar.update(1)
            bar.set_postfix(new=entered, facts=int((facts.birth != ABSENT).sum()))
        if entered == 0:
            break
        t += 1
    if bar is not None:
        bar.close()

    edge_head = np.concatenate([np.zeros(0, np.int64)] + [b[1] for b in blocks])
    edge_rule = np.concatenate([np.zeros(0, np.int32)] + [np.full(len(b[1]), b[0], dtype=np.int32) for b in blocks])
    sizes = np.concatenate([np.zeros(0, np.int64)] + [np.full(len(b[1]), b[2].shape[1], dtype=np.int64) for b in blocks])
    body = np.concatenate([np.zeros(0, np.int64)] + [b[2].ravel() for b in blocks])
    body_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    full_base = np.zeros(len(facts.birth), dtype=bool)
    full_base[:n_kb] = base
    birth_out = facts.birth.copy()
    birth_out[:n_kb][base & ~in_rules] = 0  # facts no rule uses pass through
    return Grounded(n_kb, list(term_id), relations, facts.node_s, facts.node_r, facts.node_o, birth_out,
                    full_base, edge_head, edge_rule, body_ptr, body, t, guard.peak)


def _value(term: tuple[str, int], cols: dict[int, np.ndarray], n: int) -> np.ndarray | None:
    if term[0] == "c":
        return np.full(n, term[1], dtype=np.int64)
    return cols.get(term[1])


def _join(cr: _CRule, i: int, seed: np.ndarray, t: int, index: Index, facts: Facts, guard: Guard
          ) -> tuple[np.ndarray, np.ndarray] | None:
    """All groundings of rule ``cr`` whose atom ``i`` is a delta fact. Returns the head keys and
    the body fact matrix (one column per relation atom, body order), or None if there are none.

    The bindings are a table: one column per bound variable (``cols``) and one per matched
    atom (``fids``, node ids); each atom in the plan's order filters or expands its rows. Before
    an expansion allocates, ``guard`` checks that its rows fit the grounding budget."""
    atoms = cr.atoms
    node_s, node_o, birth = facts.node_s, facts.node_o, facts.birth
    fids: dict[int, np.ndarray] = {i: seed}
    cols: dict[int, np.ndarray] = {}
    old = t - 1  # facts of positions before i must be older than the delta

    def select(rows: np.ndarray) -> None:
        """Keep (bool mask) or repeat (index array) the rows of the table."""
        for table in (cols, fids):
            for v in table:
                table[v] = table[v][rows]

    def filters(ids: list[int]) -> None:
        n = len(fids[i])
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
        select(mask)

    for step, j in enumerate(cr.plans[i]):
        a = atoms[j]
        n = len(fids[i])
        if step == 0:  # the delta facts themselves
            s_val, o_val = node_s[seed], node_o[seed]
            mask = np.ones(n, dtype=bool)
            if a.s[0] == "c":
                mask &= s_val == a.s[1]
            if a.o[0] == "c":
                mask &= o_val == a.o[1]
            if a.s[0] == "v" and a.o[0] == "v" and a.s[1] == a.o[1]:
                mask &= s_val == o_val
            if a.s[0] == "v":
                cols[a.s[1]] = s_val
            if a.o[0] == "v":
                cols[a.o[1]] = o_val
            select(mask)
        else:
            sb, ob = _value(a.s, cols, n), _value(a.o, cols, n)
            if sb is not None and ob is not None:  # both ends bound: a membership check
                ids = facts.lookup(facts.key(a.rel, sb, ob))
                b = birth[np.maximum(ids, 0)]
                fids[j] = ids
                select((ids >= 0) & ((b < old) if j < i else (b <= old)))
            else:
                if sb is not None:  # expand along the subject index
                    ranges = index.by_subject(a.rel, sb)
                    guard.room(cr, ranges[2])
                    rows, nodes = index.gather(index.s_nodes, ranges)
                elif ob is not None:  # ... or the object index
                    ranges = index.by_object(a.rel, ob)
                    guard.room(cr, ranges[2])
                    rows, nodes = index.gather(index.o_nodes, ranges)
                else:  # no end bound: every fact of the relation (a product)
                    allr = index.all_of(a.rel)
                    guard.room(cr, n * len(allr))
                    rows, nodes = np.repeat(np.arange(n), len(allr)), np.tile(allr, n)
                select(rows)
                fids[j] = nodes
                mask = np.ones(len(nodes), dtype=bool)
                if sb is None:
                    cols[a.s[1]] = node_s[nodes]
                if ob is None:
                    if a.o[1] in cols:  # r(X, X) with X unbound before
                        mask &= cols[a.o[1]] == node_o[nodes]
                    cols[a.o[1]] = node_o[nodes]
                if j < i:
                    mask &= birth[nodes] < old
                select(mask)
        filters(cr.filters_after[i][step])
        if len(fids[i]) == 0:
            return None
    n = len(fids[i])
    head_keys = facts.key(cr.head.rel, _value(cr.head.s, cols, n), _value(cr.head.o, cols, n))
    return head_keys, np.stack([fids[j] for j in range(len(atoms))], axis=1)
