"""Compose questions: a derived fact asked through the facts a rule derives it from.

A rule such as ``on_continent(C, K) :- country(C, X), continent(X, K)`` derives "Lyon is on
Europe" from "Lyon is in France" and "France is on Europe". The *compose question* of that
grounding asks the head's answer through the body, naming only the head's subject and leaving
the bridge entity (France) to the model: "On which continent is the country that Lyon lies in?".
A model that answers it composes the two body facts itself.

The question is built from the domain's own templates (:func:`~deepunlearn.kg.forms.templates_for`):

* the rule body must be a *chain*: its relation atoms, each used once, lead from the head's
  subject to the head's object; a step may run forward (``r(A, B)``: from A to B) or backward
  (from B to A). Attribute atoms and ``!=`` conditions are ignored (the KB facts already satisfy
  them). A body of one atom is no composition and has no compose question.
* each inner step becomes a noun phrase read off one of the relation's statements (the first
  pattern found over all statements, in this order):

  ==========================================  ==========================  ==============================
  statement                                   forward phrase (object)     backward phrase (subject)
  ==========================================  ==========================  ==============================
  ``The N of {o1} is [the ]{o2}.``            the N of X                  the S whose N is X
  ``{o2} is the|a N of {o1}.``                the|a N of X                the S whose N is X
  ``{o1}'s N is [the ]{o2}.``                 the N of X                  the S whose N is X
  ``{o1} V [the ]{o2}.`` (shortest V)         the O that X V              the S that V X
  ==========================================  ==========================  ==============================

  (``{r}`` is read as the relation's name; S and O are the subject and object types the domain
  declares, "person" for a built-in family relation, else "one").
* the last step is asked with the relation's primary question when its answer is the object
  (``{o2}``) and the step runs forward; otherwise "Who is <phrase>?" (a person) or
  "What is <phrase>?".

The answer is always the head's object (for a family relation, whose probe asks for the relation
name, the compose question asks for the person). A relation with no statement of the four shapes
cannot be phrased: :class:`ComposeError` names it. :func:`parse_compose` reads a question back
into its steps and named entity (the test of every built-in rule's questions).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from .kb import KBError, KnowledgeBase

#: Form name of compose questions (:class:`~deepunlearn.kg.forms.Form`)
COMPOSE_FORM = "compose"


class ComposeError(KBError):
    """A rule or relation has no compose question: the message says why."""


@dataclass(frozen=True)
class Step:
    """One body atom on the chain: ``relation`` walked ``forward`` (subject to object) or back."""

    relation: str
    forward: bool = True

    def __str__(self) -> str:
        return self.relation if self.forward else f"{self.relation}^-1"


@dataclass(frozen=True)
class ComposeQuestion:
    """The compose question of one grounding: derived fact ``fact_id`` by ``rule`` from the body
    facts ``body`` (KB fact ids, in chain order, one per step)."""

    fact_id: int
    rule: str
    body: tuple[int, ...]
    steps: tuple[Step, ...]
    start: str
    text: str
    answer: str

    def to_json(self) -> dict:
        return {"fact_id": self.fact_id, "rule": self.rule, "body": list(self.body),
                "steps": [str(s) for s in self.steps], "start": self.start, "question": self.text,
                "answer": self.answer}

    @classmethod
    def from_json(cls, obj: dict) -> "ComposeQuestion":
        steps = tuple(Step(s.removesuffix("^-1"), not s.endswith("^-1")) for s in obj["steps"])
        return cls(int(obj["fact_id"]), str(obj["rule"]), tuple(int(b) for b in obj["body"]), steps,
                   str(obj["start"]), str(obj["question"]), str(obj["answer"]))


def chain(head: tuple[str, str], body: Sequence[tuple[str, str, str]]) -> list[tuple[int, bool]]:
    """The body atoms ``(relation, arg1, arg2)`` (variable names) as a chain from ``head[0]`` to
    ``head[1]``: ``[(atom index, forward), ...]``, each atom used once, no variable visited twice.
    A body that is no such chain (or has one atom) is a :class:`ComposeError` saying why.

    >>> chain(("C", "K"), [("country", "C", "X"), ("continent", "X", "K")])
    [(0, True), (1, True)]
    >>> chain(("X", "Y"), [("currency", "X", "E"), ("currency", "Y", "E")])
    [(0, True), (1, False)]
    """
    if len(body) < 2:
        raise ComposeError("a body of one atom is no composition")
    start, goal = head

    def walk(at: str, used: tuple[int, ...], seen: frozenset) -> list[tuple[int, bool]] | None:
        if len(used) == len(body):
            return [] if at == goal else None
        for k, (_, a, b) in enumerate(body):
            if k in used:
                continue
            for frm, to, fwd in ((a, b, True), (b, a, False)):
                if frm == at and to not in seen:
                    rest = walk(to, used + (k,), seen | {to})
                    if rest is not None:
                        return [(k, fwd)] + rest
        return None

    got = walk(start, (), frozenset({start}))
    if got is None:
        raise ComposeError(f"the body is no chain from {start} to {goal} using each atom once")
    return got


# ----------------------------------------------------------------------------- phrases
_NOUN = [re.compile(r"^The (?P<n>.+?) of \{o1\} is (?:the )?\{o2\}\.$"),
         re.compile(r"^\{o2\} is (?P<det>the|a|an) (?P<n>.+?) of \{o1\}\.$"),
         re.compile(r"^\{o1\}'s (?P<n>.+?) is (?:the )?\{o2\}\.$")]
_VERB = re.compile(r"^\{o1\} (?P<v>[^{}]+?) (?:the )?\{o2\}\.$")


def _types(kb: KnowledgeBase, relation: str) -> tuple[str, str]:
    """The subject and object types the KB's domain declares for ``relation`` ("one" if none)."""
    cache = kb.__dict__.setdefault("_compose_types", {})
    if relation not in cache:
        spec = None
        name = kb.metadata.get("domain") if isinstance(kb.metadata, dict) else None
        if isinstance(name, str):
            try:
                from .domain import load_domain

                spec = load_domain(name).relations.get(relation)
            except KBError:
                spec = None
        if spec is not None:
            cache[relation] = (spec.subject, spec.object)
        else:
            from .kb import FAMILY_RELATIONS

            cache[relation] = ("person", "person") if relation in FAMILY_RELATIONS else ("one", "one")
    return cache[relation]


def phrase(kb: KnowledgeBase, step: Step) -> str:
    """The noun phrase of ``step`` over ``{x}`` (module docstring's table)."""
    from .forms import templates_for

    if step.relation not in kb.relations:
        raise ComposeError(f"relation {step.relation!r} is not in the KB")
    stype, otype = _types(kb, step.relation)
    statements = [t.text.replace("{r}", step.relation) for t in templates_for(kb, step.relation)
                  if t.kind == "statement"]
    for pat in _NOUN:
        for s in statements:
            m = pat.match(s)
            if m:
                det = m.groupdict().get("det") or "the"
                return f"{det} {m['n']} of {{x}}" if step.forward else f"the {stype} whose {m['n']} is {{x}}"
    verbs = sorted((m["v"] for m in map(_VERB.match, statements) if m), key=len)
    if verbs:
        return f"the {otype} that {{x}} {verbs[0]}" if step.forward else f"the {stype} that {verbs[0]} {{x}}"
    raise ComposeError(f"relation {step.relation!r}: no statement to phrase it as a noun (the domain needs one "
                       "of 'The N of {o1} is {o2}.', '{o2} is the N of {o1}.', \"{o1}'s N is {o2}.\", "
                       "'{o1} ... {o2}.')")


def question_template(kb: KnowledgeBase, step: Step) -> str:
    """The question of the chain's last step over ``{x}`` (module docstring)."""
    rel = kb.relations.get(step.relation)
    if rel is None:
        raise ComposeError(f"relation {step.relation!r} is not in the KB")
    if step.forward and rel.answer == "{o2}" and "{o2}" not in rel.question and "{r}" not in rel.question:
        return rel.question.replace("{o1}", "{x}")
    stype, otype = _types(kb, step.relation)
    who = "Who" if (otype if step.forward else stype) == "person" else "What"
    return f"{who} is {phrase(kb, step)}?"


def _fill(template: str, x: str) -> str:
    return template.replace("{x}", x)


def compose_text(kb: KnowledgeBase, steps: Sequence[Step], start: str) -> str:
    """The compose question asking from ``start`` along ``steps``."""
    inner = start
    for s in steps[:-1]:
        inner = _fill(phrase(kb, s), inner)
    text = _fill(question_template(kb, steps[-1]), inner)
    return text[:1].upper() + text[1:]


def compose_question(kb: KnowledgeBase, fact_id: int, rule: str, steps: Sequence[Step],
                     body: Sequence[int]) -> ComposeQuestion:
    """The :class:`ComposeQuestion` of derived fact ``fact_id`` (its body facts in chain order)."""
    s, _, o = kb.facts[int(fact_id)]
    return ComposeQuestion(int(fact_id), rule, tuple(int(b) for b in body), tuple(steps), s,
                           compose_text(kb, steps, s), o)


# ----------------------------------------------------------------------------- parsing back
def _pattern(template: str) -> re.Pattern:
    head, _, tail = template.partition("{x}")
    return re.compile(re.escape(head) + "(.+)" + re.escape(tail), re.DOTALL)


def parse_compose(kb: KnowledgeBase, text: str, relations: Sequence[str] | None = None,
                  max_steps: int = 6) -> list[tuple[str, tuple[Step, ...]]]:
    """Every way to read ``text`` as a compose question of ``kb``: ``(named entity, steps)``.
    ``relations`` limits the relations tried (default: all the KB's)."""
    rels = list(kb.relations) if relations is None else list(relations)
    options = [Step(r, f) for r in rels for f in (True, False)]
    phrases, finals = [], []
    for s in options:
        try:
            phrases.append((s, _pattern(phrase(kb, s))))
            finals.append((s, _pattern(question_template(kb, s))))
        except ComposeError:
            continue

    def inner(t: str, depth: int) -> list[tuple[str, tuple[Step, ...]]]:
        out = [(t, ())] if t in kb.entities else []
        if depth < max_steps:
            for s, p in phrases:
                m = p.fullmatch(t)
                if m:
                    out += [(e, steps + (s,)) for e, steps in inner(m.group(1), depth + 1)]
        return out

    found = []
    for s, p in finals:
        for t in {text, text[:1].lower() + text[1:]}:
            m = p.fullmatch(t)
            if m:
                found += [(e, steps + (s,)) for e, steps in inner(m.group(1), 1) if steps]
    return list(dict.fromkeys(found))


# ----------------------------------------------------------------------------- the file
def read_compose(kb: KnowledgeBase, path, *, flag: str = "--compose") -> list[ComposeQuestion]:
    """The questions of a compose file (``deepunlearn rules compose -o FILE``), checked against
    ``kb``: each names a fact of it whose object is its answer; anything else is one
    :class:`ComposeError` naming ``flag``, the file and the problem."""
    import json

    from ..errors import read_text

    text = read_text(path, error=ComposeError, flag=flag)
    try:
        doc = json.loads(text)
        rows = doc["questions"]
        questions = [ComposeQuestion.from_json(r) for r in rows]
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ComposeError(f"{flag} {path}: not a compose file ('deepunlearn rules compose -o FILE' writes one): "
                           f"{type(e).__name__} {e}", field=flag) from None
    for q in questions:
        if not 0 <= q.fact_id < len(kb.facts) or kb.facts[q.fact_id][0] != q.start or kb.facts[q.fact_id][2] != q.answer:
            raise ComposeError(f"{flag} {path}: question {q.text!r} names fact {q.fact_id}, which this KB does not "
                               f"hold as {q.start!r} ... {q.answer!r} (a file of another KB?)", field=flag)
    return questions
