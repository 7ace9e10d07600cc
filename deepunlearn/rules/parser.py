"""Read rule files: plain Datalog (``*.dl``) and the release's ``family_rule_raw.txt`` format.

Datalog::

    % comments start with % or #
    child(A, B) :- father(B, A).
    brother(X0, X1) :- sister(X1, X0), male(X1), X0 != X1.
    0.8 :: child(A, B) :- mother(B, A).    % a soft rule: holds with probability 0.8 (.soft)

Release raw format, one rule per line, ``+`` between body tuples and ``>`` before the head::

    (A, is wife of, B) > (B, is husband of, A)
    (B, is child of, A) + (B, is child of, C) + (A, is, "male") > (A, is husband of, C)

``(A, is wife of, B)`` reads "A is B's wife", the fact ``(B, wife, A)`` = ``wife(B, A)``: this is
the direction of the release's ``family_rule.pt`` (its first rule, ``(0, wife, 1) -> (1, husband,
0)``, is the first line above) and of its facts. ``(A, is, "male")`` is the attribute atom
``male(A)``. The raw file has no ``!=`` and spells out only some gender conditions: the
reference applies its gender and self-loop filter in code to every newly derived fact (see
``edu-relat.dl``). :func:`parse_raw` gives each rule that filter as explicit atoms, so the raw
file means what the reference computes (the release's file closes to the same 562 facts as
``edu-relat``); a raw rule with a condition the filter does not imply is refused.

Every error names the file, the line and the column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import env_limit
from .errors import RulesError, RuleSyntaxError
from ..kg.names import name_problem, shown
from .language import Atom, Const, Neq, Rule, RuleSet, Term, Var, cartesian_warnings
from .mine_measures import is_measures_comment, parse_measures

_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r\n]+)
  | (?P<comment>[%\#][^\n]*)
  | (?P<probsep>::)
  | (?P<implies>:-)
  | (?P<neq>!=)
  | (?P<lpar>\()
  | (?P<rpar>\))
  | (?P<comma>,)
  | (?P<number>-?\d+(?:\.\d+)?(?![A-Za-z_]))
  | (?P<dot>\.)
  | (?P<var>[A-Z_][A-Za-z0-9_]*)
  | (?P<name>[a-z][A-Za-z0-9_]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
    """,
    re.VERBOSE,
)


#: Most rules a rule file may hold, and most literals (atoms and ``!=``) in one rule's body; the
#: shipped rule sets have 48 rules of at most 5. Evaluation time grows with both (10,000 chained
#: rules, or one rule of 2,000 atoms, run for minutes), so a file past them is refused as it is
#: read. ``DEEPUNLEARN_MAX_RULES`` and ``DEEPUNLEARN_MAX_BODY`` change them.
MAX_RULES = 1000
MAX_BODY = 32
RULES_ENV, BODY_ENV = "DEEPUNLEARN_MAX_RULES", "DEEPUNLEARN_MAX_BODY"


def limit(env: str, default: int) -> int:
    """``$env`` as a positive integer (a :class:`RulesError` naming the variable if it is not
    one), else ``default``."""
    return env_limit(env, default, error=RulesError)


def _too_many_rules(src: str, line: int, col: int, cap: int) -> RuleSyntaxError:
    return RuleSyntaxError(src, line, col, f"more than {cap:,} rules in the file; set {RULES_ENV} to allow more")


def _too_long(src: str, line: int, col: int, cap: int) -> RuleSyntaxError:
    return RuleSyntaxError(src, line, col, f"rule body of more than {cap} atoms and conditions; "
                                           f"set {BODY_ENV} to allow more")


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    line: int
    col: int


def _tokens(text: str, source: str, measures: dict[int, tuple[str, int]] | None = None) -> list[_Tok]:
    """The tokens of ``text``; a measures comment (``% support=...``) alone on its line goes to
    ``measures`` by line number, with its column (:mod:`.mine_measures`)."""
    out: list[_Tok] = []
    pos, line, line_start = 0, 1, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            ch = text[pos]
            hint = " (unterminated string?)" if ch in "\"'" else ""
            raise RuleSyntaxError(source, line, pos - line_start + 1, f"unexpected character {ch!r}{hint}")
        kind = m.lastgroup
        if kind not in ("ws", "comment"):
            out.append(_Tok(kind, m.group(), line, pos - line_start + 1))
        elif kind == "comment" and measures is not None and is_measures_comment(m.group()) \
                and not text[line_start:pos].strip():
            measures[line] = (m.group(), pos - line_start + 1)
        nl = m.group().count("\n")
        if nl:
            line += nl
            line_start = m.start() + m.group().rfind("\n") + 1
        pos = m.end()
    out.append(_Tok("eof", "", line, pos - line_start + 1))
    return out


def _unquote(s: str) -> str:
    body = s[1:-1]
    return re.sub(r"\\(.)", r"\1", body)


class _Parser:
    def __init__(self, text: str, source: str):
        self.source = source
        self.measures: dict[int, tuple[str, int]] = {}
        self.toks = _tokens(text, source, self.measures)
        self.i = 0
        self.anon = 0
        self.max_rules, self.max_body = limit(RULES_ENV, MAX_RULES), limit(BODY_ENV, MAX_BODY)

    def peek(self, k: int = 0) -> _Tok:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def error(self, tok: _Tok, msg: str) -> RuleSyntaxError:
        return RuleSyntaxError(self.source, tok.line, tok.col, msg)

    def expect(self, kind: str, what: str) -> _Tok:
        tok = self.peek()
        if tok.kind != kind:
            found = "end of file" if tok.kind == "eof" else repr(tok.text)
            raise self.error(tok, f"expected {what}, found {found}")
        self.i += 1
        return tok

    def term(self) -> Term:
        tok = self.peek()
        self.i += 1
        if tok.kind == "var":
            if tok.text == "_":
                self.anon += 1
                return Var(f"_{self.anon}")
            return Var(tok.text)
        if tok.kind in ("name", "number", "string"):
            value = _unquote(tok.text) if tok.kind == "string" else tok.text
            problem = name_problem(value)  # a constant names an entity or a value: the same rules
            if problem:
                raise self.error(tok, f"constant {shown(value)} {problem}")
            return Const(value)
        self.i -= 1
        found = "end of file" if tok.kind == "eof" else repr(tok.text)
        raise self.error(tok, f"expected a variable or a constant, found {found}")

    def atom(self) -> tuple[Atom, _Tok]:
        name = self.expect("name", "a relation name (lower-case)")
        self.expect("lpar", f"'(' after {name.text!r}")
        args = [self.term()]
        while self.peek().kind == "comma":
            self.i += 1
            args.append(self.term())
        self.expect("rpar", "')' or ','")
        if len(args) > 2:
            raise self.error(name, f"{name.text!r} has {len(args)} arguments: relation atoms take 2 "
                                   f"(r(X, Y) is the fact (X, r, Y)), attribute atoms take 1")
        return Atom(name.text, tuple(args)), name

    def literal(self) -> tuple[Atom | Neq, _Tok]:
        tok = self.peek()
        if tok.kind == "name" and self.peek(1).kind == "lpar":
            return self.atom()
        left = self.term()
        self.expect("neq", "'!=' (a body holds atoms and 'X != Y' conditions)")
        return Neq(left, self.term()), tok

    def probability(self) -> float | None:
        """A soft rule's ``p ::`` prefix (None without one): a number in [0, 1]."""
        tok = self.peek()
        if tok.kind != "number" or self.peek(1).kind != "probsep":
            return None
        self.i += 2
        p = float(tok.text)
        if not 0.0 <= p <= 1.0:
            raise self.error(tok, f"rule probability {tok.text} is outside [0, 1]")
        return p

    def rule(self, index: int) -> Rule:
        self.anon = 0
        prob = self.probability()
        head, head_tok = self.atom()
        if head.is_attribute:
            raise self.error(head_tok, f"the head {head} has one argument: a rule derives a relation atom r(X, Y)")
        if self.peek().kind == "dot":
            raise self.error(self.peek(), f"{head} has no body: a rule needs ':-' and at least one relation atom")
        self.expect("implies", "':-' after the head")
        body: list[tuple[Atom | Neq, _Tok]] = [self.literal()]
        while self.peek().kind == "comma":
            self.i += 1
            if len(body) == self.max_body:
                tok = self.peek()
                raise _too_long(self.source, tok.line, tok.col, self.max_body)
            body.append(self.literal())
        dot = self.expect("dot", "',' or '.' at the end of the rule")
        measures = None
        if dot.line + 1 in self.measures:  # the measures of a mined rule, on the line after it
            comment, col = self.measures[dot.line + 1]
            measures, problem = parse_measures(comment)
            if problem:
                raise RuleSyntaxError(self.source, dot.line + 1, col, f"measures comment: {problem}")
        atoms = [(a, t) for a, t in body if isinstance(a, Atom)]
        neqs = [(c, t) for c, t in body if isinstance(c, Neq)]
        rel_atoms = [a for a, _ in atoms if not a.is_attribute]
        if not rel_atoms:
            raise self.error(head_tok, f"rule for {head} has no relation atom in its body: "
                                       "a rule must derive from at least one fact")
        bound = {v for a in rel_atoms for v in a.variables()}
        for v in head.variables():
            if v not in bound:
                raise self.error(head_tok, f"unsafe rule: head variable {v} is not bound by any relation atom in the body")
        for lit, tok in atoms + neqs:
            vars_ = lit.variables() if isinstance(lit, Atom) else [x for x in (lit.left, lit.right) if isinstance(x, Var)]
            for v in vars_:
                if v not in bound:
                    raise self.error(tok, f"unsafe rule: variable {v} in {lit} is not bound by any relation atom in the body")
        return Rule(head, tuple(a for a, _ in atoms), tuple(c for c, _ in neqs), label=f"rule {index}", line=head_tok.line,
                    measures=measures, prob=prob)

    def program(self) -> list[Rule]:
        rules = []
        while self.peek().kind != "eof":
            if len(rules) == self.max_rules:
                tok = self.peek()
                raise _too_many_rules(self.source, tok.line, tok.col, self.max_rules)
            rules.append(self.rule(len(rules) + 1))
        return rules


def parse_datalog(text: str, name: str = "rules", source: str | None = None) -> RuleSet:
    """Parse a Datalog rule file.

    >>> rs = parse_datalog('''
    ... % B is A's child if A is B's father
    ... child(A, B) :- father(B, A).
    ... husband(X1, X0) :- wife(X0, X1), male(X0), female(X1), X1 != X0.
    ... ''', name="demo")
    >>> [r.label for r in rs], str(rs[1].head), [str(a) for a in rs[1].body]
    (['rule 1', 'rule 2'], 'husband(X1, X0)', ['wife(X0, X1)', 'male(X0)', 'female(X1)'])
    >>> parse_datalog("child(A, C) :- father(B, A).", source="bad.dl")
    Traceback (most recent call last):
    ...
    deepunlearn.rules.errors.RuleSyntaxError: bad.dl:1:1: unsafe rule: head variable C is not bound by any relation atom in the body
    """
    src = source or f"<{name}>"
    rules = tuple(_Parser(text, src).program())
    return RuleSet(name=name, rules=rules, source=source, warnings=cartesian_warnings(rules, src))


# ------------------------------------------------------------------------------ release raw format
_RAW_TUPLE = re.compile(r"\(([^()]*)\)")
_RAW_REL = re.compile(r"^is\s+(.+?)\s+of$")
_RAW_VAR = re.compile(r"^[A-Z_][A-Za-z0-9_]*$")


#: The reference's filter on a newly derived fact r(X, Y) ("Y is X's r"): Y's gender by relation,
#: and the owner X of a husband (female) or a wife (male); no relation derives a self loop.
MALE_OBJECT = ("husband", "uncle", "father", "brother", "nephew")
FEMALE_OBJECT = ("wife", "aunt", "mother", "sister", "niece")
_OWNER = {"husband": "female", "wife": "male"}


def reference_filter(head: Atom) -> tuple[tuple[Atom, ...], tuple[Neq, ...]]:
    """The reference's filter on facts derived as ``head``, as attribute atoms and ``!=``.

    >>> atoms, neq = reference_filter(Atom("husband", (Var("X"), Var("Y"))))
    >>> [str(a) for a in atoms], [str(c) for c in neq]
    (['male(Y)', 'female(X)'], ['X != Y'])
    >>> [str(a) for a in reference_filter(Atom("child", (Var("X"), Var("Y"))))[0]]
    []
    """
    x, y = head.args
    atoms = []
    if head.relation in MALE_OBJECT:
        atoms.append(Atom("male", (y,)))
    elif head.relation in FEMALE_OBJECT:
        atoms.append(Atom("female", (y,)))
    if head.relation in _OWNER:
        atoms.append(Atom(_OWNER[head.relation], (x,)))
    return tuple(atoms), (Neq(x, y),)


def parse_raw(text: str, name: str = "rules", source: str | None = None, literal: bool = False) -> RuleSet:
    """Parse the release's ``family_rule_raw.txt`` format (see the module docstring).

    Each rule gets the reference's filter (:func:`reference_filter`): its relation atoms, then
    the filter's gender atoms and ``!=``. The file's own gender tuples must be implied by the
    filter (they are in the release's file) and are replaced by it; any other condition cannot
    be given the reference's semantics and is refused. ``literal=True`` reads the tuples as
    written, with no filter.

    >>> rs = parse_raw('(A, is wife of, B) > (B, is husband of, A)\\n'
    ...                '(B, is uncle of, A) + (A, is, "male") > (A, is nephew of, B)')
    >>> [r.to_datalog() for r in rs]
    ['husband(A, B) :- wife(B, A), male(B), female(A), A != B.', 'nephew(B, A) :- uncle(A, B), male(A), B != A.']
    >>> [r.to_datalog() for r in parse_raw('(B, is uncle of, A) + (A, is, "male") > (A, is nephew of, B)', literal=True)]
    ['nephew(B, A) :- uncle(A, B), male(A).']
    >>> parse_raw('(B, is uncle of, A) + (A, is, "female") > (A, is nephew of, B)', source="my.txt")
    Traceback (most recent call last):
    ...
    deepunlearn.rules.errors.RuleSyntaxError: my.txt:1:23: female(A): the reference's filter asks of a derived nephew fact only male(A) and B != A, so this condition cannot be read with the reference's semantics; write the rules as Datalog (a .dl file) or use --rules edu-relat
    """
    src = source or f"<{name}>"
    rules = []
    max_rules, max_body = limit(RULES_ENV, MAX_RULES), limit(BODY_ENV, MAX_BODY)
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.split("%", 1)[0].split("#", 1)[0]
        if not stripped.strip():
            continue
        if len(rules) == max_rules:
            raise _too_many_rules(src, lineno, 1, max_rules)
        if stripped.count("(") > max_body + 1:  # body tuples and the head
            raise _too_long(src, lineno, 1, max_body)
        if stripped.count(">") != 1:
            raise RuleSyntaxError(src, lineno, 1, "expected exactly one '>' between the body tuples and the head tuple")
        split = stripped.index(">")
        atoms: list[tuple[Atom, int]] = []
        pos = 0
        for m in _RAW_TUPLE.finditer(stripped):
            between = stripped[pos:m.start()]
            gap, where = between.strip(), pos + len(between) - len(between.lstrip()) + 1
            if not atoms and gap:
                raise RuleSyntaxError(src, lineno, where, f"expected a tuple (A, is r of, B) to start the rule, found {gap!r}")
            expected = ">" if pos <= split < m.start() else "+"
            if atoms and gap != expected:
                raise RuleSyntaxError(src, lineno, where, f"expected {expected!r} between tuples, found {gap!r}")
            atoms.append((_raw_atom(m.group(1), src, lineno, m.start() + 1), m.start()))
            pos = m.end()
        if stripped[pos:].strip():
            raise RuleSyntaxError(src, lineno, pos + 1, f"unexpected text after the head tuple: {stripped[pos:].strip()!r}")
        body = [a for a, at in atoms if at < split]
        heads = [(a, at) for a, at in atoms if at > split]
        if len(heads) != 1 or not body:
            raise RuleSyntaxError(src, lineno, split + 1, "expected body tuples, '>' and exactly one head tuple")
        head, head_col = heads[0]
        if head.is_attribute:
            raise RuleSyntaxError(src, lineno, head_col + 1, "the head must be a relation tuple (A, is r of, B)")
        # Reuse the Datalog checks (safety, relation atom in the body) on the rule's Datalog text.
        text_rule = f"{head} :- {', '.join(map(str, body))}."
        try:
            rule = _Parser(text_rule, src).rule(len(rules) + 1)
        except RuleSyntaxError as e:
            raise RuleSyntaxError(src, lineno, 1, e.message) from None
        body_atoms, neq = rule.body, rule.neq
        if not literal:
            attrs, neq = reference_filter(rule.head)
            for a, at in atoms:
                if a.is_attribute and a not in attrs:
                    implied = " and ".join([*map(str, attrs), *map(str, neq)])
                    raise RuleSyntaxError(src, lineno, at + 1, (
                        f"{a}: the reference's filter asks of a derived {rule.head.relation} fact only {implied}, so this "
                        "condition cannot be read with the reference's semantics; write the rules as Datalog "
                        "(a .dl file) or use --rules edu-relat"))
            body_atoms = rule.relation_atoms + attrs
        rules.append(Rule(rule.head, body_atoms, neq, label=f"rule {len(rules) + 1}", line=lineno))
    return RuleSet(name=name, rules=tuple(rules), source=source, warnings=cartesian_warnings(tuple(rules), src))


def _raw_atom(inner: str, src: str, lineno: int, col: int) -> Atom:
    parts = [p.strip() for p in inner.split(",")]
    if len(parts) != 3:
        raise RuleSyntaxError(src, lineno, col, f"expected a tuple (A, is r of, B) or (A, is, \"value\"), found ({inner})")
    a, rel, b = parts
    if not _RAW_VAR.match(a):
        raise RuleSyntaxError(src, lineno, col, f"expected a variable (upper-case) as the tuple's first element, found {a!r}")
    if rel == "is":
        if len(b) < 2 or b[0] != '"' or b[-1] != '"':
            raise RuleSyntaxError(src, lineno, col, f'expected a quoted value in (A, is, "value"), found {b!r}')
        value = b[1:-1]
        if not re.match(r"^[a-z][A-Za-z0-9_]*$", value):
            raise RuleSyntaxError(src, lineno, col, f"attribute value {value!r} must be a lower-case name")
        return Atom(value, (Var(a),))
    m = _RAW_REL.match(rel)
    if not m:
        raise RuleSyntaxError(src, lineno, col, f"expected 'is <relation> of' or 'is', found {rel!r}")
    if not _RAW_VAR.match(b):
        raise RuleSyntaxError(src, lineno, col, f"expected a variable (upper-case) as the tuple's third element, found {b!r}")
    relation = re.sub(r"\s+", "_", m.group(1))
    # "(A, is wife of, B)": A is B's wife, the fact (B, wife, A).
    return Atom(relation, (Var(b), Var(a)))
