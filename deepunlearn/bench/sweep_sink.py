"""Where a sweep's job events land: each point stored the moment it arrives (one transaction for a
batch's rows), the tracker and the progress bar told, a job's end or skip recorded, and a
model's K kept for the report's derivations."""

from __future__ import annotations

import json
from typing import Any

from .store import Point, known_key


class PointSink:
    """The executor's ``sink(job, event)``: it stores and reports the events of every job
    (:class:`~.jobs.ModelWorker` yields them). ``computed`` counts the points stored by this run;
    ``skipped`` maps a job's key to why it was skipped (the store's earlier skips included)."""

    def __init__(self, store: Any, kb: Any, bar: Any, tracker: Any = None, skipped: dict | None = None):
        self.store, self.kb, self.bar, self.tracker = store, kb, bar, tracker
        self.skipped: dict[tuple[str, int, str], str] = dict(skipped or {})
        self.computed = 0
        self._warned: set[tuple[str, int]] = set()

    def __call__(self, job: Any, ev: dict[str, Any]) -> None:
        kind = ev.get("event")
        if kind in ("point", "points"):  # a batch's rows of one grid value: one transaction
            rows = [ev["point"]] if kind == "point" else ev["points"]
            new = [Point.from_dict({**d, "seed": job.run_seed}, model=job.model) for d in rows]
            if kind == "point":
                self.store.add_point(new[0])
            else:
                self.store.add_points(new)
            self.computed += len(new)
            if self.tracker is not None:
                self.tracker.log_points(new)
            self.bar.advance(len(new))
        elif kind == "done":
            self.store.finish_job(*job.key, seed=job.run_seed)
        elif kind == "skipped":
            self._skipped(job, ev)
        elif kind == "status":
            self.bar.message(ev.get("text", ""))
        elif kind == "known":  # the model's K: the report draws what survives in it
            self.store.set_meta({known_key(job.model, job.run_seed): json.dumps(ev["ids"])})
        self.bar.postfix(f"{job.model} {job.method} target {job.target}")

    def _skipped(self, job: Any, ev: dict[str, Any]) -> None:
        reason = ev.get("reason")
        self.store.finish_job(*job.key, status="skipped", reason=reason, seed=job.run_seed)
        self.skipped[job.key] = ev.get("reason", "")
        self.bar.advance(job.todo)
        if (job.model, job.target) not in self._warned:
            self._warned.add((job.model, job.target))
            self.bar.message(f"warning: skipping target {job.target} {list(self.kb.facts[job.target])} for "
                             f"{job.model}: {reason}")

