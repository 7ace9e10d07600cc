"""Question formats of the family relations: the paper's, and questions answered with the person.

The paper asks every family fact ``(o1, r, o2)`` ("o2 is o1's r") as "Who is {o2} to {o1}?" and
expects the relation's name ("father"). That answer is one of eleven words, and a model can often
tell it from the two names and genders alone (a child shares the father's surname in the paper's
data), so a model that never saw a fact may still answer it.

``entity`` questions ask the four *functional* relations (father, mother, husband, wife: one
object per subject) for the person instead: "Who is {o1}'s father?" answered "{o2}", with
paraphrases and statements ("The father of {o1} is {o2}.") as template forms and the yes/no
form "Is {o2} {o1}'s father?" (its ``no`` twin names another person). The other relations have
several objects per subject (children, siblings, ...), so their question keeps the paper's
format. Candidates for ``rank`` are then every person of the KB
(:mod:`deepunlearn.kg.candidates`).

``person`` questions ask *every* family relation for the person ("Who is {o1}'s child?",
"Name a sister of {o1}."), so no question has a relation word for an answer. A question about
a person with several children (siblings, aunts, ...) then has several right answers, one per
fact; the KB records ``other_answers = "aside"`` (:mod:`deepunlearn.kg.other_answers`): each of
them is probed with the others set aside.

:func:`use_question_format` rewrites a KB's relations and records the choice in
``metadata["questions"]`` (absent: the paper's format); finetuning and every probe mode read the
KB's templates, so they ask the chosen format without any flag.
"""

from __future__ import annotations

from dataclasses import replace

from ...kb import FAMILY_RELATIONS, KBError, KnowledgeBase, Relation

#: The question formats: ``relation`` (the paper's, the default), ``entity`` and ``person``.
QUESTION_FORMATS = ("relation", "entity", "person")
#: The family relations with one object per subject: asked for the person under ``entity``.
FUNCTIONAL_RELATIONS = ("father", "mother", "husband", "wife")


def entity_relation(rel: Relation) -> Relation:
    """``rel`` (a functional family relation) asked for its object: primary question
    "Who is {o1}'s father?", answer ``{o2}``, three paraphrases and three statements.

    >>> from deepunlearn.kg.kb import Relation
    >>> r = entity_relation(Relation.default("father", "entity"))
    >>> r.question, r.answer, r.statements[0]
    ("Who is {o1}'s father?", '{o2}', 'The father of {o1} is {o2}.')
    """
    r = rel.name
    questions = (f"Who is {{o1}}'s {r}?", f"Who is the {r} of {{o1}}?", f"Which person is {{o1}}'s {r}?",
                 f"Name the {r} of {{o1}}.")
    statements = (f"The {r} of {{o1}} is {{o2}}.", f"{{o1}}'s {r} is {{o2}}.", f"{{o1}} has {{o2}} as {r}.")
    return replace(rel, question=questions[0], answer="{o2}", paraphrases=questions[1:], statements=statements)


def person_relation(rel: Relation) -> Relation:
    """``rel`` (any family relation) asked for its object; a functional one as
    :func:`entity_relation`, one with several objects per subject with an indefinite article
    ("Who is a child of {o1}?").

    >>> r = person_relation(Relation.default("aunt", "entity"))
    >>> r.question, r.paraphrases[0], r.answer, r.statements[0]
    ("Who is {o1}'s aunt?", 'Who is an aunt of {o1}?', '{o2}', 'An aunt of {o1} is {o2}.')
    """
    if rel.name in FUNCTIONAL_RELATIONS:
        return entity_relation(rel)
    r = rel.name
    a = "an" if r[0] in "aeiou" else "a"
    questions = (f"Who is {{o1}}'s {r}?", f"Who is {a} {r} of {{o1}}?", f"Which person is {a} {r} of {{o1}}?",
                 f"Name {a} {r} of {{o1}}.")
    statements = (f"{a.capitalize()} {r} of {{o1}} is {{o2}}.", f"{{o1}}'s {r} is {{o2}}.",
                  f"{{o1}} has {{o2}} as {r}.")
    return replace(rel, question=questions[0], answer="{o2}", paraphrases=questions[1:], statements=statements)


def question_format(kb: KnowledgeBase) -> str:
    """The question format a KB records (``metadata["questions"]``; absent: ``relation``)."""
    q = kb.metadata.get("questions") if isinstance(kb.metadata, dict) else None
    return q if q in QUESTION_FORMATS else "relation"


def use_question_format(kb: KnowledgeBase, fmt: str) -> KnowledgeBase:
    """``kb`` with its functional family relations asked in format ``fmt`` (changed in place and
    returned). ``relation`` leaves the KB as it is; ``entity`` needs a KB holding at least one of
    :data:`FUNCTIONAL_RELATIONS` as an entity relation and without its own wording of their probes
    (``probe_overrides``)."""
    if fmt not in QUESTION_FORMATS:
        raise KBError(f"--questions: expected one of {', '.join(QUESTION_FORMATS)}, got {fmt!r}", field="--questions")
    if fmt == "relation":
        return kb
    asked = FUNCTIONAL_RELATIONS if fmt == "entity" else FAMILY_RELATIONS
    rels = [r for r in asked if r in kb.relations and kb.relations[r].kind == "entity"]
    if not rels:
        raise KBError(f"--questions {fmt}: KB {kb.name!r} has none of the "
                      f"{'functional ' if fmt == 'entity' else ''}family relations ({', '.join(asked)})",
                      field="--questions")
    worded = [i for i in kb.probe_overrides if kb.facts[i][1] in rels]
    if worded:
        raise KBError(f"--questions {fmt}: KB {kb.name!r} words {len(worded)} of these facts' probes itself "
                      f"(e.g. fact {worded[0]}); its own wording would be asked instead", field="--questions")
    for r in rels:
        kb.relations[r] = (entity_relation if fmt == "entity" else person_relation)(kb.relations[r])
    kb.metadata["questions"] = fmt
    if fmt == "person":
        from ...other_answers import set_other_answers

        set_other_answers(kb, "aside")
    for cache in ("_forms_cache", "_answer_candidates_cache", "_other_answers_siblings"):
        kb.__dict__.pop(cache, None)
    return kb


def describe_data(kb: KnowledgeBase) -> str | None:
    """One line on how a family KB names its people and asks its questions (``None`` for a KB
    the family generator did not make and that records no question format)."""
    params = kb.metadata.get("params") if isinstance(kb.metadata, dict) else None
    generated = isinstance(params, dict) and "generator" in kb.metadata and "family" in str(kb.metadata["generator"])
    if not generated and "questions" not in kb.metadata:
        return None
    parts = []
    if generated:
        names = params.get("names", "inherited")
        parts.append(f"names {names}" + (" (a child takes the father's surname, the paper's)" if names == "inherited"
                                         else " (surnames drawn per person: no kinship in names)"))
    q = question_format(kb)
    parts.append(f"questions {q}" + (" (\"Who is {o2} to {o1}?\" -> relation, the paper's)" if q == "relation"
                                     else f" ({', '.join(FUNCTIONAL_RELATIONS)} asked \"Who is {{o1}}'s father?\" -> "
                                          "person)" if q == "entity"
                                     else " (every relation asked \"Who is {o1}'s child?\" -> person; the other "
                                          "right answers of a question set aside)"))
    return ", ".join(parts)
