"""What every unlearning method shares: the registry, the hyper-parameter base model, the
session a method runs in (:mod:`.session`: model, the forget batch, the optimiser loop) and the
two families:

* :class:`GradientUnlearner` (GA, NPO): a loss (as open-unlearning's ``GradAscent`` overrides only
  ``compute_loss``); the shared loop takes optimiser steps along ONE trajectory and hands the model
  over after every step count of the grid.
* :class:`ReinforcedUnlearner` (TV, WHP): first reinforce the target (the paper's "overfit"
  model), then per grid value ``alpha`` change the weights (TV) or the next-token distribution (WHP).

Every method runs in full mode (the session holds a :class:`WeightSnapshot`) or LoRA mode (a
:class:`LoraAdapter`: GA/NPO train it; TV scales the reinforced adapter by ``-alpha``; WHP switches
it on and off). :meth:`Unlearner.trajectory` yields one :class:`Step` per grid value with the model
in the state to probe; the per-target loop (``loop.py``) probes it and restores the weights.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Iterator, Mapping, Sequence

import torch
from pydantic import ValidationError

from .params import (MethodParams, UnlearnError, check_grid, check_kind, describe_params_error,  # noqa: F401
                     first_field, show_values)
from .retain import retain_term
# the session and the grid point live in .session; they are named here too, where methods import them
from .session import ModelFn, Session, Step, decay_groups, lr_factor  # noqa: F401



class MethodCache(Mapping[str, type["Unlearner"]]):
    """Every method's class by name: iterating names the catalogue's methods (and any class
    registered without a spec) without importing any; looking one up loads its class from its
    spec (:func:`get_method`) and keeps it."""

    def __init__(self) -> None:
        self.loaded: dict[str, type[Unlearner]] = {}

    def __getitem__(self, name: str) -> type["Unlearner"]:
        try:
            return get_method(name)
        except UnlearnError:
            raise KeyError(name) from None

    def __iter__(self) -> Iterator[str]:
        from . import catalog

        names = catalog.names()
        return iter(names + sorted(n for n in self.loaded if n not in names))

    def __len__(self) -> int:
        return len(list(iter(self)))

    def __contains__(self, name: object) -> bool:
        from . import catalog

        return isinstance(name, str) and (name.lower() in self.loaded or name.lower() in catalog.names())

    def pop(self, name: str, default: Any = None) -> Any:
        """Forget a loaded class (the next look-up loads it again)."""
        return self.loaded.pop(name.lower(), default)


#: the method classes, loaded from the catalogue on first use
METHODS = MethodCache()


def register_method(cls: type["Unlearner"]) -> type["Unlearner"]:
    """Keep a method's class under its ``name`` in :data:`METHODS`. :func:`get_method` does it
    for every class a catalogue spec names, so a method needs no call of its own; a class without
    a spec (made in code) is found by name once registered. Usable as a class decorator."""
    if METHODS.loaded.get(cls.name, cls) is not cls:
        raise ValueError(f"unlearning method {cls.name!r} is registered twice")
    METHODS.loaded[cls.name] = cls
    return cls


def _spec_rates(cls: type["Unlearner"]) -> None:
    """Give a method's class its catalogue spec's learning rates (``rates``), when it has them."""
    from . import catalog

    try:
        spec = catalog.find(cls.name)
    except catalog.CatalogError:  # a plug-in's bad spec is refused where it is looked up
        return
    if spec is not None and spec.rates is not None:
        cls.paper_lr, cls.paper_lr_large, cls.paper_lr_ratio = spec.rates.lr, spec.rates.lr_large, spec.rates.ratio


def _spec_grid(name: str) -> list[float] | None:
    """The grid of a method's catalogue spec, None for a class without a spec."""
    from . import catalog
    from .params import spec_grid_values

    try:
        spec = catalog.find(name)
    except catalog.CatalogError:  # a plug-in's bad spec is refused where it is looked up
        return None
    return None if spec is None else spec_grid_values(spec)


def get_method(name: str) -> type["Unlearner"]:
    """A method's class by name, built in or a plug-in's, loaded from its catalogue spec
    (:func:`~.catalog.load_class`) on first use and kept in :data:`METHODS`."""
    from . import catalog

    key = name.lower()
    if key not in METHODS.loaded:
        try:
            cls = catalog.load_class(catalog.get_spec(name))
        except catalog.CatalogError as e:
            raise UnlearnError(str(e), field=e.field) from None
        if not (isinstance(cls, type) and issubclass(cls, Unlearner)):
            raise UnlearnError(f"method {key!r}: {cls!r} is not an Unlearner subclass", field="cls")
        register_method(cls)
    return METHODS.loaded[key]


class Unlearner(ABC):
    """An unlearning method. Subclasses set ``name`` and ``Params`` and state their loss
    (:class:`GradientUnlearner`) or their arithmetic; their learning rates are their catalogue
    spec's ``rates`` (set when a class naming itself is made)."""

    name: ClassVar[str]
    Params: ClassVar[type[MethodParams]]
    #: what the grid values are, for tables and plots
    grid_name: ClassVar[str] = "param"
    #: LoRA mode can replace full finetuning for this method
    supports_lora: ClassVar[bool] = False
    #: the paper's rates (appendix D): the spec's ``rates`` (:class:`~.catalog.PaperRates`), else GA's
    paper_lr: ClassVar[float] = 2e-5
    paper_lr_large: ClassVar[float] = 1e-5
    paper_lr_ratio: ClassVar[float] = 1.0
    #: times the base rate, given or by the rule (:mod:`deepunlearn.unlearn.lr`; du_*: per instance)
    lr_multiplier: float = 1.0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            _spec_rates(cls)

    def __init__(self, params: MethodParams | None = None, **overrides):
        if "grid" not in overrides and (params is None or "grid" not in params.model_fields_set):
            # the method's own spec's grid, also under another method's Params
            grid = _spec_grid(self.name)
            overrides = overrides if grid is None else {"grid": grid, **overrides}
        base = params if params is not None else self.Params()
        if not isinstance(base, self.Params):
            raise UnlearnError(f"{self.name}: expected {self.Params.__name__}, got {type(base).__name__}")
        data = {**base.model_dump(), **overrides}
        try:
            self.params = self.Params.model_validate(data)
        except ValidationError as e:
            raise UnlearnError(f"{self.name}: {describe_params_error(e)}", field=first_field(e)) from None
        self.check_grid(self.params.grid)
        check_kind(self.name, "steps" if isinstance(self, GradientUnlearner) else None, self.params)  # sam_rho

    def check_grid(self, grid: Sequence[float]) -> list[float]:
        """The grid in the order its points are produced; raises :class:`UnlearnError` (field
        ``grid``) if it is empty or holds a value that is not a finite number (or not one of the
        method's kind: :func:`~.params.check_grid`)."""
        return check_grid(self.name, None, grid)

    #: the retain term when the params leave ``retain`` at None
    default_retain: ClassVar[str] = "none"
    #: the method needs the rules layer (``Session.rules``): rule-aware methods
    needs_rules: ClassVar[bool] = False

    @property
    def retain_kind(self) -> str:
        return self.params.retain or self.default_retain

    @property
    def uses_retain(self) -> bool:
        """Whether a run needs a retain set (the runner builds a :class:`RetainSampler`)."""
        return self.retain_kind != "none"

    @abstractmethod
    def trajectory(self, session: Session, grid: Sequence[float]) -> Iterator[Step]:
        """Unlearn and yield one :class:`Step` per grid value, in :meth:`check_grid` order."""


class GradientUnlearner(Unlearner):
    """A loss minimised with the shared loop; the grid is the number of optimiser steps and all
    its points lie on one trajectory (probe after steps 1, 2, 4, 8, 16), as in the reference's
    ``forget.py``, which trains ONE run of 16 steps (32 for GPT2-XL) and saves steps 1, 2, 4, 8, 16.

    The schedule spans the grid's largest step count (the reference: linear decay to 0 at step
    16 after 1 warm-up step), so the model after T steps does not depend on where the run stops.
    """

    grid_name = "steps"
    supports_lora = True

    def check_grid(self, grid: Sequence[float]) -> list[float]:
        return check_grid(self.name, "steps", grid)

    def prepare(self, session: Session) -> None:
        """Called once before the trajectory (NPO computes its reference likelihood here)."""

    def train_parameters(self, session: Session) -> list[torch.nn.Parameter] | None:
        """The parameters the trajectory trains; None: the session's (:meth:`Session.trainable`)."""
        return None

    @abstractmethod
    def loss(self, session: Session) -> torch.Tensor:
        """The method's own loss of one optimiser step on the forget batch."""

    def total_loss(self, session: Session) -> torch.Tensor:
        """``loss + retain_weight * retain term`` (the term of :attr:`retain_kind`, if any)."""
        loss, retain = self.loss(session), self.retain_loss(session)
        return loss if retain is None else loss + retain

    def retain_loss(self, session: Session) -> torch.Tensor | None:
        """``retain_weight * retain term`` of one step, or None without a retain term."""
        if self.retain_kind == "none" or self.params.retain_weight <= 0:
            return None
        return self.params.retain_weight * retain_term(session, self.retain_kind)

    def trajectory(self, session: Session, grid: Sequence[float], prepare: bool = True) -> Iterator[Step]:
        steps = self.check_grid(grid)
        wanted = set(steps)
        if prepare:
            self.prepare(session)
        session.sam_rho = self.params.sam_rho
        for step in session.descend(self.total_loss, steps[-1], params=self.train_parameters(session)):
            if step in wanted:
                yield Step(float(step))
