"""Which jobs a sweep still has to run: one per (model, target, method) trajectory, or per group
of targets (batch) or per method (sequential requests), minus what the store already holds."""

from __future__ import annotations

from typing import Sequence

from .config import SweepConfig
from .config_run import run_seeds
from .grids import job_seed
from .jobs import Job
from .oracle import ORACLE
from .store import ResultsStore


def plan_jobs(cfg: SweepConfig, targets: Sequence[int], store: ResultsStore) -> tuple[list[Job], int]:
    """The jobs still to run (grouped by model) and how many grid points need no work: stored,
    or belonging to a job skipped because the model did not know its target."""
    jobs, done_points = [], 0
    for seed in run_seeds(cfg):  # [run] seeds: every trajectory once per seed, stored with its seed
        j, d = (_plan_requests if cfg.targets.batch or cfg.targets.sequential else _plan_single)(
            cfg, targets, store, seed)
        jobs += j
        done_points += d
    order = {m.name: i for i, m in enumerate(cfg.models)}
    return sorted(jobs, key=lambda j: order[j.model]), done_points  # grouped by model (stable: seeds in order)


def _plan_single(cfg: SweepConfig, targets: Sequence[int], store: ResultsStore, seed: int) -> tuple[list[Job], int]:
    finished = store.jobs(seed)
    jobs, done_points = [], 0
    for m in cfg.models:
        grids = grids_with_baselines(cfg, m)
        for t in targets:
            for method, grid in grids.items():
                key = (m.name, t, method)
                done = store.done_params(*key, seed=seed)
                if key in finished:
                    done_points += len(grid) if finished[key][0] == "skipped" else len(done & set(grid))
                    continue
                done_points += len(done & set(grid))
                if set(grid) <= done:  # all points landed, the process died before marking the job
                    store.finish_job(*key, seed=seed)
                    continue
                jobs.append(Job(m.name, t, method, tuple(grid), tuple(sorted(done & set(grid))),
                                job_seed(seed, m.name, t, method), run_seed=seed))
    return jobs, done_points


def _plan_requests(cfg: SweepConfig, targets: Sequence[int], store: ResultsStore, seed: int
                   ) -> tuple[list[Job], int]:
    """Batch jobs (one per group of ``batch`` targets and method; a group's rows of one grid value
    land together, so its done values are those stored for its first target) or sequential jobs
    (one per method; one stopped half-way runs again from the first request: its weights are gone)."""
    from .requests import batch_label, batches, sequential_label

    finished = store.jobs(seed)
    jobs, done_points = [], 0
    for m in cfg.models:
        for method, grid in cfg.grids_for(m).items():
            if cfg.targets.sequential:
                plans = [([list(targets)], sequential_label(method))]
            else:
                plans = [(batches(targets, n), batch_label(method, n)) for n in dict.fromkeys(cfg.targets.batch)]
            for b, group, label in ((b, g, label) for groups, label in plans for b, g in enumerate(groups)):
                key = (m.name, group[0], label)
                if key in finished:
                    done_points += len(grid) * len(group)
                    continue
                done: set[float] = set()
                if cfg.targets.sequential:
                    store.drop_points(m.name, label, seed=seed)
                else:
                    done = store.done_params(*key, seed=seed) & set(grid)
                    done_points += len(done) * len(group)
                jobs.append(Job(m.name, group[0], label, tuple(grid), tuple(sorted(done)),
                                job_seed(seed, m.name, group[0], label),
                                mode="sequential" if cfg.targets.sequential else "batch", targets=tuple(group),
                                base=method, batch=b, run_seed=seed))
    return jobs, done_points


def grids_with_baselines(cfg: SweepConfig, m) -> dict[str, list[int | float]]:
    """The model's grids, after the baseline rows (one point each, param 0) of a measured sweep
    and before the ``oracle`` row of an ``oracle = true`` sweep (one point, param 0)."""
    return {**{b: [0] for b in cfg.baseline_methods()}, **cfg.grids_for(m), **({ORACLE: [0]} if cfg.oracle else {})}
