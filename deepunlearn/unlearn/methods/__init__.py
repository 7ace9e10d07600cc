"""The unlearning methods, one small class per file, found by name in :data:`METHODS`.

Adding a method: subclass :class:`GradientUnlearner` (state the loss) or
:class:`ReinforcedUnlearner` / :class:`Unlearner` (state the arithmetic), give it a pydantic
``Params`` (its ``grid`` defaults to the spec's: :func:`~.params.spec_grid`), decorate it with
:func:`register_method`, and declare its :class:`~.catalog.MethodSpec` (grid, memory profile,
learning rates) in :mod:`.catalog` (built in) or under the entry-point group
``deepunlearn.methods`` (another package).

Nothing here imports torch until a name below is used (``from deepunlearn.unlearn.methods.catalog
import ...`` stays torch-free); the first use imports every built-in method, which registers it.
"""

from __future__ import annotations

import importlib

#: the names this package exports, by the module that defines them
_EXPORTS = {
    "base": ("METHODS", "GradientUnlearner", "MethodParams", "Session", "Step", "Unlearner", "UnlearnError",
             "get_method", "register_method"),
    "params": ("spec_grid",),
    "reinforced": ("ReinforcedParams", "ReinforcedUnlearner"),
    "retain": ("RETAIN_KINDS", "RetainPoolError", "RetainSampler", "retain_pool"),
    "ga": ("GAParams", "GradientAscent"),
    "npo": ("NPO", "NPOParams"),
    "du": ("BASES", "DULoop", "DULoopParams", "DUOracle", "DUParams"),
    "graddiff": ("GradDiff", "GradDiffParams", "NPOGDR", "NPOGDRParams"),
    "idk": ("IDK", "IDKParams", "REFUSALS", "refusal_for"),
    "simnpo": ("SimNPO", "SimNPOParams"),
    "rmu": ("RMU", "RMUParams", "decoder_layers"),
    "tv": ("TaskVector", "TVParams", "negate_task_vector"),
    "whp": ("WHPForward", "WHPParams", "WhoIsHarryPotter", "whp_distribution", "whp_logprobs"),
}


def __getattr__(name: str):
    if not any(name in names for names in _EXPORTS.values()):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    for module, names in _EXPORTS.items():  # every built-in method, so METHODS is complete
        mod = importlib.import_module(f".{module}", __name__)
        globals().update({n: getattr(mod, n) for n in names})
    return globals()[name]


__all__ = [
    "METHODS", "GradientUnlearner", "MethodParams", "spec_grid", "ReinforcedParams", "ReinforcedUnlearner", "Session", "Step",
    "Unlearner", "UnlearnError", "get_method", "register_method",
    "RETAIN_KINDS", "RetainPoolError", "RetainSampler", "retain_pool",
    "GAParams", "GradientAscent", "NPO", "NPOParams", "TaskVector", "TVParams", "negate_task_vector",
    "BASES", "DULoop", "DULoopParams", "DUOracle", "DUParams", "GradDiff", "GradDiffParams", "NPOGDR", "NPOGDRParams",
    "IDK", "IDKParams", "REFUSALS", "refusal_for", "SimNPO", "SimNPOParams", "RMU", "RMUParams", "decoder_layers",
    "WHPForward", "WHPParams", "WhoIsHarryPotter", "whp_distribution", "whp_logprobs",
]
