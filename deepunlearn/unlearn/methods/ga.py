"""Gradient ascent (Jang et al., 2022): raise the answer's negative log-likelihood."""

from __future__ import annotations

from ..losses import gradient_ascent_loss
from .base import GradientUnlearner, MethodParams, Session, register_method
from .params import spec_grid


class GAParams(MethodParams):
    """The paper's grid (appendix D): T in {1, 2, 4, 8, 16} optimiser steps."""

    grid: list[float] = spec_grid("ga")


@register_method
class GradientAscent(GradientUnlearner):
    name = "ga"
    Params = GAParams

    def loss(self, session: Session):
        return gradient_ascent_loss(session.logits(), session.batch["labels"])
