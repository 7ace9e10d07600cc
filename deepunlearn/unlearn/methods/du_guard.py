"""du_loop's step guard (``guard > 0``): a trust region on the collateral of every optimiser step.

du_loop takes constant-rate steps until the target is out of the closure; on a model where one
step at that rate already forgets a large share of K, the first step overshoots and no later
step can undo it. The guard watches a seeded sample of ``guard`` facts of K outside every minimal
deep-unlearning set of the targets (the facts du_loop must keep;
:meth:`~deepunlearn.unlearn.deep.DeepContext.guard_sample`) with the run's primary probe:

* before the run it probes the sample (what the sample knows);
* before every step :meth:`StepGuard.save` copies the trained tensors (float32 master copies
  included), AdamW's state and torch's random state;
* after every step :meth:`StepGuard.accept` probes the sample again. If the step lost more than
  ``guard_drop`` of what the sample knew before it, the step is undone (the copies put back, bit
  for bit) and the rate factor halved for the rest of the run; :meth:`Session.descend
  <deepunlearn.unlearn.methods.session.Session.descend>` then takes the same step again (same step
  number, hence the same retain batch) at the smaller rate.
* A step that would need a factor below ``guard_min_scale`` is accepted as it is (counted as
  ``guard_forced``): the guard never stops the loop, it only slows it down.

Grid points count accepted steps: the point at budget B is the model after B accepted steps, and
undone steps are not part of any budget. Each point's notes record ``guard_undone`` (steps undone
so far), ``guard_forced``, ``guard_scale`` (the rate factor now) and ``guard_known`` (the share of
the sample the model still answers). The copies cost the trained tensors' size plus AdamW's
state once more in memory; each step costs one probe of the sample more.
"""

from __future__ import annotations

import copy
import random
from typing import Callable, Iterable, Sequence

import torch

#: a step is "lost more than guard_drop" only beyond this tolerance (float shares)
EPS = 1e-9


def draw(pool: Iterable[int], n: int, seed: int) -> list[int]:
    """``n`` facts of ``pool`` (all of them if fewer), seeded, sorted."""
    pool = sorted({int(f) for f in pool})
    return sorted(random.Random(f"guard:{seed}").sample(pool, min(int(n), len(pool))))


class StepGuard:
    """Undo a step that forgets more than ``drop`` of the guard sample; see the module docstring.

    ``known_among(ids)`` is the probe: which of ``ids`` the model answers now."""

    def __init__(self, known_among: Callable[[Sequence[int]], set[int]], sample: Sequence[int], drop: float,
                 min_scale: float):
        self.known_among, self.sample = known_among, [int(f) for f in sample]
        self.drop, self.min_scale = float(drop), float(min_scale)
        self.scale, self.undone, self.forced = 1.0, 0, 0
        self.known = set(self.known_among(self.sample)) if self.sample else set()
        self._saved = None

    def save(self, tensors: Sequence[torch.Tensor], opt: torch.optim.Optimizer) -> None:
        """Copy what a step changes: the tensors it trains, the optimizer's state, torch's RNG."""
        self._saved = ([t.detach().clone() for t in tensors], copy.deepcopy(opt.state_dict()), torch.get_rng_state())

    def restore(self, tensors: Sequence[torch.Tensor], opt: torch.optim.Optimizer) -> None:
        """Put back what :meth:`save` copied."""
        weights, state, rng = self._saved
        with torch.no_grad():
            for t, w in zip(tensors, weights):
                t.copy_(w)
        opt.state.clear()
        opt.load_state_dict(state)
        torch.set_rng_state(rng)

    def lost(self, now: set[int]) -> float:
        """The share of what the sample knew before the step that it no longer knows."""
        return len(self.known - now) / len(self.known) if self.known else 0.0

    def accept(self, tensors: Sequence[torch.Tensor], opt: torch.optim.Optimizer) -> bool:
        """Whether the step just taken stands; if not, it is undone and the rate factor halved."""
        if not self.sample:
            return True
        now = set(self.known_among(self.sample))
        if self.lost(now) > self.drop + EPS:
            if self.scale / 2 >= self.min_scale - EPS:
                self.restore(tensors, opt)
                self.undone += 1
                self.scale /= 2
                return False
            self.forced += 1
        self.known = now
        return True

    def notes(self) -> dict:
        share = len(self.known) / len(self.sample) if self.sample else None
        return {"guard_undone": self.undone, "guard_forced": self.forced, "guard_scale": self.scale,
                "guard_known": share, "guard_size": len(self.sample)}


def start(params, session, ctx) -> StepGuard | None:
    """du_loop's guard for ``session`` (None with ``guard = 0``), installed as its ``step_guard``."""
    if not params.guard:
        session.step_guard = None
        return None
    guard = StepGuard(ctx.known_among, ctx.guard_sample(params.guard), params.guard_drop, params.guard_min_scale)
    session.step_guard = guard
    return guard


def notes(guard: StepGuard | None) -> dict:
    """What a point records of the guard (nothing when it is off)."""
    return guard.notes() if guard is not None else {}
