"""``deepunlearn evaluate``: judge unlearned checkpoints against their original in one command.

``deepunlearn evaluate --original A --unlearned B [B2 ...] --kb KB --target T [--rules R]
[--mode M] [--forms SEL] [-o OUT.json] [--json]`` probes A once (through the probe cache) and
each B in A's answer format, and prints per B: |K_A|, the forgotten facts K_A \\ K_B, recall and
accuracy, whether the target is forgotten, whether it is forgotten deeply (not in the closure of
K_B), and, for a superficial forgetting, the derivation that survives (:mod:`.evaluate`).

``--manifest FILE`` (TOML ``[[row]]`` tables or CSV rows of ``checkpoint, target[, method,
param]``) judges many B's, appending one JSON line per row to ``-o OUT.jsonl`` as it goes; rows
already judged there are skipped, so an interrupted run picks up where it stopped
(:mod:`.evaluate_manifest`); ``deepunlearn evaluate-report OUT.jsonl -o DIR`` turns those lines
into a results store and the sweep report (:mod:`deepunlearn.bench.verdict_store`).

The checks a sweep and ``deepunlearn attack`` run, on each B (:mod:`.evaluate_checks`):
``--adversarial`` (``--adversarial-modes``, ``--adversarial-calibration``), the attacks
``--relearn N,N,...`` (``--relearn-size``, ``--relearn-lr``, ``--seed``) and ``--quantize
int8|int4|nf4``, and ``--scores`` (``--retain R``: a retain model for the reference-based
measures). B is loaded once for its probe and its checks; the attacks put its weights back.

``--calibration CAL`` (a calibration written by ``deepunlearn probe --calibrate -o CAL``) adds
to each verdict that is not deep its ``p_chance``: the probability that a model that learned none
of the verdict's set, answering its facts by chance at the raw false-positive rate of each fact's
relation, answers as many and is judged the same (:mod:`.chance_verdict`); one with
``p_chance >= 0.05`` prints as not established.
``--oracle DIR`` (an oracle folder from ``deepunlearn oracle``; ``--negatives HOLD.json``
calibrates its margin) adds ``deep_oracle``, the verdict relative to exact unlearning
(:mod:`..oracle_verdict`); repeated, the oracles (one set, other seeds) form one reference.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    from ...cli import add_force, add_json, add_threads, positive_int
    from ...rules.soft import DEFAULT_MAX_NODES, MEASURES
    from ...probe.cli.probe import add_format_args
    from ...probe.modes import mode_names, modes_help

    p = sub.add_parser(
        "evaluate", help="judge unlearned checkpoints against their original: forgotten facts, recall, "
                         "accuracy, deep or superficial",
        description="Probe the original model A once and each unlearned model B, then report per B the facts "
                    "it forgot, recall and accuracy against the target's minimal deep-unlearning sets, and "
                    "whether the target is deeply forgotten (not derivable by the rules from what B still "
                    "knows); a superficially forgotten target comes with the derivation that survives.")
    p.add_argument("--original", required=True, metavar="A",
                   help="the model before unlearning: checkpoint folder, hub name or GGUF file")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--unlearned", nargs="+", metavar="B",
                     help="unlearned model(s): checkpoint folder, hub name, GGUF file or PEFT adapter folder on A")
    src.add_argument("--manifest", metavar="FILE",
                     help="TOML ([[row]] tables) or CSV file of rows checkpoint, target[, method, param]; one JSON "
                          "line per row goes to -o (required), rows already there are skipped")
    p.add_argument("--kb", required=True, help="KB file")
    p.add_argument("--target", default=None,
                   help="fact index or 'subject|relation|object' (with --manifest: for rows that name none)")
    p.add_argument("--rules", default=None,
                   help="rule set name or rule file (default: the KB's metadata 'rules', else family)")
    p.add_argument("--rule-prob", choices=MEASURES, default=None,
                   help="soft rules: each mined rule holds with this measure of its (from the '%% support=...' line "
                        "after it; a rule without one keeps its written 'p ::' probability); verdicts get deep_p")
    p.add_argument("--soft-budget", type=positive_int, default=None, metavar="N",
                   help=f"most decision-diagram nodes one deep_p may build (default {DEFAULT_MAX_NODES:,})")
    p.add_argument("--mode", choices=mode_names(fact=True), default=None,
                   help=f"probe mode, as 'deepunlearn probe --mode': {modes_help(mode_names(fact=True))} (default: the protocol's)")
    p.add_argument("--forms", default=None, metavar="SEL", help="probe forms, as 'deepunlearn probe --forms'")
    p.add_argument("--model-derived", action="store_true",
                   help="also ask each unlearned model the target's compose questions (multi-hop questions "
                        "composing the rule bodies that derive it from K) and report model-derived deep unlearning "
                        "(deep_model: the model answers the target neither directly nor through any of them)")
    p.add_argument("--oracle", default=None, metavar="DIR", action="append",
                   help="also judge relative to exact unlearning (deep_oracle): an oracle folder from deepunlearn "
                        "oracle; an excluded fact counts as still held only where B's evidence beats the oracle's by "
                        "a margin calibrated on never-seen facts. Repeat it with oracles of the same set and other "
                        "seeds (deepunlearn oracle --seed) to compare against the strongest of them")
    p.add_argument("--oracle-correction", choices=("family", "fact"), default="family",
                   help="with --oracle: the margin's 5 %% false-positive rate bounds the whole verdict (family: "
                        "shared among the excluded facts of the target's cone B answers, default) or each fact (fact)")
    p.add_argument("--oracle-noise", choices=("fact", "pooled"), default="fact",
                   help="with several --oracle: the seed noise B must also beat on an excluded fact: the oracles' "
                        "disagreement on that fact (fact, default) or, besides, how far one oracle beats the "
                        "strongest of the others on any excluded fact it answers (pooled)")
    p.add_argument("--negatives", default=None, metavar="HOLD.json",
                   help="with --oracle: the never-seen facts the margin is calibrated on (a holdout KB from "
                        "deepunlearn data holdout, or never-true facts; default: a holdout drawn with seed 0, of at least "
                        "200 facts)")
    add_format_args(p)
    p.add_argument("--batch-size", type=positive_int, default=64, metavar="N", help="questions per forward pass")
    p.add_argument("--device", default=None, help="cuda, cuda:1, cpu, mps (default: cuda when present)")
    p.add_argument("--dtype", default=None, help="bf16, fp16, fp32 (default: bf16 on CUDA, fp32 on CPU)")
    p.add_argument("--cache-dir", default=None,
                   help="probe cache for the original's probe (default: $DEEPUNLEARN_CACHE/probe or "
                        "~/.cache/deepunlearn/probe)")
    from .attack_args import add_attack_args
    from .checks import add_adversarial_args

    add_adversarial_args(p)
    add_attack_args(p, quantize_choices=False)
    p.add_argument("--scores", action="store_true",
                   help="also record how much remains: answer probability, truth ratio, exposure, ROUGE-L, Min-K%%, "
                        "model utility (on the target, its minimal set and the rest of K)")
    p.add_argument("--retain", default=None, metavar="R",
                   help="with --scores: a retain model (the base trained without the target's reference set) for "
                        "forget quality and generalised exposure")
    p.add_argument("--calibration", default=None, metavar="CAL",
                   help="a calibration (deepunlearn probe --calibrate -o CAL): each verdict that is not deep gets "
                        "p_chance, the chance that a model answering the target's facts only by chance (at the raw "
                        "false-positive rate of each fact's relation) is judged the same; p_chance >= 0.05 prints "
                        "as not established")
    p.add_argument("-o", "--output", default=None, metavar="OUT",
                   help="write the verdicts (JSON; with --manifest: JSON lines, appended, resumable)")
    add_force(p, "-o (not with --manifest: only a verdicts file it wrote is appended to)")
    add_threads(p)
    add_json(p)
    p.set_defaults(handler=_evaluate)


def _judge(args):
    from ...probe.cli.probe import resolve_format, resolve_protocol
    from ..evaluate import Judge

    protocol = resolve_protocol(args)
    fmt = resolve_format(args, protocol)  # checks --device and --answer-format before anything loads
    return Judge(args.original, args.kb, rules=args.rules, mode=args.mode, forms=args.forms,
                 protocol=protocol.name, device=args.device, dtype=args.dtype, prompt=fmt["prompt"],
                 answer_format=fmt["answer_format"], trust_remote_code=fmt["trust_remote_code"],
                 cache_dir=args.cache_dir, batch_size=args.batch_size, progress=not args.json,
                 model_derived=args.model_derived, oracle=args.oracle, negatives=_negatives(args),
                 oracle_correction=args.oracle_correction, oracle_noise=args.oracle_noise, rule_prob=args.rule_prob,
                 soft_budget=args.soft_budget)


def _negatives(args):
    """``--oracle`` and ``--negatives`` checked before any model loads; the negatives KB or None."""
    from ...cli import CLIError

    if args.negatives is not None and args.oracle is None:
        raise CLIError("--negatives: calibrates the margin of --oracle; give --oracle DIR too", field="--negatives")
    if args.oracle is None:
        return None
    from ..oracle_verdict import oracle_folder

    oracle_folder(args.oracle)
    if args.negatives is None:
        return None
    from ...kg.io import load_kb

    neg = load_kb(args.negatives, flag="--negatives")
    if not neg.facts:
        raise CLIError(f"--negatives {args.negatives}: the KB has no facts", file=args.negatives, field="--negatives")
    return neg


def _chance_judge(args):
    """The judge of the flags with ``--calibration``'s rates (p_chance), read before any model loads."""
    rates = None
    if args.calibration is not None:
        from ...probe.cli.probe import resolve_protocol
        from ..chance_verdict import chance_rates

        rates = chance_rates(args.calibration, args.mode or resolve_protocol(args).probe_mode)
        note = rates.forms_note(args.forms)
        if note:
            print(f"deepunlearn evaluate: {note}", file=sys.stderr)
    judge = _judge(args)
    judge.chance = rates
    return judge


def _checks(args):
    """The checks of the flags (None when none is asked for); a bad value is one line naming its
    flag, before any model loads."""
    from ...cli import CLIError
    from .attack_args import attack_params
    from .checks import adversarial_kwargs
    from ..evaluate_checks import EvalChecks

    adv = adversarial_kwargs(args)
    attacks = attack_params(args, required=False)
    if args.retain is not None and not args.scores:
        raise CLIError("--retain: the retain model is the reference of the scores: give --scores too", field="--retain")
    checks = EvalChecks(adversarial=adv.get("adversarial", False), adversarial_modes=adv.get("adversarial_modes"),
                        calibration=adv.get("adversarial_calibration"), attacks=attacks, relearn_lr=args.relearn_lr,
                        seed=args.seed, scores=args.scores, retain=args.retain)
    return checks if checks.active else None


def _evaluate(args: argparse.Namespace) -> int:
    from ...cli import CLIError, apply_threads, emit
    from ...errors import atomic_write_text, dumps

    if args.manifest is not None:
        if not args.output:
            raise CLIError("--manifest writes one JSON line per row: give -o OUT.jsonl", field="-o")
        from ..evaluate_manifest import open_output, read_manifest, run_manifest

        rows = read_manifest(args.manifest)  # a bad manifest is one line before any model loads
        checks = _checks(args)
        apply_threads(args)
        with open_output(args) as sink:  # checked and locked before any model loads
            return run_manifest(args, rows, _chance_judge(args), checks, sink)
    if args.target is None:
        raise CLIError("--target is required (a fact index or 'subject|relation|object')", field="--target")
    if args.output is not None:  # -o "" is one line, not "no output"
        from ...output_kinds import VERDICT_DOC
        from ...outputs import check_output

        check_output(args.output, force=args.force, ours=VERDICT_DOC, what="a verdict of 'deepunlearn evaluate'",
                     inputs={"--kb": args.kb, "--original": args.original, "--unlearned": args.unlearned,
                             "--retain": args.retain, "--rules": args.rules})
    checks = _checks(args)
    apply_threads(args)
    judge = _chance_judge(args)
    from tqdm import tqdm

    verdicts = [judge.verdict(b, args.target, checks=checks)
                for b in tqdm(args.unlearned, desc="unlearned models", unit=" model", file=sys.stderr,
                              disable=args.json or len(args.unlearned) < 2, leave=False)]
    dicts = [v.model_dump() for v in verdicts]
    out = dicts[0] if len(dicts) == 1 else {"original": args.original, "verdicts": dicts}
    if args.output:
        atomic_write_text(args.output, dumps(out, ensure_ascii=False, indent=1) + "\n")
    emit(args, out, lambda: "\n\n".join(v.text() for v in verdicts)
         + (f"\nwritten to {args.output}" if args.output else ""))
    return 0
