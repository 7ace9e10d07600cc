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
target's other forms, :mod:`~deepunlearn.unlearn.relearn_pool`) and after quantisation
(:func:`~deepunlearn.unlearn.attacks.quantize_attack`). The model is restored exactly after each
attack; nothing is written.

The relearning lr is ``--relearn-lr``, else the finetuning lr the unlearned checkpoint records
(``deepunlearn.json``, ``training.lr``), else 2e-5; the output says which (``relearn_lr_from``).

Only argparse is imported at import time.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .attacks import AttackParams

#: probe modes offered (the probe layer checks them; deepunlearn.probe.probing.MODES)
from ..probe.modes import MODES as ATTACK_MODES  # noqa: E402
#: the relearning lr when neither --relearn-lr nor the checkpoint gives one (the paper's finetuning lr)
DEFAULT_RELEARN_LR = 2e-5


def register(sub: argparse._SubParsersAction) -> None:
    from ..cli import add_json, add_threads, nonneg_int, positive_float, positive_int
    from ..probe.cli import add_format_args

    p = sub.add_parser(
        "attack",
        help="attack an unlearned model: relearn on facts it was not asked to forget, or quantise it, and re-probe",
        description=(
            "Probe an unlearned model on K (what --original knew, or the whole KB), then attack it: finetune "
            "N steps (each N of --relearn) on a sample of K minus the target and its chosen minimal set (or, with "
            "--relearn-on split, on half that set and the target's other forms), and/or "
            "quantise its Linear layers (--quantize), re-probing after each; prints recall and accuracy before "
            "and after every attack. The weights are restored exactly after each attack; nothing is written."
        ),
    )
    p.add_argument("--model", required=True, help="checkpoint folder (or hub name) of the unlearned model")
    p.add_argument("--kb", required=True, help="KB file")
    p.add_argument("--target", required=True, help="the unlearned fact: index or 'subject|relation|object'")
    p.add_argument("--original", default=None,
                   help="the model before unlearning: K = the facts it answers (default: K = every fact of the KB)")
    p.add_argument("--relearn", default=None, metavar="N,N,...",
                   help="relearning grid: re-probe after these many finetuning steps (sorted, distinct, >= 1), "
                        "e.g. 1,2,4,8")
    p.add_argument("--relearn-size", type=positive_int, default=16, metavar="N",
                   help="facts sampled (seeded) from the pool to relearn on (default 16)")
    p.add_argument("--relearn-lr", type=positive_float, default=None, metavar="LR",
                   help=f"relearning learning rate (default: the finetuning lr the checkpoint records, "
                        f"else {DEFAULT_RELEARN_LR:g})")
    add_relearn_on(p)
    p.add_argument("--quantize", choices=("int8", "int4", "nf4"), default=None,
                   help="int8: torch dynamic quantisation of every Linear (CPU); int4 / nf4: 4-bit round-to-nearest "
                        "of every Linear, group-wise absmax (any device)")
    p.add_argument("--mode", choices=ATTACK_MODES, default=None,
                   help="probe mode (default: the protocol's): exact, generate, yesno, rank or any")
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
    p.add_argument("--seed", type=nonneg_int, default=0, help="seed of the relearning sample and steps (default 0)")
    add_threads(p)
    add_json(p)
    p.set_defaults(handler=_attack)


def add_relearn_on(p: argparse.ArgumentParser) -> None:
    """The ``--relearn-on`` flag (the attack command and ``unlearn``)."""
    p.add_argument("--relearn-on", choices=("other", "split"), default=None,
                   help="what relearning trains on: other = a sample of K minus the target and its chosen set "
                        "(default); split = a seeded half of the chosen set and the target's other forms, "
                        "re-probing the held-out half and the target")


def parse_steps(text: str | None, flag: str = "--relearn") -> list[int]:
    """``"1,2,4"`` -> ``[1, 2, 4]``; ``None`` -> ``[]``. Anything but comma-separated integers is
    a :class:`~deepunlearn.cli.CLIError` naming ``flag`` (the order and range are checked by
    :class:`~deepunlearn.unlearn.attacks.AttackParams`).

    >>> parse_steps("1, 2,8")
    [1, 2, 8]
    """
    from ..cli import CLIError

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

    from ..cli import CLIError
    from .attacks import AttackParams

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
        raise CLIError(f"{flag} {getattr(args, flag[2:].replace('-', '_'))}: {msg}", field=flag) from None
    if not params.enabled():
        if not required:
            return None
        raise CLIError("no attack asked for: give --relearn N,N,... and/or --quantize int8|int4|nf4", field="--relearn")
    return params


def relearn_lr(args, bundle) -> tuple[float, str]:
    """The relearning lr and where it came from: ``--relearn-lr``, ``checkpoint`` (the finetuning
    lr recorded in its ``deepunlearn.json``) or ``default``."""
    if args.relearn_lr is not None:
        return float(args.relearn_lr), "--relearn-lr"
    lr = ((getattr(bundle, "meta", None) or {}).get("training") or {}).get("lr")
    if isinstance(lr, (int, float)) and not isinstance(lr, bool) and lr > 0:
        return float(lr), "checkpoint"
    return DEFAULT_RELEARN_LR, "default"


def _check_probe_args(kb, mode: str, forms: str | None) -> None:
    """``--mode`` and ``--forms`` against what the probe layer offers, before any model loads."""
    import inspect

    from ..cli import CLIError
    from ..probe import probe
    from ..probe.probing import MODES

    if mode not in MODES:
        raise CLIError(f"--mode {mode}: this probe layer offers {', '.join(MODES)}", field="--mode")
    if forms is not None:
        from ..kg.forms import parse_selection

        parse_selection(kb, forms, flag="--forms")
        if "forms" not in inspect.signature(probe).parameters:
            raise CLIError("--forms: this probe layer does not probe forms yet", field="--forms")


def _encoder(bundle, kb):
    """Fact ids -> their (primary) questions and answers encoded as in finetuning, collated on
    the model's device (as :meth:`TargetRunner.encode`, for the unlearned model)."""
    from .data import collate, encode_qa

    def encode(ids):
        probes = [kb.probe(int(i)) for i in ids]
        batch = collate(encode_qa(bundle.tokenizer, bundle.prompt, [(p.question, p.answer) for p in probes]),
                        bundle.pad_id)
        device = next(bundle.model.parameters()).device
        return {k: v.to(device) for k, v in batch.items()}

    return encode


def _attack(args) -> int:
    import time

    from ..cli import CLIError, apply_threads, emit
    from ..kg.io import load_kb
    from ..kg.refs import resolve_target
    from ..probe import get_protocol
    from ..probe.cache import check_cache_dir
    from ..probe.cli import resolve_format
    from ..probe.fingerprint import check_trained_on
    from .attacks import check_quantize, quantize_attack, relearn_attack, relearn_sample
    from .loop import TargetRunner
    from .methods import UnlearnError

    t0 = time.perf_counter()
    if args.cache_dir is not None:  # before the model loads, not when the probe is cached
        check_cache_dir(args.cache_dir, where="--cache-dir")
    apply_threads(args)
    kb = load_kb(args.kb)
    (target,) = resolve_target(kb, args.target, kb_file=args.kb, allow_all=False)
    params = attack_params(args, required=False)  # no attack: the unlearned model's verdict alone
    if params is None:
        from .attacks import AttackParams

        params = AttackParams()
    protocol = get_protocol(args.protocol)
    mode = args.mode or protocol.probe_mode
    _check_probe_args(kb, mode, args.forms)
    fmt = resolve_format(args, protocol)  # checks --device
    runner_kw = dict(rules=args.rules, protocol=protocol, probe_mode=mode, sets=args.sets,
                     cache_dir=args.cache_dir, batch_size=args.batch_size, progress=False)
    try:
        if args.original is not None:
            original = _load("--original", args.original, kb, args, fmt)
            _warn_kb(check_trained_on(original, kb, kb_file=args.kb))
            runner = TargetRunner(original, kb, k_mode="probed", **runner_kw)
            runner.known_target(target, field="--target")
            runner.bundle = runner.snapshot = original = None  # K and the sets are all we need of it
            _free()
            bundle = _load("--model", args.model, kb, args, fmt)
        else:
            bundle = _load("--model", args.model, kb, args, fmt)
            _warn_kb(check_trained_on(bundle, kb, kb_file=args.kb))
            runner = TargetRunner(bundle, kb, k_mode="dataset", **runner_kw)
            runner.snapshot = None  # each attack keeps its own
        if params.quantize is not None:
            check_quantize(bundle.model, params.quantize)
        obj = _run_attacks(args, params, bundle, kb, runner, target, mode, relearn_attack, quantize_attack,
                           relearn_sample)
    except UnlearnError as e:
        raise CLIError(str(e), field=e.field) from None
    obj["seconds"] = round(time.perf_counter() - t0, 3)
    emit(args, obj, lambda: _text(obj))
    return 0


def _load(flag: str, name: str, kb, args, fmt):
    """:func:`~deepunlearn.probe.cli.load_for_cli`, its errors naming ``flag`` (``--model`` or
    ``--original``: two models are loaded, the line must say which one failed)."""
    from ..cli import CLIError
    from ..errors import UserError
    from ..probe.cli import load_for_cli

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


def _run_attacks(args, params, bundle, kb, runner, target, mode, relearn_attack, quantize_attack,
                 relearn_sample) -> dict:
    """Probe the unlearned model, run the attacks, and build the result object."""
    from tqdm.auto import tqdm

    from ..probe import probe

    ids = sorted(runner.known)
    extra = {"forms": args.forms} if args.forms else {}

    def known() -> set[int]:
        res = probe(bundle, kb, ids, mode=mode, batch_size=args.batch_size, progress=False, **extra)
        return {int(i) for i in res.known_ids()}

    def score(now: set[int]) -> tuple[float, float]:
        ev = runner.evaluator.evaluate(target, sorted(runner.known - now))
        return float(ev.recall), float(ev.accuracy)

    before = known()
    recall, accuracy = score(before)
    chosen = runner.chosen_set(target)
    lr, lr_from = relearn_lr(args, bundle)
    split = None
    if params.relearn_on == "split":
        from .relearn_pool import split_plan

        split = split_plan(kb, chosen, target, seed=args.seed, probe_forms=args.forms)
        pool, facts = sorted(set(chosen) - {target}), (split.relearned if params.relearn else [])
    else:
        pool = sorted(runner.known - {target} - set(chosen))
        facts = relearn_sample(pool, params.relearn_size, args.seed) if params.relearn else []
    runs = bool(facts) or (split is not None and not split.empty)
    total = (params.relearn[-1] if params.relearn and runs else 0) + (params.quantize is not None)
    bar = tqdm(total=total, desc=f"attack target {target}", unit="step", file=sys.stderr,
               disable=total == 0, leave=False)
    try:
        if split is not None and params.relearn:
            from .relearn_pool import run_split, split_batch

            relearned = run_split(bundle.model, lambda: split_batch(bundle, kb, split), split, params.relearn,
                                  lr=lr, known=known, on_step=lambda s: bar.update(), before=before)[1]
        else:
            relearned = relearn_attack(bundle.model, _encoder(bundle, kb), pool, params.relearn, lr=lr,
                                       size=params.relearn_size, seed=args.seed, known=known,
                                       on_step=lambda s: bar.update()) if params.relearn else {}
        quant = None
        if params.quantize is not None:
            quant = quantize_attack(bundle.model, known, how=params.quantize)
            bar.update()
    finally:
        bar.close()
    if split is not None:  # a relearned fact counts as it stood before the attack
        from .relearn_pool import as_before, recovered

        recovery = {str(n): recovered(split, before, k) for n, k in relearned.items()}
        relearned = {n: as_before(split, before, k) for n, k in relearned.items()}
    after = {n: score(k) for n, k in relearned.items()}
    q = score(quant) if quant is not None else (None, None)
    from ..rules.recall_inputs import deep_after

    def deep(now: set[int]) -> bool:  # the target outside the closure of what the model knows now
        return bool(deep_after(kb, runner.evaluator.rules, sorted(now), target, None)["deep"])

    return {
        "deep": deep(before), "deep_relearn": {str(n): deep(k) for n, k in relearned.items()},
        "deep_quant": None if quant is None else deep(quant),
        "target": list(kb.facts[target]), "index": target, "known": len(runner.known), "total": len(kb),
        "k_mode": runner.k_mode, "mode": mode, "forms": args.forms, "sets": runner.sets,
        "chosen_set": [list(kb.facts[i]) for i in chosen],
        "recall": recall, "accuracy": accuracy, "target_forgotten": target not in before,
        "recall_relearn": {str(n): r for n, (r, _) in after.items()},
        "accuracy_relearn": {str(n): a for n, (_, a) in after.items()},
        "target_relearned": {str(n): target in relearned[n] for n in relearned},
        "recall_quant": q[0], "accuracy_quant": q[1], "quantize": params.quantize,
        "target_quant": None if quant is None else target in quant,
        "relearn_pool": len(pool), "relearn_facts": [list(kb.facts[i]) for i in facts],
        "relearn_size": params.relearn_size, "relearn_lr": lr if params.relearn else None,
        "relearn_lr_from": lr_from if params.relearn else None, "seed": args.seed,
        "relearn_on": params.relearn_on,
        **({} if split is None else {
            "relearn_forms": [f.name for f in split.forms] if params.relearn else [],
            "held_out": [list(kb.facts[i]) for i in split.held_out],
            "recovered_relearn": recovery if params.relearn else {}}),
    }


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _text(obj: dict) -> str:
    s, r, o = obj["target"]
    lines = [f"attack on [{obj['index']}] {o} is {s}'s {r} (K: {obj['known']} of {obj['total']} facts, "
             f"k_mode {obj['k_mode']}, probe {obj['mode']})",
             f"  {'model':<22}  {'recall':>6}  {'acc':>6}  {'target':<9}  deep",
             f"  {'unlearned':<22}  {obj['recall']:6.3f}  {obj['accuracy']:6.3f}  "
             f"{'forgotten' if obj['target_forgotten'] else 'known':<9}  {_yes(obj['deep'])}"]
    for n, rec in obj["recall_relearn"].items():
        label = f"relearn {n} step{'s' if n != '1' else ''}"
        lines.append(f"  {label:<22}  {rec:6.3f}  {obj['accuracy_relearn'][n]:6.3f}  "
                     f"{'known' if obj['target_relearned'][n] else 'forgotten':<9}  {_yes(obj['deep_relearn'][n])}")
    if obj["recall_quant"] is not None:
        lines.append(f"  {obj['quantize']:<22}  {obj['recall_quant']:6.3f}  {obj['accuracy_quant']:6.3f}  "
                     f"{'known' if obj['target_quant'] else 'forgotten':<9}  {_yes(obj['deep_quant'])}")
    if obj["relearn_lr"] is not None and obj.get("relearn_on") == "split":
        lines.append(f"  split: relearned on {len(obj['relearn_facts'])} of the {obj['relearn_pool']} facts of the "
                     f"chosen set and {len(obj['relearn_forms'])} other forms of the target; re-probed "
                     f"{len(obj['held_out']) - 1} held-out facts and the target (lr {obj['relearn_lr']:g} from "
                     f"{obj['relearn_lr_from']}, seed {obj['seed']})")
        for n, share in obj["recovered_relearn"].items():
            lines.append(f"  recovered after {n}: {'-' if share is None else f'{share:.3f}'} of the held-out facts "
                         "forgotten before")
    elif obj["relearn_lr"] is not None:
        lines.append(f"  relearned on {len(obj['relearn_facts'])} of a pool of {obj['relearn_pool']} facts "
                     f"(lr {obj['relearn_lr']:g} from {obj['relearn_lr_from']}, seed {obj['seed']})")
    return "\n".join(lines)
