"""The flags that ask for attacks (``--relearn``, ``--relearn-size``, ``--relearn-lr``,
``--relearn-on``, ``--quantize``, ``--seed``; ``attack``, ``evaluate`` and ``unlearn``) and their
checks into :class:`~deepunlearn.unlearn.attacks.AttackParams`. The attacks themselves are
:func:`deepunlearn.unlearn.attack_run.run_attacks`. Only argparse is imported at import time."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..attack_kinds import QUANT_KINDS, RELEARN_ON, relearn_on_help
from ..attack_run import DEFAULT_RELEARN_LR

if TYPE_CHECKING:
    from ..attacks import AttackParams


def add_attack_args(p: argparse.ArgumentParser, *, quantize_choices: bool = True) -> None:
    """``--relearn``, ``--relearn-size``, ``--relearn-lr``, ``--relearn-on``, ``--quantize`` and ``--seed``.
    ``quantize_choices=False`` checks ``--quantize`` in :func:`attack_params` (one line, exit 1)
    instead of argparse (a usage error, exit 2)."""
    from ...cli import positive_float, positive_int, seed_int

    p.add_argument("--relearn", default=None, metavar="N,N,...",
                   help="relearning grid: re-probe after these many finetuning steps (sorted, distinct, >= 1), "
                        "e.g. 1,2,4,8")
    p.add_argument("--relearn-size", type=positive_int, default=16, metavar="N",
                   help="facts sampled (seeded) from the pool to relearn on (default 16)")
    p.add_argument("--relearn-lr", type=positive_float, default=None, metavar="LR",
                   help=f"relearning learning rate (default: the finetuning lr the checkpoint records, "
                        f"else {DEFAULT_RELEARN_LR:g})")
    add_relearn_on(p)
    p.add_argument("--quantize", choices=QUANT_KINDS if quantize_choices else None, default=None,
                   metavar=None if quantize_choices else "|".join(QUANT_KINDS),
                   help="int8: torch dynamic quantisation of every Linear (CPU); int4 / nf4: 4-bit round-to-nearest "
                        "of every Linear, group-wise absmax (any device)")
    p.add_argument("--seed", type=seed_int, default=0, help="seed of the relearning sample and steps (default 0)")


def add_relearn_on(p: argparse.ArgumentParser) -> None:
    """The ``--relearn-on`` flag (``attack``, ``evaluate`` and ``unlearn``)."""
    p.add_argument("--relearn-on", choices=RELEARN_ON, default=None,
                   help="what relearning trains on (default other): " + relearn_on_help())


def parse_steps(text: str | None, flag: str = "--relearn") -> list[int]:
    """``"1,2,4"`` -> ``[1, 2, 4]``; ``None`` -> ``[]``. Anything but comma-separated integers is
    a :class:`~deepunlearn.cli.CLIError` naming ``flag`` (the order and range are checked by
    :class:`~deepunlearn.unlearn.attacks.AttackParams`).

    >>> parse_steps("1, 2,8")
    [1, 2, 8]
    """
    from ...cli import CLIError

    if text is None:
        return []
    out = []
    for part in text.split(","):
        try:
            out.append(int(part.strip()))
        except ValueError:
            raise CLIError(f"{flag}: {part.strip()!r} is not an integer (expected step counts such as 1,2,4,8)",
                           field=flag) from None
    return out


def attack_params(args, *, required: bool = True) -> "AttackParams | None":
    """The :class:`AttackParams` of the flags (``--relearn``, ``--relearn-size``, ``--relearn-lr``,
    ``--relearn-on``, ``--quantize`` and, where the command has it, ``--attack-at``; a flag left at ``None`` keeps the
    field's default); a bad value is one line naming its flag. No attack asked for: an error when
    ``required``, else ``None``."""
    from pydantic import ValidationError

    from ...cli import CLIError
    from ..attacks import AttackParams

    flags = {"relearn": "--relearn", "relearn_size": "--relearn-size", "relearn_lr": "--relearn-lr",
             "quantize": "--quantize", "at": "--attack-at", "relearn_on": "--relearn-on"}
    given = {"relearn": parse_steps(args.relearn), "relearn_size": args.relearn_size, "relearn_lr": args.relearn_lr,
             "quantize": args.quantize, "at": getattr(args, "attack_at", None),
             "relearn_on": getattr(args, "relearn_on", None)}
    try:
        params = AttackParams(**{k: v for k, v in given.items() if v is not None})
    except ValidationError as e:
        err = e.errors()[0]
        flag = flags.get(str(err["loc"][0]) if err["loc"] else "", "--relearn")
        msg = err["msg"].removeprefix("Value error, ")
        if flag == "--quantize":
            msg = f"expected one of {', '.join(QUANT_KINDS)}"
        raise CLIError(f"{flag} {getattr(args, flag[2:].replace('-', '_'))}: {msg}", field=flag) from None
    if not params.enabled():
        if not required:
            return None
        raise CLIError("no attack asked for: give --relearn N,N,... and/or --quantize int8|int4|nf4", field="--relearn")
    return params
