"""``deepunlearn unlearn``'s options for probe forms and for asking again:
``--forms`` (what the methods unlearn on), ``--probe-forms`` (the primary probe's forms),
``--adversarial`` (recall under any form and any mode, and the superficial forgetting rate) and
the attacks ``--relearn`` / ``--relearn-size`` / ``--relearn-lr`` / ``--relearn-on`` / ``--quantize`` /
``--attack-at``; ``--calibration`` (the target's p_chance, :mod:`..chance_verdict`)."""

from __future__ import annotations

import argparse
from typing import Any


def add_check_args(p: argparse.ArgumentParser) -> None:
    from ...cli import positive_float, positive_int

    p.add_argument("--forms", default=None, metavar="SEL",
                   help="the probe forms the method unlearns, one row per form: a split (train, test, unlearn), form "
                        "names (primary, qa1, st2, question, ...), 'all', comma-separated (default: the primary "
                        "question, as before)")
    p.add_argument("--probe-forms", default=None, metavar="SEL",
                   help="the forms the primary probe asks (a fact is known if known on any of them; default: the "
                        "primary question)")
    add_adversarial_args(p)
    p.add_argument("--relearn", default=None, metavar="N,N,...",
                   help="relearning attack at the last grid point: finetune N steps (every N listed, e.g. 1,2,4,8) "
                        "on facts the method did not target, then re-probe (recall_relearn)")
    p.add_argument("--relearn-size", type=positive_int, default=None, help="facts the attack relearns (default 16)")
    p.add_argument("--relearn-lr", type=positive_float, default=None,
                   help="the attack's learning rate (default: the run's unlearning learning rate)")
    from ..attack_kinds import ATTACK_AT, QUANT_KINDS
    from .attack_args import add_relearn_on

    add_relearn_on(p)
    p.add_argument("--quantize", choices=QUANT_KINDS, default=None,
                   help="quantisation attack at the last grid point: int8 dynamic quantisation of the Linear layers "
                        "(CPU) or int4 / nf4 4-bit round-to-nearest (any device), then re-probe (recall_quant)")
    p.add_argument("--attack-at", choices=ATTACK_AT, default=None,
                   help="attack at the last grid point (default) or at every one")
    p.add_argument("--calibration", default=None, metavar="CAL",
                   help="a calibration (deepunlearn probe --calibrate -o CAL): report the target's p_chance, the "
                        "chance that a model answering its facts only by chance (at the raw false-positive rate of "
                        "each fact's relation) is judged not deep (evaluate --calibration gives a saved model's own)")


def add_adversarial_args(p: argparse.ArgumentParser) -> None:
    """``--adversarial``, ``--adversarial-modes`` and ``--adversarial-calibration``."""
    p.add_argument("--adversarial", action="store_true",
                   help="also record recall_adv / accuracy_adv (a fact is known if any of its forms is known under "
                        "any probe mode) and the superficial forgetting rate")
    p.add_argument("--adversarial-modes", default=None, metavar="M,M,...",
                   help="the modes of the adversarial aggregate, some of exact, yesno, rank, generate (default: all "
                        "four; the primary probe's mode is always included)")
    p.add_argument("--adversarial-calibration", default=None, metavar="FILE",
                   help="calibrate the adversarial aggregate (probe --calibrate -o FILE): a mode counts only above "
                        "the threshold set on never-seen facts; the raw values and the floor are recorded too "
                        "(default: the raw rule, uncalibrated)")


def adversarial_kwargs(args) -> dict[str, Any]:
    """``adversarial``, ``adversarial_modes`` and ``adversarial_calibration`` of the flags (none
    when unused), checked: a bad value is one CLI error naming the flag."""
    from ...cli import CLIError

    out: dict[str, Any] = {}
    if args.adversarial:
        out["adversarial"] = True
    if args.adversarial_modes is not None:
        from ...probe.forms_probe import check_any_modes

        if not args.adversarial:
            raise CLIError("--adversarial-modes: give --adversarial too", field="--adversarial-modes")
        try:
            out["adversarial_modes"] = list(check_any_modes([m.strip() for m in args.adversarial_modes.split(",")]))
        except ValueError as e:
            raise CLIError(f"--adversarial-modes: {e}", field="--adversarial-modes") from None
    if args.adversarial_calibration is not None:
        from ...probe.calibration import load_calibration

        if not args.adversarial:
            raise CLIError("--adversarial-calibration: give --adversarial too", field="--adversarial-calibration")
        out["adversarial_calibration"] = load_calibration(args.adversarial_calibration,
                                                          flag="--adversarial-calibration")
    return out


def check_kwargs(args, kb) -> dict[str, Any]:
    """The TargetRunner keyword arguments these options give (none when unused), checked: a bad
    selection or grid is one CLI error naming the flag."""
    from ...kg.forms import parse_selection

    out: dict[str, Any] = {}
    for flag, value, key in (("--forms", args.forms, "unlearn_forms"), ("--probe-forms", args.probe_forms, "forms")):
        if value is not None:
            parse_selection(kb, value, flag=flag)
            out[key] = value
    out.update(adversarial_kwargs(args))
    from .attack_args import attack_params

    attacks = attack_params(args, required=False)
    if attacks is not None:
        out["attacks"] = attacks
    return out


def check_line(point: dict) -> str:
    """The checks of one point for the text table ("" when it has none)."""
    parts = []
    if point.get("recall_adv") is not None:
        sup = point.get("superficial")
        parts.append(f"adversarial recall {point['recall_adv']:.3f} acc {point['accuracy_adv']:.3f}, superficial "
                     + ("-" if sup is None else f"{sup:.1%} ({point['superficial_n'][0]}/{point['superficial_n'][1]})"))
        if point.get("adv_floor") is not None:
            raw = point.get("superficial_raw")
            parts[-1] += (f" calibrated (floor {point['adv_floor']:.1%}); raw recall {point['recall_adv_raw']:.3f}, "
                          f"superficial " + ("-" if raw is None else f"{raw:.1%}"))
    if point.get("recall_relearn"):
        parts.append("relearn " + " ".join(f"{n}:{r:.3f}" for n, r in point["recall_relearn"].items()))
    if point.get("recall_quant") is not None:
        parts.append(f"quantised recall {point['recall_quant']:.3f}")
    return ("            " + "; ".join(parts)) if parts else ""


def chance_rates_of(args, protocol, many: bool):
    """``--calibration``'s rates for the run's probe mode (None without it), read before the
    model loads; a batch of targets is refused (p_chance is reported per target)."""
    if getattr(args, "calibration", None) is None:
        return None
    from ...cli import CLIError
    from ..chance_verdict import chance_rates

    if many:
        raise CLIError("--calibration: p_chance is reported per target: run the targets one at a time (or 'all')",
                       field="--calibration")
    rates = chance_rates(args.calibration, args.probe_mode or protocol.probe_mode)
    note = rates.forms_note(args.probe_forms)
    if note:
        import sys

        print(f"deepunlearn unlearn: {note}", file=sys.stderr)
    return rates
