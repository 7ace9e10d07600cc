"""``deepunlearn finetune``: teach a model a KB's facts and save the checkpoint.

``deepunlearn finetune --kb KB.json --model NAME|DIR|tiny -o DIR --json`` writes a Hugging Face
checkpoint (plus ``deepunlearn.json``) to DIR and prints ``{"known": int, "total": int, ...}``.
``tiny`` builds the small local model of docs/models.md for the KB and trains it from
scratch with the :meth:`~deepunlearn.unlearn.finetune.FinetuneConfig.tiny` preset.
``--exclude F.json`` trains on every fact but those listed (a retain model): the known
share counts the trained facts, and the output lists the excluded facts the model still answers.

Every argument (flags and ``--config``) is checked before anything is built, loaded or written,
and the checkpoint is written into a temporary sibling of DIR that replaces DIR only once it is
complete (:func:`deepunlearn.errors.atomic_dir`): a bad argument, a crash or Ctrl-C leaves an
existing checkpoint in DIR exactly as it was.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ...cli import number_in

#: the tiny architectures (deepunlearn.probe.tiny.ARCHS, repeated so --help needs no import; a test
#: checks they agree)
TINY_ARCHS = ("llama", "phi", "gpt2", "qwen2", "qwen3", "gpt_neox", "gemma2", "olmo2", "mistral")

_OVERRIDES = ("lr", "epochs", "batch_size", "schedule", "warmup_ratio", "grad_clip", "weight_decay",
              "target_known", "probe_mode", "seed")


def share(text: str) -> float:
    """argparse type: a share in (0, 1] (``--target-known``)."""
    return number_in(0, 1, lo_open=True)(text)


def warmup_share(text: str) -> float:
    """argparse type: a share in [0, 1) (``--warmup-ratio``)."""
    return number_in(0, 1, hi_open=True)(text)


def nonneg_float(text: str) -> float:
    """argparse type: a finite number >= 0."""
    return number_in(0)(text)


def register(sub: argparse._SubParsersAction) -> None:
    from ...cli import add_force, add_json, add_threads, positive_float, positive_int, seed_int

    p = sub.add_parser("finetune", help="finetune a causal LM on a KB's question/answer pairs",
                       description="Train a model on every fact of a KB (answer-only loss) until it knows "
                                   "--target-known of them, and save the checkpoint. Arguments are checked first; "
                                   "an existing checkpoint in -o is replaced only by a complete new one.")
    p.add_argument("--kb", required=True, help="KB file")
    p.add_argument("--model", required=True, help="hub name, checkpoint folder, or 'tiny' (built locally for the KB)")
    p.add_argument("-o", "--output", required=True,
                   help="folder to save the finetuned checkpoint in (replaced only once training has finished; a "
                        "non-empty folder that is not a model folder is refused without --force)")
    p.add_argument("--exclude", default=None, metavar="F.json",
                   help="train on every fact of the KB but these (a JSON list of fact indices or [s, r, o], or an "
                        "object with an 'exclude' list): a retain model that never saw them")
    p.add_argument("--forms", default=None, metavar="SEL",
                   help="the probe forms every fact is trained on, one example each: a split (train, test, unlearn), "
                        "form names (primary, qa1, st2, question, ...), 'all', comma-separated (default: the "
                        "primary question only, as before); see 'deepunlearn data forms'")
    p.add_argument("--preset", choices=("auto", "paper", "tiny"), default="auto",
                   help="hyper-parameter preset (auto: tiny for tiny models, else the paper's)")
    p.add_argument("--protocol", choices=("default", "reference"), default="default",
                   help="default: stop once --target-known of the facts are known; reference: train every epoch "
                        "(10, 15 for GPT-2), as the paper's code")
    from ...probe.cli.probe import add_format_args
    from ...probe.modes import mode_names

    add_format_args(p, protocol=False)
    p.add_argument("--config", default=None, help="YAML/JSON file of FinetuneConfig fields (over the preset)")
    p.add_argument("--lr", type=positive_float, default=None,
                   help="peak learning rate of AdamW (preset: 2e-5 paper, 1e-5 for 5B+ models, 1e-3 tiny)")
    p.add_argument("--epochs", type=positive_int, default=None,
                   help="most epochs (stops early at --target-known; preset: 10 paper, 15 GPT-2, 30 tiny)")
    p.add_argument("--batch-size", type=positive_int, default=None,
                   help="training batch size (preset: 16 paper, 32 tiny)")
    p.add_argument("--schedule", choices=("linear", "one-cycle", "constant"), default=None,
                   help="learning-rate schedule: linear (HF's, after --warmup-ratio of warm-up), one-cycle (rise "
                        "for --warmup-ratio of the steps, then cosine decay), constant (preset: linear paper, "
                        "one-cycle tiny)")
    p.add_argument("--warmup-ratio", type=warmup_share, default=None,
                   help="share of the steps spent warming up, in [0, 1) (preset: one epoch paper, 0.3 tiny; "
                        "one-cycle needs > 0)")
    p.add_argument("--grad-clip", type=positive_float, default=None,
                   help="clip the gradient norm at this value (preset: none paper, 1.0 tiny; 'grad_clip: null' "
                        "in --config turns clipping off)")
    p.add_argument("--weight-decay", type=nonneg_float, default=None,
                   help="AdamW weight decay on matrices, not on norms or biases (preset: 0.01 paper, 0 tiny)")
    p.add_argument("--target-known", type=share, default=None,
                   help="stop once this share of the facts, in (0, 1], is known (default 0.95; the reference "
                        "protocol trains every epoch)")
    p.add_argument("--probe-mode", choices=mode_names(protocol=True), default=None,
                   help="how --target-known is checked: exact answer (default) or the answer among 10 generated tokens")
    p.add_argument("--seed", type=seed_int, default=None,
                   help="seed of the data order (and of the tiny model's initial weights); default 0")
    p.add_argument("--device", default=None, help="cuda, cpu, ... (default: cuda when present)")
    p.add_argument("--dtype", default=None, help="bf16, fp16, fp32 (default: bf16 on CUDA, fp32 on CPU)")
    g = p.add_argument_group("tiny model (with --model tiny)")
    g.add_argument("--tiny-hidden", type=positive_int, default=512,
                   help="width of the tiny model (default 512; a multiple of --tiny-heads)")
    g.add_argument("--tiny-layers", type=positive_int, default=2, help="transformer layers (default 2)")
    g.add_argument("--tiny-heads", type=positive_int, default=8, help="attention heads (default 8)")
    g.add_argument("--arch", choices=TINY_ARCHS, default=None, metavar="ARCH",
                   help=f"architecture of the tiny model: {', '.join(TINY_ARCHS)} (default llama), each from its "
                        "transformers config class; the answer format defaults to the family's (gpt2 for gpt2 and "
                        "gpt_neox, phi for phi, llama otherwise); only with --model tiny")
    # the older spelling, kept working but no longer listed
    g.add_argument("--tiny-arch", dest="arch", choices=TINY_ARCHS, default=None, help=argparse.SUPPRESS)
    add_threads(p)
    add_force(p, "-o")
    add_json(p)
    p.set_defaults(handler=_finetune, _usage_error=p.error)


def _read_config_file(path: str) -> dict:
    """The ``--config`` file's mapping (JSON by suffix, else YAML); any problem is one CLIError
    naming the file."""
    from ...cli import CLIError
    from ...errors import parse_json, read_text

    from ...safe_yaml import check_shape, load_yaml

    text = read_text(path, flag="--config", error=CLIError)
    if Path(path).suffix.lower() == ".json":
        data = parse_json(text, source=path, flag="--config", error=CLIError)
    else:  # aliases expanded past a bound, a key given twice, deep nesting: one line (safe_yaml)
        data = load_yaml(text, path, CLIError, prefix=f"--config {path}", field="--config")
    check_shape(data, path, CLIError)
    if not isinstance(data, dict):
        raise CLIError(f"--config {path}: expected a mapping of FinetuneConfig fields", file=path, field="--config")
    return data


def collect_overrides(args: argparse.Namespace) -> tuple[dict, set[str]]:
    """The config file's fields, then the flags given, and the names that came from flags."""
    from ...probe.protocol import get_protocol

    overrides = _read_config_file(args.config) if args.config else {}
    if not get_protocol(args.protocol).finetune_early_stop:
        overrides.setdefault("target_known", None)
    flags = set()
    for name in _OVERRIDES:
        v = getattr(args, name)
        if v is not None:
            overrides[name] = v
            flags.add(name)
    return overrides, flags


def _preset(args: argparse.Namespace, bundle=None) -> str:
    """The preset ``auto`` resolves to, without loading a model when ``bundle`` is None: tiny for
    ``--model tiny`` and for checkpoint folders whose ``deepunlearn.json`` says ``origin: tiny``."""
    if args.preset != "auto":
        return args.preset
    if bundle is not None:
        return "tiny" if bundle.meta.get("origin") == "tiny" else "paper"
    if args.model == "tiny":
        return "tiny"
    from ...probe.models import META_FILE

    meta = Path(args.model).expanduser() / META_FILE
    if meta.is_file():
        from ...errors import load_json

        try:
            data = load_json(meta)
        except Exception:  # noqa: BLE001 - the loader reports a bad file when the model is loaded
            return "paper"
        if isinstance(data, dict) and data.get("origin") == "tiny":
            return "tiny"
    return "paper"


def build_config(args: argparse.Namespace, bundle=None, overrides: tuple[dict, set[str]] | None = None):
    """The preset, then the config file, then the command-line flags. Without ``bundle`` (before
    the model is loaded) the preset is guessed by :func:`_preset` so that every value is checked
    early; errors name the flag or the ``--config`` file and field."""
    from pydantic import ValidationError

    from ...cli import CLIError
    from ..finetune import FinetuneConfig

    values, flags = overrides if overrides is not None else collect_overrides(args)
    try:
        if args.preset == "paper" or (bundle is None and _preset(args) == "paper"):
            return FinetuneConfig.paper(**values)
        if args.preset == "tiny" or bundle is None:
            return FinetuneConfig.tiny(**values)
        return FinetuneConfig.for_bundle(bundle, args.protocol, **values)
    except ValidationError as e:
        parts, names = [], []
        for err in e.errors():
            name = str(err["loc"][0]) if err["loc"] else ""
            names.append(name)
            where = (f"--{name.replace('_', '-')}" if name in flags
                     else f"--config {args.config}: field {name}" if name and args.config
                     else f"finetune config{': ' + name if name else ''}")
            parts.append(f"{where}: {err['msg']} (got {err.get('input')!r})")
        from_file = bool(args.config) and any(n not in flags for n in names)
        raise CLIError("; ".join(parts), file=args.config if from_file else None,
                       field="--config" if from_file else (f"--{names[0].replace('_', '-')}" if names else None)
                       ) from None


def _finetune(args: argparse.Namespace) -> int:
    from ...cli import CLIError, apply_threads, emit
    from ...errors import atomic_dir
    from ...kg.io import load_kb
    from ...probe.cli.probe import load_for_cli, resolve_format

    if args.arch is not None and args.model != "tiny":
        args._usage_error(f"argument --arch: only with --model tiny (it picks the architecture of the tiny model "
                          f"built for the KB; {args.model!r} has its own)")  # exits 2, --json error object too
    apply_threads(args)
    from ...outputs import check_output, model_dir

    out_dir = check_output(args.output, force=args.force, folder=True, ours=model_dir,
                           what="a model folder of this tool (no deepunlearn.json)",
                           inputs={"--model": args.model, "--kb": args.kb, "--config": args.config,
                                   "--exclude": args.exclude})
    if args.model == "tiny" and args.tiny_hidden % args.tiny_heads:
        raise CLIError(f"--tiny-hidden {args.tiny_hidden} is not a multiple of --tiny-heads {args.tiny_heads}",
                       field="--tiny-hidden")
    kb = load_kb(args.kb)
    if not kb.facts:
        raise CLIError(f"--kb {args.kb}: the KB has no facts to finetune on", file=args.kb, field="--kb")
    exclude: list[int] = []
    if args.exclude is not None:
        from ...kg.refs import read_fact_list

        exclude = sorted(set(read_fact_list(kb, args.exclude, flag="--exclude", key="exclude")))
        if len(exclude) == len(kb.facts):
            raise CLIError(f"--exclude {args.exclude}: excludes every fact of the KB, nothing is left to finetune on",
                           file=args.exclude, field="--exclude")
    if args.forms is not None:
        from ...kg.forms import parse_selection

        parse_selection(kb, args.forms, flag="--forms")  # checked before anything is built
    fmt = resolve_format(args)
    overrides = collect_overrides(args)
    build_config(args, None, overrides)  # every value checked before anything is built or written

    from ..finetune import finetune

    with atomic_dir(out_dir) as tmp:
        model = args.model
        if model == "tiny":
            from ...probe.tiny import build_tiny_model

            try:
                build_tiny_model(kb, tmp, hidden=args.tiny_hidden, layers=args.tiny_layers, heads=args.tiny_heads,
                                 arch=args.arch or "llama", seed=args.seed or 0, prompt=fmt["prompt"])
            except ValueError as e:
                raise CLIError(str(e)) from None
            model = str(tmp)
        bundle = load_for_cli(model, kb, args.device, args.dtype, **fmt)
        # KB mismatch does not apply: finetuning on a new KB is what this command does.
        config = build_config(args, bundle, overrides)
        res = finetune(bundle, kb, config, out_dir=tmp, exclude=exclude, forms=args.forms)
    res.checkpoint = out_dir
    out = {**res.to_json(), "model": args.model, "kb": str(args.kb), "protocol": args.protocol, "forms": args.forms,
           "answer_format": bundle.prompt.describe(), "config": config.model_dump()}
    emit(args, out, lambda: (
        f"finetuned {args.model} on {kb.name}"
        + (f" minus {len(exclude)} excluded facts (of which it still answers {len(res.excluded_known)})"
           if exclude else "")
        + f": {res.known} of {res.total} {'trained ' if exclude else ''}facts known ({res.share:.1%}) "
        f"after {res.epochs} epochs, {res.seconds:.0f}s; checkpoint in {res.checkpoint}"
    ))
    return 0
