"""The checks ``evaluate`` runs on an unlearned model B beside its verdict, the same ones a sweep
runs at a grid point and ``deepunlearn attack`` runs on a checkpoint:

``adversarial``
    the facts the primary probe counts forgotten (K_A \\ K_B) asked again under any form and any
    probe mode (:meth:`~deepunlearn.unlearn.checks.ForgettingChecks.adversarial_check`, calibrated
    with a calibration file): ``recall_adv``, ``accuracy_adv``, ``superficial``, ``superficial_n``
    (and the ``*_raw`` keys and ``adv_floor`` / ``adv_fpr`` when calibrated), the keys a sweep's
    point records;
``attacks``
    relearning (a grid of step counts) and quantisation on B, as ``deepunlearn attack`` runs them
    (:func:`~deepunlearn.unlearn.attack_run.run_attacks`, K = what A knows): its result object;
``scores``
    how much remains (:mod:`deepunlearn.unlearn.measures`: answer probability, truth ratio,
    exposure, ROUGE-L, Min-K%, model utility, on the target, its ``U*_A`` and the rest of K_A);
    with a retain model (``retain``: the same base trained without the target's reference set) the
    reference-based ones too (forget quality, generalised exposure).

B is loaded once: the checks run on the model the verdict probed, the adversarial probe and the
scores first, the attacks last; every attack puts B's weights back bit for bit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Sequence

from .evaluate_models import EvaluateError


@dataclass
class EvalChecks:
    """Which checks to run on each B (see the module docstring); :meth:`build` checks the values."""

    adversarial: bool = False
    adversarial_modes: Sequence[str] | None = None
    calibration: Any = None
    attacks: Any = None  # AttackParams with an attack enabled, or None
    relearn_lr: float | None = None
    seed: int = 0
    scores: bool = False
    retain: str | None = None
    _refs: dict = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, *, adversarial: bool = False, adversarial_modes: Sequence[str] | None = None,
              adversarial_calibration: Any = None, relearn: Sequence[int] | None = None, relearn_size: int = 16,
              relearn_lr: float | None = None, quantize: str | None = None, seed: int = 0, scores: bool = False,
              retain: str | None = None) -> "EvalChecks | None":
        """The checks of :func:`~deepunlearn.unlearn.evaluate.evaluate`'s keywords; ``None`` when
        none is asked for. A bad value is an :class:`EvaluateError` naming the keyword."""
        from pydantic import ValidationError

        from .attacks import AttackParams

        kw = {"relearn": list(relearn or []), "relearn_size": relearn_size, "quantize": quantize}
        try:
            params = AttackParams(**kw)
        except ValidationError as e:
            err = e.errors()[0]
            where = str(err["loc"][0]) if err["loc"] else "relearn"
            msg = err["msg"].removeprefix("Value error, ")
            raise EvaluateError(f"{where} {kw.get(where)!r}: {msg}", field=where) from None
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise EvaluateError(f"seed {seed!r}: must be an integer >= 0", field="seed")
        if adversarial_modes is not None:
            from ..probe.forms_probe import check_any_modes

            try:
                adversarial_modes = list(check_any_modes(list(adversarial_modes)))
            except ValueError as e:
                raise EvaluateError(f"adversarial_modes: {e}", field="adversarial_modes") from None
        if relearn_lr is not None and not (isinstance(relearn_lr, (int, float)) and relearn_lr > 0):
            raise EvaluateError(f"relearn_lr {relearn_lr!r}: must be a number > 0", field="relearn_lr")
        if (adversarial_modes is not None or adversarial_calibration is not None) and not adversarial:
            name = "adversarial_modes" if adversarial_modes is not None else "adversarial_calibration"
            raise EvaluateError(f"{name}: belongs to the adversarial probe: set adversarial too", field=name)
        if retain is not None and not scores:
            raise EvaluateError("retain: the retain model is the reference of the scores: set scores too",
                                field="retain")
        if isinstance(adversarial_calibration, (str, bytes)) or hasattr(adversarial_calibration, "__fspath__"):
            from ..probe.calibration import load_calibration

            adversarial_calibration = load_calibration(adversarial_calibration, flag="--adversarial-calibration")
        out = cls(adversarial=bool(adversarial), adversarial_modes=adversarial_modes,
                  calibration=adversarial_calibration, attacks=params if params.enabled() else None,
                  relearn_lr=relearn_lr, seed=int(seed), scores=bool(scores),
                  retain=None if retain is None else str(retain))
        return out if out.active else None

    @property
    def active(self) -> bool:
        return self.adversarial or self.attacks is not None or self.scores

    def check_device(self, device_type: str) -> None:
        """Refuse int8 quantisation for a model on a GPU before any B loads."""
        if self.attacks is not None and self.attacks.quantize == "int8" and device_type != "cpu":
            raise EvaluateError(f"--quantize int8: dynamic int8 quantisation runs on CPU and the models are on "
                                f"{device_type}; use int4 or nf4, or --device cpu", field="--quantize")

    def run(self, judge, bundle, target: int, verdict) -> dict[str, Any]:
        """The verdict's ``adversarial`` / ``scores`` / ``attacks`` fields for B (``bundle``)."""
        out: dict[str, Any] = {}
        if self.adversarial:
            out["adversarial"] = self._adversarial(judge, bundle, target, verdict.forgotten)
        if self.scores:
            out["scores"] = _plain(self._scores(judge, bundle, target, verdict.best_set))
        if self.attacks is not None:
            from .attack_run import run_attacks

            from .runner_options import ProbeOptions

            probing = ProbeOptions(mode=judge.mode, forms=judge.forms, batch_size=judge.batch_size)
            out["attacks"] = run_attacks(self.attacks, bundle, judge.kb, judge, target, probing, seed=self.seed,
                                         relearn_lr_given=self.relearn_lr, progress=judge.progress)
        return out

    def _adversarial(self, judge, bundle, target: int, forgotten: Sequence[int]) -> dict[str, Any]:
        from .check_spec import CheckModel, CheckSpec
        from .checks import ForgettingChecks

        spec = CheckSpec.build(judge.mode, adversarial=True, modes=self.adversarial_modes, calibration=self.calibration)
        checks = ForgettingChecks(spec, CheckModel(bundle=bundle, kb=judge.kb, evaluator=judge.evaluator,
                                                   batch_size=judge.batch_size))
        point = SimpleNamespace(target=target, notes={})
        checks.adversarial_check([point], forgotten)
        return {"modes": list(checks.modes), **point.notes}

    def _scores(self, judge, bundle, target: int, best_set: Sequence[int]) -> dict[str, Any]:
        from .measures import Measurer, reference_set

        m = Measurer(bundle, judge.kb, sorted(judge.known), seed=self.seed, batch_size=judge.batch_size)
        scores, hold = m.score()
        F = reference_set(judge.evaluator, target)
        ref = self._reference(judge, m, target, F) if self.retain else None
        out = m.measures(target, best_set, F, scores, hold, ref)
        out["retain_model"] = self.retain
        return out

    def _reference(self, judge, measurer, target: int, F: list[int]):
        """The retain model's scores (loaded once per target, in A's answer format)."""
        from .measures import Reference

        if target not in self._refs:
            ret = judge.load(self.retain, "--retain")
            try:
                scores, hold = measurer.score(bundle=ret)
            finally:
                del ret
            self._refs[target] = Reference(target=target, removed=F, scores=scores, holdout=hold, path=self.retain)
        return self._refs[target]


def _plain(obj: Any) -> Any:
    """numpy numbers and arrays as plain JSON values (NaN and infinities as None)."""
    from ..errors import dumps

    return json.loads(dumps(obj, default=lambda x: x.tolist() if hasattr(x, "tolist") else float(x)))


def check_lines(v) -> list[str]:
    """The lines :meth:`Verdict.text` adds for the checks."""
    lines = []
    a = v.adversarial
    if a is not None:
        sup = a.get("superficial")
        n = a.get("superficial_n") or [0, 0]
        lines.append(f"  adversarial (any form, modes {', '.join(a.get('modes', []))}"
                     + (f", calibrated, floor {a['adv_floor']:.1%}" if a.get("adv_floor") is not None else "")
                     + f"): recall {a['recall_adv']:.4f}, accuracy {a['accuracy_adv']:.4f}; still known "
                     + ("-" if sup is None else f"{n[0]} of the {n[1]} forgotten facts ({sup:.1%})"))
    if v.attacks is not None:
        from .attack_run import attack_rows

        o = v.attacks
        lines.append(f"  attacks (re-probed on the {o['known']} facts A knows):")
        lines.append(f"    {'attack':<22}  {'recall':>6}  {'acc':>6}  {'target':<9}  deep")
        lines += attack_rows(o, indent="    ")
    s = v.scores
    if s is not None:
        def fmt(x):
            return "-" if x is None else f"{x:.4f}"

        for g in ("target", "forget", "retain"):
            d = s.get(g) or {}
            lines.append(f"  scores, {g:<6}: prob {fmt(d.get('prob'))}, truth ratio {fmt(d.get('truth_ratio'))}, "
                         f"exposure {fmt(d.get('exposure'))}, ROUGE-L {fmt(d.get('rouge_l'))}")
        lines.append(f"  model utility {fmt(s.get('model_utility'))}; forget quality {fmt(s.get('forget_quality'))}, "
                     f"generalised exposure {fmt(s.get('genex'))}"
                     + (f" (retain model {s['retain_model']})" if s.get("retain_model") else " (no retain model)"))
    return lines
