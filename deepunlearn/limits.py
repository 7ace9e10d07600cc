"""Upper bounds on the numbers a user gives (steps, people, repeats), shared by every layer.

A number far past what this tool can do on one machine would run for days or exhaust memory
before any error; each bound here is well above every planned use (a 1,000,000-person KB, the
paper's grids of at most a few hundred steps) and is refused with one line naming the flag or
field, the bound, and how to lift it. One switch lifts all of them: the environment variable
``DEEPUNLEARN_ALLOW_LARGE=1`` (for a user who knows the machine can).

This module imports nothing from the layers (all of them may import it).
"""

from __future__ import annotations

import os

from .errors import UserError

#: The environment variable that lifts every bound of this module.
ALLOW_LARGE_ENV = "DEEPUNLEARN_ALLOW_LARGE"

#: Optimiser steps of one grid value (unlearn --grid, a sweep's GA/NPO grids, attack --relearn).
MAX_STEPS = 100_000
#: People of ``data generate --people`` (a 1,000,000-person KB is a planned use).
MAX_GENERATE_PEOPLE = 2_000_000
#: People of ``data holdout --people``.
MAX_HOLDOUT_PEOPLE = 1_000_000
#: Repeats (``--repeat``: how often finetuning shows each canary per epoch).
MAX_REPEAT = 10_000


def allow_large() -> bool:
    """Whether ``DEEPUNLEARN_ALLOW_LARGE`` is set to a true value (1, yes, true, on)."""
    return os.environ.get(ALLOW_LARGE_ENV, "").strip().lower() in ("1", "yes", "true", "on")


def too_large(value: float, bound: int) -> bool:
    """Whether ``value`` is past ``bound`` and the bounds are not lifted."""
    return value > bound and not allow_large()


def bound_message(where: str, value: float, bound: int, unit: str) -> str:
    """``--grid: 1e+21 steps is more than the bound of 100,000 steps; ...`` (one line)."""
    whole = isinstance(value, int) or (float(value).is_integer() and abs(value) < 1e16)  # exact as a float
    shown = f"{int(value):,}" if whole else f"{value:g}"
    return (f"{where}: {shown} {unit} is more than the bound of {bound:,} {unit} (it would run for days or "
            f"exhaust memory); set {ALLOW_LARGE_ENV}=1 to lift it")


def check_at_most(value: float, bound: int, *, where: str, unit: str, error: type[UserError] = UserError,
                  file=None, field: str | None = None) -> None:
    """Raise ``error`` (one line naming ``where``) when ``value`` is past ``bound`` and
    ``DEEPUNLEARN_ALLOW_LARGE`` is not set."""
    if too_large(value, bound):
        raise error(bound_message(where, value, bound, unit), file=file, field=field or where)
