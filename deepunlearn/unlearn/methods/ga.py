"""Gradient ascent (Jang et al., 2022): raise the answer's negative log-likelihood."""

from __future__ import annotations

from ..losses import gradient_ascent_loss
from .base import GradientUnlearner, Session
from .params.gradient import GAParams


class GradientAscent(GradientUnlearner):
    name = "ga"
    Params = GAParams

    def loss(self, session: Session):
        return gradient_ascent_loss(session.logits(), session.batch["labels"])
