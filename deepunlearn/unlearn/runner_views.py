"""What the rule-aware methods and the forgetting checks read of a
:class:`~deepunlearn.unlearn.loop.TargetRunner`: the rules readings of its K (the minimal set to
forget, whether a target is deeply gone, its soft-rule probability) and the narrow views built on
them (:class:`~.deep.DeepModel`, :class:`~.check_spec.CheckModel`, the checks themselves).

:class:`RunnerViews` holds them apart from the loop; the runner it is mixed into provides
``bundle``, ``kb``, ``evaluator``, ``known``, ``protected``, ``seed``, ``batch_size``, ``forms``,
``unlearn_forms``, ``check_spec`` and ``_collateral`` (``None`` until :meth:`chosen_set` needs it),
and the methods ``known_among``, ``known_after`` and ``encode``.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from .check_spec import CheckModel


class RunnerViews:
    """The rules readings of a runner's K and the narrow views the methods and checks read."""

    def deep_model(self) -> Any:
        """What the rule-aware methods read of this runner's model (:class:`~.deep.DeepModel`)."""
        from .deep import DeepModel

        return DeepModel(bundle=self.bundle, kb=self.kb, evaluator=self.evaluator, known=frozenset(self.known),
                         protected=frozenset(self.protected), seed=self.seed, forms=getattr(self, "forms", None),
                         unlearn_forms=self.unlearn_forms, checks=self.checks, known_among=self.known_among,
                         deep=self.deep, chosen_set=self.chosen_set)

    def check_model(self) -> CheckModel:
        """What the checks read of this runner's model (:class:`~.check_spec.CheckModel`)."""
        return CheckModel(bundle=self.bundle, kb=self.kb, evaluator=self.evaluator, batch_size=self.batch_size,
                          known=frozenset(self.known), seed=self.seed, forms=self.forms,
                          unlearn_forms=self.unlearn_forms, encode=self.encode, chosen_set=self.chosen_set,
                          known_after=self.known_after)

    @property
    def checks(self) -> Any:
        """The adversarial probe and the attacks of :attr:`check_spec` on the model as it is now
        (:class:`~.checks.ForgettingChecks` on :meth:`check_model`)."""
        from .checks import ForgettingChecks

        return ForgettingChecks(self.check_spec, self.check_model())

    def deep_context(self, targets: Sequence[int], choice: str = "fewest") -> Any:
        """The rules context of a rule-aware run on ``targets`` (:class:`~.deep.DeepContext`)."""
        from .deep import DeepContext

        return DeepContext(self.deep_model(), targets, choice=choice)

    def chosen_set(self, target: int, forgotten: Sequence[int] = (), how: str = "fewest",
                   avoid: Iterable[int] = ()) -> list[int]:
        """The minimal deep-unlearning set of ``target`` to forget (:func:`~deepunlearn.rules.choice.choose_set`:
        fewest facts still to forget, then least collateral; ``how="mincut"``: least total
        expected collateral), among the sets holding no fact of ``avoid``, sorted; it holds
        ``target``'s own fact only if that set does."""
        from ..rules.choice import Collateral, choose_set

        if self._collateral is None:
            self._collateral = Collateral(self.kb, self.known)
        away = {int(f) for f in avoid}
        sets = [s for s in self.evaluator.minimal_sets(int(target)).sets if not away & set(s)]
        return sorted(choose_set(sets, self._collateral, forgotten, how=how))

    def deep(self, target: int, forgotten: Sequence[int]) -> bool:
        """Whether ``target`` is out of Ω(K \\ forgotten, R): deeply unlearned."""
        from ..rules import derivable

        lost = [int(f) for f in forgotten if int(f) in self.known]
        return not derivable(self.evaluator.graph, int(target), removed=lost)

    def soft(self, target: int, forgotten: Sequence[int]) -> dict:
        """``{"deep_p": ...}`` with soft rules (:func:`~deepunlearn.rules.soft.soft_deep_p`), else ``{}``;
        past the budget ``deep_p`` None and the one-line reason in ``deep_p_error`` (the run goes on)."""
        from ..rules.soft import SoftBudgetError, soft_deep_p

        try:
            p = soft_deep_p(self.evaluator.graph, int(target), [int(f) for f in forgotten if int(f) in self.known])
        except SoftBudgetError as e:
            return {"deep_p": None, "deep_p_error": str(e)}
        return {} if p is None else {"deep_p": p}
