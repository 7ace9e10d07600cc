"""Upper bounds on the numbers a user gives (steps, people, seeds, threads), shared by every layer.

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
#: Entities of one kind in a domain's ``domain.toml`` (``count``): the bound of ``--people``.
MAX_DOMAIN_COUNT = MAX_GENERATE_PEOPLE
#: DUS+RP seeds of the approximate minimal sets (``rules sets --seeds``, ``unlearn --seeds``, a
#: sweep's ``mdus_seeds``; the paper uses 100).
MAX_MDUS_SEEDS = 100_000
#: torch CPU threads (``--threads``, a sweep's ``threads``) on any machine: :func:`max_threads` is
#: this machine's bound (four per CPU, at least 64); more threads than cores never run faster, and
#: thousands make the OpenMP runtime abort or exhaust memory.
MIN_THREAD_BOUND = 64
#: Random seeds (every ``--seed``, a config's ``seed``, ``[run] seeds``): torch and numpy take a
#: seed as a 64-bit integer. A type bound, not lifted by ``DEEPUNLEARN_ALLOW_LARGE``.
MAX_SEED = 2**63 - 1


def max_threads() -> int:
    """The most torch threads a command may ask for on this machine: 4 x its CPUs, at least 64."""
    return max(MIN_THREAD_BOUND, 4 * (os.cpu_count() or 1))


def allow_large() -> bool:
    """Whether ``DEEPUNLEARN_ALLOW_LARGE`` is set to a true value (1, yes, true, on)."""
    return os.environ.get(ALLOW_LARGE_ENV, "").strip().lower() in ("1", "yes", "true", "on")


def too_large(value: float, bound: int) -> bool:
    """Whether ``value`` is past ``bound`` and the bounds are not lifted."""
    return value > bound and not allow_large()


def bound_message(where: str, value: float, bound: int, unit: str) -> str:
    """``--grid: 1e+21 steps is more than the bound of 100,000 steps; ...`` (one line)."""
    return f"{where}: {bound_text(value, bound, unit)}"


def bound_text(value: float, bound: int, unit: str) -> str:
    """``1e+21 steps is more than the bound of 100,000 steps; ...`` (the message without its place)."""
    whole = isinstance(value, int) or (float(value).is_integer() and abs(value) < 1e16)  # exact as a float
    shown = f"{int(value):,}" if whole else f"{value:g}"
    return (f"{shown} {unit} is more than the bound of {bound:,} {unit} (it would run for days or "
            f"exhaust memory); set {ALLOW_LARGE_ENV}=1 to lift it")


def count_problem(value: object, bound: int, unit: str) -> str | None:
    """Why ``value`` is not a count from 1 to ``bound`` (an integer; a bool or a float is refused,
    never coerced), or None.

    >>> count_problem(4, 64, "threads"), count_problem(1e9, 64, "threads")
    (None, 'expected an integer from 1 to 64 threads, got 1000000000.0')
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return f"expected an integer from 1 to {bound:,} {unit}, got {value!r}"
    return bound_text(value, bound, unit) if too_large(value, bound) else None


def check_at_most(value: float, bound: int, *, where: str, unit: str, error: type[UserError] = UserError,
                  file=None, field: str | None = None) -> None:
    """Raise ``error`` (one line naming ``where``) when ``value`` is past ``bound`` and
    ``DEEPUNLEARN_ALLOW_LARGE`` is not set."""
    if too_large(value, bound):
        raise error(bound_message(where, value, bound, unit), file=file, field=field or where)


def seed_problem(value: object) -> str | None:
    """Why ``value`` is not a seed (an integer from 0 to ``MAX_SEED``), or None.

    >>> seed_problem(3), seed_problem(-1), seed_problem(True), seed_problem(1e23)
    (None, 'expected an integer seed from 0 to 9223372036854775807, got -1', 'expected an integer seed from 0 to 9223372036854775807, got True', 'expected an integer seed from 0 to 9223372036854775807, got 1e+23')
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEED:
        return f"expected an integer seed from 0 to {MAX_SEED}, got {value!r}"
    return None
