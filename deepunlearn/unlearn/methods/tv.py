"""Task vector (Ilharco et al., 2023): subtract alpha times the direction that reinforced the target.

Full mode: reinforce the weights, keep ``θ_reinf`` beside the snapshot ``θ``, and write
``θ - α (θ_reinf - θ)`` into the model at every alpha (:func:`negate_task_vector`).

LoRA mode: the reinforcement trains the LoRA adapter, so the task vector IS the adapter's delta
``ΔW = s·B·A`` (``s = lora_alpha / r``) on the adapted projections, and ``θ - α·ΔW`` is exactly the
adapter with its scale set to ``-α·s`` (peft's ``LoraLayer.set_scale``): no weight is written and
no copy of the weights is kept (full mode keeps two: the snapshot and ``θ_reinf``), which is what
lets TV run on a 7-8B model on one 80 GB GPU. ``alpha = 0`` switches the adapter off: the
original model, bit for bit. The task vector lives only in the adapted projections (peft's
default: the attention's query/value projections for Llama-style models), so LoRA-mode TV moves
fewer weights than full-mode TV: the two are different (comparable) points of the method.
"""

from __future__ import annotations

from typing import Iterator, Mapping, Sequence

import torch

from .base import Session, Step
from .params.reinforced import TVParams
from .reinforced import ReinforcedUnlearner


def negate_task_vector(
    model: torch.nn.Module,
    original: Mapping[str, torch.Tensor],
    reinforced: Mapping[str, torch.Tensor],
    alpha: float,
) -> None:
    """Set every parameter named in ``reinforced`` to ``θ - α (θ_reinf - θ)`` in place, with
    ``θ = original[name]``. The arithmetic is done in float32 (at least) and rounded once to the
    parameter's dtype, so ``alpha = 0`` gives back the original weights bit for bit.

    >>> import torch
    >>> lin = torch.nn.Linear(1, 1, bias=False)
    >>> negate_task_vector(lin, {"weight": torch.tensor([[1.0]])}, {"weight": torch.tensor([[1.5]])}, 2.0)
    >>> lin.weight.item()  # 1 - 2 * (1.5 - 1)
    0.0
    """
    live = model.state_dict(keep_vars=True)
    with torch.no_grad():
        for name, reinf in reinforced.items():
            p = live[name]
            theta = original[name].to(p.device, dtype=torch.promote_types(p.dtype, torch.float32))
            vector = reinf.to(p.device, dtype=theta.dtype) - theta
            p.copy_((theta - alpha * vector).to(p.dtype))


class TaskVector(ReinforcedUnlearner):
    name = "tv"
    Params = TVParams

    def trajectory(self, session: Session, grid: Sequence[float]) -> Iterator[Step]:
        alphas = self.begin(session, grid)
        if session.lora is not None:
            yield from self._lora_trajectory(session, alphas)
            return
        params = {n for n, _ in session.model.named_parameters(remove_duplicate=False)}
        live = session.model.state_dict(keep_vars=True)
        # θ_reinf is kept beside the snapshot (one model's worth, on the snapshot's device)
        reinforced = {
            n: live[n].detach().to(session.snapshot[n].device, copy=True)
            for n in session.snapshot.names if n in params
        }
        try:
            for alpha in alphas:
                negate_task_vector(session.model, session.snapshot, reinforced, alpha)
                yield Step(alpha)
        finally:
            reinforced.clear()

    @staticmethod
    def _lora_trajectory(session: Session, alphas: Sequence[float]) -> Iterator[Step]:
        """``θ - α·ΔW`` as the reinforced adapter scaled by ``-α`` (off at ``α = 0``); the adapter
        is back at scale 1 and on when the iterator ends (the loop then removes it)."""
        adapter = session.lora
        try:
            for alpha in alphas:
                adapter.enable(alpha != 0)
                adapter.scale(-alpha)
                yield Step(alpha)
        finally:
            adapter.scale(1.0)
            adapter.enable(True)
