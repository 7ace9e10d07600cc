"""The checks of ``deepunlearn unlearn``'s arguments that need no model: the grid, the outputs
(``-o``, ``--save-model``), ``--point`` and ``--model-derived``. Each fails with a
:class:`~deepunlearn.cli.CLIError` naming its flag, before the model is loaded."""

from __future__ import annotations

import math

from ..methods import catalog


def parse_grid(text: str | None) -> list[float] | None:
    """``"1,2,4"`` -> ``[1.0, 2.0, 4.0]``; ``None`` stays ``None`` (the method's default grid).
    Anything but comma-separated finite numbers is a :class:`~deepunlearn.cli.CLIError` (field
    ``--grid``) naming the bad value; the method checks the values' range (:meth:`check_grid`).

    >>> parse_grid("1, 2,4e1")
    [1.0, 2.0, 40.0]
    """
    from ...cli import CLIError

    if text is None:
        return None
    out = []
    for part in text.split(","):
        part = part.strip()
        try:
            v = float(part)
        except ValueError:
            raise CLIError(f"--grid: {part!r} is not a number (expected comma-separated values such as 1,2,4)",
                           field="--grid") from None
        if not math.isfinite(v):
            raise CLIError(f"--grid: {part!r} is not a finite number", field="--grid")
        out.append(v)
    return out



def check_outputs(args, grid, method, single: bool) -> float | None:
    """Check -o, --point and --save-model before anything is loaded; the wanted point or None."""
    from ...cli import CLIError

    from ...output_kinds import UNLEARN_DOC
    from ...outputs import check_output, model_dir

    inputs = {"--kb": args.kb, "--model": args.model, "--rules": args.rules}
    if args.output is not None:
        check_output(args.output, force=args.force, ours=UNLEARN_DOC, what="an output of 'deepunlearn unlearn'",
                     inputs=inputs)
    if args.save_model is not None:
        check_output(args.save_model, flag="--save-model", force=args.force, folder=True, ours=model_dir,
                     what="a model folder of this tool (no deepunlearn.json)", inputs=inputs)
    values = method.check_grid(method.params.grid)
    if args.point is None:
        return None
    if not math.isfinite(args.point) or float(args.point) not in {float(v) for v in values}:
        raise CLIError(f"--point {args.point:g}: not a value of the grid "
                       f"({', '.join(f'{v:g}' for v in values)})", field="--point")
    if args.output is None and args.save_model is None and not args.model_derived:
        raise CLIError("--point chooses the point -o, --save-model and --model-derived use; give one of them",
                       field="--point")
    return float(args.point)


def check_save_model(args, method, single: bool) -> None:
    """Check --save-model and --model-derived against the method, --lora and the targets."""
    from ...cli import CLIError

    if args.model_derived and (not single or method.name == "whp"):
        raise CLIError("--model-derived: asks one target's compose questions of the unlearned weights: give one "
                       "--target, and a method other than WHP (which changes the output distribution)",
                       field="--model-derived")
    if args.save_model is None:
        return
    if not single:
        raise CLIError("--save-model saves one target's unlearned model: give --target one fact, not 'all'",
                       field="--save-model")
    mixed = catalog.find(method.name) is not None and catalog.find(method.name).memory.mixed_forward
    if mixed or args.lora:
        why = f"{catalog.title(method.name)} changes the output distribution, not the weights" if mixed else \
            "--lora trains an adapter that is removed after the run (the base weights never change, so there is " \
            "no unlearned model to save)"
        keep = [n for n in catalog.names() if not catalog.get_spec(n).memory.mixed_forward]
        raise CLIError(f"--save-model: {why}; use {', '.join(keep[:3])} or another method that changes the weights, "
                       "without --lora", field="--save-model")
