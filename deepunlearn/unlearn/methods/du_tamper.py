"""du_loop's tamper phase (``tamper > 0``): unlearn where a relearning attack would take the model.

Once every target is deep and the margin and healing are done, du_loop simulates a split relearning
attack on the model as it is (:meth:`~deepunlearn.unlearn.deep.DeepContext.split_relearned`, built
as :mod:`~deepunlearn.unlearn.relearn_pool` builds it: a seeded half of each target's last chosen
set and the target's other forms, or the half alone with ``tamper_on = "split-set"``,
``tamper_steps`` AdamW steps at the run's rate times
``tamper_lr_scale``), probes the watched facts there and restores the model; once per half: every
half of the chosen set when there are at most ``tamper_splits`` of them, else ``tamper_splits``
halves drawn at random (:func:`halves`; with ``tamper_halves = "linked"`` the draws that relearn
the most facts from which the rules derive a held-out one, :func:`linked_halves`). If every
target is still out of the closure after each (relearned facts counted as before the attack), the
phase ends. Otherwise the next step is a
first-order meta-unlearning step (as in MUDMAN, arXiv 2506.12484, and TAR's first-order outer step): the
gradient of the base forget loss taken *at the attacked weights* (the mean over the attacks that
brought a target back) is applied at the current ones (a surrogate ``sum(p * g)``, plus the retain
term at the current weights), and the attacks are simulated again (with ``tamper_every_half =
False`` first only those that brought a target back, the other halves once those all leave every
target deep). ``tamper_every`` meta steps are taken on one simulation's gradients before the loop
probes and checks again. At most ``tamper`` meta steps. Drawn halves come from seeds derived from the run's seed
and change at every round over the other halves, never the seed the checks' own split attack uses,
so the phase cannot fit one particular split. After each meta step the loop probes the watched
facts as usual: a target derivable at the current weights sends it back to unlearning (then margin
and healing, then the phase again while its budget lasts). Points record
``tamper_steps_taken`` and ``tamper_robust`` (whether the last simulated attacks left every target
deep).
"""

from __future__ import annotations

import itertools
import math
from typing import Callable, Mapping, Sequence

import numpy as np
import torch


def split_seed(run_seed: int, k: int) -> int:
    """The seed of the k-th drawn halves: derived from the run's seed, distinct from it.

    >>> split_seed(0, 0) != 0 and split_seed(0, 0) != split_seed(0, 1)
    True
    """
    return int(np.random.SeedSequence([int(run_seed), 0x7A3E, int(k)]).generate_state(1)[0])


def halves(chosen: Mapping[int, Sequence[int]], targets: Sequence[int], n: int, seed: int) -> list[dict[int, list[int]]]:
    """The relearned halves of the simulated attacks: per attack, ``{target: half}``, a half being
    as many facts of the target's chosen set less the target as the split attack relearns
    (:func:`~deepunlearn.unlearn.relearn_pool.split_size`). Every half when a target has at most ``n`` of them, else ``n`` distinct halves
    drawn with ``seed``; with several targets attack i takes each target's i-th half (cycling).

    >>> halves({9: [9, 1, 2, 3]}, [9], 4, 0)
    [{9: [1]}, {9: [2]}, {9: [3]}]
    >>> len(halves({9: list(range(10))}, [9], 3, 0))
    3
    """
    from ..relearn_pool import split_size

    rng = np.random.default_rng(seed)
    per: dict[int, list[list[int]]] = {}
    for t in targets:
        rest, k = split_size(chosen.get(t, ()), t)
        if not rest:
            per[t] = [[]]
            continue
        if math.comb(len(rest), k) <= n:
            per[t] = [list(c) for c in itertools.combinations(rest, k)]
            continue
        picked: list[list[int]] = []
        while len(picked) < n:
            h = sorted(int(rest[j]) for j in rng.choice(len(rest), size=k, replace=False))
            if h not in picked:
                picked.append(h)
        per[t] = picked
    return _attacks(per, targets)


def _attacks(per: Mapping[int, Sequence[list[int]]], targets: Sequence[int]) -> list[dict[int, list[int]]]:
    """One attack per half of the target with the most: attack i takes each target's i-th half (cycling)."""
    count = max(len(v) for v in per.values())
    return [{t: per[t][i % len(per[t])] for t in targets} for i in range(count)]


def linked_halves(chosen: Mapping[int, Sequence[int]], targets: Sequence[int], n: int, seed: int,
                  links: Mapping[int, Sequence[tuple[int, int]]], tries: int = 64) -> list[dict[int, list[int]]]:
    """As :func:`halves`, but the drawn halves are the ``n`` of ``tries`` random draws that split
    the most links of their target (``links[t]``: ``(a, b)`` where the rules derive b from a and
    what lies outside the set, :meth:`~deepunlearn.unlearn.deep.DeepContext.links`), a relearned
    a with its b held out (the target counting as held out): the halves through which relearned
    facts most readily bring held-out ones back. Ties keep the draw order.

    >>> linked_halves({9: [9, 1, 2, 3, 4]}, [9], 1, 0, {9: [(1, 2), (2, 1), (3, 4), (4, 3)]})[0][9]  # one of each pair
    [1, 4]
    >>> linked_halves({9: [9, 1, 2, 3, 4]}, [9], 1, 0, {9: []})[0][9] == halves({9: [9, 1, 2, 3, 4]}, [9], 1, 0)[0][9]
    True
    """
    from ..relearn_pool import split_size

    rng = np.random.default_rng(seed)
    per: dict[int, list[list[int]]] = {}
    for t in targets:
        rest, k = split_size(chosen.get(t, ()), t)
        if not rest or math.comb(len(rest), k) <= n:
            per[t] = [h[t] for h in halves({t: chosen.get(t, ())}, [t], n, seed)]
            continue
        inside = set(rest) | {int(t)}
        score: dict[tuple[int, ...], int] = {}
        for _ in range(tries):
            h = tuple(sorted(int(rest[j]) for j in rng.choice(len(rest), size=k, replace=False)))
            if h not in score:
                hs = set(h)
                score[h] = sum(1 for a, b in links.get(t, ()) if a in hs and b in inside and b not in hs)
        per[t] = [list(h) for h in sorted(score, key=lambda h: -score[h])[:n]]
    return _attacks(per, targets)


def draw_halves(how: str, ctx, chosen, n: int, seed: int) -> list[dict[int, list[int]]]:
    """The halves of the tamper phase's or the lookahead's simulated attacks: ``how`` = "random"
    (:func:`halves`) or "linked" (:func:`linked_halves`, on ``ctx.links`` of each target and its set)."""
    if how == "linked":
        links = {t: ctx.links(set(chosen.get(t, ())) | {t}) for t in ctx.targets}
        return linked_halves(chosen, ctx.targets, n, seed, links)
    return halves(chosen, ctx.targets, n, seed)


class Tamper:
    """The tamper phase of one du_loop run; ``ctx`` is its rules context, ``params`` the trained
    parameters (the list the loop's optimiser steps; None: the session's trainable ones)."""

    def __init__(self, method_params, session, ctx, seed: int,
                 params: Sequence[torch.nn.Parameter] | None,
                 probe: Callable[[], set[int]]):
        self.limit = int(method_params.tamper)
        self.attack_steps, self.splits = int(method_params.tamper_steps), int(method_params.tamper_splits)
        self.every_half, self.every = bool(method_params.tamper_every_half), int(method_params.tamper_every)
        self.lr = float(session.lr) * float(method_params.tamper_lr_scale)
        self.on, self.how = str(method_params.tamper_on), str(method_params.tamper_halves)
        self.ctx, self.seed, self.probe = ctx, int(seed), probe
        self.params = list(params) if params is not None else session.trainable()
        self.taken, self.simulated, self.robust = 0, 0, None
        self._grads: list[torch.Tensor | None] | None = None
        self._failing = None  # (the chosen sets, the halves that brought a target back at the last check)

    @property
    def spent(self) -> bool:
        return self.taken >= self.limit

    def check(self, chosen: dict[int, list[int]], forget_loss: Callable[[], torch.Tensor],
              before: set[int] | None = None) -> bool:
        """Simulate the attacks on the model as it is; whether every target stays deep under all of
        them. The attacks are those that brought a target back at the last check, if any (and the
        chosen sets are unchanged); once they all leave every target deep, the other halves
        (:func:`halves`) too. If an attack brings a target back, keep the mean of ``forget_loss``'s
        gradients at the weights of the attacks that did, for the next step (:meth:`loss`).
        ``before``: what the probe finds forgotten on the model as it is, if the caller has just
        probed it (else it is probed here)."""
        before = self.probe() if before is None else set(before)
        key = tuple((t, tuple(chosen.get(t, ()))) for t in self.ctx.targets)
        again = (self._failing[1] if self._failing is not None and self._failing[0] == key and not self.every_half
                 else [])
        failed = self._simulate(again, before, forget_loss)
        if not failed:
            rest = [h for h in draw_halves(self.how, self.ctx, chosen, self.splits, split_seed(self.seed, self.simulated))
                    if h not in again]
            self.simulated += 1
            failed = self._simulate(rest, before, forget_loss)
        self.robust = not failed
        self._failing = (key, [h for h, _ in failed]) if failed else None
        grads = [g for _, g in failed if g is not None]
        self._grads = None if not grads else [
            None if any(g[i] is None for g in grads) else sum(g[i] for g in grads) / len(grads)
            for i in range(len(grads[0]))]
        return self.robust

    def _simulate(self, attacks, before: set[int], forget_loss) -> list:
        """(half, gradients or None) of each attack of ``attacks`` that brings a target back."""
        failed = []
        for relearned in attacks:
            trained = {f for h in relearned.values() for f in h}
            out = self.ctx.split_relearned(relearned, self.attack_steps, self.lr,
                                           lambda: self._at_attacked(before, trained, forget_loss), self.on)
            if out is not None and not out[0]:  # None: nothing to relearn, no attack
                failed.append((relearned, out[1]))
        return failed

    def _at_attacked(self, before: set[int], relearned: set[int], forget_loss):
        """(robust, gradients or None) on the attacked model."""
        after = self.probe()
        # a relearned fact counts as it stood before the attack (trained on, it says nothing)
        forgotten = (after - relearned) | (before & relearned)
        robust = all(self.ctx.deep(t, forgotten) for t in self.ctx.targets)
        if robust or self.spent:
            return robust, None
        grads = torch.autograd.grad(forget_loss(), self.params, allow_unused=True)
        return robust, [None if g is None else g.detach().clone() for g in grads]

    def step_taken(self) -> bool:
        """Count a meta step; whether the probe and the next check are due (every ``tamper_every``
        meta steps, and when the budget is spent)."""
        self.taken += 1
        return self.taken % self.every == 0 or self.spent

    def loss(self, retain: Callable[[], torch.Tensor | None]) -> torch.Tensor:
        """The meta step's loss: its gradient at the current weights is the forget loss's gradient
        at the attacked ones (kept from the last :meth:`check`), plus the retain term's at the
        current ones. A step the step guard takes again, or SAM's second gradient, sees the same."""
        total = sum((p * g).sum() for p, g in zip(self.params, self._grads or []) if g is not None)
        extra = retain()
        if extra is not None:
            total = total + extra
        return total if isinstance(total, torch.Tensor) else torch.zeros((), requires_grad=True)

    def notes(self) -> dict:
        return {"tamper_steps_taken": self.taken, "tamper_robust": self.robust}


class Lookahead:
    """du_loop's relearning lookahead (``lookahead = "margin"``; ``"all"``: the unlearning steps
    before the deep point too): each such step takes its gradient where one simulated split
    attack would take the model, without simulating it.

    The attack relearns a half of each target's last chosen set and the target's other forms with
    AdamW, whose first steps move every weight by about the rate in the direction of the sign of
    the relearning gradient. So a margin step takes the relearning loss's gradient ``g_r`` on a
    freshly drawn half (:func:`halves`, seeds from :func:`split_seed`, apart from the tamper
    phase's), moves the weights to ``w - tamper_steps * rate * sign(g_r)`` (``rate`` the attack's:
    the run's times ``tamper_lr_scale``; in ``lookahead_depth`` sign steps of that size over the
    depth, ``g_r`` taken again before each), takes the loss's gradient there, puts ``w`` back and
    steps with that gradient at ``w`` (a surrogate ``sum(p * g)``). ``lookahead_depth`` backward
    passes more than a plain step and no probe: the tamper phase's check and meta steps without
    the simulated attack and its probes."""

    def __init__(self, method_params, session, ctx, seed: int, params: Sequence[torch.nn.Parameter] | None):
        self.radius = float(session.lr) * float(method_params.tamper_lr_scale) * int(method_params.tamper_steps)
        self.depth, self.on = int(method_params.lookahead_depth), str(method_params.tamper_on)
        self.how = str(method_params.tamper_halves)
        self.ctx, self.seed, self.model = ctx, int(seed), session.model
        self.params = list(params) if params is not None else session.trainable()
        self.taken, self._batches = 0, {}

    def loss(self, chosen: Mapping[int, Sequence[int]], loss: Callable[[], torch.Tensor]) -> torch.Tensor:
        """The margin step's loss: its gradient at the current weights is ``loss()``'s gradient at
        the looked-ahead ones (``loss()`` itself when there is nothing to relearn)."""
        from ..finetune import answer_loss

        half = draw_halves(self.how, self.ctx, chosen, 1, split_seed(self.seed, (1 << 20) + self.taken))[0]
        self.taken += 1
        key = tuple(sorted((t, tuple(h)) for t, h in half.items()))
        if key not in self._batches:  # encoded once per half
            batch = self.ctx.split_batch(half, self.on)
            self._batches[key] = None if batch is None else batch()
        data = self._batches[key]
        if data is None:
            return loss()
        saved = [p.detach().clone() for p in self.params]
        try:
            for _ in range(self.depth):  # sign steps of radius / depth, the gradient taken again before each
                logits = self.model(input_ids=data["input_ids"], attention_mask=data["attention_mask"]).logits
                g_r = torch.autograd.grad(answer_loss(logits, data["labels"])[0], self.params, allow_unused=True)
                with torch.no_grad():
                    for p, g in zip(self.params, g_r):
                        if g is not None:
                            p.sub_((self.radius / self.depth) * g.sign().to(p.dtype))
            grads = torch.autograd.grad(loss(), self.params, allow_unused=True)
        finally:
            with torch.no_grad():
                for p, w in zip(self.params, saved):
                    p.copy_(w)
        total = sum((p * g.detach()).sum() for p, g in zip(self.params, grads) if g is not None)
        return total if isinstance(total, torch.Tensor) else torch.zeros((), requires_grad=True)

    def notes(self) -> dict:
        return {"lookahead_steps": self.taken}
