"""The parameters of RMU (:mod:`deepunlearn.unlearn.methods.rmu` says why each default). Torch-free."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from . import MethodParams, spec_grid


class RMUParams(MethodParams):
    """GA's grid (1, 2, 4, 8, 16 steps); the middle layer, steering 4 × the forget activations'
    mean norm, the MLP output projections of layers l-2..l, α = 1 on the retain activations, 8
    retain facts a step."""

    grid: list[float] = spec_grid("rmu")
    layer: int | None = Field(None, ge=0, description="decoder layer l (0-based); None: (n_layers - 1) // 2")
    steering: float = Field(4.0, gt=0, description="c = steering x the mean norm of the original forget "
                            "activations at layer l")
    train: Literal["down", "mlp"] = Field("down", description="the MLP output projection (down) or every MLP "
                                          "matrix (mlp) of layers l-2..l")
    seed: int = Field(0, description="seeds the random direction u")
    retain: Literal["activations", "nll", "kl", "none"] | None = Field(
        "activations", description="retain term: the layer's activations held at the original model's (default), "
        "nll, kl or none")
    retain_weight: float = Field(1.0, ge=0, description="alpha (open-unlearning's TOFU setting)")
