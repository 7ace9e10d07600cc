"""Methods that first reinforce the target and then move away from the reinforced model (TV,
WHP): the shared start of their trajectories."""

from __future__ import annotations

from typing import Sequence

from ..losses import nll_loss
from .base import MethodParams, Session, Unlearner, UnlearnError
from .params import check_grid, check_kind
from .params.reinforced import ReinforcedParams  # noqa: F401 - the package's export


class ReinforcedUnlearner(Unlearner):
    """Methods that first reinforce the target (the paper: "finetuned with 10 more iterations on
    the target data point") and then move away from the reinforced model by ``alpha``.

    ``alpha`` must be finite and >= 0: ``alpha = 0`` is the original model (a control point: it
    forgets nothing) and ``alpha > 0`` moves away from the reinforced model; a negative alpha
    would move TOWARDS it (TV: ``θ - α (θ_reinf - θ)`` with α = -1 IS the reinforced model; WHP:
    it would raise the target's probability), i.e. teach the target instead of unlearning it, so
    it is refused.

    Both run in LoRA mode too (``supports_lora``): the reinforcement trains the adapter
    (``ΔW = s·B·A``) and the method works from the adapter instead of a copy of the weights
    (see :mod:`deepunlearn.unlearn.snapshot`)."""

    grid_name = "alpha"
    supports_lora = True

    def __init__(self, params: MethodParams | None = None, **overrides):
        super().__init__(params, **overrides)
        check_kind(self.name, "strength", self.params)  # no retain term

    def check_grid(self, grid: Sequence[float]) -> list[float]:
        return check_grid(self.name, "strength", grid)

    def begin(self, session: Session, grid: Sequence[float]) -> list[float]:
        """Check the grid and reinforce the target: the shared start of every trajectory. Full
        mode reinforces the weights (and needs the snapshot to come back); LoRA mode trains the
        session's adapter, so the reinforced model is the adapter switched on."""
        if session.snapshot is None and session.lora is None:
            raise UnlearnError(f"{self.name} reinforces the target first: it needs a weight snapshot (full mode) "
                               "or a LoRA adapter (LoRA mode) to undo it")
        alphas = self.check_grid(grid)
        self.reinforce(session)
        return alphas

    def reinforce(self, session: Session) -> None:
        """Finetune the session's model on the target's answer (answer-only loss) for
        ``reinforce_steps`` steps with the reinforcement schedule (the reference's
        ``finetune_reinforced_model.py``: 10 steps, 1 warm-up step, linear decay to 0)."""
        steps = self.params.reinforce_steps or session.reinforce_steps
        loss = lambda s: nll_loss(s.logits(), s.batch["labels"])  # noqa: E731
        for _ in session.descend(loss, steps, schedule=session.reinforce_schedule,
                                 warmup=session.reinforce_warmup_steps):
            pass
