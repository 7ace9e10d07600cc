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


class Baselines:
    """The measuring side of a :class:`~deepunlearn.unlearn.loop.TargetRunner` (``runner``)."""

    def __init__(self, runner, *, scores: bool, holdout=None, min_k: float = 20.0, reference: str | None = None,
                 retrain_cache=None):
        from .methods import UnlearnError

        if reference not in (None, "retrain"):
            raise UnlearnError(f"reference must be 'retrain' or None, got {reference!r}")
        if holdout is not None and not scores:
            raise UnlearnError("a holdout KB is used by the measures: give scores=True too")
        self.runner, self.reference_mode, self.retrain_cache = runner, reference, retrain_cache
        self.measurer = None
        if scores:
            self.measurer = Measurer(runner.bundle, runner.kb, runner._probe_ids, holdout=holdout, k=min_k,
                                     seed=runner.seed, batch_size=runner.batch_size)
        self._refs: dict[int, tuple[Reference, Any]] = {}

    @property
    def on(self) -> bool:
        return self.measurer is not None

    def ref_set(self, target: int) -> list[int]:
        return reference_set(self.runner.evaluator, target)

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
        return self.runner.point_for(target, ORIGINAL, 0, [], None, self.measure(target, None, [], self.reference(target)))

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

        if target not in self.runner.known:
            raise TargetNotKnownError(f"target {target} {list(self.runner.kb.facts[target])} is not known by the "
                                      "model before unlearning: no baseline rows")

    def _build(self, target: int) -> tuple[Reference, Any]:
        from ..probe import load_model, probe
        from .methods import UnlearnError
        from .retrain import retrain

        r = self.runner
        if self.retrain_cache is None:
            raise UnlearnError("reference='retrain' needs retrain_cache (a folder for the retain models)")
        F = self.ref_set(target)
        path = retrain(r.bundle, r.kb, F, cache_dir=self.retrain_cache, progress=r.progress)
        device = str(next(r.bundle.model.parameters()).device)
        ret = load_model(str(path), device=device, prompt=r.bundle.prompt)
        try:
            res = probe(ret, r.kb, r._probe_ids, mode=r.probe_mode, batch_size=r.batch_size, progress=False)
            answered = res.known_ids()
            forgotten = sorted(r.known - answered)
            scores = hold = None
            if self.on:
                scores, hold = self.measurer.score(bundle=ret)
        finally:
            del ret
        ref = Reference(target=target, removed=F, scores=scores, holdout=hold, path=str(path))
        measure = None
        if self.on:
            measure = lambda set_ids: self.measurer.measures(target, set_ids, F, scores, hold, None)  # noqa: E731
        point = r.point_for(target, RETRAIN, 0, forgotten, None, measure)
        point.notes = {"answers_target": target in answered, "answers_set": sorted(i for i in F if i in answered)}
        return ref, point
