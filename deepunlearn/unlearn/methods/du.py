"""Rule-aware deep unlearning: forget the target together with what derives it.

Per-fact methods leave the target derivable from facts the model still knows. These two methods
ask the rules layer (through ``Session.rules``, a :class:`~deepunlearn.unlearn.deep.DeepContext`)
for the target's minimal deep-unlearning sets over the model's probed K and unlearn a whole set,
with a base loss (``base``: ``ga``, ``npo``, ``simnpo`` or ``rmu``) plus a retain term (default
``nll``) on facts outside every chosen set:

* ``du_oracle``: one set chosen before training, the one expected to cost least
  (``choice = "fewest"``: fewest facts, ties: fewest other known facts sharing its entities;
  ``"mincut"``: least total expected collateral, a minimum weighted cut of the derivation
  hypergraph); grid: optimiser steps, as GA's. With ``watch = "adversarial"`` it unlearns on
  ``watch_forms`` and records at each grid point whether every target is out of the closure
  under the adversarial aggregate (``deep_adversarial``); it does not stop on it.
* ``du_loop`` (closed loop): unlearn the chosen set in rounds of ``round_steps`` steps (default
  1, at half the base's learning rate: ``lr_scale``); after
  each round probe the watched facts; while a target is still in Ω(K_after, R) (a set member
  survived or came back) choose the cheapest set given what is already forgotten and go on on
  its facts still known; once every target is out of Ω(K_after, R), take a margin of
  ``overshoot`` times the steps so far on the last sets (each step's gradient taken where a
  simulated relearning attack would take the weights: ``lookahead``), heal (``heal``: finetune on facts
  outside the sets until a sample of K has recovered, unlearning again if a target comes back)
  and optionally unlearn where a simulated relearning attack would take the model (``tamper``,
  off by default); stop then or when the step budget is spent. With ``robust`` a target is deep
  only once no single forgotten fact of its sets would bring it back on its return (a spare set
  that avoids that fact is forgotten too). Its grid is the step budget: the
  point at budget B is the model after at most B steps (once deep, larger budgets give the same
  model); its rate is constant (not the protocol's linear decay), so the first k steps are the
  same whatever the budgets.

Both work on several targets at once (batch requests): the forget set is the union over targets.
"""

from __future__ import annotations

import math
from typing import Iterator, Sequence

import torch

from . import du_guard, du_heal, du_tamper
from .base import GradientUnlearner, MethodParams, Session, Step, UnlearnError, get_method
from .params.du import BASES, DULoopParams, DUParams  # noqa: F401 - BASES is the package's export

#: a base's learning rate as a rule-aware base, relative to its own rule's rate (a factor of the method's
#: ``lr_multiplier``, which an explicit rate replaces: :mod:`deepunlearn.unlearn.lr`): RMU at its own rate (the
#: rule's 2.5e-4 on a checkpoint finetuned at 1e-3) changed nothing in 16 steps on the release's first
#: five targets; 16x (du_loop's half rate: 2e-3) forgot 3 of the 5 targets in 16 steps at accuracy 0.98
#: (docs/results-history.md); 4e-3 collapsed the model
BASE_LR_FACTOR = {"rmu": 16.0}


class _RuleAware(GradientUnlearner):
    needs_rules = True
    default_retain = "nll"

    def __init__(self, params: MethodParams | None = None, **overrides):
        super().__init__(params, **overrides)
        cls = get_method(self.params.base)
        if cls.name not in BASES:
            raise UnlearnError(f"{self.name}: unknown base {self.params.base!r}; expected one of {', '.join(BASES)}",
                               field="base")
        self.base = cls(None, grid=[1], retain="none", retain_size=self.params.retain_size)
        # the base's rate by the rule (NPO runs at twice GA's rate, as in the paper) times this method's
        # multiplier; an explicit rate replaces both (deepunlearn.unlearn.lr)
        self.paper_lr, self.paper_lr_large, self.paper_lr_ratio = cls.paper_lr, cls.paper_lr_large, cls.paper_lr_ratio
        self.lr_multiplier = getattr(self.params, "lr_scale", 1.0) * BASE_LR_FACTOR.get(cls.name, 1.0)

    @property
    def uses_retain(self) -> bool:
        return self.retain_kind != "none" or self.base.uses_retain

    def loss(self, session: Session) -> torch.Tensor:
        return self.base.loss(session)

    def train_parameters(self, session: Session):
        return self.base.train_parameters(session)

    def start(self, session: Session) -> dict[int, list[int]]:
        """Choose every target's set, make their union the forget set, keep it out of the retain
        draws and let the base loss see every watched fact once (NPO's references)."""
        ctx = self._context(session)
        chosen = {t: ctx.choose(t, ()) for t in session.targets}
        if session.retain is not None:
            session.retain.exclude(f for s in chosen.values() for f in s)
        session.set_forget(ctx.watch)
        self.base.prepare(session)
        session.set_forget(_union(session.targets, chosen))
        return chosen

    def _context(self, session: Session):
        if session.rules is None:
            raise UnlearnError(f"{self.name} needs the rules context of a TargetRunner run (Session.rules)")
        return session.rules

    def _watched_probe(self, session: Session, ctx):
        """The probe that says which watched facts are forgotten (``watch``); the adversarial
        watch also makes the session unlearn on ``watch_forms``. Call before :meth:`start`."""
        if self.params.watch == "adversarial":
            ctx.use_forms(session, self.params.watch_forms)
            return ctx.forgotten_now_adversarial
        return ctx.forgotten_now


class DUOracle(_RuleAware):
    """Unlearn each target together with its cheapest minimal deep-unlearning set."""

    name = "du_oracle"
    Params = DUParams

    def trajectory(self, session: Session, grid: Sequence[float]) -> Iterator[Step]:
        ctx = self._context(session)
        probe = self._watched_probe(session, ctx)
        adversarial = self.params.watch == "adversarial"
        chosen = self.start(session)
        info = {"sets": {str(t): s for t, s in chosen.items()}}
        for step in GradientUnlearner.trajectory(self, session, grid, prepare=False):
            if adversarial:  # every target out of the closure under the adversarial aggregate?
                forgotten = probe()
                info = {**info, "deep_adversarial": all(ctx.deep(t, forgotten) for t in session.targets)}
            yield Step(step.param, info=info)


class DULoop(_RuleAware):
    """The closed loop: unlearn, probe, re-choose the set while a target is still derivable."""

    name = "du_loop"
    Params = DULoopParams

    def __init__(self, params: MethodParams | None = None, **overrides):
        super().__init__(params, **overrides)
        name = self.params.margin_base
        if name == "auto":
            name = "ga" if self.params.base == "npo" else None
        self.margin_base = (None if name is None or name == self.params.base else
                            get_method(name)(None, grid=[1], retain="none", retain_size=self.params.retain_size))

    def margin_loss(self, session: Session) -> torch.Tensor:
        """The loss of a margin step: the margin base's forget loss (else the base's) plus the retain term."""
        if self.margin_base is None:
            return self.total_loss(session)
        retain = self.retain_loss(session)
        loss = self.margin_base.loss(session)
        return loss if retain is None else loss + retain

    def trajectory(self, session: Session, grid: Sequence[float]) -> Iterator[Step]:
        budgets = self.check_grid(grid)
        ctx = self._context(session)
        probe_now = self._watched_probe(session, ctx)
        chosen = self.start(session)
        rounds, used, deep_at, stop_at, forget_from = 0, 0, None, None, 0
        probed: dict = {}  # the step of the last probe of the watched facts and what it found forgotten
        phase = "forget"  # then "margin" (overshoot), "heal", "tamper", "done"
        sets_tried = [sorted(_union(session.targets, chosen))]
        last_sets = dict(chosen)
        healer = du_heal.Healer(self.params, session, ctx, ctx.seed) if self.params.heal else None
        trained = self.train_parameters(session)
        tamper = (du_tamper.Tamper(self.params, session, ctx, ctx.seed, trained, probe_now)
                  if self.params.tamper else None)
        look = (du_tamper.Lookahead(self.params, session, ctx, ctx.seed, trained)
                if self.params.lookahead == "all" or (self.params.lookahead == "margin" and self.params.overshoot)
                else None)

        def info() -> dict:
            out = {"steps_used": used, "rounds": rounds, "stopped_deep": phase in ("margin", "tamper", "heal", "done"),
                   "sets_tried": len(sets_tried), **du_guard.notes(guard)}
            if self.params.overshoot:
                out["steps_to_deep"] = deep_at
            if healer is not None:
                out.update(healer.notes())
            if tamper is not None:
                out.update(tamper.notes())
            if look is not None:
                out.update(look.notes())
            return out

        def check() -> bool:
            """Probe the watched facts; re-choose for the open targets; whether every target is deep."""
            nonlocal rounds
            rounds += 1
            forgotten = probe_now()
            probed.update(step=used, forgotten=forgotten)
            open_targets = [t for t in session.targets if not ctx.deep(t, forgotten)]
            spare = {t: h for t in session.targets if self.params.robust and t not in open_targets
                     and (h := ctx.fragile(t, forgotten)) is not None}
            if not open_targets and not spare:
                return True
            for t in open_targets:
                chosen[t] = last_sets[t] = ctx.choose(t, forgotten)
            for t, h in spare.items():  # a spare set that holds without h; the margin goes on on both
                chosen[t] = ctx.choose(t, forgotten, avoid=[h])
                last_sets[t] = sorted(set(last_sets[t]) | set(chosen[t]))
            open_targets += list(spare)
            for t in session.targets:
                if t not in open_targets:
                    chosen.pop(t, None)
            if session.retain is not None:
                session.retain.exclude(f for s in chosen.values() for f in s)
            if healer is not None:
                healer.update_pool(f for s in chosen.values() for f in s)
            todo = sorted(_union(open_targets, chosen) - forgotten)
            if todo != session.forget_ids:
                sets_tried.append(todo)
                session.set_forget(todo)
            return False

        def after_deep(step: int) -> str:
            if phase == "forget" and self.params.overshoot:
                nonlocal stop_at
                stop_at = step + math.ceil(self.params.overshoot * (step - forget_from))
                if stop_at > step:  # go on on everything the targets' last sets hold
                    session.set_forget(sorted(_union(session.targets, last_sets)))
                    return "margin"
            return "heal" if healer is not None and not healer.spent else finish()

        def finish() -> str:
            """After the margin and healing: the tamper phase if a simulated attack brings a target back."""
            if tamper is not None and not tamper.spent:
                session.set_forget(sorted(_union(session.targets, last_sets)))
                if not tamper_check():
                    return "tamper"
            return "done"

        def tamper_check() -> bool:
            fresh = probed.get("step") == used  # the model has not moved since check() probed it
            return tamper.check(last_sets, lambda: self.base.loss(session),
                                before=probed["forgotten"] if fresh else None)

        def loss(s: Session):
            if phase == "tamper":
                return tamper.loss(lambda: self.retain_loss(session))
            if phase == "heal":
                return healer.loss(s)
            step_loss = (lambda: self.margin_loss(s)) if phase == "margin" else (lambda: self.total_loss(s))
            if look is not None and (phase == "margin" or self.params.lookahead == "all"):
                return look.loss(last_sets, step_loss)
            return step_loss()

        session.sam_rho = self.params.sam_rho
        guard = du_guard.start(self.params, session, ctx)  # probes its sample before the first step
        steps = session.descend(loss, budgets[-1], params=trained)
        try:
            for step in steps:
                used = step
                if phase == "margin":  # no probe until the margin is done
                    if step >= stop_at:
                        phase = after_deep(step)
                elif phase == "tamper":
                    if tamper.step_taken():  # else more meta steps on the same attacked gradients
                        if not check():  # a meta step may bring a target back here: unlearn again
                            phase, forget_from = "forget", step
                        elif tamper_check() or tamper.spent:
                            phase = "done"
                elif phase == "heal":
                    if healer.probe_due():
                        if not check():
                            phase, forget_from = "forget", step  # a target came back: unlearn again
                        elif healer.recovered():
                            phase = finish()
                elif step % self.params.round_steps == 0 or step in budgets:
                    if check():
                        deep_at = step if deep_at is None else deep_at
                        phase = after_deep(step)
                if step in budgets:
                    yield Step(float(step), info=info())
                if phase == "done":
                    break
        finally:
            steps.close()
        for b in budgets:  # deep before the budget ran out: larger budgets are this same model
            if b > used:
                yield Step(float(b), info=info())


def _union(targets: Sequence[int], chosen: dict[int, list[int]]) -> set[int]:
    return set(int(t) for t in targets) | {int(f) for t in chosen for f in chosen[t]}
