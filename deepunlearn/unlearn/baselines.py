"""The per-target baseline rows of a measured sweep and the retain models behind them.

``original``: the model before unlearning (param 0: nothing forgotten, recall 0, accuracy 1) with
its measures, the "before" of every comparison. ``retrain``: a *retain model*, the same base
trained with the same recipe and seed on K without the target's reference set ``F``
(:func:`~deepunlearn.unlearn.measures.reference_set`), probed and evaluated like a grid point. It
records whether it still answers the target or facts of ``F`` (``answers_target``,
``answers_set``): knowledge it infers from what it kept, which no rule set captures. Its scores
are the reference of the points' reference-based measures. Retain models are cached on disk by
(base, KB, removed facts, recipe, seed) (:func:`deepunlearn.unlearn.retrain.retrain`) and their
scores in memory per target.
"""

from __future__ import annotations

from typing import Any, Callable

from .measures import ORIGINAL, RETRAIN, Measurer, Reference, reference_set
from .runner_options import MeasureOptions


class Baselines:
    """The measuring side of a :class:`~deepunlearn.unlearn.loop.TargetRunner`: the model
    (``bundle``), ``kb``, K (``known``), the rules layer's ``evaluator`` on K, ``point_for`` (makes
    a point from the facts lost: :meth:`~deepunlearn.unlearn.loop.TargetRunner.point_for`), how the
    retain model is probed (``probe_mode``, ``batch_size``), the seed of the measures' samples,
    progress bars for retraining and ``measures``, the runner's
    :class:`~deepunlearn.unlearn.runner_options.MeasureOptions`: its ``scores``, ``holdout``,
    ``min_k``, ``reference`` and ``retrain_cache`` (``reference="retrain"`` turns the scores on,
    as the reference-based measures need them)."""

    def __init__(self, bundle, kb, known, evaluator, point_for, *, probe_mode: str, batch_size=None, seed: int = 0,
                 progress: bool = False, measures: MeasureOptions):
        from .methods import UnlearnError

        reference, holdout = measures.reference, measures.holdout
        scores = measures.scores or reference is not None
        if reference not in (None, "retrain"):
            raise UnlearnError(f"reference must be 'retrain' or None, got {reference!r}")
        if holdout is not None and not scores:
            raise UnlearnError("a holdout KB is used by the measures: give scores=True too")
        self.bundle, self.kb, self.known, self.evaluator, self.point_for = bundle, kb, known, evaluator, point_for
        self.probe_mode, self.batch_size, self.progress = probe_mode, batch_size, progress
        self.reference_mode, self.retrain_cache = reference, measures.retrain_cache
        self.measurer = None
        if scores:
            self.measurer = Measurer(bundle, kb, sorted(known), holdout=holdout, k=measures.min_k, seed=seed,
                                     batch_size=batch_size)
        self._refs: dict[int, tuple[Reference, Any]] = {}

    @property
    def on(self) -> bool:
        return self.measurer is not None

    def ref_set(self, target: int) -> list[int]:
        return reference_set(self.evaluator, target)

    def measure(self, target: int, model_fn, forgotten, reference: Reference | None) -> Callable | None:
        """``set_ids -> measures`` of the model as it is now (None when scores are off)."""
        if not self.on:
            return None
        scores, hold = self.measurer.score(model_fn)
        F = self.ref_set(target)
        return lambda set_ids: self.measurer.measures(target, set_ids, F, scores, hold, reference)

    # ------------------------------------------------------------------ rows
    def original_point(self, target: int):
        self._check_known(target)
        return self.point_for(target, ORIGINAL, 0, [], None, self.measure(target, None, [], self.reference(target)))

    def retrain_point(self, target: int):
        from .methods import UnlearnError

        if self.reference_mode != "retrain":
            raise UnlearnError("the retrain row needs reference='retrain'")
        self._check_known(target)
        self.reference(target)
        return self._refs[target][1]

    def reference(self, target: int) -> Reference | None:
        """The target's retain-model reference (trained on first use, then cached); None unless
        ``reference="retrain"``."""
        if self.reference_mode != "retrain":
            return None
        if target not in self._refs:
            self._refs[target] = self._build(target)
        return self._refs[target][0]

    def _check_known(self, target: int) -> None:
        from .points import TargetNotKnownError

        if target not in self.known:
            raise TargetNotKnownError(f"target {target} {list(self.kb.facts[target])} is not known by the "
                                      "model before unlearning: no baseline rows")

    def _build(self, target: int) -> tuple[Reference, Any]:
        from ..probe import load_model, probe
        from .methods import UnlearnError
        from .retrain import retrain

        if self.retrain_cache is None:
            raise UnlearnError("reference='retrain' needs retrain_cache (a folder for the retain models)")
        F = self.ref_set(target)
        path = retrain(self.bundle, self.kb, F, cache_dir=self.retrain_cache, progress=self.progress)
        device = str(next(self.bundle.model.parameters()).device)
        ret = load_model(str(path), device=device, prompt=self.bundle.prompt)
        try:
            res = probe(ret, self.kb, sorted(self.known), mode=self.probe_mode, batch_size=self.batch_size,
                        progress=False)
            answered = res.known_ids()
            forgotten = sorted(self.known - answered)
            scores = hold = None
            if self.on:
                scores, hold = self.measurer.score(bundle=ret)
        finally:
            del ret
        ref = Reference(target=target, removed=F, scores=scores, holdout=hold, path=str(path))
        measure = None
        if self.on:
            measure = lambda set_ids: self.measurer.measures(target, set_ids, F, scores, hold, None)  # noqa: E731
        point = self.point_for(target, RETRAIN, 0, forgotten, None, measure)
        point.notes = {"answers_target": target in answered, "answers_set": sorted(i for i in F if i in answered)}
        return ref, point
