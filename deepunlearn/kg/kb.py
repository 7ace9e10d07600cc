"""The knowledge base: entities, facts, targets and question/answer templates.

A fact ``(o1, r, o2)`` reads "o2 is o1's r". An entity relation relates two entities (``father``,
``manager``); a value relation gives an entity a value (``birthyear`` -> "1908"). Every relation
belongs to a group (``family`` and ``biography`` in the family domain; a domain names its own) and
accuracy is reported per group. Entity attributes such as
gender are *background*: the rules may use them, but they are never unlearned and never
counted in recall or accuracy.

Inside, facts are interned to integer ids (their position in the file) so that the rules
layer can index them with numpy arrays.
"""

from __future__ import annotations

import string
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import compress
from typing import Iterable, Iterator, Literal, Sequence

import numpy as np

from ..errors import UserError

#: What a relation's object is: an entity of the KB ("o2 is o1's father") or a free value
#: ("1908 is o1's birthyear"). Version-1 files call them "family" and "biography".
Kind = Literal["entity", "value"]
LEGACY_KINDS = {"family": "entity", "biography": "value"}
#: The group of a relation that declares none: the two groups of version-1 files.
DEFAULT_GROUPS = {"entity": "family", "value": "biography"}
Fact = tuple[str, str, str]

FAMILY_RELATIONS = (
    "child", "father", "mother", "husband", "wife", "brother", "sister",
    "aunt", "uncle", "nephew", "niece",
)
BIOGRAPHY_ATTRIBUTES = ("birthyear", "birthplace", "job")

#: The paper's probe templates (Table 1): the question names the fact's subject (and, for a
#: relation, its object); the answer is the relation name or the attribute value.
DEFAULT_FAMILY_TEMPLATE = ("Who is {o2} to {o1}?", "{r}")
DEFAULT_BIOGRAPHY_TEMPLATE = ("What is the {r} of {o1}?", "{o2}")


class KBError(UserError, ValueError):
    """A knowledge base is inconsistent or a reference into it is wrong."""


#: The fields a probe template may name: the fact's subject, relation and object.
TEMPLATE_FIELDS = ("o1", "r", "o2")


def template_problem(template: str) -> str | None:
    """Why ``template`` is not a plain probe template, or ``None`` if it is.

    A template may name only :data:`TEMPLATE_FIELDS`, each as a plain ``{o1}``: no format spec
    (``{o2:>300000000}`` asked ``str.format`` for gigabytes), no conversion
    (``{o1!r}``), no attribute or index access (``{o1.__class__}``, ``{o1[0]}``), no positional
    ``{}``. Literal braces are written ``{{`` and ``}}``.

    >>> template_problem("Who is {o2} to {o1}?") is None
    True
    >>> template_problem("Who is {o2:>300000000} to {o1}?")
    "placeholder {o2:>300000000} has a format spec ('>300000000')"
    """
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as e:
        return f"not a valid template ({e}; write a literal brace as {{{{ or }}}})"
    for _, name, spec, conv in parts:
        if name is None:
            continue
        shown = "{" + name + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}"
        if conv:
            return f"placeholder {shown} has a conversion ('!{conv}')"
        if spec:
            return f"placeholder {shown} has a format spec ({spec!r})"
        if name not in TEMPLATE_FIELDS:
            return f"placeholder {shown} is not a template field"
    return None


def check_template(relation: str, role: str, template: str) -> None:
    """:class:`KBError` naming the relation and the template unless ``template`` is plain
    (see :func:`template_problem`); ``role`` is ``"question"`` or ``"answer"``."""
    if not isinstance(template, str):
        raise KBError(f"relation {relation!r}: {role} template must be a string, found {template!r}",
                      field=f"relations.{relation}.{role}")
    problem = template_problem(template)
    if problem is not None:
        raise KBError(f"relation {relation!r}: {role} template {template!r}: {problem}; templates may use only "
                      "plain {o1}, {r}, {o2}", field=f"relations.{relation}.{role}")


@dataclass(frozen=True)
class Relation:
    """A relation: what its object is (``kind``), its ``group`` (accuracy is reported per group)
    and its probe templates, all checked on creation (see :func:`check_template`).

    ``question`` is the primary probe; ``paraphrases`` are further questions (probe forms ``qa1``,
    ``qa2``, ...) and ``statements`` sentences that state the fact (forms ``st1``, ...). ``kind``
    accepts the version-1 words ``family`` / ``biography`` (read as ``entity`` / ``value``); a
    relation without a ``group`` is in ``family`` (entity objects) or ``biography`` (values), the
    two groups of version-1 files.

    >>> r = Relation("father", "family", "Who is {o2} to {o1}?", "{r}")
    >>> r.kind, r.group, r.questions
    ('entity', 'family', ('Who is {o2} to {o1}?',))
    """

    name: str
    kind: Kind
    question: str
    answer: str
    group: str = ""
    paraphrases: tuple[str, ...] = ()
    statements: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        kind = LEGACY_KINDS.get(self.kind, self.kind)
        if kind not in DEFAULT_GROUPS:
            raise KBError(f"relation {self.name!r}: kind must be entity or value, found {self.kind!r}",
                          field=f"relations.{self.name}.kind")
        object.__setattr__(self, "kind", kind)
        if not self.group:
            object.__setattr__(self, "group", DEFAULT_GROUPS[kind])
        object.__setattr__(self, "paraphrases", tuple(self.paraphrases))
        object.__setattr__(self, "statements", tuple(self.statements))
        check_template(self.name, "question", self.question)
        check_template(self.name, "answer", self.answer)
        for k, t in enumerate(self.paraphrases):
            check_template(self.name, f"questions.{k + 1}", t)
        for k, t in enumerate(self.statements):
            check_template(self.name, f"statements.{k}", t)

    @property
    def questions(self) -> tuple[str, ...]:
        """Every question template, the primary one first."""
        return (self.question, *self.paraphrases)

    @classmethod
    def default(cls, name: str, kind: str) -> "Relation":
        """The paper's template (Table 1) for an entity relation ("Who is {o2} to {o1}?", answer the
        relation's name) or a value relation ("What is the {r} of {o1}?", answer the value)."""
        kind = LEGACY_KINDS.get(kind, kind)
        q, a = DEFAULT_FAMILY_TEMPLATE if kind == "entity" else DEFAULT_BIOGRAPHY_TEMPLATE
        return cls(name, kind, q, a)


@dataclass(frozen=True)
class Probe:
    """One question/answer pair that tests whether a model knows one fact."""

    fact_id: int
    question: str
    answer: str


@dataclass
class KnowledgeBase:
    """Entities with attributes, facts over them, evaluation targets and probe templates.

    ``facts[i]`` is fact id ``i``. ``probe_overrides`` keeps a dataset's own wording of a
    probe where it differs from the relation's template (the EDU-RELAT import uses it).

    Examples
    --------
    >>> kb = KnowledgeBase.build(
    ...     entities={"Ann": {"gender": "female"}, "Bob": {"gender": "male"}},
    ...     facts=[("Ann", "husband", "Bob"), ("Bob", "wife", "Ann"), ("Ann", "birthyear", "1950")],
    ...     targets=[0],
    ... )
    >>> kb.fact_id(("Bob", "wife", "Ann"))
    1
    >>> kb.probe(0).question, kb.probe(0).answer
    ('Who is Bob to Ann?', 'husband')
    >>> kb.probe(2).question, kb.probe(2).answer
    ('What is the birthyear of Ann?', '1950')
    >>> kb.relation_counts()["wife"]
    1
    """

    entities: dict[str, dict[str, str]]
    relations: dict[str, Relation]
    facts: list[Fact]
    targets: list[int] = field(default_factory=list)
    name: str = "kb"
    background: tuple[str, ...] = ("gender",)
    probe_overrides: dict[int, tuple[str, str]] = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)
    #: explicit probe forms (:class:`~deepunlearn.kg.forms.Form`: imported or added from a forms
    #: file) and the splits of the template forms by name (:mod:`deepunlearn.kg.forms`)
    forms: list = field(default_factory=list)
    form_splits: dict[str, str] = field(default_factory=dict)

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(
        cls,
        entities: dict[str, dict[str, str]],
        facts: Iterable[Sequence[str]],
        targets: Iterable[int] = (),
        relations: dict[str, Relation] | None = None,
        **kw,
    ) -> "KnowledgeBase":
        """Make a KB, giving every relation without a declaration the default template.

        A relation named like a family relation, or whose object is an entity, is an entity
        relation (group ``family``); anything else is a value attribute (group ``biography``).
        """
        facts = [tuple(f) for f in facts]
        relations = dict(relations or {})
        for s, r, o in facts:
            if r not in relations:
                kind: Kind = "entity" if (r in FAMILY_RELATIONS or o in entities) else "value"
                relations[r] = Relation.default(r, kind)
        kb = cls(entities=dict(entities), relations=relations, facts=facts, targets=list(targets), **kw)
        kb.validate()
        return kb

    def validate(self) -> None:
        """Check references: subjects are entities, objects of entity relations are entities, targets exist,
        no fact appears twice, names are one printable line each (:mod:`.names`). Raises
        :class:`KBError` naming the first problem."""
        from .names import check_kb_names

        check_kb_names(self, KBError)
        if not self._facts_fine():  # a bad fact: find the first, in file order, for the message
            for i, (s, r, o) in enumerate(self.facts):
                if s not in self.entities:
                    raise KBError(f"facts[{i}]: subject {s!r} is not a declared entity")
                rel = self.relations.get(r)
                if rel is None:
                    raise KBError(f"facts[{i}]: relation {r!r} is not declared")
                if rel.kind == "entity" and o not in self.entities:
                    raise KBError(f"facts[{i}]: object {o!r} of entity relation {r!r} is not a declared entity")
            seen: dict[Fact, int] = {}
            for i, f in enumerate(self.facts):
                if f in seen:
                    raise KBError(f"facts[{i}]: duplicate of facts[{seen[f]}] {list(f)}")
                seen[f] = i
        for j, t in enumerate(self.targets):
            if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
                raise KBError(f"targets[{j}]: expected a fact index (an integer), found {t!r}", field=f"targets.{j}")
            if not (0 <= t < len(self.facts)):
                raise KBError(f"targets[{j}]: fact index {t} out of range (KB has {len(self.facts)} facts)")
        for i in self.probe_overrides:
            if not (0 <= i < len(self.facts)):
                raise KBError(f"probes: fact index {i} out of range")
        for j, f in enumerate(self.forms):
            if not (0 <= f.fact_id < len(self.facts)):
                raise KBError(f"forms[{j}]: fact index {f.fact_id} out of range", field=f"forms.{j}")

    def _facts_fine(self) -> bool:
        """Whether every fact's names are declared and no fact repeats, by set operations (C loops:
        millions of facts in about a second, where per-fact look-ups took several)."""
        subjects, rels, objects = zip(*self.facts) if self.facts else ((), (), ())
        if not (self.entities.keys() >= set(subjects) and self.relations.keys() >= set(rels)):
            return False
        entity_rels = {n for n, rel in self.relations.items() if rel.kind == "entity"}
        return (self.entities.keys() >= set(compress(objects, map(entity_rels.__contains__, rels)))
                and len(set(self.facts)) == len(self.facts))

    # ------------------------------------------------------------------ interning
    @cached_property
    def _index(self) -> dict[Fact, int]:
        return {f: i for i, f in enumerate(self.facts)}

    @cached_property
    def relation_names(self) -> list[str]:
        return list(self.relations)

    @cached_property
    def entity_mask(self) -> np.ndarray:
        """Boolean array over fact ids: True where the object is an entity (family relations)."""
        return np.array([self.relations[r].kind == "entity" for _, r, _ in self.facts], dtype=bool)

    @cached_property
    def groups(self) -> list[str]:
        """The relation groups, in the order the relations declare them (``family``, ``biography``
        for the family domain and version-1 files)."""
        return list(dict.fromkeys(rel.group for rel in self.relations.values()))

    @cached_property
    def group_masks(self) -> dict[str, np.ndarray]:
        """Per group, a boolean array over fact ids: True for the facts of its relations."""
        of = np.array([self.relations[r].group for _, r, _ in self.facts], dtype=object)
        return {g: (of == g) if len(of) else np.zeros(0, dtype=bool) for g in self.groups}

    def group_of(self, fact_id: int) -> str:
        return self.relations[self.facts[fact_id][1]].group

    def fact_id(self, fact: Sequence[str]) -> int:
        """The id of a fact, or :class:`KBError` if the KB does not hold it."""
        try:
            return self._index[tuple(fact)]  # type: ignore[index]
        except KeyError:
            raise KBError(f"fact {list(fact)} is not in knowledge base {self.name!r}") from None

    def __contains__(self, fact: object) -> bool:
        return isinstance(fact, (tuple, list)) and tuple(fact) in self._index

    def __len__(self) -> int:
        return len(self.facts)

    def resolve(self, ref: int | str | Sequence[str]) -> int:
        """A fact reference in any of the CLI's forms -> fact id.

        ``7``, ``"7"``, ``"S|r|O"`` or ``["S", "r", "O"]``.

        >>> kb = KnowledgeBase.build({"A": {}, "B": {}}, [("A", "child", "B")])
        >>> kb.resolve("A|child|B"), kb.resolve("0"), kb.resolve(["A", "child", "B"])
        (0, 0, 0)
        """
        if isinstance(ref, (int, np.integer)):
            i = int(ref)
            if not 0 <= i < len(self.facts):
                raise KBError(f"fact index {i} out of range (KB has {len(self.facts)} facts)")
            return i
        if isinstance(ref, str):
            if ref.strip().lstrip("-").isdigit():
                return self.resolve(int(ref))
            parts = ref.split("|")
            if len(parts) != 3:
                raise KBError(f"cannot read fact {ref!r}: expected an index or 'subject|relation|object'")
            return self.fact_id(tuple(p.strip() for p in parts))
        if isinstance(ref, (list, tuple)) and len(ref) == 3:
            return self.fact_id(tuple(str(x) for x in ref))
        raise KBError(f"cannot read fact reference {ref!r}")

    # ------------------------------------------------------------------ views
    def entity_facts(self) -> list[int]:
        """Fact ids whose object is an entity (the family facts of a family KB)."""
        return [int(i) for i in np.flatnonzero(self.entity_mask)]

    def relation_counts(self) -> dict[str, int]:
        """Facts per relation, biography attributes included, in order of first use."""
        return dict(Counter(r for _, r, _ in self.facts))

    def attribute(self, entity: str, key: str) -> str | None:
        return self.entities.get(entity, {}).get(key)

    def probe(self, fact_id: int) -> Probe:
        """The question/answer pair for one fact."""
        if fact_id in self.probe_overrides:
            q, a = self.probe_overrides[fact_id]
            return Probe(fact_id, q, a)
        s, r, o = self.facts[fact_id]
        rel = self.relations[r]
        return Probe(fact_id, rel.question.format(o1=s, r=r, o2=o), rel.answer.format(o1=s, r=r, o2=o))

    def probes(self, fact_ids: Iterable[int] | None = None) -> list[Probe]:
        ids = range(len(self.facts)) if fact_ids is None else fact_ids
        return [self.probe(i) for i in ids]

    def __iter__(self) -> Iterator[Fact]:
        return iter(self.facts)

    def subset(self, fact_ids: Iterable[int], name: str | None = None) -> "KnowledgeBase":
        """A KB holding only some facts (same entities and templates). Targets (and the canary
        facts of ``metadata["canaries"]``) are kept where their fact survives and renumbered."""
        ids = sorted(set(int(i) for i in fact_ids))
        remap = {old: new for new, old in enumerate(ids)}
        metadata = dict(self.metadata)
        canaries = metadata.get("canaries")
        if isinstance(canaries, dict) and isinstance(canaries.get("facts"), list):
            metadata["canaries"] = {**canaries, "facts": [remap[i] for i in canaries["facts"] if i in remap]}
        return KnowledgeBase(
            entities=self.entities,
            relations=self.relations,
            facts=[self.facts[i] for i in ids],
            targets=[remap[t] for t in self.targets if t in remap],
            name=name or self.name,
            background=self.background,
            probe_overrides={remap[i]: v for i, v in self.probe_overrides.items() if i in remap},
            metadata=metadata,
            forms=[replace(f, fact_id=remap[f.fact_id]) for f in self.forms if f.fact_id in remap],
            form_splits=dict(self.form_splits),
        )
