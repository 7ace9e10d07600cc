"""deepunlearn: tells whether a language model has really forgotten a fact.

Layers (data flows left to right; a layer never imports one to its right):
``kg`` -> ``rules``; ``kg`` -> ``probe`` -> ``unlearn`` -> ``bench`` (bench asks rules for metrics).

``deepunlearn.evaluate(original, unlearned, kb, target, ...) -> Verdict`` judges a model unlearned
anywhere against its original (:mod:`deepunlearn.unlearn.evaluate`).
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    # ``deepunlearn.evaluate`` loads the probe and unlearn layers only when used, so that
    # ``import deepunlearn`` stays fast and free of torch
    if name in ("evaluate", "Verdict"):
        from .unlearn import evaluate as _evaluate

        return getattr(_evaluate, name)
    raise AttributeError(f"module 'deepunlearn' has no attribute {name!r}")
