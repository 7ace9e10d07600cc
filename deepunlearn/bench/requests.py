"""Batch and sequential jobs of a sweep (``[targets] batch = N`` / ``sequential = true``): the
unlearn layer's :func:`~deepunlearn.unlearn.requests.run_batch` and
:func:`~deepunlearn.unlearn.requests.run_sequential`, their points labelled for the store.

Rows are labelled ``METHOD@bN`` (batch of N) or ``METHOD@seq`` so they never mix with the same
method's single-target rows, and carry ``base_method``, ``batch_size``, ``batch`` and
``batch_targets`` (batch) or ``request`` and, on each request's last point, ``earlier`` and
``accuracy_after`` (sequential): the keys :mod:`deepunlearn.bench.report.deep_tables` reads.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence


def batch_label(method: str, size: int) -> str:
    """>>> batch_label("ga", 5), sequential_label("npo")
    ('ga@b5', 'npo@seq')
    """
    return f"{method}@b{size}"


def sequential_label(method: str) -> str:
    return f"{method}@seq"


def batches(targets: Sequence[int], size: int) -> list[list[int]]:
    """The targets in order, ``size`` at a time (the last group may be smaller).

    >>> batches([5, 6, 7, 8, 9], 2)
    [[5, 6], [7, 8], [9]]
    """
    return [list(targets[i:i + size]) for i in range(0, len(targets), size)]


def request_points(runner, job, targets: list[int], params, sequential: dict[str, Any] | None = None
                   ) -> Iterator[list[dict]]:
    """Per grid value (batch) or per point (sequential), the rows to store, as dicts; ``params``:
    the base method's typed parameters or None (:func:`~deepunlearn.bench.jobs.given_params`);
    ``sequential``: the guard and re-check (:meth:`~deepunlearn.bench.targets.TargetSpec.sequential_options`)."""
    from ..unlearn.requests import run_batch, run_sequential

    if job.mode == "batch":
        extra = {"base_method": job.base, "batch_size": len(job.targets), "batch": job.batch,
                 "batch_targets": list(job.targets)}
        for points in run_batch(runner, targets, job.base, list(job.grid), skip_params=job.skip_params,
                                params=params, seed=job.seed):
            yield [{**p.to_dict(), **extra, "method": job.method} for p in points]
    elif job.mode == "sequential":
        for p in run_sequential(runner, targets, job.base, list(job.grid), params=params, seed=job.seed,
                                **(sequential or {})):
            yield [{**p.to_dict(), "base_method": job.base, "method": job.method}]
    else:
        raise ValueError(f"unknown job mode {job.mode!r}")
