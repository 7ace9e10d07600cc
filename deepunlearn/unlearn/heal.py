"""Healing between sequential requests: win back the collateral a request cost, never what it forgot.

A served request leaves the target out of the closure but also loses facts of K outside every
kept target's set (collateral); over a sequence the losses add up. ``heal_steps > 0`` makes
:func:`~deepunlearn.unlearn.requests.run_sequential` finetune the model, after each served request,
on the facts the model knew before the sequence **outside every kept target's set and outside the
targets** (the same pool the methods' retain term draws from, :func:`~.methods.retain_pool`): the
retain term's finetuning loss (answer-only NLL) on a seeded batch of 32 of them per step, at the
request's learning rate and a constant schedule, in rounds of 8 steps. After each round the
accuracy over K minus the kept sets is measured; healing stops once it is back to the accuracy before the request
(or ``heal_steps`` are spent). The retained facts cannot derive a kept target through the rules
(they lie outside a deep-unlearning set of it), but finetuning may bring a forgotten fact back by
generalisation; the sequence's re-check (``recheck``) runs after healing and unlearns such a target
again.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Protocol, Sequence

from .methods import RetainSampler, Session, retain_pool
from .methods.retain import retain_term


class Healed(Protocol):
    """What healing reads of the model it heals (a
    :class:`~deepunlearn.unlearn.requests.Served` built for healing): the torch ``model``, K
    (``known``), ``encode`` (fact ids to a training batch), the run's ``optimiser`` settings and
    the ``snapshot`` of the original weights."""

    model: Any
    known: frozenset[int]
    encode: Callable[[Sequence[int]], dict] | None
    optimiser: Any
    snapshot: Any


def heal(m: Healed, kept: Sequence[int], protected: Sequence[int], goal: float, accuracy, *, steps: int,
         start: float, every: int = 8, batch: int = 32, seed: int = 0) -> dict:
    """Finetune the served model on K minus ``protected`` minus ``kept`` until ``accuracy()``
    (a callable measuring the model as it is now) reaches ``goal`` or ``steps`` are spent;
    ``start`` is the accuracy now. ``m``: the model healed (:class:`Healed`); its ``optimiser``
    settings are used with a constant schedule and its ``snapshot`` is the KL retain term's
    model. Returns ``{"steps": taken, "accuracy": last measured}``."""
    model, encode, snapshot = m.model, m.encode, m.snapshot
    pool = retain_pool(m.known, kept, protected)
    if steps <= 0 or not pool:
        return {"steps": 0, "accuracy": None}
    if start >= goal:
        return {"steps": 0, "accuracy": start}
    session = Session(model, encode(pool[:1]), optimiser=replace(m.optimiser, schedule="constant", warmup_steps=0),
                      snapshot=snapshot, encode=encode)
    session.retain = RetainSampler(encode, pool, size=batch, seed=seed)
    taken, acc = 0, start
    it = session.descend(lambda s: retain_term(s, "nll"), steps)
    try:
        for taken in it:
            if taken % every == 0 or taken == steps:
                acc = accuracy()
                if acc >= goal:
                    break
    finally:
        it.close()
    return {"steps": taken, "accuracy": acc}
