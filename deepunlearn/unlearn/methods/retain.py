"""Forget and retain sets: what a method run sees besides its own loss.

A run gets a *forget set* (one or more facts, each with its question/answer: ``Session.batch``,
one row per fact of ``Session.forget_ids``) and, when its method uses one, a *retain set*: facts
of K outside the forget set and outside the chosen deep-unlearning set of every target, so the
retain facts can never derive a target back (by definition of a deep-unlearning set). A
:class:`RetainSampler` draws ``size`` of them per optimiser step, seeded by (seed, step), and the
shared loop composes ``forget loss + retain_weight * retain term``:

* ``nll``: the finetuning loss on the retain batch (TOFU's gradient difference, MUSE's GDR);
* ``kl``: ``KL(p_original || p_current)`` over the retain answers' tokens (TOFU's KL
  minimisation, MUSE's KLR), the original model being the weights before the run
  (:meth:`~deepunlearn.unlearn.methods.session.Session.original_logits`).

A method states only its own loss; the retain term is an option of every gradient method
(``retain = "none" | "nll" | "kl"``, ``retain_weight``, ``retain_size`` in its params).
"""

from __future__ import annotations

import random
from typing import Callable, Iterable

import torch

from ...errors import UserError
from ..losses import IGNORE_INDEX, nll_loss

#: the retain terms a gradient method can add to its loss
RETAIN_KINDS = ("none", "nll", "kl")


class RetainPoolError(UserError, ValueError):
    """No fact is left to retain: every known fact is in the forget set or a chosen set."""


class RetainSampler:
    """Seeded retain batches drawn from ``pool`` minus whatever :meth:`exclude` was told.

    ``encode(ids)`` turns fact ids into a collated batch on the model's device. The draw of step
    ``s`` depends only on (``seed``, ``s``) and the pool at that moment, so a trajectory is
    reproducible and a run stopped at step s saw the same retain facts as a longer one.

    >>> s = RetainSampler(lambda ids: ids, pool=range(10), size=3, seed=1)
    >>> s.ids(1) == s.ids(1), len(s.ids(1)), set(s.ids(1)) <= set(range(10))
    (True, 3, True)
    >>> s.exclude([0, 1, 2, 3, 4, 5, 6, 7]); sorted(s.pool)
    [8, 9]
    >>> s.exclude([8, 9])
    Traceback (most recent call last):
    ...
    deepunlearn.unlearn.methods.retain.RetainPoolError: the retain pool is empty: every fact of K is in the forget set or in a chosen deep-unlearning set (nothing left to retain); use a method without a retain term (retain = "none")
    """

    def __init__(self, encode: Callable[[list[int]], dict], pool: Iterable[int], size: int = 8, seed: int = 0):
        self.encode = encode
        self._all = sorted({int(i) for i in pool})
        self._excluded: set[int] = set()
        self.size, self.seed = int(size), int(seed)
        self._check()

    @property
    def pool(self) -> list[int]:
        return [i for i in self._all if i not in self._excluded]

    def exclude(self, ids: Iterable[int]) -> None:
        """Never draw these facts again (a newly chosen set's facts)."""
        self._excluded |= {int(i) for i in ids}
        self._check()

    def _check(self) -> None:
        if not self.pool:
            raise RetainPoolError("the retain pool is empty: every fact of K is in the forget set or in a chosen "
                                  "deep-unlearning set (nothing left to retain); use a method without a retain term "
                                  '(retain = "none")', field="retain")

    def ids(self, step: int) -> list[int]:
        pool = self.pool
        rng = random.Random(f"retain:{self.seed}:{int(step)}")
        return sorted(rng.sample(pool, min(self.size, len(pool))))

    def batch(self, step: int) -> dict:
        return self.encode(self.ids(step))


def retain_pool(known: Iterable[int], forget: Iterable[int], chosen: Iterable[int] = ()) -> list[int]:
    """K minus the forget set minus the chosen deep-unlearning set(s).

    >>> retain_pool(range(6), forget=[0], chosen=[0, 2, 3])
    [1, 4, 5]
    """
    drop = {int(i) for i in forget} | {int(i) for i in chosen}
    return sorted(int(i) for i in known if int(i) not in drop)


def kl_to_original(cur_logits: torch.Tensor, orig_logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean over the answer tokens of ``KL(p_orig || p_cur)`` of the next-token distributions
    (positions whose next label is -100 do not count).

    >>> import torch
    >>> z = torch.zeros(1, 3, 4); lab = torch.tensor([[-100, 1, 2]])
    >>> float(kl_to_original(z, z, lab))
    0.0
    """
    mask = (labels[:, 1:] != IGNORE_INDEX).float()
    cur = torch.log_softmax(cur_logits[:, :-1].float(), -1)
    orig = torch.log_softmax(orig_logits[:, :-1].float(), -1)
    kl = (orig.exp() * (orig - cur)).sum(-1)
    return (kl * mask).sum() / mask.sum().clamp(min=1)


def retain_term(session, kind: str, sampler: RetainSampler | None = None) -> torch.Tensor:
    """The retain term of the session's current step (``session.step``) on a batch of ``sampler``
    (default: the session's retain sampler)."""
    sampler = session.retain if sampler is None else sampler
    if sampler is None:
        raise RetainPoolError(f"retain = {kind!r} needs a retain set, and this run has none", field="retain")
    batch = sampler.batch(session.step)
    logits = session.logits_of(batch)
    if kind == "nll":
        return nll_loss(logits, batch["labels"])
    if kind == "kl":
        return kl_to_original(logits, session.original_logits(batch), batch["labels"])
    raise ValueError(f"unknown retain term {kind!r}; expected one of {', '.join(RETAIN_KINDS)}")
