"""The :class:`~deepunlearn.unlearn.methods.Session` a :class:`~deepunlearn.unlearn.loop.TargetRunner`
run works in: the batch to forget, the learning rate, the optimisation settings (the method's own
where it sets them, else the protocol's), the retain sampler and the rules context.

:func:`runner_session` is ``TargetRunner.session``; it lives here so the loop stays about the loop.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .methods import Session, Unlearner
from .points import target_seed


def optimisation(runner, u: Unlearner) -> dict:
    """The :class:`Session` settings of a run of ``u`` by ``runner``: its learning rate, the
    method's own optimisation settings where it sets them, else the protocol's, and the weight
    snapshot."""
    pr, mp = runner.protocol, u.params
    pick = lambda own, default: default if own is None else own  # noqa: E731
    return dict(lr=runner._lr(u), max_grad_norm=pick(mp.max_grad_norm, pr.max_grad_norm) or None,
                weight_decay=pick(mp.weight_decay, pr.weight_decay),
                schedule=pick(mp.schedule, pr.schedule), warmup_steps=pick(mp.warmup_steps, pr.warmup_steps),
                reinforce_steps=pr.reinforce_steps, reinforce_schedule=pr.reinforce_schedule,
                reinforce_warmup_steps=pr.reinforce_warmup_steps, snapshot=runner.snapshot)


def runner_session(self, u: Unlearner, target: int | Sequence[int],
                   forget: Sequence[int] | None = None) -> Session:
    """The :class:`Session` a run of ``u`` by the runner ``self`` works in: the forget set (``forget``, default the
    target(s)) as its batch, a seeded retain sampler when the method uses a retain term (K
    minus the forget set minus every target's chosen set minus the runner's ``protected`` facts), the rules context for rule-aware
    methods, and the method's own optimisation settings where it sets them, else the
    protocol's."""
    from .data import row_keys
    from .methods import RetainSampler, retain_pool

    targets = [int(target)] if isinstance(target, (int, np.integer)) else [int(t) for t in target]
    forget_ids = list(dict.fromkeys([int(i) for i in (forget if forget is not None else targets)]))
    session = Session(
        self.bundle.model, self.encode(forget_ids), **optimisation(self, u),
        forget_ids=forget_ids, targets=targets, encode=self.encode, encode_pairs=self.encode_pairs,
        qa=lambda ids: [(p.question, p.answer) for p in (self.kb.probe(int(i)) for i in ids)],
        row_keys=lambda ids: row_keys(self.kb, ids, self.unlearn_forms),
    )
    if u.needs_rules:
        from .deep import DeepContext

        session.rules = DeepContext(self, targets, choice=getattr(u.params, "choice", "fewest"))
    if u.uses_retain:
        chosen = [f for t in targets for f in self.chosen_set(t)] + sorted(self.protected)
        session.retain = RetainSampler(self.encode, retain_pool(self.known, forget_ids, chosen),
                                       size=u.params.retain_size, seed=target_seed(self.seed, targets))
    return session
