"""The rule language as plain data: terms, atoms, rules and rule sets.

A relation atom ``r(X, Y)`` is the fact ``(X, r, Y)``, "Y is X's r". An attribute atom ``male(X)``
holds when entity ``X`` has an attribute (gender, ...) whose value is ``male``; attributes are
background knowledge, never facts. ``X != Y`` compares two terms. A rule derives its head, a
relation atom, when all of its body holds::

    child(A, B) :- father(B, A).            % B is A's child if A is B's father
    husband(X1, X0) :- wife(X0, X1), male(X0), female(X1), X1 != X0.

Variables start with an upper-case letter or ``_``; constants are quoted strings
(``"Boston"``), numbers, or lower-case names.
"""

from __future__ import annotations

import json
from decimal import Decimal
from dataclasses import dataclass, field
from typing import Iterator, Union


@dataclass(frozen=True)
class Var:
    """A variable of a rule."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Const:
    """A constant: an entity name or an attribute value."""

    value: str

    def __str__(self) -> str:
        return json.dumps(self.value, ensure_ascii=False)


Term = Union[Var, Const]


@dataclass(frozen=True)
class Atom:
    """``relation(args...)``: two arguments for a relation atom, one for an attribute atom."""

    relation: str
    args: tuple[Term, ...]

    @property
    def is_attribute(self) -> bool:
        return len(self.args) == 1

    def variables(self) -> list[Var]:
        return [a for a in self.args if isinstance(a, Var)]

    def __str__(self) -> str:
        return f"{self.relation}({', '.join(map(str, self.args))})"


@dataclass(frozen=True)
class Neq:
    """The condition ``left != right``."""

    left: Term
    right: Term

    def __str__(self) -> str:
        return f"{self.left} != {self.right}"


@dataclass(frozen=True)
class Rule:
    """``head :- body, conditions.`` where ``body`` holds relation and attribute atoms.

    ``label`` names the rule in explanations ("rule 7"); ``line`` is where it was read.
    ``prob``: a soft rule's probability (``0.8 :: head :- body.``, ProbLog's semantics: each
    grounding holds on its own with that probability, :mod:`.soft`); ``None``: a certain rule.
    """

    head: Atom
    body: tuple[Atom, ...]
    neq: tuple[Neq, ...] = ()
    label: str = field(default="", compare=False)
    line: int = field(default=0, compare=False)
    #: AMIE's measures of a mined rule (support, head_coverage, std_confidence, pca_confidence,
    #: ...), read from the comment line right after it (:mod:`.mine_measures`); None if it has none
    measures: dict[str, float] | None = field(default=None, compare=False)
    #: the rule's probability (soft rules, ProbLog's ``p :: head :- body.``); None: a certain rule
    prob: float | None = field(default=None, compare=False)

    @property
    def relation_atoms(self) -> tuple[Atom, ...]:
        """The body atoms that match facts, in body order (a grounding's body facts follow it)."""
        return tuple(a for a in self.body if not a.is_attribute)

    @property
    def attribute_atoms(self) -> tuple[Atom, ...]:
        return tuple(a for a in self.body if a.is_attribute)

    def body_groups(self) -> list[tuple[Atom, ...]]:
        """The relation atoms with variables, grouped by shared variables (connected parts, in
        body order). More than one group: the rule's groundings are the cartesian product of
        the groups' (atoms without variables only check a fact, they multiply nothing).

        >>> from deepunlearn.rules.parser import parse_datalog
        >>> r = parse_datalog("r(X, Y) :- child(X, A), niece(Y, B), father(A, C), uncle(Z, C).")[0]
        >>> [" ".join(map(str, g)) for g in r.body_groups()]
        ['child(X, A) father(A, C) uncle(Z, C)', 'niece(Y, B)']
        """
        groups: list[tuple[set[Var], list[Atom]]] = []
        for a in self.relation_atoms:
            vs = set(a.variables())
            if not vs:
                continue
            joined = [g for g in groups if g[0] & vs]
            merged: tuple[set[Var], list[Atom]] = (vs, [a])
            for g in joined:
                merged = (merged[0] | g[0], g[1] + merged[1])
                groups.remove(g)
            groups.append(merged)
        order = {a: i for i, a in enumerate(self.relation_atoms)}
        out = [tuple(sorted(atoms, key=order.__getitem__)) for _, atoms in groups]
        return sorted(out, key=lambda g: order[g[0]])

    def to_datalog(self) -> str:
        parts = [str(a) for a in self.body] + [str(c) for c in self.neq]
        prefix = "" if self.prob is None else f"{format(Decimal(repr(float(self.prob))), 'f')} :: "
        return f"{prefix}{self.head} :- {', '.join(parts)}."

    def __str__(self) -> str:
        return self.to_datalog()


@dataclass(frozen=True)
class RuleSet:
    """An ordered collection of rules with a name (``edu-relat``, ``family`` or a file stem).

    >>> from deepunlearn.rules.parser import parse_datalog
    >>> rs = parse_datalog("child(A, B) :- father(B, A), male(B).", name="tiny")
    >>> sorted(rs.relations), sorted(rs.attributes)
    (['child', 'father'], ['male'])
    >>> print(rs.to_datalog())
    % rule set: tiny
    child(A, B) :- father(B, A), male(B).
    """

    name: str
    rules: tuple[Rule, ...]
    source: str | None = field(default=None, compare=False)
    description: str = field(default="", compare=False)
    #: warnings found when the rules were read (cartesian products: see :func:`cartesian_warnings`)
    warnings: tuple[str, ...] = field(default=(), compare=False)

    def __len__(self) -> int:
        return len(self.rules)

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __getitem__(self, i: int) -> Rule:
        return self.rules[i]

    @property
    def head_relations(self) -> frozenset[str]:
        return frozenset(r.head.relation for r in self.rules)

    @property
    def body_relations(self) -> frozenset[str]:
        return frozenset(a.relation for r in self.rules for a in r.relation_atoms)

    @property
    def relations(self) -> frozenset[str]:
        """Every relation the rules use, in heads or bodies."""
        return self.head_relations | self.body_relations

    @property
    def attributes(self) -> frozenset[str]:
        """Attribute values the rules test (``male``, ``female``)."""
        return frozenset(a.relation for r in self.rules for a in r.attribute_atoms)

    def unknown_relations(self, kb_relations) -> list[str]:
        """Body relations that are neither in the KB nor derived by a rule: rules using them
        never fire (the release's misspelt ``newphe`` is one)."""
        known = set(kb_relations) | self.head_relations
        return sorted(self.body_relations - known)

    def where(self, rule: Rule) -> str:
        """``file:line`` of a rule (``<name>:line`` if it was not read from a file)."""
        return f"{self.source or f'<{self.name}>'}:{rule.line}"

    def unknown_heads(self, kb_relations) -> list[str]:
        """Head relations the KB does not have: their facts can only be intermediate steps."""
        return sorted(self.head_relations - set(kb_relations))

    def check(self, kb) -> list[str]:
        """Warnings about this rule set, the ones found when it was read (:attr:`warnings`)
        first, then on a KB: unknown body relations (rules that never fire), head relations the
        KB lacks and attribute values no entity has. An empty list means every rule can fire in
        principle and derives facts of the KB's relations."""
        out = list(self.warnings)
        for rel in self.unknown_relations(kb.relations):
            users = [r.label or f"line {r.line}" for r in self.rules if any(a.relation == rel for a in r.relation_atoms)]
            which = users[0] + " never fires" if len(users) == 1 else ", ".join(users[:-1]) + f" and {users[-1]} never fire"
            out.append(f"rule set {self.name!r}: relation {rel!r} is neither in KB {kb.name!r} nor derived "
                       f"by any rule, so {which}")
        for rel in self.unknown_heads(kb.relations):
            users = [r for r in self.rules if r.head.relation == rel]
            which = ", ".join(f"{r.label or 'a rule'} ({self.where(r)})" for r in users[:3])
            which += f" and {len(users) - 3} more" if len(users) > 3 else ""
            out.append(f"rule set {self.name!r}: relation {rel!r}, derived by {which}, is not a relation of KB "
                       f"{kb.name!r} (misspelt?): its facts can only be steps towards other facts, never probed, "
                       "unlearned or counted")
        values = {v for attrs in kb.entities.values() for v in attrs.values()}
        for val in sorted(self.attributes - values):
            out.append(f"rule set {self.name!r}: no entity of KB {kb.name!r} has an attribute with value {val!r}")
        return out

    def to_datalog(self) -> str:
        """The rule set as a Datalog file that :func:`load_rules` reads back to an equal set."""
        lines = [f"% rule set: {self.name}"]
        if self.description:
            lines += [f"% {ln}" if ln else "%" for ln in self.description.splitlines()]
        for r in self.rules:
            lines.append(r.to_datalog())
            if r.measures is not None:
                from .mine_measures import format_measures

                lines.append(format_measures(r.measures))
        return "\n".join(lines)


def cartesian_warnings(rules: tuple[Rule, ...], source: str) -> tuple[str, ...]:
    """One warning per rule whose body atoms fall into groups sharing no variable (a cartesian
    product, :meth:`Rule.body_groups`): its groundings multiply, and on a large KB such a rule
    passes any memory (the grounding budget stops it, see :mod:`.budget`).

    >>> from deepunlearn.rules.parser import parse_datalog
    >>> print(parse_datalog("r(X, Y) :- child(X, A), niece(Y, B).", source="bad.dl").warnings[0])
    bad.dl:1: rule 1 is a cartesian product: its body atoms fall into 2 groups that share no variable (child(X, A) | niece(Y, B)), so its groundings are the product of theirs; join them through a variable if that was not meant
    """
    out = []
    for r in rules:
        groups = r.body_groups()
        if len(groups) > 1:
            parts = " | ".join(", ".join(map(str, g)) for g in groups)
            out.append(f"{source}:{r.line}: {r.label or 'a rule'} is a cartesian product: its body atoms fall into "
                       f"{len(groups)} groups that share no variable ({parts}), so its groundings are the product "
                       "of theirs; join them through a variable if that was not meant")
    return tuple(out)
