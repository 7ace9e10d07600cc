"""Healing between sequential requests: win back the collateral a request cost, never what it forgot.

A served request leaves the target out of the closure but also loses facts of K outside every
kept target's set (collateral); over a sequence the losses add up. ``heal_steps > 0`` makes
:func:`~deepunlearn.unlearn.requests.run_sequential` finetune the model, after each served request,
on the facts the model knew before the sequence **outside every kept target's set and outside the
targets** (the same pool the methods' retain term draws from, :func:`~.methods.retain_pool`): the
finetuning loss (answer-only NLL) on a seeded batch of ``heal_batch`` of them per step, at the
request's learning rate, in rounds of ``heal_every`` steps. After each round the accuracy over
K minus the kept sets is measured; healing stops once it is back to the accuracy before the request
(or ``heal_steps`` are spent). The retained facts cannot derive a kept target through the rules
(they lie outside a deep-unlearning set of it), but finetuning may bring a forgotten fact back by
generalisation; the sequence's re-check (``recheck``) runs after healing and unlearns such a target
again.
"""

from __future__ import annotations

from typing import Sequence

from .losses import nll_loss
from .methods import RetainSampler, Session, retain_pool


def heal(runner, u, kept: Sequence[int], protected: Sequence[int], goal: float, accuracy, *,
         steps: int, every: int = 8, batch: int = 32, seed: int = 0) -> dict:
    """Finetune ``runner``'s model on K minus ``protected`` minus ``kept`` until ``accuracy()``
    (a callable measuring the model as it is now) reaches ``goal`` or ``steps`` are spent; the
    learning rate and optimisation settings are those of a run of ``u``. Returns
    ``{"steps": taken, "accuracy": last measured}``."""
    pool = retain_pool(runner.known, kept, protected)
    if steps <= 0 or not pool:
        return {"steps": 0, "accuracy": None}
    pr, mp = runner.protocol, u.params
    pick = lambda own, default: default if own is None else own  # noqa: E731
    session = Session(runner.bundle.model, runner.encode(pool[:1]), runner._lr(u),
                      max_grad_norm=pick(mp.max_grad_norm, pr.max_grad_norm) or None,
                      weight_decay=pick(mp.weight_decay, pr.weight_decay), schedule="constant",
                      snapshot=runner.snapshot, encode=runner.encode)
    session.retain = RetainSampler(runner.encode, pool, size=batch, seed=seed)

    def loss(s):
        b = s.retain.batch(s.step)
        return nll_loss(s.logits_of(b), b["labels"])

    taken, acc = 0, accuracy()
    if acc >= goal:
        return {"steps": 0, "accuracy": acc}
    it = session.descend(loss, steps)
    try:
        for taken in it:
            if taken % every == 0 or taken == steps:
                acc = accuracy()
                if acc >= goal:
                    break
    finally:
        it.close()
    return {"steps": taken, "accuracy": acc}
