"""The pieces of the :class:`~deepunlearn.unlearn.methods.Session` a
:meth:`TargetRunner.session <deepunlearn.unlearn.loop.TargetRunner.session>` builds that do not
need the runner: the forget batch's ids and the seeded retain sampler.
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

import numpy as np

from .points import target_seed


def forget_batch(target: int | Sequence[int], forget: Sequence[int] | None = None) -> tuple[list[int], list[int]]:
    """``(targets, forget ids)``: the target(s) as a list, and ``forget`` (default the targets)
    without repeats, in order.

    >>> forget_batch(3)
    ([3], [3])
    >>> forget_batch([3, 4], forget=[5, 3, 5])
    ([3, 4], [5, 3])
    """
    targets = [int(target)] if isinstance(target, (int, np.integer)) else [int(t) for t in target]
    return targets, list(dict.fromkeys([int(i) for i in (forget if forget is not None else targets)]))


def retain_sampler(encode: Callable, known: Iterable[int], forget_ids: Sequence[int], avoid: Sequence[int],
                   size: int, seed: int, targets: Sequence[int]):
    """The seeded :class:`~deepunlearn.unlearn.methods.RetainSampler` of a run: K (``known``)
    minus the forget set minus ``avoid`` (every target's chosen set and the protected facts),
    ``size`` facts a batch, seeded per targets."""
    from .methods import RetainSampler, retain_pool

    return RetainSampler(encode, retain_pool(known, forget_ids, avoid), size=size, seed=target_seed(seed, targets))
