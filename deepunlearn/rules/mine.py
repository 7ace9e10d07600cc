"""Mine closed, connected Horn rules from a KB with AMIE's measures (Galárraga et al. 2013, 2015;
Lajus et al. 2020): ``deepunlearn rules mine``.

The search is AMIE's: for each head relation ``r(X, Y)`` rules grow one body atom at a time, a
*dangling* atom (a relation between a variable of the rule and a fresh one) or a *closing* atom
(between two of its variables), up to ``max_body`` atoms; a rule is refined only while its
support (:mod:`.mine_measures`) reaches the threshold, ``max(min_support, min_head_coverage *
|r|)`` (support only falls as atoms are added, so nothing above the threshold is lost), only
while the atoms left can still close it, and not once its PCA confidence is 1 (AMIE's perfect
rules). Each new atom's support is counted for every relation at once with one vectorised join.
A rule is *closed* when each variable occurs at least twice; only closed rules whose body is
connected are kept.

Beyond AMIE's language, a closed rule may be specialised by up to ``max_guards`` *guards*: an
attribute atom on a head variable (``male(X)``, from the KB's entity attributes) or ``X != Y``,
the conditions hand-written rule sets state (``family.dl``). ``max_guards=0`` mines AMIE's plain
language. Guards do not count as body atoms.

A rule is output when it is closed, passes the confidence thresholds and (AMIE's skyline, on by
default) its PCA confidence is higher than that of every more general closed rule (one body atom
or one guard fewer) that was measured. Output is sorted by PCA confidence, then standard
confidence, support and the rule's text: the same KB and options give the same file.

Bounds: a join step that would build more than ``grounding_budget`` rows skips its candidate
(counted and named in :attr:`MineResult.skipped`, never a memory blow-up); passing
``time_budget`` seconds stops mining with :class:`MineTimeError`, one line.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from itertools import combinations

import numpy as np

from .budget import DEFAULT_MAX_GROUNDINGS, check_budget, check_time_budget
from .errors import RulesError
from .language import Rule, RuleSet
from .mine_index import JoinTooLarge, MineIndex, bindings, expand, uniq
from .mine_measures import BodyCounts, Guards, format_measures
from .mine_shapes import body_vars, canonical, connected, open_count, to_rule

#: Most body atoms ``max_body`` may ask for (a closed body of four atoms has up to three fresh variables).
MAX_BODY_ATOMS = 4
#: Default seconds of ``rules mine --time-budget``.
DEFAULT_MINE_SECONDS = 600.0
TIME_FLAG = "--time-budget"


class MineTimeError(RulesError):
    """Mining took longer than the time budget."""

    def __init__(self, kb: str, seconds: float, where: str):
        super().__init__(f"{kb}: mining rules passed the time budget of {seconds:g} s ({where}); raise it with "
                         f"{TIME_FLAG} S, or lower --max-body, or raise --min-head-coverage", field=TIME_FLAG)


@dataclass(frozen=True)
class MineOptions:
    """The thresholds and bounds of one mining run (AMIE's defaults where AMIE has one)."""

    max_body: int = 2
    min_head_coverage: float = 0.01
    min_pca_confidence: float = 0.1
    min_std_confidence: float = 0.0
    min_support: int = 1
    max_guards: int = 2
    skyline: bool = True
    grounding_budget: int | None = DEFAULT_MAX_GROUNDINGS
    #: mine only rules with these head relations (AMIE's -htr); None: every relation
    head_relations: tuple[str, ...] | None = None
    #: leave these relations out of heads and bodies (AMIE's -bexr, for heads too)
    exclude_relations: tuple[str, ...] = ()
    time_budget: float | None = DEFAULT_MINE_SECONDS

    def check(self) -> None:
        def bad(name: str, value, want: str):
            raise RulesError(f"{name} must be {want}, got {value!r}", field="--" + name.replace("_", "-"))
        for name in ("max_body", "min_support", "max_guards"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "max_guards" else 1):
                bad(name, v, "an integer >= " + ("0" if name == "max_guards" else "1"))
        if self.max_body > MAX_BODY_ATOMS:
            bad("max_body", self.max_body, f"at most {MAX_BODY_ATOMS}")
        for name in ("min_head_coverage", "min_pca_confidence", "min_std_confidence"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                bad(name, v, "a number from 0 to 1")
        check_budget(self.grounding_budget)
        if self.time_budget is not None:
            check_time_budget(self.time_budget)


@dataclass
class MineResult:
    """The mined rules (each with :attr:`~.language.Rule.measures`), what was measured and skipped."""

    rules: RuleSet
    options: MineOptions
    candidates: int = 0
    skipped: list[str] = field(default_factory=list)
    seconds: float = 0.0
    kb_name: str = "kb"

    def to_datalog(self) -> str:
        """The rule file: a header naming every threshold, then each rule and its measures line."""
        o = self.options
        head = [f"% rule set: {self.rules.name}",
                f"% Horn rules mined from {self.kb_name} by deepunlearn rules mine, with AMIE's measures",
                "% (support, head coverage, standard and PCA confidence; sorted by PCA confidence).",
                f"% max_body={o.max_body} max_guards={o.max_guards} min_head_coverage={o.min_head_coverage:g} "
                f"min_support={o.min_support} min_pca_confidence={o.min_pca_confidence:g} "
                f"min_std_confidence={o.min_std_confidence:g} skyline={'on' if o.skyline else 'off'}"
                + (f" head_relations={','.join(o.head_relations)}" if o.head_relations else "")
                + (f" exclude_relations={','.join(o.exclude_relations)}" if o.exclude_relations else ""),
                f"% {len(self.rules)} rules of {self.candidates} closed candidates measured"
                + (f"; {len(self.skipped)} candidates skipped over the grounding budget" if self.skipped else "")]
        lines = []
        for r in self.rules:
            lines += [r.to_datalog(), format_measures(r.measures or {})]
        return "\n".join(head + [""] + lines) + "\n"

    def to_dict(self) -> dict:
        return {"rules": len(self.rules), "candidates": self.candidates, "skipped": len(self.skipped),
                "skipped_examples": self.skipped[:5], "seconds": round(self.seconds, 4), "options": asdict(self.options)}


# ------------------------------------------------------------------------------------ the search
class _Miner:
    def __init__(self, kb, o: MineOptions):
        self.o, self.kb_name = o, getattr(kb, "name", "kb")
        if o.exclude_relations:
            from types import SimpleNamespace

            drop = set(o.exclude_relations)
            kb = SimpleNamespace(facts=[f for f in kb.facts if f[1] not in drop], entities=kb.entities,
                                 name=self.kb_name)
        self.ix = MineIndex(kb)
        self.deadline = None if o.time_budget is None else time.perf_counter() + o.time_budget
        self.out: list[Rule] = []
        self.candidates = 0
        self.skipped: list[str] = []
        self.pairs_cache: dict[tuple, np.ndarray | None] = {}
        self.cached = 0

    def clock(self, head: str) -> None:
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise MineTimeError(self.kb_name, self.o.time_budget, f"at head relation {head!r}")

    def skip(self, head: str, atoms) -> None:
        self.skipped.append(to_rule(head, atoms, (), False, None).to_datalog())

    def head(self, r: str) -> None:
        ix, o = self.ix, self.o
        size = ix.rel[r].size
        thr = max(o.min_support, math.ceil(o.min_head_coverage * size - 1e-9))
        if size < thr:
            return
        start = ix.facts_table(r)
        measured: dict[tuple, dict] = {}
        level: dict[tuple, None] = {(): None}
        for depth in range(1, o.max_body + 1):
            nxt: dict[tuple, None] = {}
            for atoms in level:
                self.clock(r)
                try:
                    table = start if not atoms else bindings(ix, atoms, start, body_vars(atoms), o.grounding_budget)
                except JoinTooLarge:
                    self.skip(r, atoms)
                    continue
                for child in self.children(r, atoms, table, thr, o.max_body - depth):
                    nxt.setdefault(child, None)
            for atoms in nxt:
                if open_count(atoms) == 0 and connected(atoms):
                    self.clock(r)
                    self.closed(r, atoms, measured, thr)
            level = {a: None for a in nxt if not (a in measured and measured[a]["pca_confidence"] >= 1.0)}
            if not level:
                break

    def children(self, r: str, atoms, table, thr: int, left: int) -> list[tuple]:
        """The refinements of ``atoms`` by one atom whose support reaches ``thr``, canonical."""
        ix = self.ix
        have = body_vars(atoms)
        opened = open_count(atoms)
        fresh = max(have) + 1
        out = []
        counts = {0: 1, 1: 1}
        for _, a, b in atoms:
            counts[a] = counts.get(a, 0) + 1
            counts[b] = counts.get(b, 0) + 1
        is_open = {v: counts[v] == 1 for v in have}
        ops = []
        for a in sorted(have):
            for b in sorted(have):
                if a != b and opened - is_open[a] - is_open[b] <= 2 * left:
                    ops.append((a, b))
            if opened - is_open[a] + 1 <= 2 * left:
                ops += [(a, fresh), (fresh, a)]
        n = ix.n
        for a, b in ops:
            try:
                if a in table and b in table:
                    keys = table[a] * n + table[b]
                    lo = np.searchsorted(ix.pair_keys, keys, "left")
                    hi = np.searchsorted(ix.pair_keys, keys, "right")
                    cnt = hi - lo
                    total = int(cnt.sum())
                    if self.o.grounding_budget is not None and total > self.o.grounding_budget:
                        raise JoinTooLarge(total)
                    rows = np.repeat(np.arange(len(keys)), cnt)
                    pos = np.repeat(lo, cnt) + (np.arange(total) - np.repeat(np.cumsum(cnt) - cnt, cnt))
                    rels = ix.pair_rel[pos]
                else:
                    ptr, vals, at = ((ix.out_rel_ptr, ix.out_rels, table[a]) if a in table
                                     else (ix.in_rel_ptr, ix.in_rels, table[b]))
                    rows, rels = expand(ptr, vals, at, self.o.grounding_budget)
            except JoinTooLarge:
                self.skip(r, atoms + ((f"<any relation>", a, b),))
                continue
            xy = table[0][rows] * n + table[1][rows]
            distinct = uniq(rels * (n * n) + xy) // (n * n)
            support = np.bincount(distinct, minlength=len(ix.relations))
            for k in np.flatnonzero(support >= thr):
                s = ix.relations[k]
                atom = (s, a, b)
                if (s == r and a == 0 and b == 1) or atom in atoms:
                    continue
                out.append(canonical(atoms + (atom,)))
        return out

    def closed(self, r: str, atoms, measured: dict, thr: int) -> None:
        """Measure a closed rule and its guarded forms; keep those that are output."""
        ix, o = self.ix, self.o
        counts = self.body_counts(atoms)
        if counts is None:
            self.skip(r, atoms)
            return
        cats = counts.head(r)
        m = cats.measures()
        self.candidates += 1
        measured[atoms] = m
        parents = [measured.get(canonical(atoms[:i] + atoms[i + 1:])) for i in range(len(atoms))]
        self.keep(r, atoms, (), False, m, [p for p in parents if p is not None])
        if o.max_guards == 0 or m["pca_confidence"] >= 1.0:
            return
        items = [("attr", v, var) for var in (0, 1) for v in ix.values] + [("neq",)]
        done: dict[tuple, dict] = {(): m}
        for k in range(1, o.max_guards + 1):
            for combo in combinations(items, k):
                subs = [combo[:i] + combo[i + 1:] for i in range(k)]
                if any(s not in done or done[s]["support"] < thr or done[s]["pca_confidence"] >= 1.0 for s in subs):
                    continue
                attrs = tuple((g[1], g[2]) for g in combo if g[0] == "attr")
                gm = cats.measures(attrs, ("neq",) in combo)
                done[combo] = gm
                self.candidates += 1
                if gm["support"] >= thr:
                    self.keep(r, atoms, attrs, ("neq",) in combo, gm, [done[s] for s in subs])

    def body_counts(self, atoms) -> BodyCounts | None:
        """The distinct pairs (x, y) for which a closed body holds, counted by category (None
        past the grounding budget). A body's pairs do not depend on the head: their counts are
        kept for the other head relations while their total size stays within the budget."""
        if atoms in self.pairs_cache:
            return self.pairs_cache[atoms]
        counts = BodyCounts.star(self.ix, atoms) if self.star_ok(atoms) else None
        if counts is not None:
            self.pairs_cache[atoms] = counts
            self.cached += counts.size
            return counts
        try:
            t = bindings(self.ix, atoms, None, {0, 1}, self.o.grounding_budget)
        except JoinTooLarge:
            counts = None
        else:
            counts = BodyCounts(self.ix, uniq(t[0] * self.ix.n + t[1]))
        size = 0 if counts is None else counts.size
        if self.cached + size <= 2 * (self.o.grounding_budget or DEFAULT_MAX_GROUNDINGS):
            self.pairs_cache[atoms] = counts
            self.cached += size
        return counts

    def star_ok(self, atoms) -> bool:
        """Whether a two-atom body through one shared variable is worth counting without its
        pairs: its join would build more rows than per-entity tables hold."""
        from . import mine_measures

        if len(atoms) != 2:
            return False
        rows = 0
        for r, a, b in atoms:
            rel = self.ix.rel[r]
            deg = np.diff(rel.in_ptr) if b == 2 else np.diff(rel.out_ptr)
            rows = max(rows, int((deg.astype(np.int64) ** 2).sum()))
        return rows > mine_measures.PER_ENTITY_FACTOR * self.ix.n * (1 << (len(self.ix.values) + 1))

    def keep(self, r: str, atoms, attrs: Guards, neq: bool, m: dict, parents: list[dict]) -> None:
        o = self.o
        if m["pca_confidence"] < o.min_pca_confidence or m["std_confidence"] < o.min_std_confidence:
            return
        if o.skyline and any(p["pca_confidence"] >= m["pca_confidence"] for p in parents):
            return
        self.out.append(to_rule(r, atoms, attrs, neq, m))


def mine_rules(kb, *, name: str = "mined", **options) -> MineResult:
    """Mine Horn rules from a KB, each with AMIE's measures.

    Parameters
    ----------
    kb : KnowledgeBase
        The facts to mine from.
    name : str, default "mined"
        The name of the returned rule set.
    **options
        The fields of :class:`MineOptions` (``max_body``, ``min_support``, ``min_pca_confidence``,
        ``head_relations``, ``exclude_relations``, ...).

    Returns
    -------
    MineResult
        The rules, best first (PCA confidence, then standard confidence, then support), each with
        its ``measures``; the options used, the candidates measured and what was skipped.

    Raises
    ------
    RulesError
        An option out of range, or a head or excluded relation no fact of the KB has.

    Examples
    --------
    >>> from deepunlearn.kg.kb import KnowledgeBase
    >>> kb = KnowledgeBase.build({p: {} for p in "abcdef"},
    ...     [("a", "parent", "b"), ("b", "child", "a"), ("c", "parent", "d"), ("d", "child", "c"),
    ...      ("e", "parent", "f")])
    >>> res = mine_rules(kb, max_body=1)
    >>> for r in res.rules:
    ...     print(r, r.measures["support"], r.measures["std_confidence"], r.measures["pca_confidence"])
    parent(X, Y) :- child(Y, X). 2 1.0 1.0
    child(X, Y) :- parent(Y, X). 2 0.6666666666666666 1.0
    """
    o = MineOptions(**options)
    o.check()
    t0 = time.perf_counter()
    known = {r for _, r, _ in kb.facts}
    for flag, names in (("--head-relations", o.head_relations or ()), ("--exclude-relations", o.exclude_relations)):
        unknown = sorted(set(names) - known)
        if unknown:
            raise RulesError(f"{flag}: no fact of KB {getattr(kb, 'name', 'kb')!r} has relation "
                             f"{', '.join(map(repr, unknown))} (its relations: {', '.join(sorted(known))})", field=flag)
    miner = _Miner(kb, o)
    heads = [r for r in miner.ix.relations if o.head_relations is None or r in o.head_relations]
    for r in heads:
        miner.head(r)
    rules = sorted(miner.out, key=lambda q: (-q.measures["pca_confidence"], -q.measures["std_confidence"],
                                            -q.measures["support"], q.to_datalog()))
    rules = [Rule(q.head, q.body, q.neq, label=f"rule {i}", line=0, measures=q.measures) for i, q in enumerate(rules, 1)]
    return MineResult(RuleSet(name, tuple(rules)), o, miner.candidates, miner.skipped, time.perf_counter() - t0,
                      getattr(kb, "name", "kb"))
