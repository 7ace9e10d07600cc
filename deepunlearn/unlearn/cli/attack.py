"""``deepunlearn attack``: attack a model unlearned anywhere.

    deepunlearn attack --model UNLEARNED --kb KB --target T [--original ORIG]
                       [--relearn 1,2,4,8] [--relearn-size 16] [--relearn-lr LR] [--relearn-on other|split]
                       [--quantize int8|int4|nf4]
                       [--mode exact] [--forms SEL] [--rules R] [--sets S] [--json]

K is what the original model knew: the facts ``--original`` answers (a
:class:`~deepunlearn.unlearn.loop.TargetRunner` on it, k_mode ``probed``); without ``--original``
every fact of the KB (k_mode ``dataset``). The target must be in K. The unlearned model is probed
on K (``--mode``, ``--forms``), and recall and accuracy come from the rules layer's evaluator
against the target's minimal deep-unlearning sets; then after each relearning step count
(:func:`~deepunlearn.unlearn.attacks.relearn_attack` on a seeded sample of the pool K minus the
target minus its chosen minimal set; ``--relearn-on split``: half the chosen set and the
target's other forms; ``split-set``: the half alone, :mod:`~deepunlearn.unlearn.relearn_pool`) and after quantisation
(:func:`~deepunlearn.unlearn.attacks.quantize_attack`). The model is restored exactly after each
attack; nothing is written.

The relearning lr is ``--relearn-lr``, else the finetuning lr the unlearned checkpoint records
(``deepunlearn.json``, ``training.lr``), else 2e-5; the output says which (``relearn_lr_from``).

Only argparse is imported at import time.
"""

from __future__ import annotations

import argparse
import sys

#: probe modes offered (the probe layer checks them; deepunlearn.probe.probing.MODES)
from ...probe.modes import FACT_MODES as ATTACK_MODES  # noqa: E402
# the flags, their checks and the attacks themselves are shared with ``deepunlearn evaluate``
from .attack_args import attack_params  # noqa: E402


def register(sub: argparse._SubParsersAction) -> None:
    from ...cli import add_json, add_threads, positive_int
    from .attack_args import add_attack_args
    from ...probe.cli.probe import add_format_args

    p = sub.add_parser(
        "attack",
        help="attack an unlearned model: relearn on facts it was not asked to forget, or quantise it, and re-probe",
        description=(
            "Probe an unlearned model on K (what --original knew, or the whole KB), then attack it: finetune "
            "N steps (each N of --relearn) on a sample of K minus the target and its chosen minimal set (or, with "
            "--relearn-on split, on half that set and the target's other forms; split-set: the half alone), and/or "
            "quantise its Linear layers (--quantize), re-probing after each; prints recall and accuracy before "
            "and after every attack. The weights are restored exactly after each attack; nothing is written."
        ),
    )
    p.add_argument("--model", required=True, help="checkpoint folder (or hub name) of the unlearned model")
    p.add_argument("--kb", required=True, help="KB file")
    p.add_argument("--target", required=True, help="the unlearned fact: index or 'subject|relation|object'")
    p.add_argument("--original", default=None,
                   help="the model before unlearning: K = the facts it answers (default: K = every fact of the KB)")
    add_attack_args(p)
    from ...probe.modes import mode_names

    p.add_argument("--mode", choices=mode_names(fact=True), default=None,
                   help=f"probe mode (default: the protocol's): {', '.join(mode_names(fact=True))}")
    p.add_argument("--forms", default=None, metavar="SEL",
                   help="probe forms: default, all, a split (train, test, unlearn) or form names, comma-separated")
    p.add_argument("--rules", default=None,
                   help="rule set: family, edu-relat, or a rule file (default: the KB's own, else family)")
    p.add_argument("--sets", default=None,
                   help="minimal sets: exact, mdus, release or a folder of that layout (default: the protocol's)")
    add_format_args(p)
    p.add_argument("--device", default=None, help="cuda, cuda:1, cpu (default: cuda when available)")
    p.add_argument("--dtype", default=None, help="bf16, fp16, fp32 (default: bf16 on GPU, fp32 on CPU)")
    p.add_argument("--batch-size", type=positive_int, default=64, help="probing batch size (default 64)")
    p.add_argument("--cache-dir", default=None, help="where the probe before unlearning is cached")
    p.add_argument("--model-derived", action="store_true",
                   help="also ask the target's compose questions (multi-hop questions through the body of each rule "
                        "grounding that derives it from K) before and after every attack: deep_model is false when "
                        "the model answers the target directly or through any of them")
    add_threads(p)
    add_json(p)
    p.set_defaults(handler=_attack)


def _check_probe_args(kb, mode: str, forms: str | None) -> None:
    """``--mode`` and ``--forms`` against what the probe layer offers, before any model loads."""
    import inspect

    from ...cli import CLIError
    from ...probe import probe
    from ...probe.modes import mode_names

    if mode not in mode_names(fact=True):
        raise CLIError(f"--mode {mode}: this probe layer offers {', '.join(mode_names(fact=True))}", field="--mode")
    if forms is not None:
        from ...kg.forms import parse_selection

        parse_selection(kb, forms, flag="--forms")
        if "forms" not in inspect.signature(probe).parameters:
            raise CLIError("--forms: this probe layer does not probe forms yet", field="--forms")


def _attack(args) -> int:
    import time
    from dataclasses import replace

    from ...cli import CLIError, apply_threads, emit
    from ...kg.io import load_kb
    from ...kg.refs import resolve_target
    from ...probe import get_protocol
    from ...probe.cache import check_cache_dir
    from ...probe.cli.probe import resolve_format
    from ...probe.fingerprint import check_trained_on
    from ..attack_run import attack_text, run_attacks
    from ..attacks import check_quantize
    from ..loop import TargetRunner
    from ..runner_options import ProbeOptions, SetOptions
    from ..methods import UnlearnError

    t0 = time.perf_counter()
    if args.cache_dir is not None:  # before the model loads, not when the probe is cached
        check_cache_dir(args.cache_dir, where="--cache-dir")
    apply_threads(args)
    kb = load_kb(args.kb)
    (target,) = resolve_target(kb, args.target, kb_file=args.kb, allow_all=False)
    params = attack_params(args, required=False)  # no attack: the unlearned model's verdict alone
    if params is None:
        from ..attacks import AttackParams

        params = AttackParams()
    protocol = get_protocol(args.protocol)
    mode = args.mode or protocol.probe_mode
    _check_probe_args(kb, mode, args.forms)
    fmt = resolve_format(args, protocol)  # checks --device
    runner_kw = dict(rules=args.rules, protocol=protocol, minimal_sets=SetOptions(sets=args.sets), progress=False)
    probing = ProbeOptions(mode=mode, cache_dir=args.cache_dir, batch_size=args.batch_size)
    try:
        if args.original is not None:
            original = _load("--original", args.original, kb, args, fmt)
            _warn_kb(check_trained_on(original, kb, kb_file=args.kb))
            runner = TargetRunner(original, kb, probing=replace(probing, k_mode="probed"), **runner_kw)
            runner.known_target(target, field="--target")
            runner.bundle = runner.snapshot = original = None  # K and the sets are all we need of it
            _free()
            bundle = _load("--model", args.model, kb, args, fmt)
        else:
            bundle = _load("--model", args.model, kb, args, fmt)
            _warn_kb(check_trained_on(bundle, kb, kb_file=args.kb))
            runner = TargetRunner(bundle, kb, probing=replace(probing, k_mode="dataset"), **runner_kw)
            runner.snapshot = None  # each attack keeps its own
        if params.quantize is not None:
            check_quantize(bundle.model, params.quantize)
        obj = run_attacks(params, bundle, kb, runner, target,
                          ProbeOptions(mode=mode, forms=args.forms, batch_size=args.batch_size),
                          seed=args.seed, relearn_lr_given=args.relearn_lr, model_derived=args.model_derived)
    except UnlearnError as e:
        raise CLIError(str(e), field=e.field) from None
    obj["seconds"] = round(time.perf_counter() - t0, 3)
    emit(args, obj, lambda: attack_text(obj))
    return 0


def _load(flag: str, name: str, kb, args, fmt):
    """:func:`~deepunlearn.probe.cli.probe.load_for_cli`, its errors naming ``flag`` (``--model`` or
    ``--original``: two models are loaded, the line must say which one failed)."""
    from ...cli import CLIError
    from ...errors import UserError
    from ...probe.cli.probe import load_for_cli

    try:
        return load_for_cli(name, kb, args.device, args.dtype, **fmt)
    except UserError as e:
        if e.field is not None:
            raise
        raise CLIError(f"{flag} {name}: {e}", file=e.file, field=flag) from None


def _warn_kb(mismatch: str | None) -> None:
    if mismatch:
        print(f"deepunlearn attack: warning: {mismatch}", file=sys.stderr)


def _free() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
