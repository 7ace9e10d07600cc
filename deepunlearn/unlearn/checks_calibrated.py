"""The calibrated adversarial aggregate of :class:`~deepunlearn.unlearn.checks.ForgettingChecks`.

The facts the primary probe counts forgotten are asked again under every mode of the aggregate
(:func:`deepunlearn.probe.evidence.mode_evidence`, on the calibration's forms); a fact is still
known when the calibrated ``any`` says so (:meth:`~deepunlearn.probe.calibration.Calibration.known_any`),
at its relation's thresholds where the calibration has them, still known *raw* when any mode's raw
rule does. Both sets go into the point's notes, with the floor the calibrated numbers were
measured against.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def calibrated_known(checks, ids: Sequence[int], model_fn=None) -> tuple[set[int], set[int]]:
    """(calibrated, raw) sets of ``ids`` the adversarial aggregate still knows."""
    from ..probe.evidence import fact_groups, mode_evidence

    r, cal = checks.model, checks.calibration
    ids = sorted({int(i) for i in ids})
    if not ids:
        return set(), set()
    modes = [m for m in checks.modes if m in cal.modes]
    ev = mode_evidence(r.bundle, r.kb, ids, modes, forms=cal.meta.get("forms") or "all", batch_size=r.batch_size,
                       model_fn=model_fn)
    known = cal.known_any(ev, fact_groups(r.kb, ids), modes, relations=[r.kb.facts[i][1] for i in ids])
    raw = np.zeros(len(ids), dtype=bool)
    for m in modes:
        raw |= ev[m] > -np.inf
    return ({i for i, k in zip(ids, known) if k}, {i for i, k in zip(ids, raw) if k})


def annotate_calibrated(checks, points: list, forgotten: Sequence[int], model_fn) -> None:
    r, cal = checks.model, checks.calibration
    still, still_raw = calibrated_known(checks, forgotten, model_fn)
    n = len(forgotten)
    for p in points:
        ev = r.evaluator.evaluate(p.target, sorted(set(forgotten) - still))
        ev_raw = r.evaluator.evaluate(p.target, sorted(set(forgotten) - still_raw))
        p.notes.update(recall_adv=float(ev.recall), accuracy_adv=float(ev.accuracy),
                       superficial=(len(still) / n if n else None), superficial_n=[len(still), n],
                       recall_adv_raw=float(ev_raw.recall), accuracy_adv_raw=float(ev_raw.accuracy),
                       superficial_raw=(len(still_raw) / n if n else None), superficial_raw_n=[len(still_raw), n],
                       adv_floor=cal.floor(), adv_fpr=cal.fpr)
