"""``deepunlearn plan``: the peak GPU memory of a run, from the model's config alone.

``deepunlearn plan --model NAME_OR_FOLDER_OR_CONFIG_JSON --method METHOD|finetune [--lora]
[--lora-r 8] [--dtype bf16] [--batch N] [--seq N] [--probe-batch N] --json`` prints
``{"model", "params", "trainable", "dtype", "peak_gib", "parts": {...}, "host_gib",
"fits": {"24": bool, "40": bool, "80": bool, "141": bool}, "fix": str | null, ...}``
(:mod:`deepunlearn.unlearn.plan`); METHOD is any method of the catalogue. Nothing is loaded but the config: it takes a second or two
for a 7B model, on any machine.
"""

from __future__ import annotations

import argparse

DESCRIPTION = """\
Estimate the peak GPU memory of finetuning or unlearning a model with this code: weights,
gradients, float32 master copies, AdamW states, the copy a method keeps, activations, logits
and a probe batch, from the model's config alone (counted by formula for the architectures
the tool builds, else built on torch's meta device; nothing is loaded). Verdicts for 24, 40, 80 and 141 GiB GPUs; when it does not fit 80 GiB, the fix.

MODEL: a config.json, a checkpoint folder, a .gguf file, a hub name, or one of
llama-1.3b, llama-2-7b, llama-3-8b, smollm2-135m.
"""


def register(sub: argparse._SubParsersAction) -> None:
    from ...cli import add_json, number_in, positive_int
    from ...probe.modes import mode_names
    from ..plan import DEFAULT_PROBE_BATCH, DEFAULT_SEQ, DTYPE_BYTES, plan_methods

    p = sub.add_parser("plan", help="estimate the peak GPU memory of a run from the model's config",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, metavar="MODEL",
                   help="config.json, checkpoint folder, .gguf file, hub name or preset name")
    p.add_argument("--method", required=True, choices=plan_methods(), type=str.lower,
                   help="the run to plan: an unlearning method, or finetune (full AdamW)")
    p.add_argument("--lora", action="store_true", help="train a LoRA adapter instead of the full weights")
    p.add_argument("--lora-r", type=positive_int, default=8, metavar="R", help="LoRA rank (default 8)")
    p.add_argument("--dtype", choices=tuple(DTYPE_BYTES), default="bf16", help="model dtype (default bf16)")
    p.add_argument("--batch", type=positive_int, default=None, metavar="N",
                   help="training batch (default: 1, one target's question/answer; finetune: 16)")
    p.add_argument("--seq", type=positive_int, default=DEFAULT_SEQ, metavar="N",
                   help=f"tokens per question/answer (default {DEFAULT_SEQ})")
    p.add_argument("--probe-batch", type=positive_int, default=DEFAULT_PROBE_BATCH, metavar="N",
                   help=f"facts per probe batch (default {DEFAULT_PROBE_BATCH})")
    p.add_argument("--probe-mode", choices=mode_names(protocol=True), default="exact",
                   help="how facts are probed (generate also keeps a KV cache; default exact)")
    p.add_argument("--snapshot-device", choices=("cpu", "same"), default="cpu",
                   help="where the original weights are kept (default cpu: host memory)")
    p.add_argument("--sam-rho", type=number_in(0), default=0.0, metavar="RHO",
                   help="sharpness-aware steps (a gradient method's sam_rho): > 0 also holds the weights it puts "
                        "back and the first gradient (default 0)")
    p.add_argument("--guard", action="store_true",
                   help="du_loop's step guard is on (guard > 0): also holds a copy of the trained tensors and "
                        "AdamW's state through every step")
    add_json(p)
    p.set_defaults(handler=_plan)


def _plan(args: argparse.Namespace) -> int:
    from ...cli import emit
    from ..plan import RunShape, plan_memory

    plan = plan_memory(args.model, args.method, RunShape(
        lora=args.lora, lora_r=args.lora_r, dtype=args.dtype, batch=args.batch, seq=args.seq,
        probe_batch=args.probe_batch, probe_mode=args.probe_mode, snapshot_device=args.snapshot_device,
        sam_rho=args.sam_rho, guard=args.guard))
    obj = plan.to_json()
    emit(args, obj, lambda: format_plan(obj))
    return 0


def format_plan(obj: dict) -> str:
    """The plan as a short table."""
    lines = [f"{obj['model']} ({obj['model_type']}): {obj['params']:,} parameters, {obj['trainable']:,} trainable; "
             f"{obj['method']}{' LoRA' if obj['lora'] else ''}, {obj['dtype']}, batch {obj['batch']} x {obj['seq']} "
             f"tokens, probe batch {obj['probe_batch']}", ""]
    lines += [f"  {k:<18}{v:>10.3f} GiB" for k, v in obj["parts"].items() if v]
    lines += ["", "  phases: " + ", ".join(f"{k} {v:.2f} GiB" for k, v in obj["phases"].items()),
              f"  peak: {obj['peak_gib']:.2f} GiB ({obj['peak_phase']}); host memory: {obj['host_gib']:.2f} GiB",
              "  fits: " + ", ".join(f"{k} GiB {'yes' if v else 'no'}" for k, v in obj["fits"].items())]
    if obj["fix"]:
        lines.append(f"  fix: {obj['fix']}")
    return "\n".join(lines)
