"""Gradient difference: gradient ascent on the forget set plus the finetuning loss on a retain
set (TOFU's "gradient difference", Maini et al. 2024; MUSE's GA_GDR, Shi et al. 2024):
``L = -NLL(forget) + λ · NLL(retain)`` with λ = 1 as both papers."""

from __future__ import annotations

from .ga import GradientAscent
from .npo import NPO
from .params.gradient import GradDiffParams, NPOGDRParams


class GradDiff(GradientAscent):
    name = "graddiff"
    Params = GradDiffParams
    default_retain = "nll"


class NPOGDR(NPO):
    """NPO on the forget set plus the finetuning loss on a retain set (MUSE's NPO_GDR; TOFU's
    NPO-RT)."""

    name = "npo_gdr"
    Params = NPOGDRParams
    default_retain = "nll"
