"""The parameters of the gradient methods whose loss is a per-answer term: GA, NPO, their retain
variants (GradDiff, NPO_GDR), SimNPO and IDK. Torch-free; each method's module uses its class."""

from __future__ import annotations

from pydantic import Field

from . import MethodParams, spec_grid


class GAParams(MethodParams):
    """The paper's grid (appendix D): T in {1, 2, 4, 8, 16} optimiser steps."""

    grid: list[float] = spec_grid("ga")


class NPOParams(MethodParams):
    """The paper's grid: T in {1, 2, 4, 8, 16} optimiser steps; beta = 0.1."""

    grid: list[float] = spec_grid("npo")
    beta: float = Field(0.1, gt=0)


class GradDiffParams(GAParams):
    """The catalogue's grid (GA's: 1, 2, 4, 8, 16 steps); the retain term is the method's
    ``default_retain``, NLL with weight 1 and 8 retain facts a step."""

    grid: list[float] = spec_grid("graddiff")


class NPOGDRParams(NPOParams):
    """The catalogue's grid (NPO's) and beta = 0.1; the retain term is the method's
    ``default_retain``, NLL with weight 1 (MUSE's NPO_GDR)."""

    grid: list[float] = spec_grid("npo_gdr")


class SimNPOParams(MethodParams):
    """GA's grid (1, 2, 4, 8, 16 steps); open-unlearning's TOFU defaults: β = 4.5, margin γ = 0,
    forget weight 0.125, retain NLL with weight 1."""

    grid: list[float] = spec_grid("simnpo")
    beta: float = Field(4.5, gt=0, description="inverse temperature of the length-normalised reward")
    gamma: float = Field(0.0, ge=0, description="reward margin (open-unlearning's delta times beta)")
    forget_weight: float = Field(0.125, gt=0, description="weight of the forget loss (open-unlearning's gamma, "
                                 "the authors' npo_coeff)")


class IDKParams(MethodParams):
    """GA's grid (1, 2, 4, 8, 16 steps), TOFU's retain NLL with weight 1, 8 retain facts a step;
    ``seed`` seeds the refusal draws."""

    grid: list[float] = spec_grid("idk")
    seed: int = Field(0, description="seeds the refusal drawn per forget fact and step")
