"""The seed noise of a reference of several oracles: how far exact unlearning of one seed lands
from another's on the facts neither was taught (:mod:`.oracle_verdict` reads it).

Several oracles of one set (other seeds) form one reference; B holds an excluded fact only where
it beats the strongest of them by a bar. ``fact`` noise (the default) puts into that bar the
oracles' own disagreement on the very fact compared; ``pooled`` (``evaluate --oracle-noise
pooled``) also puts the noise of the whole reference: how far one oracle beats the strongest of
the others on any excluded fact it answers, at the verdict's false-positive rate
(:func:`pooled_noise`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

#: the seed noise several oracles' bar includes: each fact's own disagreement, or also the pooled one
NOISES = ("fact", "pooled")


def pooled_noise(ev_each: Sequence[dict[str, np.ndarray]], answers_each: Sequence[np.ndarray], rate: float
                 ) -> dict[str, float]:
    """Per mode: the seed noise of a reference of several oracles, a bar that at most ``rate`` of
    its leave-one-out differences pass: on every excluded fact an oracle answers (raw), its score
    minus the strongest of the other oracles' (where both score it). One oracle against the
    strongest of the rest stands for B, an exact unlearning of another seed, against the strongest
    of them all (which is at least as strong: the bar errs on the side of deep). 0 where no
    difference is there (one oracle, or none answered).

    >>> ev = [{"exact": np.array([-1.0, -2.0, -5.0])}, {"exact": np.array([-1.5, -0.5, -4.0])}]
    >>> pooled_noise(ev, [np.array([True, True, False]), np.array([True, True, True])], 0.01)
    {'exact': 1.5}
    """
    from ..probe.calibration import threshold

    out: dict[str, float] = {}
    for m in (ev_each[0] if ev_each else {}):
        pool = []
        for i, ev in enumerate(ev_each):
            rest = [e[m] for j, e in enumerate(ev_each) if j != i]
            if not rest:
                continue
            strongest = np.max(np.stack(rest), axis=0)
            ok = np.isfinite(ev[m]) & np.isfinite(strongest) & np.asarray(answers_each[i], dtype=bool)
            pool.extend((ev[m] - np.where(ok, strongest, 0.0))[ok].tolist())
        out[m] = max(0.0, float(threshold(np.array(pool), rate))) if pool else 0.0
    return out
