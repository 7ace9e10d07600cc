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

Both take the runner; the sequence itself reads only a :class:`Served`, the few things it uses of
the model being served (:func:`serving` builds it from the runner).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from .loop import Point, seed_everything
from .methods import GradientUnlearner, MethodParams, UnlearnError, catalog


@dataclass(frozen=True)
class Served:
    """What a sequence of requests reads and does of the model it serves: the torch ``model`` with
    its ``snapshot`` (the original weights), K (``known``), the rules' ``evaluator``, and

    * ``serve(targets, u, values, seed)``: run ``u`` on ``targets`` over the grid ``values`` and
      leave the weights unlearned (one list of points per grid value),
    * ``known_after()``: the facts of K the model answers now,
    * ``deep(target, forgotten)``: whether the target is out of the closure,
    * ``protect(ids)``: the facts no run's retain term nor healing may train on from now on;

    for healing (``heal_steps``) also ``encode(ids)`` (facts as a training batch) and the run's
    ``optimiser`` (an :class:`~deepunlearn.unlearn.lr.OptimiserConfig`)."""

    model: Any
    snapshot: Any
    known: frozenset[int]
    evaluator: Any
    serve: Callable[..., Iterator[list[Point]]]
    known_after: Callable[[], set[int]]
    deep: Callable[[int, Sequence[int]], bool]
    protect: Callable[[frozenset[int]], None]
    encode: Callable[[Sequence[int]], dict] | None = None
    optimiser: Any = None


def serving(runner, u=None) -> Served:
    """The :class:`Served` of ``runner`` (a :class:`~deepunlearn.unlearn.loop.TargetRunner`); with
    ``u`` (a method), what healing after its requests needs too."""

    def serve(targets, method, values, seed):
        return runner.steps(targets, method, values, set(), len(values), seed, restore=False)

    def protect(ids: frozenset[int]) -> None:
        runner.protected = frozenset(ids)

    return Served(model=runner.bundle.model, snapshot=runner.snapshot, known=frozenset(runner.known),
                  evaluator=runner.evaluator, serve=serve, known_after=runner.known_after, deep=runner.deep,
                  protect=protect, encode=None if u is None else runner.encode,
                  optimiser=None if u is None else runner.optimiser(u))


def check_targets(runner, targets: Sequence[int | str]) -> list[int]:
    """Fact ids of the requests, refusing an empty list, a target named twice and a target the
    model did not know."""
    return request_ids(runner.kb, runner.known_target, targets)


def request_ids(kb, known_target: Callable[..., int], targets: Sequence[int | str]) -> list[int]:
    """:func:`check_targets` on the KB and ``known_target(t, field=...)`` (which refuses a target
    outside K)."""
    ids = [kb.resolve(t) for t in targets]
    if not ids:
        raise UnlearnError("no target given", field="targets")
    seen: set[int] = set()
    for given, t in zip(targets, ids):
        if t in seen:
            raise UnlearnError(f"target {given!r} (fact {t} {list(kb.facts[t])}) is named twice in one "
                               "request list", field="targets")
        seen.add(known_target(t, field="targets"))
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
    m = serving(runner, u if int(heal_steps) else None)
    return _sequential(m, ids, u, values, seed, min_accuracy, on_guard, recheck, int(heal_steps), bool(protect))


def _serve(m: Served, t: int, u, values: list[float], seed: int | None) -> list[Point]:
    return [ps[0] for ps in m.serve([t], u, values, seed)]


def _accuracy(evaluator, kept: Sequence[int], forgotten: Sequence[int]) -> tuple[list, float]:
    evals = [evaluator.evaluate(s, forgotten) for s in kept]
    union = {int(f) for e in evals for f in e.set}
    return evals, float(evaluator.accuracies(union, forgotten)[0])


def _heal(m: Served, kept: list[int], forgotten: list[int], goal: float, steps: int, seed: int):
    """Heal after a request (:func:`.heal.heal`): the facts forgotten afterwards and the record."""
    from .heal import heal

    evals, start = _accuracy(m.evaluator, kept, forgotten)
    protected = {int(f) for e in evals for f in e.set}
    now = {"forgotten": forgotten}  # the facts forgotten at the last measurement

    def accuracy() -> float:
        now["forgotten"] = sorted(m.known - m.known_after())
        return _accuracy(m.evaluator, kept, now["forgotten"])[1]

    record = heal(m, kept, protected, goal, accuracy, steps=steps, start=start, seed=seed)
    return now["forgotten"], record  # healing ends on a measurement (or takes no step)


#: the re-check's passes over the earlier targets at most (a re-unlearning can bring back a target
#: checked before it in the same pass)
RECHECK_PASSES = 3


def _protected(evaluator, targets: Sequence[int], forgotten: Sequence[int]) -> frozenset[int]:
    """The facts a run must not retain on while other requests are served: each of ``targets``
    and its chosen set on the model as it is (``forgotten``)."""
    out = {int(t) for t in targets}
    for s in targets:
        out |= {int(f) for f in evaluator.evaluate(s, forgotten).set}
    return frozenset(out)


def _recheck(m: Served, u, values: list[float], earlier: Sequence[int], forgotten: list[int], seed: int | None,
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
        back = [s for s in earlier if not m.deep(s, forgotten)]
        if not back:
            break
        groups = [back] if batch else [[s] for s in back]
        for group in groups:
            if not batch and m.deep(group[0], forgotten):
                continue  # an earlier re-unlearning of this pass made it deep again
            if protect:
                m.protect(_protected(m.evaluator, [s for s in served if s not in group], forgotten))
            run_seed = None if seed is None else seed + 1000 * (n + 1) + (0 if batch else earlier.index(group[0]))
            last = list(m.serve(group, u, values, run_seed))[-1]
            forgotten = list(last[0].forgotten)
            redone += [{"target": s, "deep": m.deep(s, forgotten), "steps": last[0].notes.get("steps_used"),
                        "pass": n + 1} for s in group]
    return forgotten, redone


def _sequential(m: Served, ids: list[int], u, values: list[float], seed: int | None, min_accuracy: float | None,
                on_guard: str, recheck: bool | str, heal_steps: int = 0, protect: bool = True) -> Iterator[Point]:
    from .snapshot import WeightSnapshot

    kept: list[int] = []
    measured = recheck or min_accuracy is not None or heal_steps > 0
    forgotten = sorted(m.known - m.known_after()) if measured else []
    acc_before = _accuracy(m.evaluator, kept, forgotten)[1] if heal_steps else None
    try:
        for j, t in enumerate(ids):
            before = WeightSnapshot(m.model) if min_accuracy is not None else None
            if protect:
                m.protect(_protected(m.evaluator, kept, forgotten))
            points = _serve(m, t, u, values, None if seed is None else seed + j)
            last = points[-1]
            now = list(last.forgotten)
            redone: list[dict] = []
            if heal_steps:
                now, last.notes["healed"] = _heal(m, kept + [t], now, acc_before, heal_steps,
                                                   0 if seed is None else seed + j)
            if recheck:
                now, redone = _recheck(m, u, values, kept + [t] if heal_steps else kept, now, seed,
                                       batch=recheck == "batch", protect=protect, served=kept + [t])
            evals, acc = _accuracy(m.evaluator, kept + [t], now)
            skipped = min_accuracy is not None and acc < float(min_accuracy)
            if skipped:
                before.restore(m.model)
                m.model.eval()
                last.notes.update(skipped=True, accuracy_would_be=acc)
                evals, acc = _accuracy(m.evaluator, kept, forgotten)
                served = kept
            else:
                kept.append(t)
                forgotten, served = now, kept
            acc_before = acc
            last.notes["earlier"] = [{"target": s, "recall": float(e.recall), "deep": m.deep(s, forgotten)}
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
        m.protect(frozenset())
        m.snapshot.restore(m.model)
        m.model.eval()
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
