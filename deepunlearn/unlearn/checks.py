"""Has it really forgotten? The adversarial probe and the attacks at a grid point.

The primary probe (one mode over the selected forms, :class:`~deepunlearn.unlearn.loop.TargetRunner`)
says which facts of K a point forgot. Two checks ask again, harder:

adversarial aggregate (``adversarial=True``)
    a fact counts as known if any of its forms (``all``) is known under any probe mode (exact,
    yesno, rank, generate; the ``any`` mode of :func:`deepunlearn.probe.probe`; ``modes`` may
    restrict them, e.g. without ``generate``, whose decoding is costly through WHP's
    ``model_fn``). The aggregate includes the primary probe's forms and mode (added to ``modes``
    when missing), so every fact the primary probe knows the aggregate knows too: only the facts
    the primary probe counts forgotten are asked again. The
    point's notes gain ``recall_adv`` and ``accuracy_adv`` (the rules layer's recall and accuracy
    with what the aggregate still knows put back; ``recall_adv <= recall`` always) and the
    *superficial forgetting rate* ``superficial``: the share of the facts the primary probe counts
    forgotten that the aggregate still knows (``superficial_n`` = [those facts, the forgotten
    facts]; ``None`` when nothing was forgotten). With a calibration (``calibration``: a
    :class:`~deepunlearn.probe.calibration.Calibration`, its JSON or a file from ``probe
    --calibrate``) the aggregate is the calibrated ``any`` (a mode counts only above the threshold
    set on never-seen facts, uninformative modes left out): those keys hold the calibrated values,
    ``recall_adv_raw`` / ``accuracy_adv_raw`` / ``superficial_raw`` / ``superficial_raw_n`` the raw
    rule's, and ``adv_floor`` / ``adv_fpr`` the calibrated aggregate's measured FPR on never-seen
    facts (with every informative mode; a subset of modes stays below it) and the target FPR.
    Without one the keys are as before (the raw rule, whose floor is not measured).
attacks (``attacks``: :class:`~deepunlearn.unlearn.attacks.AttackParams`)
    at the last grid point (``at = "last"``) or at every one: ``relearn`` finetunes the unlearned
    model for N steps (every N of the grid, one trajectory) on ``relearn_size`` facts drawn from
    K minus the targets and their chosen minimal sets (``relearn_on = "split"``: on half the
    target's chosen set and its other forms; ``"split-set"``: on the half alone,
    :mod:`~deepunlearn.unlearn.relearn_pool`),
    re-probing (primary probe) after each N;
    ``quantize`` re-probes the model with its Linear layers quantised. The weights are put back
    bit for bit after each attack, so the trajectory goes on from where it was. Notes:
    ``recall_relearn`` / ``accuracy_relearn`` keyed by ``str(N)``, ``recall_quant`` /
    ``accuracy_quant``, and ``relearn_lr``. A model served through a ``model_fn`` (WHP's mixed
    distribution) is relearnt and quantised in its own weights; the reinforced copy WHP mixes in
    is not quantised.
"""

from __future__ import annotations

import time
from typing import Sequence

from .attack_kinds import SPLIT_ON
from .check_spec import CheckModel, CheckSpec
from .methods import UnlearnError


class ForgettingChecks:
    """The adversarial probe and the attacks (``spec``, a :class:`~.check_spec.CheckSpec`) on one
    model (``model``, a :class:`~.check_spec.CheckModel`): a runner's points are checked through
    :attr:`TargetRunner.checks <deepunlearn.unlearn.loop.TargetRunner.checks>`."""

    def __init__(self, spec: CheckSpec, model: CheckModel):
        self.spec, self.model = spec, model

    @property
    def adversarial(self) -> bool:
        return self.spec.adversarial

    @property
    def attacks(self):
        return self.spec.attacks

    @property
    def modes(self) -> tuple[str, ...]:
        """The modes of the adversarial aggregate, in run order (the primary probe's included)."""
        return self.spec.modes

    @property
    def calibration(self):
        return self.spec.calibration

    @property
    def active(self) -> bool:
        return self.spec.active

    def annotate(self, points: list, targets: Sequence[int], step, forgotten: Sequence[int], *, last: bool,
                 lr: float | None) -> None:
        """Add the adversarial and attack results to the ``points`` of one grid value."""
        if not self.active:
            return
        t0 = time.perf_counter()
        model_fn = getattr(step, "model_fn", None)
        if self.adversarial:
            self.adversarial_check(points, forgotten, model_fn)
        if self.attacks is not None and (last or self.attacks.at == "all"):
            self._attack(points, targets, model_fn, lr)
        for p in points:
            p.notes["check_seconds"] = round(time.perf_counter() - t0, 3)

    # ------------------------------------------------------------------ adversarial
    def adversarial_known(self, ids: Sequence[int], model_fn=None) -> set[int]:
        """Which of ``ids`` the adversarial aggregate knows: any form under any mode."""
        from ..probe import probe

        r = self.model
        ids = sorted({int(i) for i in ids})
        if not ids:
            return set()
        res = probe(r.bundle, r.kb, ids, mode="any", forms="all", any_modes=self.modes, batch_size=r.batch_size,
                    model_fn=model_fn, progress=False)
        return {int(i) for i in res.known_ids()}

    def adversarial_check(self, points: list, forgotten: Sequence[int], model_fn=None) -> None:
        """Ask the facts the primary probe counts ``forgotten`` again (the aggregate, calibrated when a
        calibration is given) and put ``recall_adv`` and the rest into every point's ``notes``."""
        if self.calibration is not None:
            from .checks_calibrated import annotate_calibrated

            return annotate_calibrated(self, points, forgotten, model_fn)
        r = self.model
        still = self.adversarial_known(forgotten, model_fn)
        forgotten_adv = sorted(set(forgotten) - still)
        n = len(forgotten)
        for p in points:
            ev = r.evaluator.evaluate(p.target, forgotten_adv)
            p.notes.update(recall_adv=float(ev.recall), accuracy_adv=float(ev.accuracy),
                           superficial=(len(still) / n if n else None), superficial_n=[len(still), n])

    # ------------------------------------------------------------------ attacks
    def relearn_pool(self, targets: Sequence[int]) -> list[int]:
        """K minus the targets and their chosen minimal sets: the facts a relearning attack may use."""
        r = self.model
        out = set(r.known) - {int(t) for t in targets}
        for t in targets:
            out -= set(r.chosen_set(int(t)))
        return sorted(out)

    def _measure(self, points: list, known: set[int]) -> list[tuple[float, float]]:
        """(recall, accuracy) of each point's target when the model knows ``known``."""
        r = self.model
        forgotten = sorted(r.known - set(known))
        return [(float(ev.recall), float(ev.accuracy))
                for ev in (r.evaluator.evaluate(p.target, forgotten) for p in points)]

    def _attack(self, points: list, targets: Sequence[int], model_fn, lr: float | None) -> None:
        from .attacks import quantize_attack, relearn_attack

        a, r = self.attacks, self.model
        known = lambda: r.known_after(model_fn)  # noqa: E731
        if a.relearn:
            relearn_lr = a.relearn_lr if a.relearn_lr is not None else lr
            if relearn_lr is None:
                raise UnlearnError("attacks.relearn_lr: no learning rate to relearn with: give relearn_lr",
                                   field="attacks.relearn_lr")
            if a.relearn_on in SPLIT_ON:  # half the chosen set (and the target's forms); notes of its own
                from .relearn_pool import annotate_split

                annotate_split(self, points, targets, known, relearn_lr)
            else:
                after = relearn_attack(r.bundle.model, r.encode, self.relearn_pool(targets), a.relearn, lr=relearn_lr,
                                       size=a.relearn_size, seed=r.seed, known=known)
                measured = {n: self._measure(points, ks) for n, ks in after.items()}
                for k, p in enumerate(points):
                    p.notes["recall_relearn"] = {str(n): m[k][0] for n, m in measured.items()}
                    p.notes["accuracy_relearn"] = {str(n): m[k][1] for n, m in measured.items()}
                    p.notes["relearn_lr"] = relearn_lr
        if a.quantize:
            measured_q = self._measure(points, quantize_attack(r.bundle.model, known, how=a.quantize))
            for k, p in enumerate(points):
                p.notes["recall_quant"], p.notes["accuracy_quant"] = measured_q[k]
