"""Probe forms: the several ways one fact can be asked.

A fact has many *forms*; each is one of three kinds:

``qa``
    a question and its answer, the kind every KB has had: the relation's template
    (:meth:`KnowledgeBase.probe`) is the form named ``primary``.
``statement``
    a sentence with the answer span inside (``"Richard Perry is Reid Perry's father."`` with
    answer ``"father"``). The probe is the text before the first occurrence of the answer at a
    position > 0 (an answer that only opens the sentence leaves nothing to ask with, and is an
    error); :attr:`Form.rest` is what follows it.
``yesno``
    a yes/no question whose answer is ``"yes"`` (the fact as stated) or ``"no"`` (a false
    *distractor*: the fact with a wrong answer of its type put in the answer's place).

Where forms come from, in this order (:func:`forms_of`):

1. ``primary``: the relation's question/answer template or the KB's own wording
   (``probe_overrides``), today's probe;
2. the built-in templates of the built-in relations (:data:`FAMILY_TEMPLATES`,
   :data:`BIOGRAPHY_TEMPLATES`): three question paraphrases ``qa1..qa3``, three statements
   ``st1..st3`` and a yes/no pair ``yes1``/``no1`` per relation (``no1``'s distractor is
   :func:`~deepunlearn.kg.candidates.perturbed`'s first wrong answer, seed 0); a statement
   template whose answer also occurs before its slot (in a name: "The job of Ann Smith is Ann.")
   is left out for that fact, since its probe would be cut at the wrong place;
3. the KB's explicit forms (``kb.forms``): the EDU-RELAT import's ``question`` (statement),
   ``question2`` (yes/no, true), ``question3`` (yes/no, false distractor), ``question4`` (QA),
   and any added from a forms file (``data forms --add``, :mod:`~deepunlearn.kg.forms_file`).
   Their names may not be a template's (:data:`TEMPLATE_NAMES`) or a selection word
   (:func:`name_problem`), so a ``--forms``/``--label`` name means one thing.

A form carries a *split* (``train``, ``test``, ``unlearn`` or none): explicit forms their own,
template forms (``primary`` included) the one ``kb.form_splits`` gives their name.

A *selection* (``--forms``) is a comma list of tokens: ``default`` (the primary form only,
today's behaviour), ``all``, a split name, or a form name; a fact takes every form any token
picks, and a fact that none picks falls back to its primary form
(:class:`FormSelection.fallback` counts them).
"""

from __future__ import annotations

import re

from dataclasses import dataclass, field
from typing import Iterable, Literal, Sequence

from .kb import KBError, KnowledgeBase

FormKind = Literal["qa", "statement", "yesno"]
FORM_KINDS = ("qa", "statement", "yesno")
SPLITS = ("train", "test", "unlearn")
PRIMARY = "primary"
#: Selection tokens that are not form names or splits.
SPECIAL = ("default", "all")


class FormError(KBError):
    """A form, a forms file or a form selection is wrong: the message names it."""


def statement_position(text: str, answer: str) -> int:
    """Where the answer span of a statement starts: its first occurrence at a position > 0.

    >>> statement_position("Ann is Bob's wife.", "wife")
    13
    >>> statement_position("wife of Bob is Ann, his wife.", "wife")
    24
    """
    if not answer:
        raise FormError("statement form: the answer is empty")
    pos = text.find(answer, 1)
    if pos < 0:
        where = "only at the start of" if text.startswith(answer) else "not in"
        raise FormError(f"statement form: answer {answer!r} is {where} its text {text!r} (a statement needs "
                        "text before the answer to ask with)")
    return pos


@dataclass(frozen=True)
class Form:
    """One way to ask fact ``fact_id``: see the module docstring for the kinds.

    ``text`` is the question (``qa``, ``yesno``) or the whole sentence (``statement``).

    >>> f = Form(0, "statement", "Ann is Bob's wife.", "wife", "st1")
    >>> f.prompt, f.answer, f.rest
    ("Ann is Bob's ", 'wife', '.')
    """

    fact_id: int
    kind: str
    text: str
    answer: str
    name: str
    split: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in FORM_KINDS:
            raise FormError(f"form {self.name!r}: kind must be one of {', '.join(FORM_KINDS)}, got {self.kind!r}")
        if self.split is not None and self.split not in SPLITS:
            raise FormError(f"form {self.name!r}: split must be one of {', '.join(SPLITS)} or none, got {self.split!r}")
        if self.kind == "yesno" and self.answer not in ("yes", "no"):
            raise FormError(f"form {self.name!r}: a yes/no form's answer is 'yes' or 'no', got {self.answer!r}")
        if not self.text.strip():
            raise FormError(f"form {self.name!r}: the {'text' if self.kind == 'statement' else 'question'} is empty")
        if self.kind == "statement":
            statement_position(self.text, self.answer)
        elif not self.answer:
            raise FormError(f"form {self.name!r}: the answer is empty")

    @property
    def prompt(self) -> str:
        """What the model is asked: the question, or a statement's text before its answer."""
        if self.kind == "statement":
            return self.text[:statement_position(self.text, self.answer)]
        return self.text

    @property
    def rest(self) -> str:
        """A statement's text after the answer span ("" for the other kinds)."""
        if self.kind != "statement":
            return ""
        return self.text[statement_position(self.text, self.answer) + len(self.answer):]

    def with_split(self, split: str | None) -> "Form":
        return Form(self.fact_id, self.kind, self.text, self.answer, self.name, split)

    def to_json(self) -> dict:
        """The forms-file line of this form (plus its name and split)."""
        key = "text" if self.kind == "statement" else "question"
        out = {"fact_id": self.fact_id, "kind": self.kind, key: self.text, "answer": self.answer, "name": self.name}
        if self.split is not None:
            out["split"] = self.split
        return out


@dataclass(frozen=True)
class Template:
    """A form template over ``{o1}``, ``{r}``, ``{o2}``. Its answer is the relation's answer
    (``{r}`` for a family relation, ``{o2}`` for an attribute); a yes/no template's ``no`` form
    puts a wrong answer in that slot."""

    name: str
    kind: str
    text: str


def _family(qa: Sequence[str], st: Sequence[str], yn: str) -> list[Template]:
    return ([Template(f"qa{k}", "qa", q) for k, q in enumerate(qa, 1)]
            + [Template(f"st{k}", "statement", s) for k, s in enumerate(st, 1)]
            + [Template("yes1", "yesno", yn)])


#: Every family relation: the answer is the relation's name ``{r}``, as in the primary form.
FAMILY_TEMPLATES = _family(
    ("What relation is {o2} to {o1}?", "How is {o2} related to {o1}?", "In the family of {o1}, who is {o2}?"),
    ("{o2} is {o1}'s {r}.", "{o2} is the {r} of {o1}.", "In {o1}'s family, {o2} is the {r}."),
    "Is {o2} {o1}'s {r}?",
)
#: Per biography attribute: the answer is the value ``{o2}``.
BIOGRAPHY_TEMPLATES = {
    "birthyear": _family(
        ("In which year was {o1} born?", "When was {o1} born?", "What year was {o1} born in?"),
        ("{o1} was born in {o2}.", "The birthyear of {o1} is {o2}.", "{o1}'s year of birth is {o2}."),
        "Was {o1} born in {o2}?",
    ),
    "birthplace": _family(
        ("Where was {o1} born?", "In which place was {o1} born?", "Which place does {o1} come from?"),
        ("{o1} was born in {o2}.", "The birthplace of {o1} is {o2}.", "{o1} comes from {o2}."),
        "Was {o1} born in {o2}?",
    ),
    "job": _family(
        ("What does {o1} do for a living?", "What is {o1}'s job?", "What is the occupation of {o1}?"),
        ("{o1}'s job is {o2}.", "The job of {o1} is {o2}.", "{o1} earns a living as {o2}."),
        "Is the job of {o1} {o2}?",
    ),
}


#: The names of the built-in template forms (``primary`` included): an explicit form may not take one.
TEMPLATE_NAMES = tuple(dict.fromkeys(
    [PRIMARY] + [t.name for ts in [FAMILY_TEMPLATES, *BIOGRAPHY_TEMPLATES.values()] for t in ts]
    + ["no" + t.name.removeprefix("yes") for t in FAMILY_TEMPLATES if t.kind == "yesno"]))


def is_template_name(name: str) -> bool:
    """Whether ``name`` is (or could be) a template form's name: ``primary``, ``qaN``, ``stN``,
    ``yesN``, ``noN`` (a domain's relation may have more paraphrases than the built-in three)."""
    return name in TEMPLATE_NAMES or re.fullmatch(r"(qa|st|yes|no)[1-9][0-9]*", name) is not None


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name an explicit form (``None`` if it can): a template's name, a
    selection word (``default``, ``all``, a split), or a name a ``--forms`` list cannot hold."""
    if not name or name != name.strip():
        return "is empty or starts or ends with whitespace"
    if is_template_name(name):
        return f"is a built-in template's name ({', '.join(TEMPLATE_NAMES)}, qaN, stN)"
    if name in SPECIAL or name in SPLITS:
        return f"is a --forms selection word ({', '.join(SPECIAL + SPLITS)})"
    if "," in name or not name.isprintable():
        return "holds a comma or an unprintable character (--forms takes a comma list of names)"
    return None


def templates_for(kb: KnowledgeBase, relation: str) -> list[Template]:
    """The template forms of a relation: its own paraphrases (``qa1``...) and statements
    (``st1``...) where it declares any (KB version 2, from a domain's ``domain.toml``), else the
    built-in ones of a family relation or biography attribute; plus the built-in yes/no template of
    a built-in relation (a family relation asked for the person, answer ``{o2}``, gets the yes/no
    pair alone: its ``no`` form names another person). None for a relation that is not built in
    and declares none, or whose answer template is neither the built-in one (``{r}`` for family,
    ``{o2}`` for an attribute) nor ``{o2}``."""
    from .kb import FAMILY_RELATIONS

    rel = kb.relations[relation]
    builtin: list[Template] = []
    if rel.kind == "entity" and relation in FAMILY_RELATIONS and rel.answer == "{r}":
        builtin = FAMILY_TEMPLATES
    elif rel.kind == "entity" and relation in FAMILY_RELATIONS and rel.answer == "{o2}":
        builtin = [t for t in FAMILY_TEMPLATES if t.kind == "yesno"]  # asked for the person: "Is {o2} ...?"
    elif rel.kind == "value" and relation in BIOGRAPHY_TEMPLATES and rel.answer == "{o2}":
        builtin = BIOGRAPHY_TEMPLATES[relation]
    if not rel.paraphrases and not rel.statements:
        return builtin
    return ([Template(f"qa{k}", "qa", q) for k, q in enumerate(rel.paraphrases, 1)]
            + [Template(f"st{k}", "statement", t) for k, t in enumerate(rel.statements, 1)]
            + [t for t in builtin if t.kind == "yesno"])


def _template_forms(kb: KnowledgeBase, i: int) -> list[Form]:
    from .candidates import perturbed

    s, r, o = kb.facts[i]
    rel = kb.relations[r]
    templates = templates_for(kb, r)
    if not templates:
        return []
    answer = rel.answer.format(o1=s, r=r, o2=o)
    out = []
    slot = "{r}" if rel.answer == "{r}" else "{o2}"
    for t in templates:
        form = Form(i, t.kind, t.text.format(o1=s, r=r, o2=o), "yes" if t.kind == "yesno" else answer, t.name)
        if t.kind == "statement" and form.prompt != t.text.split(slot, 1)[0].format(o1=s, r=r, o2=o):
            continue  # the answer also occurs before its slot (in a name): the probe would be cut there
        out.append(form)
        if t.kind == "yesno":
            wrong = perturbed(kb, i, 1, seed=0)
            if wrong:
                d = wrong[0]
                text = t.text.format(o1=s, r=d, o2=o) if rel.answer == "{r}" else t.text.format(o1=s, r=r, o2=d)
                out.append(Form(i, "yesno", text, "no", "no" + t.name.removeprefix("yes")))
    return out


_CACHE = "_forms_cache"


def forms_of(kb: KnowledgeBase, fact_id: int) -> list[Form]:
    """Every form of one fact: primary, built-in templates, explicit forms (module docstring),
    with their splits. Computed once per KB object and fact."""
    cache = kb.__dict__.setdefault(_CACHE, {})
    i = int(fact_id)
    if i not in cache:
        if not 0 <= i < len(kb.facts):
            raise KBError(f"fact index {i} out of range (KB has {len(kb.facts)} facts)")
        p = kb.probe(i)
        base = [Form(i, "qa", p.question, p.answer, PRIMARY)] + _template_forms(kb, i)
        splits = kb.form_splits
        cache[i] = [f.with_split(splits.get(f.name)) for f in base] + [f for f in kb.forms if f.fact_id == i]
    return cache[i]


def form_names(kb: KnowledgeBase) -> list[str]:
    """The names of every form the KB has, in first-seen order (primary first)."""
    names = {PRIMARY: None}
    for r in kb.relations:
        for t in templates_for(kb, r):
            names[t.name] = None
            if t.kind == "yesno":
                names["no" + t.name.removeprefix("yes")] = None
    for f in kb.forms:
        names[f.name] = None
    return list(names)


@dataclass
class FormSelection:
    """The forms a ``--forms`` selection gives each fact; ``fallback`` lists the facts none of
    whose forms it picks (they get their primary form)."""

    spec: str
    forms: dict[int, list[Form]] = field(default_factory=dict)
    fallback: list[int] = field(default_factory=list)

    def all(self) -> list[Form]:
        return [f for fs in self.forms.values() for f in fs]


def parse_selection(kb: KnowledgeBase, spec: str | None, *, flag: str = "--forms") -> list[str]:
    """The tokens of a selection, checked: each is ``default``, ``all``, a split or a form name
    of ``kb``; anything else is a :class:`FormError` naming ``flag`` and the names there are."""
    if spec is None or str(spec).strip() == "":
        return ["default"]
    tokens = [t.strip() for t in str(spec).split(",") if t.strip()]
    names = form_names(kb)
    for t in tokens:
        if t not in SPECIAL and t not in SPLITS and t not in names:
            raise FormError(f"{flag}: {t!r} is not a form of this KB, a split or 'default'/'all' (forms: "
                            f"{', '.join(names)}; splits: {', '.join(SPLITS)})", field=flag)
    return tokens or ["default"]


def select_forms(kb: KnowledgeBase, spec: str | None, fact_ids: Iterable[int] | None = None, *,
                 kinds: Sequence[str] = FORM_KINDS, flag: str = "--forms") -> FormSelection:
    """The forms of ``fact_ids`` (all facts by default) that ``spec`` picks, of the ``kinds``
    asked for (a probe mode that cannot use yes/no forms asks for ``qa`` and ``statement``)."""
    tokens = parse_selection(kb, spec, flag=flag)
    ids = range(len(kb.facts)) if fact_ids is None else [int(i) for i in fact_ids]
    want_all = "all" in tokens
    sel = FormSelection(spec=",".join(tokens))
    for i in ids:
        fs = forms_of(kb, i)
        picked = [f for f in fs if f.kind in kinds and (
            want_all or f.name in tokens or (f.split is not None and f.split in tokens)
            or ("default" in tokens and f.name == PRIMARY))]
        if not picked:
            sel.fallback.append(i)
            picked = [fs[0]] if fs[0].kind in kinds else []
        sel.forms[i] = picked
    return sel


def label_forms(kb: KnowledgeBase, names: Iterable[str], split: str | None) -> int:
    """Give the forms named ``names`` the split ``split`` (``None`` clears it): template names
    through ``kb.form_splits``, explicit forms in place. Returns how many names matched."""
    if split is not None and split not in SPLITS:
        raise FormError(f"--split: expected one of {', '.join(SPLITS)}, got {split!r}", field="--split")
    names = list(dict.fromkeys(names))
    known = set(form_names(kb))
    for n in names:
        if n not in known:
            raise FormError(f"--label: {n!r} is not a form of this KB (forms: {', '.join(form_names(kb))})",
                            field="--label")
    explicit = {f.name for f in kb.forms}
    for n in names:
        if n not in explicit:
            if split is None:
                kb.form_splits.pop(n, None)
            else:
                kb.form_splits[n] = split
    kb.forms = [f.with_split(split) if f.name in names else f for f in kb.forms]
    kb.__dict__.pop(_CACHE, None)
    return len(names)


def forms_table(kb: KnowledgeBase, *, explicit_only: bool = False) -> dict[str, dict]:
    """Per form name: ``{"kind", "count", "split", "template"}`` (what ``data forms`` and
    ``data show`` print). ``kind`` is the kinds under that name joined by ``+`` (a template pair
    ``yes1``/``no1`` is one kind each); ``split`` is the one split all its forms share (``None``:
    none), or ``"mixed"`` with ``splits`` counting them (``"none"`` for no split)."""
    from collections import Counter

    groups: dict[str, list[Form]] = {}
    fs = kb.forms if explicit_only else [f for i in range(len(kb.facts)) for f in forms_of(kb, i)]
    for f in fs:
        groups.setdefault(f.name, []).append(f)
    explicit = {f.name for f in kb.forms}
    out = {}
    for name, group in groups.items():
        splits = Counter(f.split for f in group)
        row = {"kind": "+".join(k for k in FORM_KINDS if any(f.kind == k for f in group)), "count": len(group),
               "split": next(iter(splits)) if len(splits) == 1 else "mixed", "template": name not in explicit}
        if len(splits) > 1:
            row["splits"] = {s or "none": n for s, n in sorted(splits.items(), key=lambda x: x[0] or "")}
        out[name] = row
    return out
