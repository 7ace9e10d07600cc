"""Gradient difference: gradient ascent on the forget set plus the finetuning loss on a retain
set (TOFU's "gradient difference", Maini et al. 2024; MUSE's GA_GDR, Shi et al. 2024):
``L = -NLL(forget) + λ · NLL(retain)`` with λ = 1 as both papers."""

from __future__ import annotations

from .base import register_method
from .ga import GAParams, GradientAscent
from .npo import NPO, NPOParams
from .params import spec_grid


class GradDiffParams(GAParams):
    """The catalogue's grid (GA's: 1, 2, 4, 8, 16 steps); the retain term is the method's
    ``default_retain``, NLL with weight 1 and 8 retain facts a step."""

    grid: list[float] = spec_grid("graddiff")


@register_method
class GradDiff(GradientAscent):
    name = "graddiff"
    Params = GradDiffParams
    default_retain = "nll"


class NPOGDRParams(NPOParams):
    """The catalogue's grid (NPO's) and beta = 0.1; the retain term is the method's
    ``default_retain``, NLL with weight 1 (MUSE's NPO_GDR)."""

    grid: list[float] = spec_grid("npo_gdr")


@register_method
class NPOGDR(NPO):
    """NPO on the forget set plus the finetuning loss on a retain set (MUSE's NPO_GDR; TOFU's
    NPO-RT)."""

    name = "npo_gdr"
    Params = NPOGDRParams
    default_retain = "nll"
