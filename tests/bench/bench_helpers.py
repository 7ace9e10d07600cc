"""Helpers the bench tests import by name (a conftest.py cannot be imported: with
--doctest-modules every conftest.py would collide as the module ``conftest``)."""

from __future__ import annotations


class FakeExecutor:
    """Emits, per job, one point per grid value not yet stored (recall and accuracy made up), or
    skips every job when ``skip`` (a model that knows none of its targets). ``calls`` counts runs."""

    name = "fake"

    def __init__(self, skip: bool = False, accuracy: float = 0.9):
        self.skip, self.accuracy, self.calls, self.jobs = skip, accuracy, 0, []

    def run(self, spec, jobs, sink) -> None:
        self.calls += 1
        for job in jobs:
            self.jobs.append(job)
            if self.skip:
                sink(job, {"event": "skipped", "reason": "the model does not know the target before unlearning"})
                continue
            for p in job.grid:
                if p in job.skip_params:
                    continue
                sink(job, {"event": "point", "point": {
                    "target": job.target, "method": job.method, "param": p, "recall": min(1.0, p / 4),
                    "accuracy": self.accuracy, "target_forgotten": p >= 2, "forgotten": [job.target] if p >= 2 else [],
                }})
            sink(job, {"event": "done"})
