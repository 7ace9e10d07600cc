"""What the rule-aware methods (``du_oracle``, ``du_loop``) ask of the model while they unlearn.

A :class:`DeepContext` is built per run for the run's targets. It knows each target's minimal
deep-unlearning sets over the model's probed K (the rules layer's exact sets), which facts to
*watch* (the union of those sets: whether a target is still derivable depends on them only),
and can

* probe the watched facts on the model as it is now (:meth:`forgotten_now`; under every form and
  mode, calibrated: :meth:`forgotten_now_adversarial`),
* probe any facts (:meth:`known_among`; du_loop's guard sample: :meth:`guard_sample`),
* tell whether a target is deeply unlearned, t ∉ Ω(K \\ forgotten, R) (:meth:`deep`),
* simulate a split relearning attack and look at the model it leaves (:meth:`split_relearned`;
  its training batch: :meth:`split_batch`),
* pick the set to forget next given what is already forgotten (:meth:`choose`, the rules layer's
  :func:`~deepunlearn.rules.choice.choose_set`), optionally among the sets that avoid some facts,
* find a forgotten fact whose return alone would make a target derivable again (:meth:`fragile`).

It reads the model and its K through a :class:`DeepModel`, the few things a rule-aware method
uses (:meth:`~deepunlearn.unlearn.loop.TargetRunner.deep_model` builds it).
Tests replace it with a scripted prober (any object with these methods).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class DeepModel:
    """What the rule-aware methods read of the model being unlearned: the model (``bundle``) and
    its KB, K (``known``) with the facts a request protects, the run's seed, the forms it is asked
    and unlearned on, the rules' ``evaluator``, the adversarial ``checks``, and three questions:
    which facts it answers now (``known_among``), whether a target is deep after forgetting some
    facts (``deep``) and which minimal set to forget next (``chosen_set``)."""

    bundle: Any
    kb: Any
    evaluator: Any
    known: frozenset[int]
    protected: frozenset[int]
    seed: int | None
    forms: str | None
    unlearn_forms: str | None
    checks: Any
    known_among: Callable[[Sequence[int]], set[int]]
    deep: Callable[[int, Sequence[int]], bool]
    chosen_set: Callable[..., list[int]]


class DeepContext:
    def __init__(self, model: DeepModel, targets: Sequence[int], choice: str = "fewest"):
        self.model = model
        self.targets = [int(t) for t in targets]
        self.choice = choice
        watch: set[int] = set(self.targets)
        for t in self.targets:
            for s in model.evaluator.minimal_sets(t).sets:
                watch |= set(int(f) for f in s)
        self.watch = sorted(watch)
        self._links: dict[frozenset[int], list[tuple[int, int]]] = {}  # links() per set

    @property
    def seed(self) -> int | None:
        """The run's seed (du_loop's samples are drawn with it)."""
        return self.model.seed

    @property
    def known(self) -> frozenset[int]:
        """K: the facts the model answered before unlearning."""
        return self.model.known

    @property
    def protected(self) -> frozenset[int]:
        """The facts a request protects (never forgotten nor drawn)."""
        return self.model.protected

    def forgotten_now(self) -> set[int]:
        """The watched facts the model no longer answers."""
        return set(self.watch) - self.model.known_among(self.watch)

    def forgotten_now_adversarial(self) -> set[int]:
        """The watched facts neither the primary probe nor the adversarial aggregate answers: every
        form under every mode of the run's checks, with the calibrated thresholds when the checks
        has a calibration (:mod:`~deepunlearn.unlearn.checks_calibrated`), else the raw rule."""
        forgotten = self.forgotten_now()
        checks = self.model.checks
        if checks.calibration is not None:
            from .checks_calibrated import calibrated_known

            still = calibrated_known(checks, sorted(forgotten))[0]
        else:
            still = checks.adversarial_known(sorted(forgotten))
        return forgotten - set(still)

    def use_forms(self, session, forms: str) -> None:
        """Make ``session`` unlearn every fact on the forms ``forms`` picks (a
        :mod:`deepunlearn.kg.forms` selection; a fact it picks none of keeps its primary question)."""
        from .data import encode_facts, row_keys

        r = self.model
        session.encode = lambda ids: encode_facts(r.bundle, r.kb, ids, forms)
        session.row_keys = lambda ids: row_keys(r.kb, ids, forms)

    def known_among(self, ids: Sequence[int]) -> set[int]:
        """Which of ``ids`` the model answers now (the primary probe)."""
        return self.model.known_among(ids)

    def guard_sample(self, n: int) -> list[int]:
        """``n`` facts of K outside every minimal set of the targets (and the targets), drawn with
        the run's seed: du_loop's guard sample (:mod:`~deepunlearn.unlearn.methods.du_guard`)."""
        from .methods.du_guard import draw

        return draw(set(self.model.known) - set(self.watch), n, self.model.seed)

    def split_relearned(self, relearned: Mapping[int, Sequence[int]], steps: int, lr: float,
                        then: Callable[[], T], on: str = "split") -> T | None:
        """Simulate a split relearning attack (:mod:`~deepunlearn.unlearn.relearn_pool`) on the
        model as it is: train ``steps`` steps at ``lr`` on the facts ``relearned[t]`` (a half of
        target t's chosen set) and on each target's other forms (``on = "split-set"``: the facts
        alone), call ``then()`` on the relearned
        model (in eval mode), restore the model and return what ``then`` returned (``None``:
        nothing to relearn, no attack). du_loop's tamper phase
        (:mod:`~deepunlearn.unlearn.methods.du_tamper`)."""
        from .attacks import relearn_then

        batch = self.split_batch(relearned, on)
        if batch is None:
            return None
        return relearn_then(self.model.bundle.model, batch, steps, then, lr=lr)

    def split_batch(self, relearned: Mapping[int, Sequence[int]], on: str = "split") -> Callable[[], dict] | None:
        """What a split attack that relearns ``relearned[t]`` trains on (the facts and, for
        ``on = "split"``, each target's other forms), as a function building the batch; ``None``:
        nothing to relearn."""
        from .relearn_pool import SplitPlan, split_batch, trained_forms

        r = self.model
        plan = SplitPlan(self.targets[0], sorted({int(f) for t in self.targets for f in relearned.get(t, ())}), [],
                         trained_forms(r.kb, self.targets, r.forms, on), on)
        if plan.empty:
            return None
        return lambda: split_batch(r.bundle, r.kb, plan, r.unlearn_forms)

    def deep(self, target: int, forgotten: Iterable[int]) -> bool:
        return self.model.deep(int(target), sorted(forgotten))

    def links(self, inside: Iterable[int]) -> list[tuple[int, int]]:
        """``(a, b)``, both of ``inside`` (a target and its chosen set), where the rules derive b
        from a and K outside ``inside``: the facts that relearning a alone makes derivable again
        (its inverse, "X's sister is Y" giving "Y's sister is X", or b through what the model
        keeps), so the ones a split attack most readily brings back (``tamper_halves = "linked"``)."""
        from ..rules.graph import derivable

        inside = frozenset(int(f) for f in inside)
        if inside not in self._links:
            g = self.model.evaluator.graph
            self._links[inside] = [(a, b) for a in sorted(inside) for b in sorted(inside - {a})
                                   if derivable(g, b, removed=inside - {a})]
        return self._links[inside]

    def choose(self, target: int, forgotten: Iterable[int], avoid: Iterable[int] = ()) -> list[int]:
        return self.model.chosen_set(int(target), sorted(forgotten), how=self.choice, avoid=avoid)

    def fragile(self, target: int, forgotten: Iterable[int]) -> int | None:
        """The first forgotten fact (by id) of ``target``'s minimal sets, other than the target,
        whose return alone would make the target derivable again and that some minimal set avoids
        (so forgetting that set mends it); None when there is none."""
        gone = {int(f) for f in forgotten}
        sets = self.model.evaluator.minimal_sets(int(target)).sets
        for h in sorted(gone & {int(f) for s in sets for f in s} - {int(target)}):
            if not self.deep(target, gone - {h}) and any(h not in s for s in sets):
                return h
        return None
