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
  when the iterator finishes or is closed. Two options keep the requests' promises: an accuracy
  guard (``min_accuracy``: a request that would take accuracy below it is undone and marked
  ``skipped``, or ends the sequence) and a re-check (``recheck``: after each request an earlier
  target that came back through the rules is unlearnt again; docs/unlearning.md).
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
                   params: MethodParams | None = None, seed: int | None = None, *,
                   min_accuracy: float | None = None, on_guard: str = "skip", recheck: bool | str = False,
                   heal_steps: int = 0, protect: bool = True) -> Iterator[Point]:
    """Serve ``targets`` one after another; see the module docstring.

    ``min_accuracy`` (the accuracy guard): when the accuracy after a request (over K minus every
    kept target's chosen set) would fall below it, the request's weights are undone (the model is
    put back as it was before the request) and the request is marked ``skipped``; ``on_guard =
    "stop"`` also ends the sequence there. ``recheck``: after each request every earlier kept target
    is checked on the model as it is now; one that is derivable again is unlearnt again with the same
    method (its points are not yielded; the request's last point lists it under ``reunlearned``).
    ``heal_steps``: after each request, up to this many finetuning steps on K outside every kept
    target's set win back the accuracy the request cost (:mod:`.heal`; before the re-check, which
    then also checks the request's own target; the request's last point records ``healed``: steps
    taken and the accuracy reached). ``recheck = "batch"`` unlearns the earlier targets found
    derivable in one pass again together, as one batch request, instead of one after another.
    ``protect`` (default): while a request (or a re-unlearning) is served, the retain term and
    du_loop's healing never train on the other kept targets nor on their chosen sets on the model
    as it is (:attr:`~deepunlearn.unlearn.loop.TargetRunner.protected`); ``protect=False`` lets
    them draw from all of K outside the request's own sets.
    """
    ids = check_targets(runner, targets)
    u = runner.unlearner(method, grid, params)
    if not isinstance(u, GradientUnlearner):
        raise UnlearnError(f"sequential requests keep each request's weights: {u.name} works from a reinforced copy "
                           f"({catalog.titles('strength')}), use a gradient method (ga, npo, graddiff, du_loop, ...)",
                           field="method")
    if runner.lora or runner.snapshot is None:
        raise UnlearnError("sequential requests need full mode (a weight snapshot), not LoRA mode", field="lora")
    if min_accuracy is not None and not 0 <= float(min_accuracy) <= 1:
        raise UnlearnError(f"min_accuracy must be between 0 and 1, got {min_accuracy}", field="min_accuracy")
    if on_guard not in ("skip", "stop"):
        raise UnlearnError(f"on_guard must be 'skip' or 'stop', got {on_guard!r}", field="on_guard")
    if recheck not in (False, True, "each", "batch"):
        raise UnlearnError(f"recheck must be true, 'each' or 'batch', got {recheck!r}", field="recheck")
    if int(heal_steps) < 0:
        raise UnlearnError(f"heal_steps must be 0 or more, got {heal_steps}", field="heal_steps")
    values = u.check_grid(u.params.grid)
    return _sequential(runner, ids, u, values, seed, min_accuracy, on_guard, recheck, int(heal_steps), bool(protect))


def _serve(runner, t: int, u, values: list[float], seed: int | None) -> list[Point]:
    return [ps[0] for ps in runner.steps([t], u, values, set(), len(values), seed, restore=False)]


def _accuracy(runner, kept: Sequence[int], forgotten: Sequence[int]) -> tuple[list, float]:
    evals = [runner.evaluator.evaluate(s, forgotten) for s in kept]
    union = {int(f) for e in evals for f in e.set}
    return evals, float(runner.evaluator.accuracies(union, forgotten)[0])


def _heal(runner, u, kept: list[int], forgotten: list[int], goal: float, steps: int, seed: int):
    """Heal after a request (:func:`.heal.heal`): the facts forgotten afterwards and the record."""
    from .heal import heal

    evals, start = _accuracy(runner, kept, forgotten)
    protected = {int(f) for e in evals for f in e.set}
    now = {"forgotten": forgotten}  # the facts forgotten at the last measurement

    def accuracy() -> float:
        now["forgotten"] = sorted(runner.known - runner.known_after())
        return _accuracy(runner, kept, now["forgotten"])[1]

    record = heal(runner.bundle.model, runner.encode, runner.known, runner.optimiser(u), kept, protected, goal,
                  accuracy, steps=steps, start=start, seed=seed, snapshot=runner.snapshot)
    return now["forgotten"], record  # healing ends on a measurement (or takes no step)


#: the re-check's passes over the earlier targets at most (a re-unlearning can bring back a target
#: checked before it in the same pass)
RECHECK_PASSES = 3


def _protected(runner, targets: Sequence[int], forgotten: Sequence[int]) -> frozenset[int]:
    """The facts a run must not retain on while other requests are served: each of ``targets``
    and its chosen set on the model as it is (``forgotten``)."""
    out = {int(t) for t in targets}
    for s in targets:
        out |= {int(f) for f in runner.evaluator.evaluate(s, forgotten).set}
    return frozenset(out)


def _recheck(runner, u, values: list[float], earlier: Sequence[int], forgotten: list[int], seed: int | None,
             batch: bool = False, protect: bool = True, served: Sequence[int] = ()):
    """Unlearn again every target of ``earlier`` that is derivable on the model as it is now (one
    after another in serving order, or with ``batch`` all together as one request), pass after
    pass until a pass finds every target deep (at most :data:`RECHECK_PASSES`); the facts
    forgotten afterwards and what was redone. ``served``: every kept target (with ``protect``, the
    ones not being unlearnt again are protected)."""
    earlier = list(earlier)
    served = list(served) or earlier
    redone = []
    for n in range(RECHECK_PASSES):
        back = [s for s in earlier if not runner.deep(s, forgotten)]
        if not back:
            break
        groups = [back] if batch else [[s] for s in back]
        for group in groups:
            if not batch and runner.deep(group[0], forgotten):
                continue  # an earlier re-unlearning of this pass made it deep again
            if protect:
                runner.protected = _protected(runner, [s for s in served if s not in group], forgotten)
            run_seed = None if seed is None else seed + 1000 * (n + 1) + (0 if batch else earlier.index(group[0]))
            last = list(runner.steps(group, u, values, set(), len(values), run_seed, restore=False))[-1]
            forgotten = list(last[0].forgotten)
            redone += [{"target": s, "deep": runner.deep(s, forgotten), "steps": last[0].notes.get("steps_used"),
                        "pass": n + 1} for s in group]
    return forgotten, redone


def _sequential(runner, ids: list[int], u, values: list[float], seed: int | None, min_accuracy: float | None,
                on_guard: str, recheck: bool | str, heal_steps: int = 0, protect: bool = True) -> Iterator[Point]:
    from .snapshot import WeightSnapshot

    kept: list[int] = []
    measured = recheck or min_accuracy is not None or heal_steps > 0
    forgotten = sorted(runner.known - runner.known_after()) if measured else []
    acc_before = _accuracy(runner, kept, forgotten)[1] if heal_steps else None
    try:
        for j, t in enumerate(ids):
            before = WeightSnapshot(runner.bundle.model) if min_accuracy is not None else None
            if protect:
                runner.protected = _protected(runner, kept, forgotten)
            points = _serve(runner, t, u, values, None if seed is None else seed + j)
            last = points[-1]
            now = list(last.forgotten)
            redone: list[dict] = []
            if heal_steps:
                now, last.notes["healed"] = _heal(runner, u, kept + [t], now, acc_before, heal_steps,
                                                   0 if seed is None else seed + j)
            if recheck:
                now, redone = _recheck(runner, u, values, kept + [t] if heal_steps else kept, now, seed,
                                       batch=recheck == "batch", protect=protect, served=kept + [t])
            evals, acc = _accuracy(runner, kept + [t], now)
            skipped = min_accuracy is not None and acc < float(min_accuracy)
            if skipped:
                before.restore(runner.bundle.model)
                runner.bundle.model.eval()
                last.notes.update(skipped=True, accuracy_would_be=acc)
                evals, acc = _accuracy(runner, kept, forgotten)
                served = kept
            else:
                kept.append(t)
                forgotten, served = now, kept
            acc_before = acc
            last.notes["earlier"] = [{"target": s, "recall": float(e.recall), "deep": runner.deep(s, forgotten)}
                                     for s, e in zip(served, evals)]
            last.notes["accuracy_after"] = acc
            if recheck:
                last.notes["reunlearned"] = redone
            for p in points:
                p.notes["request"] = j
            yield from points
            if skipped and on_guard == "stop":
                break
    finally:
        runner.protected = frozenset()
        runner.snapshot.restore(runner.bundle.model)
        runner.bundle.model.eval()
        if seed is not None:
            seed_everything(seed)


def requests_json(kb, method: str, mode: str, targets: Sequence[int], by_target: dict[int, list[Point]]) -> dict:
    """The result of a batch or sequential run (``mode``) of ``method`` on ``targets``: per target
    its points and summary, how many targets are deep at the last grid point, and the accuracy after the last."""
    from .summary import point_json, target_metrics

    results = [{"target": list(kb.facts[t]), "index": t, "points": [point_json(p, kb) for p in pts],
                "summary": target_metrics(pts)} for t, pts in by_target.items()]
    last = [pts[-1] for pts in by_target.values()]
    return {"method": method, "mode": mode, "targets": results,
            "deep": sum(bool(p.notes.get("deep")) for p in last), "n_targets": len(targets),
            "accuracy": last[-1].notes.get("accuracy_after", last[-1].accuracy)}
