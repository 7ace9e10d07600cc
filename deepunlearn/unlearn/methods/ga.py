"""Gradient ascent (Jang et al., 2022): raise the answer's negative log-likelihood."""

from __future__ import annotations

from ..losses import gradient_ascent_loss
from .base import GradientUnlearner, Session, register_method
from .params.gradient import GAParams


@register_method
class GradientAscent(GradientUnlearner):
    name = "ga"
    Params = GAParams

    def loss(self, session: Session):
        return gradient_ascent_loss(session.logits(), session.batch["labels"])
