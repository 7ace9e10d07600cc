"""SimNPO (Fan et al., 2024, "Simplicity Prevails: Rethinking Negative Preference Optimization
for LLM Unlearning"): NPO without the reference model and with the answer's log-likelihood
normalised by its length,

``L = w · -(2/β) log σ(-(β/|a|) log p_θ(a|q) - γ)  +  λ · NLL(retain)``

(:func:`~deepunlearn.unlearn.losses.simnpo_loss`, averaged over the forget rows).

Defaults are open-unlearning's for TOFU (``configs/trainer/SimNPO.yaml`` of
locuslab/open-unlearning, which cites the authors' ``Unlearn-Simple/TOFU/config/forget.yaml``):
``beta: 4.5``, ``delta: 0.0`` (the margin: its loss is ``-(2/β) logsigmoid(β (NLL/|a| - δ))``, so
this module's γ = β·δ = 0), ``gamma: 0.125`` (the forget loss's weight, the authors'
``npo_coeff``: :attr:`SimNPOParams.forget_weight` here), ``alpha: 1.0`` and
``retain_loss_type: NLL`` (the retain NLL with weight 1: ``retain_weight``).
"""

from __future__ import annotations

from ..losses import sequence_logprob, simnpo_loss
from .base import GradientUnlearner, Session
from .params.gradient import SimNPOParams


class SimNPO(GradientUnlearner):
    """Reference-free, length-normalised NPO plus retain NLL. No reference likelihood is computed
    or kept: the loss depends on the current model only."""

    name = "simnpo"
    Params = SimNPOParams
    default_retain = "nll"

    def loss(self, session: Session):
        logp, n = sequence_logprob(session.logits(), session.batch["labels"])
        return self.params.forget_weight * simnpo_loss(logp, n, self.params.beta, self.params.gamma)
