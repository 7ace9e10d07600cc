"""``deepunlearn unlearn``'s options for the new methods and for several requests:
``--retain`` / ``--retain-weight`` (any gradient method), ``--base`` / ``--choice`` (rule-aware
methods), ``--target A,B,C`` (a batch forgotten in one run) and ``--sequential`` (the same
targets served one after another without restoring the weights; ``--min-accuracy`` and
``--recheck``: the accuracy guard and the re-check of earlier targets)."""

from __future__ import annotations

import argparse
from typing import Any


def add_request_args(p: argparse.ArgumentParser) -> None:
    from ...cli import positive_float
    from ..methods import catalog

    p.add_argument("--retain", choices=("none", "nll", "kl"), default=None,
                   help="retain term added to a gradient method's loss: nll (gradient difference), kl (KL to the "
                        "original model) or none (default: the method's own: none for ga/npo, nll for graddiff, "
                        "npo_gdr, idk, du_oracle, du_loop)")
    p.add_argument("--retain-weight", type=positive_float, default=None, help="lambda of the retain term (default 1)")
    p.add_argument("--base", choices=catalog.bases(), default=None,
                   help="du_oracle / du_loop: the base forget loss (default npo)")
    p.add_argument("--choice", choices=("fewest", "mincut"), default=None,
                   help="du_oracle / du_loop: which minimal set to forget (default fewest)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="set one of the method's parameters (repeatable), e.g. --param max_grad_norm=1 "
                        "--param weight_decay=0; VALUE is read as JSON (1e-5, true, null, [1, 2]), else as text; "
                        "the method's parameters are listed when a key is unknown")
    p.add_argument("--sequential", action="store_true",
                   help="with --target A,B,C: serve the targets one after another without restoring the weights, "
                        "recording after each request the recall and deep flag of every earlier target")
    p.add_argument("--min-accuracy", type=float, default=None, metavar="A",
                   help="with --sequential: the accuracy guard: a request that would take accuracy (over K minus the "
                        "kept targets' sets) below A is undone and marked skipped")
    p.add_argument("--recheck", nargs="?", const="each", default=False, choices=("each", "batch"),
                   help="with --sequential: after each request unlearn again every earlier target that came back "
                        "through the rules, one after another (each, the default) or together in one run (batch)")
    p.add_argument("--no-protect", dest="protect", action="store_false",
                   help="with --sequential: let a request's retain term and healing train on the kept targets and "
                        "their chosen sets (default: never)")
    p.add_argument("--heal-steps", type=int, default=0, metavar="N",
                   help="with --sequential: after each request, up to N finetuning steps on the facts outside every "
                        "kept target's set win back the accuracy it cost (before --recheck; default 0: off)")


def method_overrides(args) -> dict[str, Any]:
    """The method parameters the command line sets (checked by the method's own Params)."""
    pairs = {"retain": args.retain, "retain_weight": args.retain_weight, "base": args.base, "choice": args.choice}
    return {k: v for k, v in pairs.items() if v is not None}


def parse_params(method_cls, items: list[str] | None, taken: dict[str, Any]) -> dict[str, Any]:
    """``--param KEY=VALUE`` items as the method's parameter values (VALUE read as JSON, else as
    text); an item without ``=``, a key the method's Params lacks or one set twice is one
    :class:`~deepunlearn.cli.CLIError` naming the flag, the key and the allowed keys."""
    import json

    from ...cli import CLIError

    allowed = ", ".join(method_cls.Params.model_fields)
    out: dict[str, Any] = {}
    for item in items or ():
        key, eq, text = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise CLIError(f"--param {item!r}: expected KEY=VALUE; {method_cls.name}'s keys: {allowed}", field="--param")
        if key not in method_cls.Params.model_fields:
            raise CLIError(f"--param {key}: {method_cls.name} has no parameter {key!r}; allowed keys: {allowed}",
                           field="--param")
        if key in out or key in taken:
            raise CLIError(f"--param {key}: set twice (by --param or its own flag)", field="--param")
        try:
            out[key] = json.loads(text)
        except ValueError:
            out[key] = text.strip()
    return out


def grid_usage(args, fn, *a):
    """``fn(*a)``, with a bad ``--grid`` value reported as bad usage (exit code 2, as every flag
    value argparse checks), not as bad input."""
    from ...cli import CLIError

    try:
        return fn(*a)
    except CLIError as e:
        if e.field == "--grid" and getattr(args, "_usage_error", None) is not None:
            args._usage_error(str(e))
        raise


def build_method(method_cls, grid, args):
    """The method with ``--grid`` and the overrides, or one CLI error naming the flag."""
    from ...cli import CLIError
    from ..methods import UnlearnError

    overrides = method_overrides(args)
    params = parse_params(method_cls, getattr(args, "param", None), overrides)
    fields = set(method_cls.Params.model_fields)
    for key in overrides:
        if key not in fields:
            flag = "--" + key.replace("_", "-")
            raise CLIError(f"{flag}: {method_cls.name} has no {key} (it is an option of "
                           f"{'du_oracle and du_loop' if key in ('base', 'choice') else 'gradient methods'})",
                           field=flag)
    if "grid" in params and grid is not None:
        raise CLIError("--param grid: set twice (by --param and --grid)", field="--param")
    try:
        return method_cls(**({"grid": grid} if grid is not None else {}), **overrides, **params)
    except UnlearnError as e:
        if e.field in params:
            allowed = ", ".join(method_cls.Params.model_fields)
            raise CLIError(f"--param {e.field}={params[e.field]!r}: {e}; allowed keys: {allowed}",
                           field="--param") from None
        flag = "--grid" if e.field in (None, "grid") else "--" + str(e.field).replace("_", "-")
        raise CLIError(f"{flag}{' ' + args.grid if flag == '--grid' and args.grid else ''}: {e}", field=flag) from None


def parse_targets(kb, text: str, kb_file) -> list[int]:
    """``--target A,B,C``: fact indices or ``S|r|O`` strings; a target named twice is an error."""
    from ...cli import CLIError
    from ...kg.refs import resolve_target

    ids: list[int] = []
    for part in (x.strip() for x in text.split(",")):
        if not part:
            raise CLIError(f"--target {text!r}: an empty item in the list", field="--target")
        (t,) = resolve_target(kb, part, kb_file=kb_file, allow_all=False)
        if t in ids:
            raise CLIError(f"--target {text!r}: names fact {t} {list(kb.facts[t])} twice", field="--target")
        ids.append(t)
    return ids


def check_request_flags(args) -> tuple[float | None, bool, int]:
    """``--min-accuracy``, ``--recheck`` and ``--heal-steps``, refused without ``--sequential`` or
    out of range."""
    from ...cli import CLIError

    guard, recheck = getattr(args, "min_accuracy", None), getattr(args, "recheck", False)
    heal = getattr(args, "heal_steps", 0) or 0
    protect = getattr(args, "protect", True)
    if not args.sequential and (guard is not None or recheck or heal or not protect):
        flag = ("--min-accuracy" if guard is not None else "--recheck" if recheck else "--heal-steps" if heal
                else "--no-protect")
        raise CLIError(f"{flag}: applies to --sequential requests only", field=flag)
    if guard is not None and not 0 <= guard <= 1:
        raise CLIError(f"--min-accuracy {guard}: must be between 0 and 1", field="--min-accuracy")
    if heal < 0:
        raise CLIError(f"--heal-steps {heal}: must be 0 or more", field="--heal-steps")
    return guard, recheck, heal


def run_requests(args, runner, method, kb, targets: list[int]) -> dict:
    """Run the batch (or the sequential requests) and return the command's JSON object."""
    from ..requests import requests_json, run_batch, run_sequential

    guard, recheck, heal = check_request_flags(args)
    if args.sequential:
        points = list(run_sequential(runner, targets, method, seed=args.seed, min_accuracy=guard, recheck=recheck,
                                     heal_steps=heal, protect=getattr(args, "protect", True)))
        by_target = {t: [p for p in points if p.target == t] for t in targets}
    else:
        rows = list(run_batch(runner, targets, method, seed=args.seed))
        by_target = {t: [r[i] for r in rows] for i, t in enumerate(targets)}
    return requests_json(kb, method.name, "sequential" if args.sequential else "batch", targets, by_target)


def requests_table(obj: dict) -> str:
    lines = [f"{obj['method']} {obj['mode']} of {obj['n_targets']} targets: {obj['deep']} deep at the last grid point, "
             f"accuracy {obj['accuracy']:.3f}"]
    for r in obj["targets"]:
        p = r["points"][-1]
        lines.append(f"  {r['index']:>5} {'|'.join(r['target'])}: recall {p['recall']:.3f}  deep {p.get('deep')}")
    return "\n".join(lines)
