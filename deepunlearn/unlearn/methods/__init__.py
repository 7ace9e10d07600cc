"""The unlearning methods, one small class per file, found by name in :data:`METHODS` (the
classes loaded from the catalogue, :mod:`.catalog`, on first use).

Adding a method: subclass :class:`GradientUnlearner` (state the loss) or
:class:`ReinforcedUnlearner` / :class:`Unlearner` (state the arithmetic), give it a pydantic
``Params`` in a torch-free module (:mod:`.params`; its ``grid`` defaults to the spec's:
:func:`~.params.spec_grid`), and declare its :class:`~.catalog.MethodSpec` (grid, memory profile,
learning rates, the class's and the Params' import paths) in :mod:`.catalog` (built in) or under
the entry-point group ``deepunlearn.methods`` (another package).

Nothing here imports torch until a name below is used (``from deepunlearn.unlearn.methods.catalog
import ...`` and the ``Params`` classes of :mod:`.params` stay torch-free); a name imports the
module that defines it.
"""

from __future__ import annotations

import importlib

#: the names this package exports, by the module that defines them
_EXPORTS = {
    "base": ("METHODS", "GradientUnlearner", "MethodCache", "Session", "Step", "Unlearner", "get_method",
             "register_method"),
    "params": ("MethodParams", "UnlearnError", "spec_grid"),
    "params.gradient": ("GAParams", "NPOParams", "GradDiffParams", "NPOGDRParams", "IDKParams", "SimNPOParams"),
    "params.reinforced": ("ReinforcedParams", "TVParams", "WHPParams"),
    "params.rmu": ("RMUParams",),
    "params.du": ("DUParams", "DULoopParams", "BASES"),
    "reinforced": ("ReinforcedUnlearner",),
    "retain": ("RETAIN_KINDS", "RetainPoolError", "RetainSampler", "retain_pool"),
    "ga": ("GradientAscent",),
    "npo": ("NPO",),
    "du": ("DULoop", "DUOracle"),
    "graddiff": ("GradDiff", "NPOGDR"),
    "idk": ("IDK", "REFUSALS", "refusal_for"),
    "simnpo": ("SimNPO",),
    "rmu": ("RMU", "decoder_layers"),
    "tv": ("TaskVector", "negate_task_vector"),
    "whp": ("WHPForward", "WhoIsHarryPotter", "whp_distribution", "whp_logprobs"),
}


def __getattr__(name: str):
    for module, names in _EXPORTS.items():
        if name in names:
            value = getattr(importlib.import_module(f".{module}", __name__), name)
            globals()[name] = value
            return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [name for names in _EXPORTS.values() for name in names]
