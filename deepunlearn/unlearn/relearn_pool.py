"""What a relearning attack trains on, and what it re-probes (``AttackParams.relearn_on``).

``other`` (the default)
    a seeded sample of ``relearn_size`` facts of K minus the targets and their chosen minimal
    sets (:func:`other_pool`, :func:`~deepunlearn.unlearn.attacks.relearn_sample`): facts the
    method never touched. Recall and accuracy after N steps are the rules layer's on the whole
    re-probed K.
``split`` (Deeb & Roger's split relearning)
    the target's chosen minimal deep-unlearning set, less the target, is split by a seeded draw
    (``numpy.random.default_rng(seed)``) into a *relearned* half (``max(1, n // 2)`` of its ``n``
    facts) and a *held-out* rest; the attack trains on the relearned half (each fact as the
    methods unlearn it: its primary question, or the run's ``unlearn_forms``) and on the
    target's *other forms*: its question and statement forms (:mod:`deepunlearn.kg.forms`)
    whose prompt differs from every form the primary probe asks of the target (so never the
    target's primary question, nor a form with the same text, such as the release's
    ``question4``). A KB without such forms gives the half alone; a chosen set that is the
    target alone gives the forms alone (nothing to train on: no attack). The target and the
    held-out half are re-probed; a relearned fact counts as it stood before the attack (trained
    on, it says nothing about recovery), so recall and accuracy after N steps move only with
    the held-out facts.
``split-set``
    the same split, trained on the relearned half alone, never the target's forms: the facts
    trained on and the facts re-probed are disjoint, as in Deeb & Roger's protocol, so the attack
    can only *recover* the target (through what the model kept), never teach it. ``split`` also
    trains on the target's paraphrases, a stronger attack that also teaches the fact to a model
    that never saw it (``benchmarks/relearn_floor.py`` measures how often).

Notes of both split kinds (and the ``attack`` command's output) add ``relearn_on``,
    ``relearn_facts`` (the relearned half), ``relearn_forms`` (the target's forms trained on),
    ``held_out`` (the re-probed facts, the target last), ``recovered_relearn`` (per N: the share
    of the held-out facts forgotten before the attack that are known after N steps; ``None``
    when none was forgotten), ``target_relearned`` (per N: whether the target is known) and
    ``returned_relearn`` (per N: each re-probed fact, the target included, forgotten before the
    attack and known after it, mapped to whether the rules derive it from what the model knows
    after the attack plus the relearned half: the model's own inference from the facts it was
    taught back, :func:`returned`).

Because the chosen set is minimal, the rules always derive the target from K minus the held-out
facts, that is from the rest of K and the relearned half: a model that applied the rules to all
it knows would answer the target again after any split attack. ``returned_relearn`` says how
many returns are such inferences.

Points of an ``other`` attack carry none of these keys: a point without ``relearn_on`` was
attacked with ``other``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .attack_kinds import SPLIT_ON
from .methods import UnlearnError

#: the form kinds a split attack trains on (a yes/no form does not ask for the answer)
SPLIT_FORM_KINDS = ("qa", "statement")


def other_pool(known: Sequence[int], targets: Sequence[int], chosen: Sequence[Sequence[int]]) -> list[int]:
    """K minus the targets and their chosen minimal sets, sorted: the ``other`` pool.

    >>> other_pool([1, 2, 3, 4, 5], [1], [[1, 3]])
    [2, 4, 5]
    """
    out = {int(i) for i in known} - {int(t) for t in targets}
    for s in chosen:
        out -= {int(i) for i in s}
    return sorted(out)


def split_size(chosen: Sequence[int], target: int) -> tuple[list[int], int]:
    """``(facts, k)``: the chosen set less ``target``, sorted, and the size ``max(1, n // 2)`` of
    the half a split attack relearns (``k`` is 0 for an empty set).

    >>> split_size([3, 5, 9, 4], 9)
    ([3, 4, 5], 1)
    """
    ordered = sorted({int(i) for i in chosen} - {int(target)})
    return ordered, max(1, len(ordered) // 2) if ordered else 0


def split_half(chosen: Sequence[int], target: int, seed: int = 0) -> tuple[list[int], list[int]]:
    """``(relearned, held_out)``: the chosen set less ``target``, split by a seeded draw into
    ``max(1, n // 2)`` relearned facts and the rest, each sorted (``([], [])`` for an empty set).

    >>> split_half([3, 5, 9], 9)
    ([5], [3])
    >>> split_half([9], 9)
    ([], [])
    """
    ordered, k = split_size(chosen, target)
    if not ordered:
        return [], []
    picked = {int(j) for j in np.random.default_rng(seed).choice(len(ordered), size=k, replace=False)}
    return ([f for j, f in enumerate(ordered) if j in picked], [f for j, f in enumerate(ordered) if j not in picked])


def target_forms(kb, target: int, probe_forms: str | None = None) -> list:
    """The target's question and statement forms whose prompt differs from the prompt of every
    form the primary probe asks of it (``probe_forms``: its selection, ``None`` the primary
    question), in the KB's form order."""
    from ..kg.forms import forms_of, select_forms

    asked = {f.prompt for f in select_forms(kb, probe_forms or "default", [int(target)]).all()}
    out, seen = [], set(asked)
    for f in forms_of(kb, int(target)):
        if f.kind in SPLIT_FORM_KINDS and f.prompt not in seen:
            seen.add(f.prompt)
            out.append(f)
    return out


def trained_forms(kb, targets: Sequence[int], probe_forms: str | None, on: str) -> list:
    """The forms a split attack of kind ``on`` trains on besides the relearned facts: each
    target's :func:`target_forms` for ``"split"``, none for ``"split-set"``."""
    return [f for t in targets for f in target_forms(kb, t, probe_forms)] if on == "split" else []


@dataclass(frozen=True)
class SplitPlan:
    """One target's split attack: the chosen-set facts trained on, the target's forms trained
    on, and the facts re-probed (the held-out half, then the target)."""

    target: int
    relearned: list[int]
    held_out: list[int]
    forms: list = field(default_factory=list)
    on: str = "split"

    @property
    def empty(self) -> bool:
        return not self.relearned and not self.forms


def split_plan(kb, chosen: Sequence[int], target: int, *, seed: int = 0, probe_forms: str | None = None,
               on: str = "split") -> SplitPlan:
    """The :class:`SplitPlan` of ``target`` with chosen minimal set ``chosen``; ``on``: ``"split"``
    (the half and the target's forms) or ``"split-set"`` (the half alone)."""
    if on not in SPLIT_ON:
        raise UnlearnError(f"attacks.relearn_on: {on!r} does not split the chosen set (one of {', '.join(SPLIT_ON)})",
                           field="attacks.relearn_on")
    relearned, rest = split_half(chosen, target, seed)
    return SplitPlan(int(target), relearned, rest + [int(target)], trained_forms(kb, [target], probe_forms, on), on)


def split_batch(bundle, kb, plan: SplitPlan, unlearn_forms: str | None = None) -> dict[str, Any]:
    """The training batch of a split attack on the model's device: the relearned facts as the
    methods' forget batch encodes them (primary question, or ``unlearn_forms``), then the
    target's forms, all as in finetuning (answer-only labels)."""
    from ..kg.forms import select_forms
    from .data import on_device, encode_forms_qa

    rows = select_forms(kb, unlearn_forms or "default", plan.relearned).all() if plan.relearned else []
    return on_device(bundle, encode_forms_qa(bundle.tokenizer, bundle.prompt, rows + list(plan.forms)))


def as_before(plan: SplitPlan, before: set[int], after: set[int]) -> set[int]:
    """What the model knows after the attack with every relearned fact as it stood before it.

    >>> sorted(as_before(SplitPlan(9, [1], [2, 9]), {1, 3}, {2, 3}))
    [1, 2, 3]
    """
    trained = set(plan.relearned)
    return (set(after) - trained) | (set(before) & trained)


def recovered(plan: SplitPlan, before: set[int], after: set[int]) -> float | None:
    """The share of the held-out facts forgotten before the attack that are known after it
    (``None`` when none was forgotten).

    >>> recovered(SplitPlan(9, [1], [2, 4, 9]), {4}, {1, 2})
    0.5
    """
    lost = [f for f in plan.held_out if f not in before]
    return sum(1 for f in lost if f in after) / len(lost) if lost else None


def returned(plan: SplitPlan, before: set[int], after: set[int], graph, known: set[int]) -> dict[str, bool]:
    """The held-out facts (the target included) forgotten before the attack and known after it,
    each (as ``str(id)``) mapped to whether the rules derive it from what the model knows after
    the attack plus the relearned facts, the fact itself left out (``graph``: the rules layer's
    derivation graph over K, ``known``: K)."""
    from ..rules import derivable

    have = set(after) | set(plan.relearned)
    out = {}
    for f in plan.held_out:
        if f not in before and f in after:
            out[str(f)] = bool(derivable(graph, f, removed=sorted((known - have) | {f})))
    return out


def run_split(model, batch: Callable[[], dict], plan: SplitPlan, steps: Sequence[int], *, lr: float,
              known: Callable[[], set[int]], on_step: Callable[[int], None] | None = None,
              before: set[int] | None = None) -> tuple[set[int], dict[int, set[int]]]:
    """``(before, {N: known after N steps})`` of a split attack, ``before`` being ``known()``
    before it (unless given); nothing is run for an empty plan (``(before, {})``). The model is
    exactly as before afterwards."""
    from .attacks import check_steps, relearn_batch

    steps = check_steps(steps)
    before = {int(i) for i in (known() if before is None else before)}
    if plan.empty or not steps:
        return before, {}
    return before, relearn_batch(model, batch, steps, lr=lr, known=known, on_step=on_step)


def split_notes(plan: SplitPlan, before: set[int], after: dict[int, set[int]], graph,
                known: set[int]) -> dict[str, Any]:
    """The keys a split attack adds to a point (module docstring)."""
    return {"relearn_on": plan.on, "relearn_facts": list(plan.relearned),
            "relearn_forms": [f.name for f in plan.forms], "held_out": list(plan.held_out),
            "recovered_relearn": {str(n): recovered(plan, before, k) for n, k in after.items()},
            "target_relearned": {str(n): plan.target in k for n, k in after.items()},
            "returned_relearn": {str(n): returned(plan, before, k, graph, known) for n, k in after.items()}}


def annotate_split(checks, points: list, targets: Sequence[int], known: Callable[[], set[int]], lr: float) -> None:
    """A split relearning attack at one grid point of a single-target trajectory, on the model
    ``checks`` checks (a :class:`~deepunlearn.unlearn.checks.ForgettingChecks`): the points gain
    ``recall_relearn`` / ``accuracy_relearn`` (relearned facts as before the attack),
    ``relearn_lr`` and :func:`split_notes`."""
    r = checks.model
    if len(targets) != 1:
        raise UnlearnError(f"attacks.relearn_on: {checks.attacks.relearn_on!r} relearns one target's chosen set: "
                           "attack single targets", field="attacks.relearn_on")
    t = int(targets[0])
    plan = split_plan(r.kb, r.chosen_set(t), t, seed=r.seed, probe_forms=r.forms,
                      on=checks.attacks.relearn_on)
    before, after = run_split(r.bundle.model, lambda: split_batch(r.bundle, r.kb, plan, r.unlearn_forms), plan,
                              checks.attacks.relearn, lr=lr, known=known)
    measured = {n: checks._measure(points, as_before(plan, before, k)) for n, k in after.items()}
    notes = split_notes(plan, before, after, r.evaluator.graph, set(r.known))
    for k, p in enumerate(points):
        p.notes["recall_relearn"] = {str(n): m[k][0] for n, m in measured.items()}
        p.notes["accuracy_relearn"] = {str(n): m[k][1] for n, m in measured.items()}
        p.notes["relearn_lr"] = lr
        p.notes.update(notes)
