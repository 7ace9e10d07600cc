"""``deepunlearn unlearn``: unlearn one target fact (or every target of the KB) with one method and
print recall and accuracy at every grid point (DESIGN.md section 7).

Only argparse is imported at import time; torch, transformers and the method classes are
imported inside the handler.
"""

from __future__ import annotations

import argparse
import sys

#: the methods shipped; the handler checks the name against the registry (which needs torch)
SHIPPED_METHODS = ("ga", "npo", "tv", "whp")
#: protocol presets (deepunlearn.probe.protocol.PROTOCOL_NAMES, repeated so --help needs no import)
PROTOCOLS = ("default", "reference")


def register(sub: argparse._SubParsersAction) -> None:
    from ..cli import add_json

    p = sub.add_parser(
        "unlearn",
        help="unlearn a target fact with GA, NPO, TV or WHP and measure recall and accuracy along the grid",
        description=(
            "Probe the model once (cached), unlearn the target with the method at every grid point "
            "(GA/NPO: optimiser steps along one trajectory; TV/WHP: alpha after reinforcing the target), "
            "probe again and compute recall and accuracy against the target's minimal deep-unlearning sets. "
            "The original weights are restored in memory after each target; nothing is written to disk."
        ),
    )
    p.add_argument("--model", required=True, help="checkpoint folder (or hub name) of the model that knows the KB")
    p.add_argument("--kb", required=True, help="KB file")
    p.add_argument("--method", required=True, help=f"unlearning method: {', '.join(SHIPPED_METHODS)}")
    p.add_argument("--target", required=True,
                   help="fact index, 'subject|relation|object', or 'all' (every target the KB lists)")
    p.add_argument("--rules", default=None,
                   help="rule set: family, edu-relat, or a rule file (default: the KB's own, else family)")
    p.add_argument("--grid", default=None,
                   help="comma-separated grid values (steps for ga/npo, alpha for tv/whp); default: the paper's")
    p.add_argument("--lr", type=float, default=None,
                   help="peak learning rate; default: the paper's ratio to the training lr the checkpoint records "
                        "(GA/TV/WHP 1x, NPO 2x; a tenth of that for models trained from scratch), else the paper's "
                        "(2e-5, NPO 4e-5; half for 7-8B models)")
    p.add_argument("--protocol", choices=PROTOCOLS, default="default",
                   help="protocol preset: default, or reference (the paper's code: linear schedule with a zero-lr "
                        "warm-up step, generate probe, K = the KB, the release's sets, first-set ties); README's "
                        "protocol table lists every choice")
    from ..probe.cli import add_format_args

    add_format_args(p, protocol=False)
    p.add_argument("--lora", action="store_true", help="train a LoRA adapter (ga, npo) instead of the full weights")
    p.add_argument("--k-mode", choices=("probed", "dataset"), default=None,
                   help="K = facts the model answers before unlearning or the whole KB (default: the protocol's)")
    p.add_argument("--probe-mode", choices=("exact", "generate"), default=None,
                   help="known = greedy answer is exact, or the answer appears in 10 generated tokens "
                        "(default: the protocol's)")
    sets = p.add_mutually_exclusive_group()
    sets.add_argument("--sets", default=None,
                      help="minimal sets: exact, mdus, release (the release's stored sets) or a folder of that "
                           "layout (default: the protocol's)")
    sets.add_argument("--seeds", type=int, default=None, help="approximate the sets with MDUS over N seeds instead")
    p.add_argument("--tie", choices=("accuracy", "first"), default=None,
                   help="among sets of equal recall take the best accuracy or the first (default: the protocol's)")
    p.add_argument("--device", default=None, help="cuda, cuda:1, cpu (default: cuda when available)")
    p.add_argument("--dtype", default=None, help="bf16, fp16, fp32 (default: bf16 on GPU, fp32 on CPU)")
    p.add_argument("--batch-size", type=int, default=64, help="probing batch size")
    p.add_argument("--cache-dir", default=None, help="where the baseline probe is cached")
    p.add_argument("--seed", type=int, default=0, help="seed of every run (dropout, LoRA initialisation)")
    add_json(p)
    p.set_defaults(handler=_unlearn)


def parse_grid(text: str | None) -> list[float] | None:
    """``"1,2,4"`` -> ``[1.0, 2.0, 4.0]``; ``None`` stays ``None`` (the method's default grid).

    >>> parse_grid("1, 2,4e1")
    [1.0, 2.0, 40.0]
    """
    from ..cli import CLIError

    if text is None:
        return None
    out = []
    for part in text.split(","):
        part = part.strip()
        try:
            out.append(float(part))
        except ValueError:
            raise CLIError(f"--grid: {part!r} is not a number (expected comma-separated values such as 1,2,4)") from None
    return out


def point_json(point, kb) -> dict:
    """A :class:`~deepunlearn.unlearn.loop.Point` for JSON: facts as ``[s, r, o]``."""
    d = point.to_dict()
    d.pop("target", None)
    d.pop("method", None)
    d["forgotten"] = [list(kb.facts[i]) for i in point.forgotten]
    d["set"] = [list(kb.facts[i]) for i in point.set]
    return d


def _table(result: dict) -> str:
    s, r, o = result["target"]
    lines = [f"{result['method']} on [{result['index']}] {o} is {s}'s {r} (lr {result['lr']:g})",
             f"  {'param':>8}  {'recall':>6}  {'acc':>6}  {'fam':>6}  {'bio':>6}  forgot  target"]
    for p in result["points"]:
        fam = "-" if p["accuracy_family"] is None else f"{p['accuracy_family']:.3f}"
        bio = "-" if p["accuracy_biography"] is None else f"{p['accuracy_biography']:.3f}"
        lines.append(f"  {p['param']:>8g}  {p['recall']:6.3f}  {p['accuracy']:6.3f}  {fam:>6}  {bio:>6}  "
                     f"{len(p['forgotten']):6d}  {'forgotten' if p['target_forgotten'] else 'kept'}")
    return "\n".join(lines)


def _unlearn(args) -> int:
    from ..cli import CLIError, emit
    from ..kg.io import load_kb

    kb = load_kb(args.kb)
    grid = parse_grid(args.grid)
    if args.target.strip().lower() == "all":
        if not kb.targets:
            raise CLIError(f"{args.kb}: the KB lists no targets; give --target as an index or 'S|r|O'")
        targets, single = list(kb.targets), False
    else:
        targets, single = [kb.resolve(args.target)], True
    if args.seeds is not None and args.seeds < 1:
        raise CLIError("--seeds must be at least 1")
    if args.batch_size < 1:
        raise CLIError("--batch-size must be at least 1")

    from ..probe import load_model
    from ..probe.models import ModelLoadError
    from .loop import TargetNotKnownError, TargetRunner
    from .methods import UnlearnError

    try:
        from .methods import get_method

        method = get_method(args.method)
        if grid is not None:
            method(grid=grid)  # check the grid before loading the model
        from ..probe import get_protocol

        protocol = get_protocol(args.protocol)
        from ..probe.cli import resolve_format

        bundle = load_model(args.model, device=args.device, dtype=args.dtype, **resolve_format(args, protocol))
        runner = TargetRunner(
            bundle, kb, rules=args.rules, protocol=protocol, probe_mode=args.probe_mode, k_mode=args.k_mode,
            sets="mdus" if args.seeds is not None else args.sets, tie=args.tie, lr=args.lr,
            lora=args.lora, cache_dir=args.cache_dir, seeds=args.seeds or 100,
            batch_size=args.batch_size, seed=args.seed,
        )
        results, skipped = [], []
        for t in targets:
            try:
                points = list(runner.run(t, method.name, grid=grid, seed=args.seed))
            except TargetNotKnownError as e:
                if single:
                    raise
                print(f"deepunlearn unlearn: warning: skipping target {t}: {e}", file=sys.stderr)
                skipped.append(list(kb.facts[t]))
                continue
            lr = points[0].lr if points else None
            results.append({
                "method": method.name, "target": list(kb.facts[t]), "index": t, "lr": lr,
                "points": [point_json(p, kb) for p in points],
            })
    except (UnlearnError, ModelLoadError) as e:
        raise CLIError(str(e)) from None

    common = {"known": len(runner.known), "known_before": len(runner.baseline.known_ids()), "total": len(kb),
              "k_mode": runner.k_mode, "probe_mode": runner.probe_mode, "protocol": protocol.name,
              "sets": runner.sets, "tie": runner.tie, "answer_format": bundle.prompt.name}
    if single:
        obj = {**results[0], **common}
        emit(args, obj, lambda: _table(obj))
    else:
        obj = {"method": method.name, "targets": results, "skipped": skipped, **common}
        emit(args, obj, lambda: "\n".join(_table(r) for r in results) + (f"\nskipped {len(skipped)} targets the model did not know" if skipped else ""))
    return 0
