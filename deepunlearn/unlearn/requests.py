"""Several unlearning requests: a batch forgotten in one run, or requests served one after another
(MUSE's scalability and sustainability), on a :class:`~deepunlearn.unlearn.loop.TargetRunner`.

* :func:`run_batch`: one run whose forget set holds every target (and, for the rule-aware
  methods, every target's chosen set); per grid value one :class:`Point` per target, each with
  its own recall and ``deep`` and the batch's accuracy (over K minus every target's set).
* :func:`run_sequential`: the targets are served in order without restoring the weights in
  between (gradient methods only); every point of request j carries ``request = j`` and the last
  one also ``earlier`` (recall and ``deep`` of every target served so far, on the model after
  request j: does an earlier target come back through the rules?) and ``accuracy_after``
  (accuracy over K minus the union of the served targets' sets). The original weights are back
  when the iterator finishes or is closed.
"""

from __future__ import annotations

from typing import Iterator, Sequence

from .loop import Point, seed_everything
from .methods import GradientUnlearner, MethodParams, UnlearnError, catalog


def check_targets(runner, targets: Sequence[int | str]) -> list[int]:
    """Fact ids of the requests, refusing an empty list, a target named twice and a target the
    model did not know."""
    ids = [runner.kb.resolve(t) for t in targets]
    if not ids:
        raise UnlearnError("no target given", field="targets")
    seen: set[int] = set()
    for given, t in zip(targets, ids):
        if t in seen:
            raise UnlearnError(f"target {given!r} (fact {t} {list(runner.kb.facts[t])}) is named twice in one "
                               "request list", field="targets")
        seen.add(runner.known_target(t, field="targets"))
    return ids


def run_batch(runner, targets: Sequence[int | str], method, grid: Sequence[float] | None = None,
              skip_params=(), params: MethodParams | None = None, seed: int | None = None) -> Iterator[list[Point]]:
    """Forget ``targets`` together; yields, per grid value not in ``skip_params``, their points."""
    ids = check_targets(runner, targets)
    u, values, skip, n_todo = runner.prepare(method, grid, params, skip_params)
    return runner.steps(ids, u, values, skip, n_todo, seed)


def run_sequential(runner, targets: Sequence[int | str], method, grid: Sequence[float] | None = None,
                   params: MethodParams | None = None, seed: int | None = None) -> Iterator[Point]:
    """Serve ``targets`` one after another; see the module docstring."""
    ids = check_targets(runner, targets)
    u = runner.unlearner(method, grid, params)
    if not isinstance(u, GradientUnlearner):
        raise UnlearnError(f"sequential requests keep each request's weights: {u.name} works from a reinforced copy "
                           f"({catalog.titles('strength')}), use a gradient method (ga, npo, graddiff, du_loop, ...)",
                           field="method")
    if runner.lora or runner.snapshot is None:
        raise UnlearnError("sequential requests need full mode (a weight snapshot), not LoRA mode", field="lora")
    values = u.check_grid(u.params.grid)
    return _sequential(runner, ids, u, values, seed)


def _sequential(runner, ids: list[int], u, values: list[float], seed: int | None) -> Iterator[Point]:
    served: list[int] = []
    try:
        for j, t in enumerate(ids):
            points = [ps[0] for ps in runner.steps([t], u, values, set(), len(values),
                                                   None if seed is None else seed + j, restore=False)]
            served.append(t)
            last = points[-1]
            evals = [runner.evaluator.evaluate(s, last.forgotten) for s in served]
            union = {int(f) for e in evals for f in e.set}
            last.notes["earlier"] = [{"target": s, "recall": float(e.recall), "deep": runner.deep(s, last.forgotten)}
                                     for s, e in zip(served, evals)]
            last.notes["accuracy_after"] = float(runner.evaluator.accuracies(union, last.forgotten)[0])
            for p in points:
                p.notes["request"] = j
            yield from points
    finally:
        runner.snapshot.restore(runner.bundle.model)
        runner.bundle.model.eval()
        if seed is not None:
            seed_everything(seed)
