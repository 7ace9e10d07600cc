"""NPO with sharpness-aware minimisation (Foret et al. 2021; for unlearning, Fan et al. 2025).

Each optimiser step: take the gradient g of the loss at the weights w, move to
``w + rho * g / ||g||`` (the worst nearby point to first order), take the gradient there, come
back to w and let the shared loop's AdamW step with that second gradient. ``rho = 0`` is NPO.
"""

from __future__ import annotations

import torch

from deepunlearn.unlearn.methods import NPO

from . import NPOSAMParams


class NPOSAM(NPO):
    name = "npo_sam"
    Params = NPOSAMParams

    def total_loss(self, session) -> torch.Tensor:
        params = [p for p in (self.train_parameters(session) or session.trainable()) if p.requires_grad]
        loss = super().total_loss(session)
        if self.params.rho == 0:
            return loss
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        norm = torch.sqrt(sum((g.float() ** 2).sum() for g in grads if g is not None))
        scale = float(self.params.rho / (norm + 1e-12))
        eps = [None if g is None else g * scale for g in grads]
        with torch.no_grad():
            for p, e in zip(params, eps):
                if e is not None:
                    p.add_(e)
        try:
            sharp = torch.autograd.grad(super().total_loss(session), params, allow_unused=True)
        finally:
            with torch.no_grad():
                for p, e in zip(params, eps):
                    if e is not None:
                        p.sub_(e)
        # a loss whose value is the loss at w and whose gradient is the one taken at w + eps
        surrogate = sum((p * g.to(p.dtype)).sum() for p, g in zip(params, sharp) if g is not None)
        return surrogate - surrogate.detach() + loss.detach()
