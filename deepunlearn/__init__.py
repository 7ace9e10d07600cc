"""deepunlearn: tells whether a language model has really forgotten a fact.

Layers (data flows left to right; a layer never imports one to its right):
``kg`` -> ``rules``; ``kg`` -> ``probe`` -> ``unlearn`` -> ``bench`` (bench asks rules for metrics).

The names below are the public API, loaded when first used, so that ``import deepunlearn``
stays fast and free of torch (``dir(deepunlearn)`` lists them):

=====================  =====================================================================
knowledge bases        :func:`load_kb`, :func:`save_kb`, :func:`generate_family`
rules                  :func:`load_rules`, :func:`closure`, :func:`derivation_graph`,
                       :func:`minimal_sets`, :class:`Evaluator` (recall and accuracy),
                       :func:`mine_rules` (Horn rules mined from a KB, AMIE's measures)
models and probing     :func:`load_model`, :func:`probe_model` (``deepunlearn.probe`` is the
                       probe layer, so the function has a longer name here)
unlearning             :class:`TargetRunner`, :func:`evaluate` -> :class:`Verdict`
sweeps                 :func:`load_config`, :func:`run_sweep`
=====================  =====================================================================

>>> import deepunlearn
>>> kb = deepunlearn.generate_family(8, seed=1)
>>> t = kb.targets[0]
>>> sets = deepunlearn.minimal_sets(deepunlearn.derivation_graph(kb, "family"), t)
>>> sets.exact, all(t in s for s in sets.sets)      # every minimal set holds the target itself
(True, True)
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: public name -> "module:object", imported on first use
_API = {
    "load_kb": "deepunlearn.kg.io:load_kb",
    "save_kb": "deepunlearn.kg.io:save_kb",
    "generate_family": "deepunlearn.kg.domains.family.generate:generate_family",
    "load_rules": "deepunlearn.rules.load:load_rules",
    "closure": "deepunlearn.rules.closure:closure",
    "derivation_graph": "deepunlearn.rules.graph:derivation_graph",
    "minimal_sets": "deepunlearn.rules.minimal:minimal_sets",
    "Evaluator": "deepunlearn.rules.metrics:Evaluator",
    "mine_rules": "deepunlearn.rules.mine:mine_rules",
    "load_model": "deepunlearn.probe.models:load_model",
    "probe_model": "deepunlearn.probe.probing:probe",
    "TargetRunner": "deepunlearn.unlearn.loop:TargetRunner",
    "evaluate": "deepunlearn.unlearn.evaluate:evaluate",
    "Verdict": "deepunlearn.unlearn.verdict:Verdict",
    "load_config": "deepunlearn.bench.config:load_config",
    "run_sweep": "deepunlearn.bench.runner:run_sweep",
}

__all__ = sorted(_API)


def __getattr__(name: str):
    target = _API.get(name)
    if target is None:
        raise AttributeError(f"module 'deepunlearn' has no attribute {name!r}")
    module, obj = target.split(":")
    value = getattr(importlib.import_module(module), obj)
    globals()[name] = value  # the next access skips this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
