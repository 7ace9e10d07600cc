"""The built-in unlearning methods' specs (:class:`~.spec.MethodSpec`), in the order lists show
them; the catalogue (:mod:`.catalog`) checks them when it loads and reads every list from them."""

from __future__ import annotations

from .spec import GA_RATES, GRADIENT, NPO_RATES, MemoryProfile, MethodSpec, PaperRates

_STEPS = (1, 2, 4, 8, 16)
_M = "deepunlearn.unlearn.methods."
_P = _M + "params."

#: the built-in methods, in the order lists show them (the paper's four first)
BUILTIN: tuple[MethodSpec, ...] = (
    MethodSpec("ga", "steps", _STEPS, GRADIENT, _M + "ga:GradientAscent", {"gpt2-xl": (1, 2, 4, 8, 16, 32)},
               colour="#1f77b4", base=True, demo=True, description="gradient ascent on the target",
               rates=GA_RATES, paper=True, params=_P + "gradient:GAParams"),
    MethodSpec("npo", "steps", _STEPS, GRADIENT, _M + "npo:NPO", {"gpt2-xl": (1, 2, 4, 8, 16, 32)},
               colour="#ff7f0e", base=True, demo=True, description="negative preference optimisation",
               rates=NPO_RATES, paper=True, params=_P + "gradient:NPOParams"),
    MethodSpec("tv", "strength", (0.2, 0.5, 1, 5, 10), MemoryProfile(False, "delta"), _M + "tv:TaskVector",
               {"gpt2-xl": (0.2, 1, 5, 10, 30, 60, 80)}, colour="#2ca02c", demo=True, params=_P + "reinforced:TVParams",
               description="task vector: subtract alpha times the reinforced delta", rates=GA_RATES, paper=True),
    MethodSpec("whp", "strength", (10, 1e3, 1e5, 1e7, 1e8), MemoryProfile(False, "weights", True),
               _M + "whp:WhoIsHarryPotter", {"gpt2-xl": (10, 1e3, 1e5, 1e7, 1e8)}, colour="#d62728", demo=True,
               description="who-is-harry-potter: mix with the reinforced model", rates=GA_RATES, paper=True,
               params=_P + "reinforced:WHPParams"),
    MethodSpec("graddiff", "steps", _STEPS, GRADIENT, _M + "graddiff:GradDiff", demo=True,
               description="gradient ascent plus a retain NLL term", rates=GA_RATES,
               params=_P + "gradient:GradDiffParams"),
    MethodSpec("npo_gdr", "steps", _STEPS, GRADIENT, _M + "graddiff:NPOGDR", description="NPO plus a retain NLL term",
               rates=NPO_RATES, params=_P + "gradient:NPOGDRParams"),
    # TOFU unlearns with IDK at its finetuning rate (1e-5 for its 7B models), as GA here
    MethodSpec("idk", "steps", _STEPS, GRADIENT, _M + "idk:IDK", description="train towards a refusal",
               rates=GA_RATES, params=_P + "gradient:IDKParams"),
    # Adam makes the step size nearly independent of the loss's scale, so SimNPO unlearns at GA's
    # rate (the authors' TOFU runs use 1e-5 on 7B models, as the paper's finetuning rate)
    MethodSpec("simnpo", "steps", _STEPS, GRADIENT, _M + "simnpo:SimNPO", base=True,
               description="reference-free NPO", rates=GA_RATES, params=_P + "gradient:SimNPOParams"),
    MethodSpec("rmu", "steps", _STEPS, MemoryProfile(True, "weights"), _M + "rmu:RMU", base=True,
               description="representation misdirection (a frozen copy of the original model in full mode)",
               rates=PaperRates(5e-5, 5e-5, 2.5), params=_P + "rmu:RMUParams"),
    # the rule-aware methods run at their base's rates (methods/du.py)
    MethodSpec("du_oracle", "steps", _STEPS, GRADIENT, _M + "du:DUOracle", needs_rules=True,
               description="rule-aware: forget one minimal set chosen before training", params=_P + "du:DUParams"),
    MethodSpec("du_loop", "steps", (4, 8, 16, 32, 64, 128), GRADIENT, _M + "du:DULoop", needs_rules=True, demo=True,
               description="rule-aware closed loop; the grid is its step budget", params=_P + "du:DULoopParams"),
)
