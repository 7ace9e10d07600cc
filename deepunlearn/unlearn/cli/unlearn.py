"""``deepunlearn unlearn``: unlearn one target fact (or every target of the KB) with one method and
print recall and accuracy at every grid point, with the target's summary metrics (Acc@Recall>=0.8,
Recall@Acc>=0.8, AUC; docs/safety.md).

``-o POINTS.json`` saves the result (what ``--json`` prints). With one target it also holds, at
its top level, ``forgotten``: the facts lost at one grid point (``--point``, default the last,
strongest one), and ``fact_ids``: K, the facts the model knew before, so that
``deepunlearn rules recall --kb KB --target T --forgotten POINTS.json`` reproduces that point's
recall and accuracy (it takes K from the file unless ``--known`` is given). ``--save-model DIR`` saves the unlearned weights of
one grid point. Every argument is checked before the model is loaded.

Only argparse and the torch-free method catalogue are imported at import time; torch,
transformers and the method classes are imported inside the handler.
"""

from __future__ import annotations

import argparse
import sys

from ...probe.protocol import PROTOCOL_NAMES as PROTOCOLS  # the presets (that module imports no torch)
from ..methods import catalog
from ..summary import point_json  # noqa: F401  (the JSON of one point; it lived here)
from .unlearn_args import check_outputs, check_save_model, parse_grid


def register(sub: argparse._SubParsersAction) -> None:
    from ...cli import add_force, add_json, add_threads

    kinds = {k: ", ".join(s.name for s in catalog.BUILTIN if s.kind == k) for k in catalog.KINDS}
    p = sub.add_parser(
        "unlearn",
        help="unlearn a target fact with one method (GA, NPO, TV, WHP, ... or a plug-in's) and measure recall "
             "and accuracy along the grid",
        description=(
            "Probe the model once (cached), unlearn the target with the method at every grid point "
            "(a steps method such as GA or NPO: optimiser steps along one trajectory; a strength method such as "
            "TV or WHP: alpha after reinforcing the target), "
            "probe again and compute recall and accuracy against the target's minimal deep-unlearning sets, "
            "then the target's Acc@Recall>=0.8, Recall@Acc>=0.8 and AUC. The original weights are restored "
            "in memory after each target; nothing is written to disk unless -o or --save-model is given."
        ),
    )
    _add_run_args(p, kinds)
    _add_measure_args(p)
    _add_output_args(p)
    from .checks import add_check_args
    from .requests import add_request_args

    add_check_args(p)

    add_request_args(p)
    add_threads(p)
    add_force(p, "-o and --save-model")
    add_json(p)
    p.set_defaults(handler=_unlearn, _usage_error=p.error)


#: short column heads of the family domain's groups (other groups show their own name)
_GROUP_HEADS = {"family": "fam", "biography": "bio"}


def _table(result: dict) -> str:
    from ..chance_verdict import chance_line
    from .checks import check_line
    from ..derived import derived_line
    from ..summary import format_summary, group_accuracy, is_deep, point_groups

    s, r, o = result["target"]
    groups = point_groups(result["points"])
    heads = [_GROUP_HEADS.get(g, g) for g in groups]
    widths = [max(6, len(h)) for h in heads]
    lines = [f"{result['method']} on [{result['index']}] {o} is {s}'s {r} (lr {result['lr']:g})",
             f"  {'param':>8}  {'recall':>6}  {'acc':>6}  "
             + "".join(f"{h:>{w}}  " for h, w in zip(heads, widths)) + "forgot  target     deep"]
    for p in result["points"]:
        cells = ["-" if (a := group_accuracy(p, g)) is None else f"{a:.3f}" for g in groups]
        lines.append(f"  {p['param']:>8g}  {p['recall']:6.3f}  {p['accuracy']:6.3f}  "
                     + "".join(f"{c:>{w}}  " for c, w in zip(cells, widths))
                     + f"{len(p['forgotten']):6d}  {'forgotten' if p['target_forgotten'] else 'kept':<9}  "
                     + ("yes" if is_deep(p) else "no"))
        lines += [x for x in [check_line(p), derived_line(p)] if x]
    lines += [chance_line(result)] if result.get("p_chance") is not None else []
    lines.append("  " + format_summary(result["summary"]))
    return "\n".join(lines)


def _add_run_args(p: argparse.ArgumentParser, kinds: dict[str, str]) -> None:
    """What to unlearn, from which model, with which method, grid, learning rate and protocol."""
    from ...cli import positive_float

    p.add_argument("--model", required=True, help="checkpoint folder (or hub name) of the model that knows the KB")
    p.add_argument("--kb", required=True, help="KB file")
    p.add_argument("--method", required=True, help=f"unlearning method: {catalog.help_names()} (other packages add "
                                                    f"theirs under the entry-point group {catalog.ENTRY_POINT_GROUP})")
    p.add_argument("--target", required=True,
                   help="fact index, 'subject|relation|object', 'all' (every target the KB lists, one at a time) "
                        "or a comma-separated list A,B,C (forgotten together in one run; see --sequential)")
    p.add_argument("--rules", default=None,
                   help="rule set: family, edu-relat, or a rule file (default: the KB's own, else family)")
    p.add_argument("--grid", default=None,
                   help=f"comma-separated grid values: step counts for {kinds['steps']} (positive integers), alpha "
                        f"for {kinds['strength']} (finite, >= 0; 0 is the unchanged model); default: the method's "
                        "(the paper's for ga, npo, tv, whp)")
    p.add_argument("--lr", type=positive_float, default=None,
                   help="peak learning rate, used as given by every method (explicit: no ratio or multiplier applies); "
                        "default: the paper's ratio to the training lr the checkpoint records (GA/TV/WHP 1x, NPO "
                        "2x; a tenth of that for models trained from scratch), else the paper's (2e-5, NPO 4e-5; "
                        "half for 7-8B models); with --lora the default is 10x that; a rule-aware method's "
                        "default is its base's times its multiplier (du_loop: lr_scale 0.5; on an RMU base: "
                        "16x) (deepunlearn.unlearn.lr)")
    p.add_argument("--protocol", choices=PROTOCOLS, default="default",
                   help="protocol preset: default; reference (the paper's code: linear schedule with a zero-lr "
                        "warm-up step, generate probe, K = the KB, the release's sets, first-set ties); or pretrained "
                        "(a model as shipped: K = the facts it answers in its chat template, whole words within 32 "
                        "greedy tokens; docs/pretrained.md). README's protocol table lists every choice")
    from ...probe.cli.probe import add_format_args

    add_format_args(p, protocol=False)
    p.add_argument("--lora", action="store_true",
                   help="LoRA mode, every method (rank 8, alpha 16): ga/npo train the adapter instead of the full "
                        "weights; tv/whp reinforce the target into the adapter, then tv scales it by -alpha and whp "
                        "switches it off and on (no second copy of the weights); the default learning rate is then "
                        "10x the full-finetuning one (deepunlearn.unlearn.lr.LORA_LR_FACTOR); --lr replaces it")


def _add_measure_args(p: argparse.ArgumentParser) -> None:
    """How K, the minimal sets and accuracy are measured, and where and how the model runs."""
    from ...cli import mdus_seeds_int, positive_int, seed_int

    p.add_argument("--k-mode", choices=("probed", "dataset"), default=None,
                   help="K = facts the model answers before unlearning or the whole KB (default: the protocol's)")
    from ...probe.modes import mode_names, modes_help

    p.add_argument("--probe-mode", choices=mode_names(fact=True), default=None,
                   help=f"what counts as known: {modes_help(mode_names(fact=True))} (default: the protocol's)")
    sets = p.add_mutually_exclusive_group()
    sets.add_argument("--sets", default=None,
                      help="minimal sets: exact, mdus, release (the release's stored sets) or a folder of that "
                           "layout (default: the protocol's)")
    sets.add_argument("--seeds", type=mdus_seeds_int, default=None,
                      help="approximate the sets with MDUS over N seeds instead")
    p.add_argument("--tie", choices=("accuracy", "first"), default=None,
                   help="among sets of equal recall take the best accuracy or the first (default: the protocol's)")
    p.add_argument("--accuracy", choices=("auto", "full", "sampled"), default="auto",
                   help="full: probe all of K at every grid point; sampled: the target's cone (exact recall and deep) "
                        "plus a stratified sample of --accuracy-sample facts, accuracy with a 95%% interval (differs "
                        "from the paper's code; one target at a time); auto (default): sampled when K holds more "
                        "than 2,000 facts, full otherwise and under --protocol reference")
    p.add_argument("--accuracy-sample", type=positive_int, default=300, metavar="N",
                   help="facts sampled outside the target's cone with --accuracy sampled (default 300)")
    p.add_argument("--device", default=None, help="cuda, cuda:1, cpu (default: cuda when available)")
    p.add_argument("--dtype", default=None, help="bf16, fp16, fp32 (default: bf16 on GPU, fp32 on CPU)")
    p.add_argument("--batch-size", type=positive_int, default=64, help="probing batch size (default 64)")
    p.add_argument("--cache-dir", default=None, help="where the baseline probe is cached")
    p.add_argument("--seed", type=seed_int, default=0, help="seed of every run (dropout, LoRA initialisation)")


def _add_output_args(p: argparse.ArgumentParser) -> None:
    """The outputs: the result file, the grid point it records, the saved model, model-derived checks."""
    p.add_argument("-o", "--output", default=None, metavar="POINTS.json",
                   help="also write the result to this JSON file (folders created); with one target its top-level "
                        "'forgotten' (the facts lost at --point) and 'fact_ids' (K) make it a --forgotten file for "
                        "'deepunlearn rules recall', which reproduces the point")
    p.add_argument("--point", type=float, default=None, metavar="PARAM",
                   help="the grid point whose forgotten facts -o puts at the top level and --save-model saves "
                        "(default: the last grid value, the strongest unlearning)")
    p.add_argument("--save-model", default=None, metavar="DIR",
                   help="save the unlearned weights at --point as a checkpoint folder (one target; ga, npo or tv "
                        "without --lora: WHP changes the output distribution, not the weights); probe it with "
                        "'deepunlearn probe --model DIR'")
    p.add_argument("--model-derived", action="store_true",
                   help="at --point also ask the target's compose questions (multi-hop questions composing the "
                        "body of each rule grounding that derives it from K) and record model-derived deep "
                        "unlearning: deep_model is false when the model answers the target directly or through "
                        "any of them (one target at a time; not WHP)")

def _unlearn(args) -> int:
    from ...cli import CLIError, apply_threads, emit
    from ...kg.io import load_kb
    from ...kg.refs import resolve_target
    from ...probe.cache import check_cache_dir

    if args.cache_dir is not None:  # before the model loads, not when the baseline is cached
        check_cache_dir(args.cache_dir, where="--cache-dir")
    apply_threads(args)
    kb = load_kb(args.kb)
    from .requests import build_method, check_request_flags, grid_usage, parse_targets, requests_table, run_requests

    grid = grid_usage(args, parse_grid, args.grid)
    many = "," in args.target
    single = args.target.strip().lower() != "all" and not many
    targets = parse_targets(kb, args.target, args.kb) if many else resolve_target(kb, args.target, kb_file=args.kb)
    if args.sequential and not many:
        raise CLIError("--sequential serves several requests: give --target A,B,C", field="--sequential")
    check_request_flags(args)

    from ..methods import UnlearnError, get_method

    try:
        method_cls = get_method(args.method)
    except UnlearnError as e:
        raise CLIError(f"--method: {e}", field="--method") from None
    method = grid_usage(args, build_method, method_cls, grid, args)  # check the grid and options before loading
    if many and args.save_model is not None:
        raise CLIError("--save-model saves one target's unlearned model, not a batch", field="--save-model")
    check_save_model(args, method, single)
    point = check_outputs(args, grid, method, single)

    protocol, checks, rates = _protocol_and_checks(args, kb, many)
    try:
        bundle, runner = _load_runner(args, kb, protocol, checks)
        if many:
            obj = run_requests(args, runner, method, kb, targets)
            if args.output is not None:
                from ...errors import atomic_write_text, dumps

                atomic_write_text(args.output, dumps(obj, ensure_ascii=False, indent=1) + "\n")
            emit(args, obj, lambda: requests_table(obj))
            return 0
        results, skipped = _run_targets(args, runner, method, grid, point, bundle, kb, targets, single, rates)
    except UnlearnError as e:
        flag = {"accuracy": "--accuracy", "accuracy_sample": "--accuracy-sample"}.get(e.field or "")
        raise CLIError(f"{flag}: {e}" if flag else str(e), field=flag or e.field) from None

    obj, text = _result(args, runner, kb, bundle, protocol, method, results, skipped, single, point)
    if args.output is not None:
        from ...errors import atomic_write_text, dumps

        atomic_write_text(args.output, dumps(obj, ensure_ascii=False, indent=1) + "\n")
        obj = {**obj, "output": str(args.output)}
    emit(args, obj, text)
    return 0


def _protocol_and_checks(args, kb, many: bool):
    """The protocol, the check keywords and the chance rates, each checked before the model loads."""
    from ...cli import CLIError
    from ...probe import get_protocol

    from .checks import chance_rates_of, check_kwargs

    protocol = get_protocol(args.protocol)
    if args.accuracy == "sampled" and (many or protocol.name == "reference"):  # checked before the model loads
        raise CLIError("--accuracy: 'sampled' departs from the reference protocol, which probes all of K" if not many
                       else "--accuracy: 'sampled' measures one target at a time; batch and sequential requests "
                       "probe all of K", field="--accuracy")
    checks = check_kwargs(args, kb)  # bad forms or attack flags fail before the model loads
    rates = chance_rates_of(args, protocol, many)  # --calibration: the target's p_chance
    return protocol, checks, rates


def _load_runner(args, kb, protocol, checks: dict):
    """The model (warning when it was not trained on the KB) and the target runner over it."""
    from ...probe.cli.probe import load_for_cli, resolve_format
    from ...probe.fingerprint import check_trained_on

    from ..loop import TargetRunner
    from ..runner_options import MeasureOptions, ProbeOptions, SetOptions, TrainOptions

    bundle = load_for_cli(args.model, kb, args.device, args.dtype, **resolve_format(args, protocol))
    mismatch = check_trained_on(bundle, kb, kb_file=args.kb)
    if mismatch:
        print(f"deepunlearn unlearn: warning: {mismatch}", file=sys.stderr)
    runner = TargetRunner(
        bundle, kb, rules=args.rules, protocol=protocol, seed=args.seed,
        probing=ProbeOptions(mode=args.probe_mode, k_mode=args.k_mode, cache_dir=args.cache_dir,
                             batch_size=args.batch_size),
        minimal_sets=SetOptions(sets="mdus" if args.seeds is not None else args.sets, tie=args.tie,
                                seeds=args.seeds or 100),
        training=TrainOptions(lr=args.lr, lora=args.lora),
        measures=MeasureOptions(accuracy=args.accuracy, accuracy_sample=args.accuracy_sample),
        **checks,  # forms, unlearn_forms, the adversarial probe and attacks, by their flat keywords
    )
    return bundle, runner


def _run_targets(args, runner, method, grid, point, bundle, kb, targets, single: bool, rates):
    """Each target's result (its points, summary and chance verdict) and the targets skipped because
    the model did not know them (with one target, not knowing it is an error)."""
    from ..loop import TargetNotKnownError

    results, skipped = [], []
    for t in targets:
        try:
            points = _run_target(runner, t, method, grid, args, point, bundle, kb)
        except TargetNotKnownError as e:
            if single:
                raise
            print(f"deepunlearn unlearn: warning: skipping target {t}: {e}", file=sys.stderr)
            skipped.append(list(kb.facts[t]))
            continue
        from ..chance_verdict import target_chance
        from ..summary import target_metrics

        lr = points[0].lr if points else None
        results.append({
            "method": method.name, "target": list(kb.facts[t]), "index": t, "lr": lr,
            "points": [point_json(p, kb) for p in points],
            "summary": target_metrics(points), **target_chance(runner.evaluator, kb, t, rates),
        })
    return results, skipped


def _result(args, runner, kb, bundle, protocol, method, results, skipped, single: bool, point):
    """The command's result document and its text: one target's, or every target's with their mean."""
    common = {"known": len(runner.known), "known_before": len(runner.baseline.known_ids()), "total": len(kb),
              "k_mode": runner.k_mode, "probe_mode": runner.probe_mode, "protocol": protocol.name,
              "sets": runner.sets, "tie": runner.tie, "answer_format": bundle.prompt.name, **runner.sampler.describe()}
    if single:
        obj = {**results[0], **common}
        chosen = _chosen(obj["points"], point)
        obj.update({"point": chosen["param"], "forgotten": chosen["forgotten"], "fact_ids": sorted(runner.known)})
        text = lambda: _table(obj)  # noqa: E731
    else:
        from ..summary import mean_summary

        obj = {"method": method.name, "targets": results, "skipped": skipped,
               "summary": mean_summary([r["summary"] for r in results]), **common}
        text = lambda: "\n".join(  # noqa: E731
            [_table(r) for r in results]
            + ([f"mean over {len(results)} targets: " + _fmt_summary(obj["summary"])] if results else [])
            + ([f"skipped {len(skipped)} targets the model did not know"] if skipped else []))
    if args.save_model is not None:
        obj["saved_model"] = str(args.save_model)
    return obj, text


def _fmt_summary(summary: dict) -> str:
    from ..summary import format_summary

    return format_summary(summary)


def _chosen(points: list[dict], point: float | None) -> dict:
    """The point -o puts at the top level: ``--point``, else the last (strongest) one."""
    if point is None:
        return points[-1]
    return next(p for p in points if float(p["param"]) == point)


def _run_target(runner, t: int, method, grid, args, point, bundle, kb) -> list:
    """The points of one target; with ``--save-model``, the weights at the chosen point are saved
    while the trajectory is there (before the runner restores the original weights)."""
    points = []
    values = method.check_grid(method.params.grid)
    chosen = float(values[-1]) if point is None else point
    save_at = chosen if args.save_model is not None else None
    questions = None
    if getattr(args, "model_derived", False):
        from ..derived import compose_questions

        questions = compose_questions(kb, runner.evaluator.rules, t, graph=runner.evaluator.graph)
    for p in runner.run(t, method, seed=args.seed):
        if save_at is not None and float(p.param) == save_at:
            _save_model(bundle, args.save_model, method.name, t, p, runner, kb)
        if questions is not None and float(p.param) == chosen:
            from ..derived import note_model_derived

            note_model_derived(p, bundle, kb, t, runner.evaluator.rules, questions, args.batch_size)
        points.append(p)
    return points


def _save_model(bundle, out: str, method: str, t: int, p, runner, kb) -> None:
    """The model as it is now (at point ``p``) into ``out``, through a temporary sibling folder."""
    from ...errors import atomic_dir
    from ...probe.models import save_bundle

    meta = dict(bundle.meta)
    record = {"method": method, "target": list(kb.facts[t]), "target_id": t, "param": p.param, "lr": p.lr,
              "protocol": runner.protocol.name, "recall": p.recall, "accuracy": p.accuracy,
              "from": str(bundle.path) if bundle.path is not None else bundle.name}
    try:
        with atomic_dir(out) as tmp:
            save_bundle(bundle, tmp, {"unlearned": record})
    finally:
        bundle.meta = meta
