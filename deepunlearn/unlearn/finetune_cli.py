"""``deepunlearn finetune``: teach a model a KB's facts and save the checkpoint.

``deepunlearn finetune --kb KB.json --model NAME|DIR|tiny -o DIR --json`` writes a Hugging Face
checkpoint (plus ``deepunlearn.json``) to DIR and prints ``{"known": int, "total": int, ...}``.
``tiny`` builds the small local model of DESIGN.md section 6 for the KB and trains it from
scratch with the :meth:`~deepunlearn.unlearn.finetune.FinetuneConfig.tiny` preset.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

_OVERRIDES = ("lr", "epochs", "batch_size", "schedule", "warmup_ratio", "grad_clip", "weight_decay",
              "target_known", "probe_mode", "seed")


def register(sub: argparse._SubParsersAction) -> None:
    from ..cli import add_json

    p = sub.add_parser("finetune", help="finetune a causal LM on a KB's question/answer pairs")
    p.add_argument("--kb", required=True, help="KB file")
    p.add_argument("--model", required=True, help="hub name, checkpoint folder, or 'tiny' (built locally for the KB)")
    p.add_argument("-o", "--output", required=True, help="folder to save the finetuned checkpoint in")
    p.add_argument("--preset", choices=("auto", "paper", "tiny"), default="auto",
                   help="hyper-parameter preset (auto: tiny for tiny models, else the paper's)")
    p.add_argument("--protocol", choices=("default", "reference"), default="default",
                   help="default: stop once --target-known of the facts are known; reference: train every epoch "
                        "(10, 15 for GPT-2), as the paper's code")
    from ..probe.cli import add_format_args

    add_format_args(p, protocol=False)
    p.add_argument("--config", default=None, help="YAML/JSON file of FinetuneConfig fields (over the preset)")
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--epochs", type=int, default=None, help="most epochs (stops early at --target-known)")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--schedule", choices=("linear", "one-cycle", "constant"), default=None)
    p.add_argument("--warmup-ratio", type=float, default=None)
    p.add_argument("--grad-clip", type=float, default=None)
    p.add_argument("--weight-decay", type=float, default=None)
    p.add_argument("--target-known", type=float, default=None, help="stop once this share of facts is known")
    p.add_argument("--probe-mode", choices=("exact", "generate"), default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--device", default=None, help="cuda, cpu, ... (default: cuda when present)")
    p.add_argument("--dtype", default=None, help="bf16, fp16, fp32 (default: bf16 on CUDA, fp32 on CPU)")
    g = p.add_argument_group("tiny model (with --model tiny)")
    g.add_argument("--tiny-hidden", type=int, default=512)
    g.add_argument("--tiny-layers", type=int, default=2)
    g.add_argument("--tiny-heads", type=int, default=8)
    g.add_argument("--tiny-arch", choices=("llama", "gpt2"), default="llama",
                   help="llama: rotary positions (default); gpt2: learned absolute positions, GPT-2 prompt")
    add_json(p)
    p.set_defaults(handler=_finetune)


def _read_config_file(path: str) -> dict:
    from ..cli import CLIError

    f = Path(path)
    try:
        text = f.read_text(encoding="utf-8")
    except OSError as e:
        raise CLIError(f"{f}: cannot read ({e.strerror or e})") from None
    if f.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise CLIError(f"{f}: line {e.lineno}: not valid JSON ({e.msg})") from None
    else:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise CLIError(f"{f}: not valid YAML ({e})") from None
    if not isinstance(data, dict):
        raise CLIError(f"{f}: expected a mapping of FinetuneConfig fields")
    return data


def build_config(args: argparse.Namespace, bundle):
    """The preset, then the config file, then the command-line flags."""
    from pydantic import ValidationError

    from ..cli import CLIError
    from .finetune import FinetuneConfig

    from ..probe.protocol import get_protocol

    overrides = _read_config_file(args.config) if args.config else {}
    if not get_protocol(args.protocol).finetune_early_stop:
        overrides.setdefault("target_known", None)
    for name in _OVERRIDES:
        v = getattr(args, name)
        if v is not None:
            overrides[name] = v
    try:
        if args.preset == "paper":
            return FinetuneConfig.paper(**overrides)
        if args.preset == "tiny":
            return FinetuneConfig.tiny(**overrides)
        return FinetuneConfig.for_bundle(bundle, args.protocol, **overrides)
    except ValidationError as e:
        errs = "; ".join(f"{'.'.join(str(x) for x in err['loc']) or 'config'}: {err['msg']}" for err in e.errors())
        raise CLIError(f"finetune config: {errs}") from None


def _finetune(args: argparse.Namespace) -> int:
    from ..cli import CLIError, emit
    from ..kg.io import load_kb
    from ..probe.cli import load_for_cli, resolve_format

    kb = load_kb(args.kb)
    fmt = resolve_format(args)
    out_dir = Path(args.output)
    model = args.model
    if model == "tiny":
        from ..probe.tiny import build_tiny_model

        try:
            build_tiny_model(kb, out_dir, hidden=args.tiny_hidden, layers=args.tiny_layers, heads=args.tiny_heads,
                             arch=args.tiny_arch, seed=args.seed or 0, prompt=fmt["prompt"])
        except ValueError as e:
            raise CLIError(str(e)) from None
        model = str(out_dir)
    bundle = load_for_cli(model, kb, args.device, args.dtype, **fmt)
    config = build_config(args, bundle)
    from .finetune import finetune

    res = finetune(bundle, kb, config, out_dir=out_dir)
    out = {**res.to_json(), "model": args.model, "kb": str(args.kb), "protocol": args.protocol,
           "answer_format": bundle.prompt.describe(), "config": config.model_dump()}
    emit(args, out, lambda: (
        f"finetuned {args.model} on {kb.name}: {res.known} of {res.total} facts known ({res.share:.1%}) "
        f"after {res.epochs} epochs, {res.seconds:.0f}s; checkpoint in {res.checkpoint}"
    ))
    return 0
