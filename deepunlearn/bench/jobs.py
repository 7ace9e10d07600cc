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
from typing import Any, Iterator

from .oracle import ORACLE, oracle_points

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
class WorkSpec:
    """Everything a worker needs to run jobs, as plain picklable data (a Ray actor on another
    node gets a copy: the KB travels as its JSON document; model paths must be reachable there).

    ``models[name]`` is the model's config entry plus ``"run"``: its resolved protocol
    (``Protocol.describe()``), ``sets`` (a name or a folder), ``tie``, ``probe_mode``, ``k_mode``."""

    kb: dict[str, Any]
    models: dict[str, dict[str, Any]]
    rules: str | None = None
    seeds: int = 100  # MDUS seeds (the config's mdus_seeds)
    batch_size: int | str = "auto"
    lora: bool = False
    cache_dir: str | None = None
    threads: int | None = None
    runner_options: dict[str, Any] = field(default_factory=dict)
    #: the sweep's methods (the memory fit check plans them before a model is loaded)
    methods: tuple[str, ...] = ()
    #: per method, its hyper-parameters besides the grid (the config's [params.METHOD])
    method_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: ask each point's compose questions and record deep_model (the config's model_derived)
    model_derived: bool = False
    #: sequential requests' guard and re-check (the config's [targets] min_accuracy, on_guard, recheck)
    sequential: dict[str, Any] = field(default_factory=dict)
    #: where the ``oracle`` rows' retrained models are cached; None: no oracle rows (the config's oracle)
    oracle_cache: str | None = None
    #: the calibration (its JSON) each point's p_chance uses; None: none (the config's chance_calibration)
    chance_calibration: dict[str, Any] | None = None


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

        m = self.spec.models[model]
        # a per-seed checkpoint or calibration: one runner (and probe cache) per run seed
        seeded = seed is not None and (is_per_seed(m["path"]) or "adversarial_calibration_by_seed" in self.spec.runner_options)
        path = per_seed(m["path"], seed) if seeded else m["path"]
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
        check_fit(model, path, methods=self.spec.methods, lora=self.spec.lora, dtype=m.get("dtype"),
                  device=m.get("device"), batch_size=self.spec.batch_size, params=self.spec.method_params)
        from .progress import quiet_library_bars

        with quiet_library_bars():  # their bars inside the sweep's bar wrote ESC[A
            bundle = load_model(path, device=m.get("device"), dtype=m.get("dtype"),
                                prompt=prompt_format(m.get("prompt")), answer_format=m["run"]["protocol"]["answer_format"])
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
        for rows in request_points(runner, job, known, self.spec.method_params.get(job.base or "", {}),
                                   self.spec.sequential):
            yield {"event": "points", "points": [{**r, "model": job.model} for r in rows]}
        yield {"event": "done"}


# --------------------------------------------------------------------------------------------- unlearn layer calls


def new_target_runner(spec: WorkSpec, model: str, bundle: Any, kb: Any, cache_dir: str | None,
                      seed: int | None = None) -> Any:
    """The unlearn layer's ``TargetRunner`` for ``model``: its protocol and the protocol's
    choices the bench resolved (sets, tie, probe and K mode), passed explicitly; ``seed``: the run
    seed of a per-seed model (a ``{seed}`` in a calibration path is that seed's file)."""
    from ..probe.protocol import Protocol
    from ..unlearn import TargetRunner
    from ..unlearn.runner_options import ProbeOptions, SetOptions, TrainOptions

    m = spec.models[model]
    run = m["run"]
    options = dict(spec.runner_options)
    by_seed = options.pop("adversarial_calibration_by_seed", None)
    if by_seed is not None:  # a calibration path with {seed}: this run seed's (config_run)
        options["adversarial_calibration"] = by_seed[str(seed if seed is not None else min(map(int, by_seed)))]
    if options.get("holdout") is not None:
        from ..kg.io import from_dict

        options["holdout"] = from_dict(options["holdout"], source="sweep holdout KB")
    return TargetRunner(
        bundle, kb, rules=spec.rules, protocol=Protocol.model_validate(run["protocol"]), progress=False,
        probing=ProbeOptions(mode=run["probe_mode"], k_mode=run["k_mode"], cache_dir=cache_dir,
                             batch_size=spec.batch_size),
        minimal_sets=SetOptions(sets=run["sets"], tie=run["tie"], seeds=spec.seeds),
        training=TrainOptions(lr=m.get("lr"), lora=spec.lora),
        **options,  # the config's runner options, by their flat keywords
    )


def model_derived_questions(runner: Any, target: int) -> list:
    """The target's compose questions over the runner's K (:mod:`deepunlearn.unlearn.derived`)."""
    from ..unlearn.derived import compose_questions

    return compose_questions(runner.kb, runner.evaluator.rules, target, graph=runner.evaluator.graph)


def job_points(runner: Any, job: Job, method_params: dict[str, dict[str, Any]] | None = None) -> Iterator[Any]:
    """The job's trajectory: one point per grid value not in ``skip_params``, seeded with the job's seed."""
    from .grids import method_params_of

    params = method_params_of(job.method, (method_params or {}).get(job.method))
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
