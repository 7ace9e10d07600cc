"""The controls of every sweep point: ``deep_oracle`` (``oracle = true``) and ``p_chance``
(``chance_calibration = FILE``), stored with the point beside the raw ``deep``.

- ``deep_oracle`` judges the point's unlearned model B relative to its target's oracle (the
  model's own recipe retrained without the target's chosen minimal set, the ``oracle`` row's model,
  :mod:`.oracle`): B holds an excluded fact only where its evidence beats the oracle's by the margin
  calibrated on never-seen facts (:class:`~deepunlearn.unlearn.oracle_verdict.OracleReference`,
  family-wise margin, negatives: :func:`~deepunlearn.unlearn.oracle_verdict.default_negatives`).
  A point the raw verdict calls deep is deep relative to the oracle too (B holds fewer facts than
  it answers), so only the other points are compared; ``deep_oracle_held`` lists the excluded facts
  B holds beyond the oracle. The oracle of a target is trained (or found in ``CACHE/retrain``)
  before the job's trajectory starts, so the job's seed and points are those of a sweep without it.
  ``oracle_exact`` records that the oracle's training set no longer derives the target (true by
  the choice of :func:`~.oracle.oracle_set`; false only with approximate minimal sets).
  With ``oracle_seeds``, the same set is retrained with each of those seeds too (cached alike),
  and B is compared against the strongest of the oracles, its margin at least their own
  disagreement on each excluded fact (:mod:`deepunlearn.unlearn.oracle_verdict`).
- ``p_chance`` (:mod:`deepunlearn.unlearn.chance_verdict`): for a point not deep, the probability
  that a model that learned none of the point's minimal set, answering its facts at their
  relation's raw false-positive rate, is judged not deep too (``p_chance_se`` beside it when it is
  a Monte Carlo estimate). The ``oracle`` row gets it as well.

Both are computed when the point is, with the weights (and WHP's output filter) of that point,
through the runner's ``point_hooks``; a stored point is never recomputed, so a sweep resumed with
an option turned on has the fields only on the points computed since (the report counts n).
A sweep without either option stores exactly what it stored without this module.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any, Iterator

from .oracle import ORACLE

#: the fields this module adds to a point
FIELDS = ("deep_oracle", "deep_oracle_held", "oracle_exact", "p_chance", "p_chance_se")

CHANCE_HELP = ("calibration file (probe --calibrate -o FILE, raw false-positive rates per relation on never-seen "
               "facts) from which every point judged not deep gets its p_chance: how likely a model that learned "
               "none of its set's facts, answering them by chance, is judged not deep too; None: no p_chance")


def check_chance(cfg: Any) -> dict | None:
    """The sweep's ``chance_calibration`` as JSON (it travels with the work), checked to hold raw
    rates for every model's probe mode; None without one. A bad file is one line naming the field."""
    path = getattr(cfg, "chance_calibration", None)
    if path is None:
        return None
    from ..probe.calibration import CalibrationError, load_calibration
    from ..unlearn.chance_verdict import chance_rates

    try:
        cal = load_calibration(path, flag="chance_calibration")
        for m in cfg.models:
            chance_rates(cal, cfg.probe_mode_for(m), flag="chance_calibration")
    except CalibrationError as e:
        raise cfg.error("chance_calibration", str(e).removeprefix("chance_calibration ")) from None
    return cal.to_json()


class PointControls:
    """One worker's controls: the oracle references by target, the chance rates (module docstring)."""

    def __init__(self, oracle_cache: str | None, calibration: dict | None, oracle_seeds: tuple[int, ...] = ()):
        self.oracle_cache = oracle_cache
        self.oracle_seeds = tuple(oracle_seeds)
        self.calibration = calibration
        self._refs: dict[int, Any] = {}
        self._rates = None
        self._negatives = None

    # ------------------------------------------------------------------ per job
    def wrap(self, runner: Any, method: str, target: int, points: Iterator[Any]) -> Iterator[Any]:
        """``points`` of one job with the controls: the oracle reference of ``target`` ready before
        the trajectory, hooked into ``runner`` while it runs; the oracle row gets its p_chance."""
        if method == ORACLE:
            for p in points:
                self.chance(runner, p)
                yield p
            return
        if self.oracle_cache:
            self.reference(runner, target)
        hook = _Hook(self, runner)
        runner.point_hooks.append(hook)
        try:
            yield from points
        finally:
            runner.point_hooks.remove(hook)

    def reference(self, runner: Any, target: int) -> Any:
        """The oracle reference of ``target`` (retrained or found in the cache, its evidence
        computed once; the oracle's weights are not kept)."""
        ref = self._refs.get((id(runner), target))
        if ref is not None:
            return ref
        import torch

        from ..probe import load_model
        from ..unlearn.retrain import retrain
        from .oracle import oracle_set

        removed = oracle_set(runner, target)
        bundle = runner.bundle
        paths, oracles = [], []
        for seed in (None, *self.oracle_seeds):  # the model's own seed (the oracle row's), then the others
            with torch.random.fork_rng(devices=[]):
                path = retrain(bundle, runner.kb, removed, cache_dir=self.oracle_cache, progress=False,
                               device=str(bundle.device), seed=seed)
            loaded = load_model(str(path), device=str(bundle.device), dtype=bundle.dtype, prompt=bundle.prompt)
            paths.append(path)
            oracles.append(replace(bundle, model=loaded.model, meta=loaded.meta, path=loaded.path))
        view = _JudgeView(runner)
        if self._negatives is None:
            from ..unlearn.oracle_verdict import default_negatives

            self._negatives = default_negatives(runner.kb, view.rules)[0]
        ref = _Reference(view, paths, self._negatives, bundle=oracles)
        ref.exact = ref.derives(target) is False
        del oracles, loaded
        self._refs = {(id(runner), target): ref}  # one target at a time: the previous one's is dropped
        return ref

    # ------------------------------------------------------------------ per point
    def annotate(self, runner: Any, point: Any, model_fn: Any, forgotten: list[int]) -> None:
        """Set the point's control fields (module docstring)."""
        import torch

        with torch.random.fork_rng(devices=[]):  # the trajectory's random state is left as it was
            if self.oracle_cache:
                ref = self.reference(runner, point.target)
                if point.notes.get("deep"):
                    deep, held = True, []
                else:
                    known_b = runner.known - set(int(f) for f in forgotten)
                    deep, entry = ref.judge_b(runner.bundle, known_b, point.target, model_fn=model_fn)
                    held = [h["id"] for h in entry["held_excluded"]]
                point.notes.update(deep_oracle=bool(deep), deep_oracle_held=held, oracle_exact=ref.exact)
            self.chance(runner, point)

    def chance(self, runner: Any, point: Any) -> None:
        """The point's ``p_chance`` when it is not deep and the sweep has a calibration."""
        if self.calibration is None or point.notes.get("deep"):
            return
        from ..unlearn.chance_verdict import chance_fields, chance_rates

        if self._rates is None:
            self._rates = chance_rates(self.calibration, runner.probe_mode, flag="chance_calibration")
        verdict = SimpleNamespace(best_set=list(point.set), forgotten=list(point.forgotten), target_id=point.target)
        f = chance_fields(runner.evaluator, runner.kb, point.target, self._rates, verdict=verdict)
        point.notes["p_chance"] = float(f["p_chance"])
        if f["p_chance_method"] == "monte-carlo":
            point.notes["p_chance_se"] = float(f["p_chance_se"])


class _Hook:
    """What a runner calls at each point (``TargetRunner.point_hooks``)."""

    def __init__(self, controls: PointControls, runner: Any):
        self.controls, self.runner = controls, runner

    def __call__(self, points: list, step: Any, forgotten: list[int]) -> None:
        for p in points:
            self.controls.annotate(self.runner, p, getattr(step, "model_fn", None), forgotten)


class _JudgeView:
    """What :class:`~deepunlearn.unlearn.oracle_verdict.OracleReference` reads of a judge, from a
    sweep's runner (its KB, rules, probe mode and forms, minimal sets)."""

    def __init__(self, runner: Any):
        self.kb, self.evaluator = runner.kb, runner.evaluator
        self.rules = runner.evaluator.rules
        self.mode, self.forms = runner.probe_mode, runner.forms
        self.batch_size = runner.batch_size if isinstance(runner.batch_size, int) else None
        self.budget = None


def _reference_class():
    from ..unlearn.oracle_verdict import OracleReference
    from ..unlearn.evaluate_models import EvaluateError

    class Reference(OracleReference):
        """A reference that records, rather than refuses, an oracle whose training set still
        derives the target (``oracle_exact`` false)."""

        exact: bool = True

        def derives(self, target: int) -> bool:
            try:
                OracleReference.check_target(self, target)
            except EvaluateError:
                return True
            return False

        def check_target(self, target: int) -> None:
            return None

    return Reference


def _Reference(*args, **kwargs):  # noqa: N802  (the class is made lazily: no unlearn import at load)
    return _reference_class()(*args, **kwargs)


def point_controls(spec: Any) -> PointControls | None:
    """The controls of a sweep's work specification; None when it asks for neither."""
    cache, cal = getattr(spec, "oracle_cache", None), getattr(spec, "chance_calibration", None)
    seeds = tuple(getattr(spec, "oracle_seeds", ()) or ())
    return PointControls(cache, cal, seeds) if cache or cal is not None else None
