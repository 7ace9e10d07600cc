"""``deepunlearn data shortcuts --kb KB [--model tiny|PATH | --recipe-from CKPT] -o FLOOR.json``.

The shortcut floor of a KB (:mod:`deepunlearn.unlearn.shortcuts`): a baseline finetuned on a
disjoint KB of the same generator, probed on the KB's facts. It trains, so it lives in the
unlearn layer and joins the kg layer's ``data`` group (:func:`deepunlearn.kg.cli.data_subcommands`).
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from ...cli import add_force, add_json, add_threads, nonneg_int, positive_float, positive_int
    from ...kg.cli import data_subcommands
    from ...probe.modes import mode_names
    from .finetune import TINY_ARCHS, nonneg_float, share, warmup_share

    dsub = data_subcommands(sub)
    p = dsub.add_parser(
        "shortcuts", help="the shortcut floor of a KB: what a model that saw none of its facts still answers",
        description="Draw a KB disjoint from --kb with the same generator (new people named with the KB's words, "
                    "as 'data holdout'), finetune a baseline on it with the given recipe, and probe that baseline "
                    "on the KB's facts, which it never saw. Per relation and probe mode, the share it answers is "
                    "the accuracy of a model that answers from names and attributes alone. The baseline and its "
                    "probes are cached (--cache-dir): a second run trains nothing.")
    p.add_argument("--kb", required=True, help="KB file")
    p.add_argument("--model", default="tiny",
                   help="base of the baseline: 'tiny' (default: built for the KB) or a model folder or hub name")
    p.add_argument("--recipe-from", default=None, metavar="CHECKPOINT",
                   help="a checkpoint 'deepunlearn finetune' made: reuse its base and recipe (not with --model or "
                        "the recipe flags)")
    p.add_argument("--holdout-seed", type=nonneg_int, default=0, help="seed of the disjoint KB (default 0)")
    p.add_argument("--modes", default="exact,rank", metavar="M,M",
                   help="probe modes, comma-separated: exact, generate, rank, yesno, any (default exact,rank)")
    p.add_argument("-o", "--output", required=True, metavar="SHORTCUTS.json",
                   help="JSON file to write the floor to (missing folders are created)")
    p.add_argument("--cache-dir", default=None,
                   help="where baselines are cached (default: $DEEPUNLEARN_CACHE/shortcuts, else "
                        "~/.cache/deepunlearn/shortcuts)")
    p.add_argument("--preset", choices=("auto", "paper", "tiny"), default="auto",
                   help="hyper-parameter preset (auto: tiny for tiny models, else the paper's)")
    p.add_argument("--protocol", choices=("default", "reference"), default="default",
                   help="default: stop once --target-known of the facts are known; reference: train every epoch")
    p.add_argument("--config", default=None, help="YAML/JSON file of FinetuneConfig fields (over the preset)")
    p.add_argument("--lr", type=positive_float, default=None, help="peak learning rate (as finetune)")
    p.add_argument("--epochs", type=positive_int, default=None, help="most epochs (as finetune)")
    p.add_argument("--batch-size", type=positive_int, default=None, help="training batch size (as finetune)")
    p.add_argument("--schedule", choices=("linear", "one-cycle", "constant"), default=None, help="as finetune")
    p.add_argument("--warmup-ratio", type=warmup_share, default=None, help="as finetune")
    p.add_argument("--grad-clip", type=positive_float, default=None, help="as finetune")
    p.add_argument("--weight-decay", type=nonneg_float, default=None, help="as finetune")
    p.add_argument("--target-known", type=share, default=None, help="stop once this share of the holdout is known")
    p.add_argument("--probe-mode", choices=mode_names(protocol=True), default=None,
                   help="how --target-known is checked during training (as finetune)")
    p.add_argument("--seed", type=nonneg_int, default=None, help="seed of the data order and tiny weights (default 0)")
    p.add_argument("--answer-format", default=None, metavar="NAME|TEMPLATE",
                   help="answer format of the baseline (default: the base's)")
    p.add_argument("--device", default=None, help="cuda, cpu, ... (default: cuda when present)")
    p.add_argument("--dtype", default=None, help="bf16, fp16, fp32 (default: bf16 on CUDA, fp32 on CPU)")
    g = p.add_argument_group("tiny model (with --model tiny)")
    g.add_argument("--tiny-hidden", type=positive_int, default=512, help="width (default 512)")
    g.add_argument("--tiny-layers", type=positive_int, default=2, help="transformer layers (default 2)")
    g.add_argument("--tiny-heads", type=positive_int, default=8, help="attention heads (default 8)")
    g.add_argument("--arch", choices=TINY_ARCHS, default=None, metavar="ARCH",
                   help=f"architecture: {', '.join(TINY_ARCHS)} (default llama)")
    add_threads(p)
    add_force(p)
    add_json(p)
    p.set_defaults(handler=_shortcuts, _usage_error=p.error)


_RECIPE_FLAGS = ("config", "lr", "epochs", "batch_size", "schedule", "warmup_ratio", "grad_clip", "weight_decay",
                 "target_known", "probe_mode", "seed", "arch", "answer_format")


def _shortcuts(args: argparse.Namespace) -> int:
    import json

    from ...cli import CLIError, apply_threads, emit
    from ...errors import atomic_write_text
    from ...kg.io import load_kb
    from ...outputs import check_output, json_file
    from ...probe.modes import mode_names
    from .finetune import build_config, collect_overrides

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in mode_names(fact=True)]
    if not modes or bad:
        args._usage_error(f"argument --modes: {bad[0] if bad else args.modes!r} is not a probe mode "
                          f"(choose from {', '.join(mode_names(fact=True))})")
    if args.recipe_from is not None:
        given = (["--model"] if args.model != "tiny" else []) + [
            f"--{n.replace('_', '-')}" for n in _RECIPE_FLAGS if getattr(args, n) is not None]
        if given:
            args._usage_error(f"argument --recipe-from: not with {', '.join(given)} (the checkpoint gives the base and "
                              "the recipe)")
    if args.arch is not None and args.model != "tiny":
        args._usage_error("argument --arch: only with --model tiny")
    if args.model == "tiny" and args.tiny_hidden % args.tiny_heads:
        raise CLIError(f"--tiny-hidden {args.tiny_hidden} is not a multiple of --tiny-heads {args.tiny_heads}",
                       field="--tiny-hidden")
    if args.cache_dir is not None:
        from ...probe.cache import check_cache_dir

        check_cache_dir(args.cache_dir, where="--cache-dir")
    out = check_output(args.output, force=args.force, ours=json_file, what="a JSON file")
    apply_threads(args)
    kb = load_kb(args.kb, flag="--kb")
    if not kb.facts:
        raise CLIError(f"--kb {args.kb}: the KB has no facts to measure", file=args.kb, field="--kb")
    from ...kg.holdout import make_holdout
    from ...kg.kb import KBError

    try:
        make_holdout(kb, args.holdout_seed, people=min(len(kb.entities), 4) or 1)  # a domain without a generator
    except KBError as e:
        raise CLIError(f"--kb {args.kb}: no shortcut floor: {e}", file=args.kb, field="--kb") from None

    prompt = None
    if args.answer_format is not None:
        from ...probe.prompts import PromptFormat

        try:
            prompt = PromptFormat.parse(args.answer_format)
        except ValueError as e:
            raise CLIError(f"--answer-format: {e}") from None
    config = make_config = recipe_key = None
    if args.recipe_from is None:
        overrides = collect_overrides(args)
        config = build_config(args, None, overrides)  # every value checked before anything is built
        if args.model != "tiny":
            config, recipe_key = None, {"preset": args.preset, "protocol": args.protocol, **overrides[0]}

            def make_config(bundle):
                return build_config(args, bundle, overrides)

    from ..shortcuts import FloorBaseline, floor_text, shortcut_floor

    baseline = FloorBaseline(
        base=args.model, recipe_from=args.recipe_from, config=config, make_config=make_config, recipe_key=recipe_key,
        prompt=prompt, tiny={"arch": args.arch or "llama", "hidden": args.tiny_hidden, "layers": args.tiny_layers,
                             "heads": args.tiny_heads, "seed": args.seed or 0})
    floor = shortcut_floor(kb, baseline, holdout_seed=args.holdout_seed, modes=modes, cache_dir=args.cache_dir,
                           device=args.device, dtype=args.dtype, progress=not args.json)
    floor = {"kb_file": str(args.kb), **floor}
    atomic_write_text(out, json.dumps(floor, indent=2, ensure_ascii=False) + "\n")
    emit(args, {"output": str(out), **floor}, lambda: floor_text(floor) + f"\nwrote {out}")
    return 0
