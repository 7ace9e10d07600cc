"""What a sweep is made of: jobs, the work specification shipped to workers, and the worker
that runs jobs on a loaded model (in-process or inside a Ray actor).

A *job* is one (model, target, method) trajectory over the model's grid of the method; it
yields one point per grid value. Jobs are the unit of scheduling and of resumption: a finished
job is never run again, and a partial one runs with its finished parameters in ``skip_params``.
Every job carries its own seed (``grids.job_seed``), set right before its trajectory, so a job
gives the same points whenever and wherever it runs (dropout, sampling).

The two calls into the unlearn layer (``TargetRunner(...)`` and ``TargetRunner.run(...)``) are
in :func:`new_target_runner` and :func:`job_points`, nowhere else; an ``oracle`` job (one point:
the model retrained without the target's minimal set) is made by :mod:`.oracle`.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

from .oracle import ORACLE, oracle_points

if TYPE_CHECKING:
    from ..probe.protocol import Protocol
    from .modelspec import ModelSpec

#: per-target baseline rows of a measured sweep (one point each): the model before unlearning and
#: the retain model (``deepunlearn.unlearn.baselines``)
BASELINES = ("original", "retrain")


@dataclass(frozen=True)
class Job:
    """One (model, target, method) trajectory; ``skip_params`` are already in the store."""

    model: str
    target: int
    method: str
    grid: tuple[float, ...]
    skip_params: tuple[float, ...] = ()
    seed: int = 0
    #: several requests: ``batch`` (forgotten together) or ``sequential`` (one after another);
    #: ``method`` is then the row label (``ga@b5``, ``ga@seq``) and ``base`` the method run
    mode: str = "single"
    targets: tuple[int, ...] = ()
    base: str | None = None
    batch: int = 0
    #: the run seed (``[run] seeds``) the job's points are stored with; None: the sweep's seed
    run_seed: int | None = None

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.model, self.target, self.method)

    @property
    def todo(self) -> int:
        """Points this job still has to compute."""
        skip = set(self.skip_params)
        return sum(1 for g in self.grid if g not in skip) * max(1, len(self.targets))


@dataclass(frozen=True)
class ModelRun:
    """One model of a sweep as its workers load it: its ``[[models]]`` entry
    (:class:`~.modelspec.ModelSpec`) and its resolved protocol."""

    model: "ModelSpec"
    protocol: "Protocol"


@dataclass(frozen=True)
class WorkSpec:
    """Everything a worker needs to run jobs, as plain picklable data (a Ray actor on another
    node gets a copy: the KB travels as its JSON document; model paths must be reachable there).

    ``models[name]`` is the model's :class:`ModelRun` (its config entry and resolved protocol);
    ``options[name]`` are the option groups its
    ``TargetRunner`` is built with (:class:`~deepunlearn.unlearn.runner_options.RunnerOptions`:
    the protocol's choices resolved, the holdout KB as its JSON document, the probe cache folder
    set per model when it loads)."""

    kb: dict[str, Any]
    models: dict[str, "ModelRun"]
    options: dict[str, Any] = field(default_factory=dict)
    rules: str | None = None
    cache_dir: str | None = None
    threads: int | None = None
    #: a calibration path with ``{seed}``: per run seed, its calibration (its JSON)
    calibration_by_seed: dict[str, Any] | None = None
    #: the sweep's methods (the memory fit check plans them before a model is loaded)
    methods: tuple[str, ...] = ()
    #: per method, its hyper-parameters besides the grid (the config's [params.METHOD]), typed and
    #: checked where the file was read (only the keys given are set)
    method_params: dict[str, Any] = field(default_factory=dict)
    #: ask each point's compose questions and record deep_model (the config's model_derived)
    model_derived: bool = False
    #: sequential requests' guard and re-check (the config's [targets] min_accuracy, on_guard, recheck)
    sequential: dict[str, Any] = field(default_factory=dict)
    #: where the ``oracle`` rows' retrained models are cached; None: no oracle rows (the config's oracle)
    oracle_cache: str | None = None
    #: more seeds of each target's oracle: deep_oracle against the strongest of them (the config's oracle_seeds)
    oracle_seeds: tuple[int, ...] = ()
    #: the calibration (its JSON) each point's p_chance uses; None: none (the config's chance_calibration)
    chance_calibration: dict[str, Any] | None = None

    def options_of(self, model: str) -> Any:
        """The option groups of ``model``'s runner (the defaults when the spec has none)."""
        from ..unlearn.runner_options import RunnerOptions

        return self.options.get(model) or RunnerOptions()


def work_spec(cfg: Any, kb: Any, holdout: dict[str, Any] | None = None, chance: dict[str, Any] | None = None) -> WorkSpec:
    """The :class:`WorkSpec` of a sweep configuration (a :class:`~.config.SweepConfig`): per
    model its protocol and the runner's option groups, from the configuration's options (the
    protocol's where it leaves one unset); ``holdout`` / ``chance``: the holdout KB and the
    p_chance calibration, read."""
    from ..kg.io import to_dict
    from ..unlearn.runner_options import (CheckOptions, MeasureOptions, ProbeOptions, RunnerOptions, SetOptions,
                                          TrainOptions)
    from .config_probe import runner_probe_options
    from .oracle import oracle_cache

    probe = runner_probe_options(cfg)  # the forms, checks and attacks, as the runner takes them
    measures = MeasureOptions(accuracy=cfg.accuracy, accuracy_sample=cfg.accuracy_sample, **(
        {"scores": True, "holdout": holdout, "min_k": cfg.min_k, "reference": None if cfg.reference == "none"
         else cfg.reference, "retrain_cache": str(cfg.cache_path / "retrain")} if cfg.measured else {}))
    checks = CheckOptions(adversarial=cfg.adversarial, attacks=probe.get("attacks"), modes=probe.get("adversarial_modes"),
                          calibration=probe.get("adversarial_calibration"))

    def options(m: Any) -> RunnerOptions:
        p = cfg.protocol_for(m)
        return RunnerOptions(
            probing=ProbeOptions(mode=cfg.probe_mode_for(m), forms=cfg.forms, k_mode=p.k_mode, batch_size=cfg.batch_size),
            minimal_sets=SetOptions(sets=cfg.sets_for(m), tie=p.tie, seeds=cfg.mdus_seeds),
            training=TrainOptions(lr=m.lr, lora=cfg.lora, unlearn_forms=cfg.unlearn_forms),
            measures=measures, checks=checks)

    return WorkSpec(
        kb=to_dict(kb), models={m.name: ModelRun(m, cfg.protocol_for(m)) for m in cfg.models},
        options={m.name: options(m) for m in cfg.models}, rules=cfg.rules, cache_dir=str(cfg.cache_path),
        threads=cfg.threads, calibration_by_seed=probe.get("adversarial_calibration_by_seed"), methods=tuple(cfg.methods),
        method_params=dict(cfg.params), model_derived=cfg.model_derived,
        sequential=cfg.targets.sequential_options() if cfg.targets.sequential else {},
        oracle_cache=str(oracle_cache(cfg.cache_path)) if cfg.oracle else None, chance_calibration=chance,
        oracle_seeds=tuple(cfg.oracle_seeds),
    )


class ModelWorker:
    """Runs jobs on one model at a time, loading each model once and keeping it until a job for
    another model arrives (jobs come grouped by model, so a model is loaded once per worker).

    :meth:`run` yields events, plain dicts so they cross process boundaries:
    ``{"event": "status", "text": ...}``, ``{"event": "point", "point": {...}}``,
    ``{"event": "skipped", "reason": ...}``, ``{"event": "done"}``.
    """

    def __init__(self, spec: WorkSpec):
        self.spec = spec
        self._kb = None
        self._model: tuple[str, str, int | None] | None = None
        self._runner = None
        from .point_controls import point_controls

        self._controls = point_controls(spec)  # deep_oracle / p_chance per point, when the sweep asks

    @property
    def kb(self):
        if self._kb is None:
            from ..kg.io import from_dict

            self._kb = from_dict(self.spec.kb, source="sweep KB")
        return self._kb

    def _load(self, model: str, seed: int | None = None) -> tuple[Any, float]:
        """The TargetRunner of ``model`` (loads the model and estimates K once); a model whose
        path holds ``{seed}`` loads run seed ``seed``'s checkpoint (``config_run``)."""
        from .config_run import is_per_seed, per_seed

        run = self.spec.models[model]
        m = run.model
        # a per-seed checkpoint or calibration: one runner (and probe cache) per run seed
        seeded = seed is not None and (is_per_seed(m.path) or self.spec.calibration_by_seed is not None)
        path = per_seed(m.path, seed) if seeded else m.path
        if self._model == (model, path, seed if seeded else None) and self._runner is not None:
            return self._runner, 0.0
        self._runner = None  # free the previous model before loading the next one
        self._model = None
        _free_accelerator_memory()
        from ..probe import load_model

        if self.spec.threads:
            import torch

            torch.set_num_threads(self.spec.threads)
        t0 = time.perf_counter()
        from .config import prompt_format
        from .guard import check_fit

        # on CUDA: refuse a model whose plan does not fit the free memory, before loading it
        opts = self.spec.options_of(model)
        check_fit(model, path, methods=self.spec.methods, lora=opts.training.lora, dtype=m.dtype,
                  device=m.device, batch_size=opts.probing.batch_size, params=self.spec.method_params)
        from .progress import quiet_library_bars

        with quiet_library_bars():  # their bars inside the sweep's bar wrote ESC[A
            bundle = load_model(path, device=m.device, dtype=m.dtype, prompt=prompt_format(m.prompt),
                                answer_format=run.protocol.answer_format)
        cache = None
        if self.spec.cache_dir:
            from pathlib import Path

            cache = str(Path(self.spec.cache_dir) / safe_name(model) / (f"seed-{int(seed)}" if seeded else ""))
        self._runner = new_target_runner(self.spec, model, bundle, self.kb, cache, **({"seed": seed} if seeded else {}))
        self._model = (model, path, seed if seeded else None)
        return self._runner, time.perf_counter() - t0

    def run(self, job: Job) -> Iterator[dict[str, Any]]:
        runner, took = self._load(job.model, job.run_seed)
        if took:
            yield {"event": "status", "text": f"{job.model}: loaded, {len(runner.known)} of {len(self.kb)} facts known "
                                              f"({took:.1f} s)"}
            yield {"event": "known", "ids": sorted(int(i) for i in runner.known)}  # K, for the report's derivations
        if job.mode != "single":
            yield from self._run_requests(runner, job)
            return
        if job.target not in runner.known:
            yield {"event": "skipped", "reason": "the model does not know the target before unlearning"}
            return
        if job.method in BASELINES:
            points = iter([runner.original_point(job.target) if job.method == "original"
                           else runner.retrain_point(job.target)])
        elif job.method == ORACLE and self.spec.oracle_cache:  # exact unlearning: the model retrained (.oracle)
            points = oracle_points(runner, job.target, self.spec.oracle_cache)
        else:
            points = job_points(runner, job, self.spec.method_params)
        if self._controls is not None and job.method not in BASELINES:
            points = self._controls.wrap(runner, job.method, job.target, points)
        questions = (model_derived_questions(runner, job.target)
                     if self.spec.model_derived and job.method not in BASELINES else None)
        for point in points:
            if questions is not None:  # the weights are at the point while it is yielded
                from ..unlearn.derived import note_model_derived

                note_model_derived(point, runner.bundle, runner.kb, job.target, runner.evaluator.rules, questions)
            d = point.to_dict() if hasattr(point, "to_dict") else dict(point)
            d["model"] = job.model
            yield {"event": "point", "point": d}
        yield {"event": "done"}


    def _run_requests(self, runner, job: Job) -> Iterator[dict[str, Any]]:
        """A batch or sequential job: the targets the model knows, in order; one ``points`` event
        per grid value (a batch's rows land together) or per request point (sequential)."""
        from .requests import request_points

        known = [t for t in job.targets if t in runner.known]
        if len(known) < len(job.targets):
            lost = [t for t in job.targets if t not in runner.known]
            yield {"event": "status", "text": f"{job.model} {job.method}: the model does not know target(s) "
                                              f"{lost} before unlearning; running the other {len(known)}"}
        if not known:
            yield {"event": "skipped", "reason": "the model knows none of the job's targets before unlearning"}
            return
        for rows in request_points(runner, job, known, given_params(self.spec.method_params, job.base),
                                   self.spec.sequential):
            yield {"event": "points", "points": [{**r, "model": job.model} for r in rows]}
        yield {"event": "done"}


# --------------------------------------------------------------------------------------------- unlearn layer calls


def new_target_runner(spec: WorkSpec, model: str, bundle: Any, kb: Any, cache_dir: str | None,
                      seed: int | None = None) -> Any:
    """The unlearn layer's ``TargetRunner`` for ``model``: its protocol and its option groups
    (:attr:`WorkSpec.options`), with the probe cache ``cache_dir``; ``seed``: the run seed of a
    per-seed model (a ``{seed}`` in a calibration path is that seed's file)."""
    from dataclasses import replace

    from ..unlearn import TargetRunner

    opts = spec.options_of(model)
    probing, checks, measures = replace(opts.probing, cache_dir=cache_dir), opts.checks, opts.measures
    by_seed = spec.calibration_by_seed
    if by_seed is not None:  # a calibration path with {seed}: this run seed's (config_run)
        checks = replace(checks, calibration=by_seed[str(seed if seed is not None else min(map(int, by_seed)))])
    if measures.holdout is not None:
        from ..kg.io import from_dict

        measures = replace(measures, holdout=from_dict(measures.holdout, source="sweep holdout KB"))
    return TargetRunner(bundle, kb, rules=spec.rules, protocol=spec.models[model].protocol, progress=False,
                        **{**opts.groups(), "probing": probing, "measures": measures, "checks": checks})


def model_derived_questions(runner: Any, target: int) -> list:
    """The target's compose questions over the runner's K (:mod:`deepunlearn.unlearn.derived`)."""
    from ..unlearn.derived import compose_questions

    return compose_questions(runner.kb, runner.evaluator.rules, target, graph=runner.evaluator.graph)


def given_params(method_params: dict[str, Any] | None, method: str | None):
    """The method's typed parameters from a sweep's ``[params.METHOD]``, or None where the sweep
    sets none of them (the method's defaults)."""
    p = (method_params or {}).get(method or "")
    return p if p is not None and p.model_fields_set else None


def job_points(runner: Any, job: Job, method_params: dict[str, Any] | None = None) -> Iterator[Any]:
    """The job's trajectory: one point per grid value not in ``skip_params``, seeded with the job's seed."""
    params = given_params(method_params, job.method)
    return runner.run(job.target, job.method, list(job.grid), skip_params=tuple(job.skip_params), seed=job.seed,
                      params=params)


@contextmanager
def torch_threads(n: int | None):
    """Run the block with ``n`` torch intra-op threads (None: unchanged), then restore the count
    (an in-process sweep must not change the caller's setting)."""
    if not n:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def safe_name(name: str) -> str:
    """A model name as one safe path component: a name of ASCII letters, digits, ``-``, ``_`` and
    ``.`` not starting with a dot stays as it is (``phi-1.5``); any other (``..``, ``a/b``,
    ``.hidden``, spaces, non-ASCII) keeps its safe characters and gets 8 hex digits of its sha256, so two names never share a folder and none
    points outside the cache (a model named ``..`` once put its probe cache above it).

    >>> safe_name("tiny"), safe_name(".."), safe_name("a/b") != safe_name("a_b")
    ('tiny', '__-5ec1f7e7', True)
    """
    import hashlib

    if name and not name.startswith(".") and all(c.isascii() and (c.isalnum() or c in "-_.") for c in name):
        return name
    cleaned = "".join(c if c.isascii() and (c.isalnum() or c in "-_") else "_" for c in name)[:64] or "_"
    return f"{cleaned}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def _free_accelerator_memory() -> None:
    import gc

    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
