"""Gradient ascent (Jang et al., 2022): raise the answer's negative log-likelihood."""

from __future__ import annotations

from pydantic import Field

from ..losses import gradient_ascent_loss
from .base import GradientUnlearner, MethodParams, Session, register_method


class GAParams(MethodParams):
    """The paper's grid (appendix D): T in {1, 2, 4, 8, 16} optimiser steps."""

    grid: list[float] = Field(default_factory=lambda: [1, 2, 4, 8, 16])


@register_method
class GradientAscent(GradientUnlearner):
    name = "ga"
    Params = GAParams
    paper_lr = 2e-5
    paper_lr_large = 1e-5
    paper_lr_ratio = 1.0

    def loss(self, session: Session):
        return gradient_ascent_loss(session.logits(), session.batch["labels"])
