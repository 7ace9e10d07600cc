"""The hyper-parameters of the unlearning methods, torch-free: the fields every method has
(:class:`MethodParams`), its error type, how a bad value is said (one line naming the field), and the
checks a method's class makes of its parameters (:func:`check_grid`, :func:`check_kind`), so a sweep
file is checked without importing torch (:func:`checked_params`).

Each method's own ``Params`` class lives in a module of this package, by family
(:mod:`.gradient`, :mod:`.reinforced`, :mod:`.rmu`, :mod:`.du`); its catalogue spec names it
(:attr:`~deepunlearn.unlearn.methods.catalog.MethodSpec.params`) and its class's ``Params`` is
that class.
"""

from __future__ import annotations

import math
from typing import Any, Literal, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ....errors import UserError
from ....limits import MAX_STEPS, bound_message, too_large


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
        from ..catalog import get_spec

        return spec_grid_values(get_spec(method))

    return Field(default_factory=default)


def spec_grid_values(spec: Any) -> list[float]:
    """A catalogue spec's grid as a ``Params`` holds it: a strength is a float, a step count a
    whole number. A method's class made without a grid takes its own spec's this way, also when
    its ``Params`` is another method's (``Unlearner``)."""
    return [float(g) if spec.kind == "strength" else int(g) for g in spec.grid]


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


def check_grid(name: str, kind: str | None, grid: Sequence[float]) -> list[float]:
    """The grid of method ``name`` in the order its points are produced, by the method's kind
    (:data:`~deepunlearn.unlearn.methods.catalog.KINDS`; None: only finite numbers): step counts
    sorted without repeats, strengths as floats. :class:`UnlearnError` (field ``grid``) for an
    empty grid or a value that is not one.

    >>> check_grid("ga", "steps", [4, 1.0, 4])
    [1, 4]
    >>> check_grid("tv", "strength", [-1])
    Traceback (most recent call last):
    ...
    deepunlearn.unlearn.methods.params.UnlearnError: tv: alpha values must be >= 0 (a negative alpha reinforces the target instead of unlearning it), got [-1]
    """
    if not grid:
        raise UnlearnError(f"{name}: the grid is empty", field="grid")
    bad = [g for g in grid if isinstance(g, bool) or not isinstance(g, (int, float)) or not math.isfinite(g)]
    if bad:
        raise UnlearnError(f"{name}: grid values must be finite numbers, got {show_values(bad)}", field="grid")
    if kind == "steps":
        bad = [g for g in grid if not float(g).is_integer() or g < 1]
        if bad:
            raise UnlearnError(f"{name}: grid values are step counts (positive integers), got {show_values(bad)}",
                               field="grid")
        if any(too_large(g, MAX_STEPS) for g in grid):  # 1e12 steps would run for ever
            raise UnlearnError(bound_message(f"{name}: grid value", max(grid), MAX_STEPS, "steps"), field="grid")
        return sorted({int(g) for g in grid})
    if kind == "strength":
        bad = [g for g in grid if g < 0]
        if bad:
            raise UnlearnError(f"{name}: alpha values must be >= 0 (a negative alpha reinforces the target "
                               f"instead of unlearning it), got {show_values(bad)}", field="grid")
        return [float(g) for g in grid]
    return list(grid)


def check_kind(name: str, kind: str | None, params: MethodParams) -> None:
    """What a method's kind refuses of its parameters: ``sam_rho`` applies to a gradient method's
    steps (kind ``steps``) only, a retain term to no method of kind ``strength`` (weight arithmetic)."""
    if getattr(params, "sam_rho", 0) and kind != "steps":
        raise UnlearnError(f"{name}: sam_rho applies to the gradient methods' steps; {name} changes the "
                           "weights by arithmetic (leave sam_rho at 0)", field="sam_rho")
    if kind == "strength" and params.retain not in (None, "none"):
        raise UnlearnError(f"{name}: a retain term applies to gradient methods (ga, npo, ...), not to "
                           f"{name}'s weight arithmetic", field="retain")


def checked_params(name: str, kind: str | None, cls: type[MethodParams], values: Mapping[str, Any]) -> MethodParams:
    """``values`` made into method ``name``'s parameters (``cls``) and checked as its class checks
    them when it is made (fields, grid, kind), without the class: torch-free. Only the keys given
    count as set (``model_dump(exclude_unset=True)`` gives them back). :class:`UnlearnError` naming
    the field otherwise.

    >>> from deepunlearn.unlearn.methods.params.gradient import NPOParams
    >>> checked_params("npo", "steps", NPOParams, {"beta": 0.5}).model_dump(exclude_unset=True)
    {'beta': 0.5}
    >>> checked_params("npo", "steps", NPOParams, {"beta": 0})
    Traceback (most recent call last):
    ...
    deepunlearn.unlearn.methods.params.UnlearnError: npo: beta: Input should be greater than 0 (got 0)
    """
    try:
        params = cls.model_validate(dict(values))
    except ValidationError as e:
        raise UnlearnError(f"{name}: {describe_params_error(e)}", field=first_field(e)) from None
    check_grid(name, kind, params.grid)
    check_kind(name, kind, params)
    return params


def method_params(name: str, values: Mapping[str, Any]) -> MethodParams:
    """``values`` checked as the parameters of the catalogue's method ``name`` (its spec's
    ``params`` class, kind and grid rules: :func:`checked_params`), without importing the method's
    class or torch: what a sweep file's ``[params.<method>]`` table is checked with.

    >>> method_params("du_loop", {"base": "ga"}).model_dump(exclude_unset=True)
    {'base': 'ga'}
    """
    from ..catalog import get_spec, load_params

    spec = get_spec(name)
    return checked_params(spec.name, spec.kind, load_params(spec), values)


def typed_params(tables: Any, methods: Mapping[str, Any] | None) -> Any:
    """``tables`` (method -> table) as method -> its ``Params`` (only the keys given are set);
    :class:`ValueError` ``field params.<method>[.<key>]: ...`` for a method not in ``methods``
    (the configuration's ``[methods]``), a table that is not one, an unknown key or a bad value.
    Anything but a table of tables is left to the schema; ``methods`` None (they did not
    validate) leaves the tables unchecked. What a sweep file's ``[params.<method>]`` tables are
    checked with when the file is read, as each method's class checks them when a run makes it.

    >>> typed_params({"npo": {"beta": 0.5}}, {"npo": [1, 2]})["npo"].beta
    0.5
    >>> typed_params({"npo": {"betta": 0.5}}, {"npo": [1, 2]})
    Traceback (most recent call last):
    ...
    ValueError: field params.npo.betta: [params.npo] has no key 'betta'; npo's keys: beta, grid, lr, ...
    """
    from ..catalog import CatalogError

    if not isinstance(tables, Mapping) or methods is None:
        return tables if methods is not None else {}
    out: dict[str, MethodParams] = {}
    for method, values in tables.items():
        if method not in methods:
            raise ValueError(f"field params.{method}: method {method!r} is not in [methods] "
                             f"({', '.join(methods)}); add it there to run it")
        if isinstance(values, MethodParams):
            out[method] = values
            continue
        if not isinstance(values, Mapping):
            raise ValueError(f"field params.{method}: expected a table of {method}'s parameters "
                             f"([params.{method}]), got {type(values).__name__}")
        try:
            out[method] = method_params(method, values)
        except CatalogError as e:  # an unknown method, or a plug-in whose spec cannot be read
            raise ValueError(f"field params.{method}: {e}") from None
        except UnlearnError as e:
            raise ValueError(_table_error(method, values, e)) from None
    return out


def _table_error(method: str, values: Mapping[str, Any], e: UnlearnError) -> str:
    """The one line of a bad ``[params.<method>]`` table, naming the table and the key."""
    key = getattr(e, "field", None)
    if key is None:
        return f"field params.{method}: {e}"
    from ..catalog import get_spec, load_params

    fields = load_params(get_spec(method)).model_fields
    if key in values and key not in fields:
        return (f"field params.{method}.{key}: [params.{method}] has no key {key!r}; {method}'s keys: "
                f"{', '.join(sorted(fields))}")
    return f"field params.{method}.{key}: {e}"
