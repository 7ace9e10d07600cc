"""Model-derived recall: does the unlearned model still reach the target by composing facts?

*Rule-derived* deep unlearning (``deep``) asks whether the rules can derive the target from what
the model still knows. It assumes the rules do the composing. *Model-derived* deep unlearning
asks the model itself: the target counts as still model-derived when the model answers it
directly (the run's own probe of the target) or answers any *compose question* of the target
(:mod:`deepunlearn.kg.compose`: the target asked through the body of a rule grounding that
derives it from facts of K, e.g. "On which continent is the country that Lyon lies in?" for
``Lyon on_continent Europe``). ``deep_model`` is its negation. A target that no rule with a
chain body derives has no compose question, so ``deep_model`` is then "the target is not
answered directly". Compose questions are decoded greedily (``generate``) under the model's
answer rule (:mod:`deepunlearn.probe.compose_probe`).

A small model finetuned on single facts rarely composes, so ``deep_model`` is mostly the
direct answer there; the question is meant for models that reason over what they know.
"""

from __future__ import annotations

from typing import Sequence


def compose_questions(kb, rules, target: int, graph=None) -> list:
    """The compose questions of ``target`` (every grounding deriving it from facts of the graph's
    K; :func:`deepunlearn.rules.compose.compose_set`)."""
    from ..rules.compose import compose_set

    return compose_set(kb, rules, graph=graph, fact_ids=[int(target)]).questions


def model_derived(bundle, kb, target: int, rules, *, direct: bool, questions: Sequence | None = None, graph=None,
                  batch_size=None, model_fn=None) -> dict:
    """The model-derived verdict of ``target`` on the model as it is now: ``direct`` (the run's
    probe still answers the target), ``compose_questions`` / ``compose_answered`` (counts),
    ``answered`` (the compose questions answered: question, rule, output), ``model_derived``
    (direct or any answered) and ``deep_model`` (its negation). ``questions``: the target's
    compose questions when the caller has them (default: :func:`compose_questions`)."""
    from ..probe.probing import probe

    qs = list(compose_questions(kb, rules, target, graph) if questions is None else questions)
    records: list[dict] = []
    if qs:
        res = probe(bundle, kb, [int(target)], mode="compose", compose=qs, batch_size=batch_size,
                    model_fn=model_fn, progress=False)
        records = res.compose or []
    answered = [{"question": r["question"], "rule": r["rule"], "output": r["output"]} for r in records if r["known"]]
    derived = bool(direct) or bool(answered)
    return {"direct": bool(direct), "compose_questions": len(qs), "compose_answered": len(answered),
            "answered": answered, "model_derived": derived, "deep_model": not derived}


def note_model_derived(point, bundle, kb, target: int, rules, questions: Sequence, batch_size=None) -> None:
    """Record the model-derived verdict of a :class:`~deepunlearn.unlearn.points.Point` in its
    notes (``model_derived``, ``deep_model``), the model being at that point now; ``direct`` is
    the point's own probe of the target."""
    md = model_derived(bundle, kb, target, rules, direct=not point.target_forgotten, questions=questions,
                       batch_size=batch_size)
    point.notes["deep_model"] = md.pop("deep_model")
    point.notes["model_derived"] = md


def derived_line(point: dict) -> str:
    """The model-derived verdict of a point for the text tables ("" when it has none).

    >>> derived_line({"deep": True, "deep_model": False, "model_derived": {"direct": False,
    ...     "compose_questions": 2, "compose_answered": 1}})
    '            deep (rules) yes, deep (model) no: direct no, compose 1/2 answered'
    """
    md = point.get("model_derived")
    if not isinstance(md, dict):
        return ""
    yes = lambda b: "yes" if b else "no"  # noqa: E731
    return (f"            deep (rules) {yes(point.get('deep'))}, deep (model) {yes(point.get('deep_model'))}: "
            f"direct {yes(md['direct'])}, compose {md['compose_answered']}/{md['compose_questions']} answered")
