"""The shapes of the rules the miner grows (:mod:`.mine`): a body is a tuple of atoms
``(relation, variable, variable)`` over numbered variables, X and Y (the head's) being 0 and 1.
Its variables, whether it is closed and connected, its canonical form (up to renaming its fresh
variables), and the :class:`~.language.Rule` it stands for."""

from __future__ import annotations

from itertools import permutations

from .language import Atom, Neq, Rule, Var
from .mine_index import BodyAtom
from .mine_measures import Guards


def body_vars(atoms) -> set[int]:
    """The variables of a rule: X and Y (0 and 1) and those of its body atoms."""
    return {0, 1} | {v for _, a, b in atoms for v in (a, b)}


def open_count(atoms) -> int:
    """How many of the rule's variables occur only once (0: the rule is closed)."""
    count = {0: 1, 1: 1}
    for _, a, b in atoms:
        count[a] = count.get(a, 0) + 1
        count[b] = count.get(b, 0) + 1
    return sum(1 for c in count.values() if c == 1)


def connected(atoms) -> bool:
    """Whether the body's atoms form one group through shared variables and hold X and Y."""
    if not atoms or not {0, 1} <= {v for _, a, b in atoms for v in (a, b)}:
        return False
    reach, rest = {atoms[0][1], atoms[0][2]}, list(atoms[1:])
    while rest:
        nxt = [t for t in rest if t[1] in reach or t[2] in reach]
        if not nxt:
            return False
        for t in nxt:
            rest.remove(t)
            reach |= {t[1], t[2]}
    return True


def canonical(atoms) -> tuple[BodyAtom, ...]:
    """The body up to renaming its fresh variables (the least sorted form over their orders)."""
    fresh = sorted({v for _, a, b in atoms for v in (a, b)} - {0, 1})
    best = None
    for perm in permutations(range(2, 2 + len(fresh))):
        m = {0: 0, 1: 1, **dict(zip(fresh, perm))}
        form = tuple(sorted((r, m[a], m[b]) for r, a, b in atoms))
        if best is None or form < best:
            best = form
    return best if best is not None else ()


_NAMES = ("X", "Y", "Z", "W", "V", "U")


def to_rule(head: str, atoms, attrs: Guards, neq: bool, measures: dict | None) -> Rule:
    """The :class:`~.language.Rule` of a head relation, body atoms, guards and measures."""
    v = [Var(n) for n in _NAMES]
    body = tuple(Atom(r, (v[a], v[b])) for r, a, b in atoms) + tuple(Atom(val, (v[x],)) for val, x in attrs)
    return Rule(Atom(head, (v[0], v[1])), body, (Neq(v[0], v[1]),) if neq else (), measures=measures)
