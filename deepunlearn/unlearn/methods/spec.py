"""What a method is, as the catalogue holds it (:mod:`.catalog`): a :class:`MethodSpec` with
its :class:`MemoryProfile` and :class:`PaperRates`, torch-free data only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

#: what a grid value is: an optimiser step count (positive integer) or a strength alpha (>= 0)
KINDS = ("steps", "strength")
#: what a method holds besides the model and the snapshot: nothing, a second model (WHP's
#: reinforced copy) or a weights-sized delta (TV's task vector)
MODEL_COPIES = ("none", "weights", "delta")


@dataclass(frozen=True)
class MemoryProfile:
    """What a method keeps on the GPU besides the model, for the memory plan and the sweep's
    GPU guard (``deepunlearn.unlearn.plan``).

    ``optimizer_while_probing``: the optimiser state and the last step's gradients are alive
    while a grid point is probed (a gradient method probing inside its trajectory);
    ``model_copy``: one of :data:`MODEL_COPIES` (a gradient method holds it while it trains
    too, e.g. RMU's frozen original model); ``mixed_forward``: probing runs two forwards
    per batch and mixes their distributions (WHP); ``step_copies``: tensors the size of the
    trained weights an optimiser step holds besides the loop's gradients (SAM: the perturbation
    and the first gradient, 2)."""

    optimizer_while_probing: bool = True
    model_copy: str = "none"
    mixed_forward: bool = False
    step_copies: int = 0


#: the profile of a gradient method (GA, NPO and every method of the shared optimiser loop)
GRADIENT = MemoryProfile()


@dataclass(frozen=True)
class PaperRates:
    """A method's learning rates by the paper (appendix D), read by the rule of
    :mod:`deepunlearn.unlearn.lr`: ``lr`` for 1-3B models, ``lr_large`` for 7-8B models and
    ``ratio``, the unlearning rate over the finetuning rate (scaled to the rate a checkpoint
    records). The defaults are GA's."""

    lr: float = 2e-5
    lr_large: float = 1e-5
    ratio: float = 1.0


#: GA's rates; also TV's and WHP's reinforcing step, and the methods run at GA's rate
GA_RATES = PaperRates()
#: NPO runs at twice GA's rate (appendix D)
NPO_RATES = PaperRates(4e-5, 2e-5, 2.0)


@dataclass(frozen=True)
class MethodSpec:
    """One unlearning method. Required: ``name``, ``kind`` (:data:`KINDS`), ``grid`` (the
    default grid), ``memory`` (:class:`MemoryProfile`), ``cls`` (``"module:Class"``, the
    :class:`~deepunlearn.unlearn.methods.Unlearner` subclass, imported when a run needs it) and
    ``params`` (``"module:Class"``, its parameters: a
    :class:`~deepunlearn.unlearn.methods.params.MethodParams` subclass in a module that does not
    import torch, the class's ``Params``).

    The spec owns the method's defaults: its ``Params`` class's grid defaults to ``grid``
    (:func:`~deepunlearn.unlearn.methods.params.spec_grid`) and its class's learning rates are
    ``rates`` (:class:`PaperRates`; None: the class's own, GA's unless it sets them).

    ``paper_grids``: grids per preset family besides the paper's (``"gpt2-xl"``: the reference's
    GPT2-XL grids); ``paper``: one of the paper's methods, whose ``grid`` is the paper's
    (appendix D, the ``"paper"`` family, used by the phi/llama presets); ``needs_rules``: the
    method asks the rules layer while it unlearns; ``label``/``colour``: in reports and plots;
    ``base``: a rule-aware method may use it as its base forget loss; ``demo``: the demo runs it."""

    name: str | None = None
    kind: str | None = None
    grid: tuple[float, ...] | None = None
    memory: MemoryProfile | None = None
    cls: str | None = None
    paper_grids: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    needs_rules: bool = False
    label: str | None = None
    colour: str | None = None
    base: bool = False
    demo: bool = False
    description: str = ""
    rates: PaperRates | None = None
    paper: bool = False
    params: str | None = None

    @property
    def title(self) -> str:
        """The name reports and plots show."""
        return self.label or str(self.name).upper()
