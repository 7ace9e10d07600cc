"""A Ray worker that dies under a sweep (killed for memory, or crashed) is one line saying what
happened and that the finished points are stored (exit 1), not a traceback with exit 70."""

from __future__ import annotations

import os

import pytest

from deepunlearn.bench.executors import RayExecutor, RayWorkerLost


class _Dying:
    """An actor whose job kills its own process, as Ray's memory monitor does to a worker."""

    def run(self, job):
        yield "started"
        os._exit(1)


def test_a_lost_worker_is_a_user_error_with_the_resume_hint():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR")
    try:
        actor = ray.remote(num_cpus=1)(_Dying).remote()
        seen = []
        with pytest.raises(RayWorkerLost) as e:
            RayExecutor._drive(ray, [actor], [type("J", (), {"model": "m"})()], lambda job, ev: seen.append(ev))
    finally:
        ray.shutdown()
    msg = str(e.value)
    assert msg.startswith("ray: a worker was lost") and "rerun the same command to resume" in msg
    assert "\n" not in msg
