"""The hyper-parameters every unlearning method has, its error type, and how a bad value is said
(one line naming the field)."""

from __future__ import annotations

from typing import Any, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...errors import UserError


class UnlearnError(UserError, ValueError):
    """An unlearning run cannot be done as asked (unknown method, bad grid, unknown target...)."""


class MethodParams(BaseModel):
    """Hyper-parameters every method has. ``grid``: the values probed (step counts for GA/NPO,
    ``alpha`` for TV/WHP). ``lr``: the method's explicit rate, used as given (None: the run's, else
    the rule's times the method's ``lr_multiplier``: :mod:`deepunlearn.unlearn.lr`). The optimisation settings left at ``None`` come from
    the run's protocol (:class:`~deepunlearn.probe.protocol.Protocol`: the reference's AdamW with
    weight decay 0.01, no clipping, a linear schedule over the grid's largest step count).
    ``sam_rho > 0`` makes every optimiser step of a gradient method sharpness-aware
    (:mod:`deepunlearn.unlearn.sam`); TV and WHP refuse it.
    Every number must be finite: NaN and infinities are refused (``allow_inf_nan=False``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    grid: list[float]
    lr: float | None = Field(None, gt=0, description="explicit learning rate, used as given; None: the run's, else "
                             "the rule's times the method's multiplier (du_loop: lr_scale) (deepunlearn.unlearn.lr)")
    max_grad_norm: float | None = Field(None, ge=0, description="gradient clipping; 0: none; None: the protocol's")
    weight_decay: float | None = Field(None, ge=0, description="AdamW weight decay; None: the protocol's")
    schedule: Literal["linear", "constant"] | None = Field(None, description="lr schedule; None: the protocol's")
    warmup_steps: int | None = Field(None, ge=0, description="linear warm-up steps; None: the protocol's")
    retain: Literal["none", "nll", "kl"] | None = Field(
        None, description="retain term added to a gradient method's loss: none, nll (gradient difference) or kl "
        "(KL to the original model); None: the method's own default")
    retain_weight: float = Field(1.0, ge=0, description="lambda of forget loss + lambda * retain term")
    retain_size: int = Field(8, ge=1, description="retain facts drawn per optimiser step")
    sam_rho: float = Field(0.0, ge=0, description="sharpness-aware minimisation's radius for a gradient method's "
                           "steps (the gradient taken at w + rho * g / ||g||); 0: off")


def spec_grid(method: str) -> Any:
    """The ``grid`` field of a method's ``Params``: its default is the grid of the method's
    catalogue spec (:class:`~deepunlearn.unlearn.methods.catalog.MethodSpec`), read when a
    ``Params`` is made, so the spec is the one place a default grid is written."""
    def default() -> list[float]:
        from .catalog import get_spec

        spec = get_spec(method)  # a strength is a float, a step count a whole number
        return [float(g) if spec.kind == "strength" else int(g) for g in spec.grid]

    return Field(default_factory=default)


def show_values(values: Sequence) -> str:
    """``[nan, -1]`` as the user typed them (``nan``, ``inf``, integers without ``.0``)."""
    return "[" + ", ".join(f"{v:g}" if isinstance(v, float) else repr(v) for v in values) + "]"


def describe_params_error(e: ValidationError) -> str:
    """A pydantic error as one line: ``field: problem (got VALUE); ...``."""
    parts = []
    for err in e.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "params"
        parts.append(f"{loc}: {err['msg']} (got {err.get('input')!r})")
    return "; ".join(parts)


def first_field(e: ValidationError) -> str | None:
    errs = e.errors()
    return str(errs[0]["loc"][0]) if errs and errs[0]["loc"] else None
