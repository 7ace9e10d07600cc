"""Where jobs run: in this process (the default) or as Ray tasks on a local or existing cluster.

An executor takes the work specification, the jobs and a *sink* ``sink(job, event)`` that the
driver owns; it calls the sink, in the driver process, with every event a job yields (see
:class:`~deepunlearn.bench.jobs.ModelWorker`). Only the driver writes the results store, so Ray
workers on other nodes need no shared file system: they stream their points back.

Ray: one actor per slot (one GPU each where the cluster has GPUs, else one CPU each), each
holding a :class:`ModelWorker` that loads a model once and keeps it across that model's jobs;
jobs are handed to whichever actor is free, grouped by model. Actor methods are Ray generator
tasks, so a point reaches the store as soon as the worker has it, not when the trajectory ends.

On a cluster, run the driver on a node of it with ``--ray-address auto`` (model paths and the
``deepunlearn`` package must exist on every node; the KB travels with the jobs). Workers get the
driver's package folder first on their ``PYTHONPATH``, so a checkout works without installing.
"""

from __future__ import annotations

import os
import sys
from collections import deque
from typing import Any, Callable, Protocol, Sequence

from ..user_error import UserError
from .jobs import Job, ModelWorker, WorkSpec, torch_threads

Sink = Callable[[Job, dict[str, Any]], None]


class Executor(Protocol):
    name: str

    def run(self, spec: WorkSpec, jobs: Sequence[Job], sink: Sink) -> None: ...


class LocalExecutor:
    """Runs every job in this process, one after the other."""

    name = "local"

    def run(self, spec: WorkSpec, jobs: Sequence[Job], sink: Sink) -> None:
        worker = ModelWorker(spec)
        with torch_threads(spec.threads):
            for job in jobs:
                for event in worker.run(job):
                    sink(job, event)


class RayExecutor:
    """Runs jobs as Ray actor tasks.

    ``address``: an existing cluster (``"auto"``, ``"ray://head:10001"``); None starts a local
    instance (``num_cpus`` CPUs, default all) unless Ray is already initialised in this process,
    in which case that instance is used. ``workers``: how many actors (default: one per GPU of
    the cluster, else one per CPU), never more than there are jobs.
    """

    name = "ray"

    def __init__(self, address: str | None = None, *, num_cpus: int | None = None, workers: int | None = None,
                 gpus_per_worker: float | None = None):
        self.address = address
        self.num_cpus = num_cpus
        self.workers = workers
        self.gpus_per_worker = gpus_per_worker

    def _init(self) -> bool:
        """Connect to or start Ray; True when this executor started it (and must stop it)."""
        import ray

        if ray.is_initialized():
            return False
        kw: dict[str, Any] = {"include_dashboard": False, "logging_level": "WARNING"}
        if self.address:
            ray.init(address=self.address, **kw)
        else:
            ray.init(num_cpus=self.num_cpus, **kw)
        return True

    def run(self, spec: WorkSpec, jobs: Sequence[Job], sink: Sink) -> None:
        if not jobs:
            return
        import ray

        started = self._init()
        actors: list[Any] = []
        try:
            resources = ray.cluster_resources()
            gpus = float(resources.get("GPU", 0))
            per_gpu = self.gpus_per_worker if self.gpus_per_worker is not None else (1.0 if gpus >= 1 else 0.0)
            cpus = spec.threads or 1  # a worker's torch threads get as many CPUs reserved
            if per_gpu:
                slots = int(gpus // per_gpu)
                opts = {"num_gpus": per_gpu, "num_cpus": cpus}
            else:
                slots = max(1, int(resources.get("CPU", 1) // cpus))
                opts = {"num_cpus": cpus}
            n = max(1, min(self.workers or slots, slots or 1, len(jobs)))
            Actor = ray.remote(**opts)(_RayWorker)
            spec_ref = ray.put(spec)
            actors = [Actor.options(runtime_env=_runtime_env()).remote(spec_ref) for _ in range(n)]
            where = ray.get([a.where.remote() for a in actors])
            here = _package_dir()
            for pid, pkg in where:
                if pkg != here:
                    print(f"ray: warning: worker {pid} imports deepunlearn from {pkg}, the driver from {here}",
                          file=sys.stderr)
            print(f"ray: {n} worker(s), {f'{per_gpu:g} GPU and ' if per_gpu else ''}{cpus} CPU each", file=sys.stderr)
            self._drive(ray, actors, jobs, sink)
        finally:
            for a in actors:
                try:
                    ray.kill(a)
                except Exception:  # the actor already died
                    pass
            if started:
                ray.shutdown()

    @staticmethod
    def _drive(ray: Any, actors: list[Any], jobs: Sequence[Job], sink: Sink) -> None:
        """Keep every actor busy; forward each event to the sink as soon as it arrives.
        A free actor preferably takes a job of the model it has loaded."""
        queue = deque(jobs)
        idle: list[tuple[Any, str | None]] = [(a, None) for a in actors]
        running: dict[Any, tuple[Any, Job]] = {}

        def submit() -> None:
            while idle and queue:
                actor, loaded = idle.pop()
                job = next((j for j in queue if j.model == loaded), queue[0])
                queue.remove(job)
                gen = actor.run.options(num_returns="streaming").remote(job)
                running[gen] = (actor, job)

        submit()
        while running:
            ready, _ = ray.wait(list(running), num_returns=1)
            gen = ready[0]
            actor, job = running[gen]
            try:
                ref = next(gen)
                event = ray.get(ref)
            except StopIteration:
                del running[gen]
                idle.append((actor, job.model))
                submit()
                continue
            except (ray.exceptions.OutOfMemoryError, ray.exceptions.RayActorError) as e:
                raise RayWorkerLost(ray_lost_message(e)) from None
            sink(job, event)


class RayWorkerLost(UserError):
    """A Ray worker died under the sweep (its node ran out of memory, or the process was killed):
    the machine's, not the input's, and the points finished so far are stored."""


def ray_lost_message(e: BaseException) -> str:
    why = ("its node ran out of memory and Ray's memory monitor killed it"
           if "memory" in str(e).lower() else "its process died")
    return (f"ray: a worker was lost ({why}); the points finished so far are stored: rerun the same "
            "command to resume, after freeing memory, with fewer workers or on a larger cluster (--ray-address)")


def _package_dir() -> str:
    import deepunlearn

    return os.path.dirname(os.path.abspath(deepunlearn.__file__))


def _runtime_env() -> dict[str, Any]:
    """Workers import deepunlearn from where the driver does: the folder holding the package goes
    first on their PYTHONPATH (a checkout run without installing; a no-op where the same package
    is installed, and on nodes that lack the folder)."""
    root = os.path.dirname(_package_dir())
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]
    return {"env_vars": {"PYTHONPATH": os.pathsep.join([root, *rest])}}


class _RayWorker:
    """The actor body: one ModelWorker per actor process."""

    def __init__(self, spec: WorkSpec):
        # the driver's sweep bar is the progress; per-worker model-loading bars only clutter it
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
        except ImportError:  # pragma: no cover - transformers is a dependency
            pass
        self.worker = ModelWorker(spec)

    def where(self) -> tuple[int, str]:
        return os.getpid(), _package_dir()

    def run(self, job: Job):
        yield from self.worker.run(job)


def make_executor(name: str, address: str | None = None, **kw: Any) -> Executor:
    """``"local"`` or ``"ray"`` (with ``address`` of an existing cluster, or None for a local one).

    >>> make_executor("local").name
    'local'
    """
    if name == "local":
        return LocalExecutor()
    if name == "ray":
        return RayExecutor(address, **kw)
    raise ValueError(f"unknown executor {name!r}: expected 'local' or 'ray'")
