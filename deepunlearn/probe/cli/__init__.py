"""The probe layer's commands: ``probe`` (with its scores and calibration flags, :mod:`.scores` and
:mod:`.calibrate`), ``model import`` / ``model info`` (:mod:`.model`), and the lm-eval exchange in
the ``data`` group (:mod:`.lmeval`). Each module imports only argparse-level things at import time;
torch and transformers load inside the handlers."""

from __future__ import annotations

import argparse

from . import lmeval, model, probe

#: In the order their commands appear in ``--help``.
MODULES = (probe, model, lmeval)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the layer's commands to ``deepunlearn``'s subparsers."""
    for mod in MODULES:
        mod.register(sub)
