"""du_loop's healing phase (``heal > 0``): win back collateral once the targets are deep.

When every target is out of the closure (and ``overshoot``'s margin is done), du_loop finetunes
on facts of K outside every chosen set and outside the targets (the retain pool, so nothing it
trains on can derive a target through the rules; without a retain term: K outside the watched
facts) with the answer-only NLL, a seeded batch of ``heal_batch`` facts per step, at the run's
rate. Every ``heal_every`` steps it probes the watched facts and a seeded sample of
``heal_sample`` facts of the same pool: a target derivable again sends the loop back to
unlearning (re-choosing its set as usual); once the sample knows again all it knew before the run
but ``heal_tolerance`` of it, or ``heal`` healing steps are spent, the run stops, unless the sample
still knows less than ``heal_floor`` of what it knew: then healing goes on for at most
``heal_more`` steps more, until the tolerance or the floor is reached. Healing steps count towards
the step budget like any other. Points record ``heal_steps`` (taken so far) and
``heal_known`` (the share of the sample's original knowledge it has at the last probe).
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

from .retain import RetainSampler, retain_term
from .du_guard import draw


class Healer:
    """The healing phase of one du_loop run; ``ctx`` is its rules context."""

    def __init__(self, params, session, ctx, seed: int):
        self.limit, self.every = int(params.heal), int(params.heal_every)
        self.more, self.floor = int(params.heal_more), float(params.heal_floor)
        self.tolerance = float(params.heal_tolerance)
        self.taken, self.share = 0, None
        self.ctx = ctx
        pool = session.retain.pool if session.retain is not None else sorted(
            set(ctx.known) - set(ctx.watch) - set(ctx.protected))
        self.sample = draw(pool, params.heal_sample, seed)
        self.before = set(ctx.known_among(self.sample))
        self.batches = RetainSampler(session.encode, pool, size=params.heal_batch, seed=seed)

    def update_pool(self, exclude: Sequence[int]) -> None:
        """Never heal on newly chosen facts."""
        self.batches.exclude(exclude)

    def loss(self, session) -> torch.Tensor:
        return retain_term(session, "nll", self.batches)

    @property
    def spent(self) -> bool:
        """No healing step is left: ``heal`` taken and the sample at its floor, or ``heal_more`` taken too."""
        return self.taken >= self.limit + self.more or (
            self.taken >= self.limit and (self.share is None or self.share >= self.floor))

    def probe_due(self) -> bool:
        self.taken += 1
        return self.taken % self.every == 0 or self.taken == self.limit or self.taken >= self.limit + self.more

    def recovered(self) -> bool:
        """Probe the sample: whether it knows all it knew before but the tolerance (or the
        healing budget is spent)."""
        now = set(self.ctx.known_among(self.sample))
        self.share = len(self.before & now) / len(self.before) if self.before else 1.0
        lost = len(self.before - now)
        return lost <= math.floor(self.tolerance * len(self.before)) or self.spent

    def notes(self) -> dict:
        return {"heal_steps": self.taken, "heal_known": self.share}
