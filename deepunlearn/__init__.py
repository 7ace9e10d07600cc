"""deepunlearn: tells whether a language model has really forgotten a fact.

Layers (data flows left to right; a layer never imports one to its right):
``kg`` -> ``rules``; ``kg`` -> ``probe`` -> ``unlearn`` -> ``bench`` (bench asks rules for metrics).
"""

__version__ = "0.1.0"
