"""Sharpness-aware minimisation (SAM; Foret et al. 2021, for unlearning Fan et al. 2025) as an
option of every gradient method's optimiser step (``sam_rho`` in the shared method parameters,
docs/unlearning.md).

One SAM step: take the gradient ``g`` of the loss at the weights ``w``, move to
``w + rho * g / ||g||`` (the worst nearby point to first order, ``||g||`` the L2 norm over every
trained parameter), take the gradient there, put ``w`` back bit for bit and let the optimiser step
with that second gradient. ``rho = 0`` is the plain step.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch


def sam_gradients(params: Sequence[torch.nn.Parameter], loss_fn: Callable[[], torch.Tensor], rho: float,
                  eps: float = 1e-12) -> torch.Tensor | None:
    """Replace the gradients in ``params[i].grad`` (those of the loss at the current weights,
    already back-propagated) by the gradients of ``loss_fn()`` at ``w + rho * g / ||g||``; the
    weights are restored exactly afterwards. Returns the loss at the perturbed point (None when
    every gradient is zero or missing: nothing to perturb, the gradients are left as they are)."""
    grads = [p.grad for p in params]
    sq = [(_wide(g) ** 2).sum() for g in grads if g is not None]
    if not sq:
        return None
    norm = torch.sqrt(torch.stack([x.double() for x in sq]).sum())
    if float(norm) == 0.0:
        return None
    scale = rho / (norm + eps)
    saved = [p.detach().clone() for p in params]
    with torch.no_grad():
        for p, g in zip(params, grads):
            if g is not None:
                p.add_((_wide(g) * scale).to(p.dtype))
    for p in params:
        p.grad = None
    try:
        loss = loss_fn()
        loss.backward()
    finally:
        with torch.no_grad():
            for p, w in zip(params, saved):
                p.copy_(w)
    return loss.detach()


def _wide(g: torch.Tensor) -> torch.Tensor:
    """``g`` in float32 at least (a bf16/fp16 gradient is widened)."""
    g = g.detach()
    return g.float() if g.dtype in (torch.float16, torch.bfloat16) else g
