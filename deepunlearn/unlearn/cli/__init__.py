"""The unlearn layer's commands: ``finetune``, ``unlearn``, ``evaluate``, ``evaluate-report``,
``plan``, ``attack``, ``oracle``, ``data shortcuts`` (one module each; :mod:`.checks` and
:mod:`.requests` hold the flags that ``unlearn`` and ``evaluate`` share). Each module imports only
argparse-level things at import time; torch and transformers load inside the handlers."""

from __future__ import annotations

import argparse

from . import attack, evaluate, finetune, oracle, plan, shortcuts, unlearn

#: In the order their commands appear in ``--help``.
MODULES = (finetune, unlearn, evaluate, oracle, plan, attack, shortcuts)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the layer's commands to ``deepunlearn``'s subparsers."""
    for mod in MODULES:
        mod.register(sub)
