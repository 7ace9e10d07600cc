"""The parameters of the methods that first reinforce the target (TV, WHP). Torch-free."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from . import MethodParams, spec_grid


class ReinforcedParams(MethodParams):
    reinforce_steps: int | None = Field(
        None, ge=1, description="finetuning steps on the target for the 'overfit' model; None: the protocol's (10)")


class TVParams(ReinforcedParams):
    """The paper's grid for Phi-1.5 / Llama: alpha in {0.2, 0.5, 1, 5, 10}; 10 reinforcing steps."""

    grid: list[float] = spec_grid("tv")


class WHPParams(ReinforcedParams):
    """The paper's grid: alpha in {10, 1e3, 1e5, 1e7, 1e8}; 10 reinforcing steps."""

    grid: list[float] = spec_grid("whp")
    space: Literal["prob", "logit"] = Field(
        "prob", description="prob: paper eq. 3 on probabilities; logit: the repository's current logit mix")
