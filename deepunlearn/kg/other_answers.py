"""Questions with several right answers, and how a probe counts each of them.

"Who is Ann's child?" has as many right answers as Ann has children, and each is a fact of its
own: (Ann, child, Bob), (Ann, child, Cara). A KB says how the probe judges such a question in
``metadata["other_answers"]``:

``wrong`` (absent: the default)
    the fact's own answer must be the model's answer; another right answer counts as wrong. The
    paper's questions ("Who is {o2} to {o1}?" -> relation) never have a second right answer, so
    on its data the two rules agree.
``aside``
    the other right answers of the same question (the answers of the facts with the same subject
    and relation whose form asks the same text) are set aside. Under ``exact`` the fact's answer
    must be the greedy answer once, at each answer position, the tokens by which another right
    answer continues the same prefix are taken out (a filtered greedy answer); under ``rank`` it
    must rank first among the candidates that are not right answers (the *filtered* ranking of
    knowledge-graph completion, Bordes et al., 2013). A yes/no distractor is never a right answer
    under either rule (:func:`deepunlearn.kg.candidates.perturbed`). ``generate`` is the same under
    both: a greedy output names one answer, so it finds one child of several.

``data generate --questions person`` records ``aside`` (every family relation asked for the
person); ``data generate --other-answers aside`` sets it on any KB.

>>> from deepunlearn.kg.kb import KnowledgeBase, Relation
>>> kb = KnowledgeBase.build({"Ann": {}, "Bob": {}, "Cara": {}}, [("Ann", "child", "Bob"), ("Ann", "child", "Cara")])
>>> kb.relations["child"] = Relation("child", "entity", "Who is {o1}'s child?", "{o2}")
>>> other_answers_rule(kb), sorted(primary_others(kb, 0))
('wrong', [])
>>> sorted(primary_others(set_other_answers(kb, "aside"), 0))
['Cara']
"""

from __future__ import annotations

from .kb import KBError, KnowledgeBase

#: how a question with several right answers is judged (module docstring)
OTHER_ANSWERS = ("wrong", "aside")
_KEY = "other_answers"
_SIBLINGS = "_other_answers_siblings"


def other_answers_rule(kb: KnowledgeBase) -> str:
    """The KB's rule for questions with several right answers: ``wrong`` (absent) or ``aside``."""
    v = kb.metadata.get(_KEY) if isinstance(kb.metadata, dict) else None
    return v if v in OTHER_ANSWERS else "wrong"


def set_other_answers(kb: KnowledgeBase, rule: str) -> KnowledgeBase:
    """``kb`` with its rule set to ``rule`` (in place, returned); ``wrong`` removes the key, so a
    KB keeps the bytes and the fingerprint it had."""
    if rule not in OTHER_ANSWERS:
        raise KBError(f"--other-answers: expected one of {', '.join(OTHER_ANSWERS)}, got {rule!r}",
                      field="--other-answers")
    if rule == "wrong":
        kb.metadata.pop(_KEY, None)
    else:
        kb.metadata[_KEY] = rule
    return kb


def _siblings(kb: KnowledgeBase, fact_id: int) -> list[int]:
    """The other facts with the same subject and relation as ``fact_id``."""
    index = kb.__dict__.get(_SIBLINGS)
    if index is None:
        index = {}
        for j, (s, r, _) in enumerate(kb.facts):
            index.setdefault((s, r), []).append(j)
        kb.__dict__[_SIBLINGS] = index
    s, r, _ = kb.facts[int(fact_id)]
    return [j for j in index[(s, r)] if j != int(fact_id)]


def primary_others(kb: KnowledgeBase, fact_id: int) -> set[str]:
    """The other right answers of fact ``fact_id``'s primary question that the probe sets aside:
    :func:`~deepunlearn.kg.candidates.true_answers` less its own (empty under ``wrong``)."""
    from .candidates import true_answers

    if other_answers_rule(kb) != "aside":
        return set()
    return true_answers(kb, fact_id) - {kb.probe(int(fact_id)).answer}


def other_forms(kb: KnowledgeBase, form) -> list:
    """The forms of ``form``'s other right answers that the probe sets aside: the same-named forms
    of the fact's siblings that ask the same text with another answer (empty under ``wrong`` and
    for yes/no forms), one per answer."""
    from .forms import forms_of

    if form.kind == "yesno" or other_answers_rule(kb) != "aside":
        return []
    out = {}
    for j in _siblings(kb, form.fact_id):
        for g in forms_of(kb, j):
            if g.name == form.name and g.kind == form.kind and g.prompt == form.prompt and g.answer != form.answer:
                out.setdefault(g.answer, g)
    return [out[a] for a in sorted(out)]


def form_others(kb: KnowledgeBase, form) -> set[str]:
    """The answers of :func:`other_forms`: what ``rank`` leaves out of ``form``'s candidates."""
    return {g.answer for g in other_forms(kb, form)}
