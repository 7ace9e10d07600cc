"""``deepunlearn rules closure | sets | recall | explain | show`` (``compose`` and ``mine`` in their modules).

Only argparse at import time; numpy, clingo and matplotlib load inside the handlers, and
nothing here imports torch. Numeric flags have strict argparse types (bad values: usage error,
exit 2); every ``-o`` is written atomically, missing folders created.

Warnings about the rules on the KB (a relation no fact has, ...) go to stderr, except those the
KB's metadata ``acknowledged_relations`` lists (the user was told at import, e.g. the release's
``newphe``) and all of them under ``-q/--quiet``; ``--json`` output still lists them all.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path


def _budget(text: str) -> float:
    """argparse type of ``--time-budget``: finite seconds > 0 (``-1`` and ``nan`` used to give
    approximate sets without a word; ``0`` would skip the exact enumeration: say ``--sets mdus``)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds > 0, got {text!r} "
                                         "(for the approximate sets only, use --sets mdus)")
    return v


def _seconds(text: str) -> float:
    """argparse type of ``rules closure --time-budget``: finite seconds > 0."""
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds > 0, got {text!r}")
    return v


def _quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument("-q", "--quiet", action="store_true",
                   help="do not print warnings about the rules on the KB to stderr (--json still lists them)")


def register(sub: argparse._SubParsersAction) -> None:
    from ...cli import add_force, add_json, mdus_seeds_int, nonneg_int, positive_int
    from ..budget import DEFAULT_CLOSURE_SECONDS, DEFAULT_MAX_GROUNDINGS

    rules = sub.add_parser("rules", help="rules: closure, minimal deep-unlearning sets, recall/accuracy, explanations")
    rsub = rules.add_subparsers(dest="rules_command", metavar="ACTION")
    rsub.required = True

    def common(p: argparse.ArgumentParser, target: bool = True) -> None:
        p.add_argument("--kb", required=True, help="KB file (deepunlearn data ... -o KB.json)")
        p.add_argument("--rules", default=None,
                       help="rule set name (edu-relat, family) or rule file (.dl, or the release's "
                            "family_rule_raw.txt); default: the KB's metadata 'rules', else family")
        p.add_argument("--known", default=None, metavar="K.json",
                       help="take K = these facts only (a JSON list of fact indices or [s, r, o], or "
                            "the file 'deepunlearn probe -o KNOWN.json' writes), e.g. what a model knew; default: the whole KB")
        if target:
            p.add_argument("--target", required=True, help="fact index, 'S|r|O', or 'all' (the KB's targets)")
        p.add_argument("--grounding-budget", type=positive_int, default=DEFAULT_MAX_GROUNDINGS, metavar="N",
                       help="stop evaluating the rules, with an error naming the rule, once the groundings and "
                            f"derived facts held would pass N (default {DEFAULT_MAX_GROUNDINGS:,}: well under 2 GB "
                            "of memory; the 100,000-person generated KB needs 2.2 million)")

    def sets_options(p: argparse.ArgumentParser) -> None:
        g = p.add_mutually_exclusive_group()
        g.add_argument("--seeds", type=mdus_seeds_int, default=None, metavar="N",
                       help="approximate the minimal sets with MDUS over N random seeds (paper Algorithm 3)")
        g.add_argument("--exact", action="store_true",
                       help="enumerate all minimal sets with clingo (the default; falls back to MDUS "
                            "with 100 seeds past --time-budget and then says exact: false)")
        p.add_argument("--time-budget", type=_budget, default=10.0, metavar="S",
                       help="seconds (> 0) for the exact enumeration of one target (default 10); past it, "
                            "the sets found so far plus MDUS, and the output says exact: false; MDUS too stops "
                            "after S seconds per target, whatever --seeds asks")
        p.add_argument("--sets", default=None, metavar="exact|mdus|release|DIR",
                       help="where the minimal sets come from: exact (clingo, the default), mdus (MDUS over "
                            "--seeds, default 100), release (the release's stored unlearn_minimal_set/, found "
                            "through the KB's metadata 'release_dir', as the reference does) or DIR (a folder of "
                            "<row>.pt files of that layout); a target the stored sets lack gets MDUS (--exact: "
                            "the exact sets)")

    p = rsub.add_parser("closure", help="deductive closure: how many facts the rules derive")
    common(p, target=False)
    p.add_argument("--time-budget", type=_seconds, default=DEFAULT_CLOSURE_SECONDS, metavar="S",
                   help="stop evaluating the rules, with an error naming the rule file, after S seconds "
                        f"(> 0; default {DEFAULT_CLOSURE_SECONDS:g})")
    p.add_argument("--engine", choices=("native", "pydatalog"), default="native",
                   help="closure engine (pydatalog: the independent cross-check; slower)")
    p.add_argument("-o", "--output", default=None, metavar="FILE.json",
                   help="also write the closure's facts as a JSON list of [s, r, o] (missing folders are created)")
    add_force(p)
    add_json(p)
    _quiet(p)
    p.set_defaults(handler=_closure)

    p = rsub.add_parser("sets", help="minimal deep-unlearning sets of a target")
    common(p)
    sets_options(p)
    add_json(p)
    _quiet(p)
    p.set_defaults(handler=_sets)

    p = rsub.add_parser("recall", help="recall and accuracy of an unlearning result")
    common(p)
    lost = p.add_mutually_exclusive_group(required=True)
    lost.add_argument("--forgotten", metavar="F.json",
                      help="JSON list of the facts the model lost, each [s, r, o] or a fact index")
    lost.add_argument("--known-after", metavar="KNOWN_B.json",
                      help="what the model knows after unlearning ('deepunlearn probe -o' of it, or a JSON list of "
                           "facts): the forgotten facts are K minus these")
    sets_options(p)
    p.add_argument("--tie", choices=("accuracy", "first"), default="accuracy",
                   help="among sets of maximal recall, U* is the one of best accuracy (default) or the first "
                        "in the sets' order (the reference's argmax; with --sets release, its stored order)")
    add_json(p)
    _quiet(p)
    p.set_defaults(handler=_recall)

    p = rsub.add_parser("explain", help="derivations and minimal sets of a target, as text and a figure")
    common(p)
    sets_options(p)
    p.add_argument("-o", "--output", default=None, metavar="FIG.png",
                   help="draw the figure to this file; the suffix picks the format (.png, .svg, .pdf, ...; "
                        "no suffix: .png is added)")
    p.add_argument("--depth", type=nonneg_int, default=2, help="levels of derivations to expand (default 2)")
    p.add_argument("--max-groundings", type=positive_int, default=12, help="groundings shown per fact (default 12)")
    p.add_argument("--max-sets", type=positive_int, default=4, help="minimal sets drawn in the figure (default 4)")
    p.add_argument("--after", default=None, metavar="KNOWN_B.json",
                   help="what a model knows after unlearning ('deepunlearn probe -o' of it, or a JSON list of facts): "
                        "say whether the target is still derivable from it and show the derivation that survives, "
                        "rule by rule (the target need not be known there)")
    add_force(p)
    add_json(p)
    _quiet(p)
    p.set_defaults(handler=_explain)

    from .compose import register as register_compose

    register_compose(rsub, common, _load)

    from .mine import register as register_mine

    register_mine(rsub)

    p = rsub.add_parser("show", help="read a rule set and print it as Datalog, with warnings")
    p.add_argument("rules", help="rule set name or rule file")
    p.add_argument("--kb", default=None, help="also check the rules against this KB (unknown relations)")
    add_json(p)
    p.set_defaults(handler=_show)


# ---------------------------------------------------------------------------------------- helpers
def _load(args):
    from ...kg.io import load_kb
    from ...kg.refs import read_fact_list
    from ..load import load_rules

    kb = load_kb(args.kb, flag="--kb")
    rules = load_rules(args.rules if args.rules is not None else kb.metadata.get("rules", "family"))
    warnings = rules.check(kb)
    _print_warnings(args, kb, rules, warnings)
    known = read_fact_list(kb, args.known, flag="--known", key="known") if args.known else None
    return kb, rules, known, warnings


def _print_warnings(args, kb, rules, warnings: list[str]) -> None:
    """Warnings on stderr, less those about relations the KB's metadata acknowledges (the user
    was told at import) and all of them with ``--quiet``."""
    from ...kg.edu_relat import acknowledged_relations

    if getattr(args, "quiet", False):
        return
    told = [f"relation {r!r} " for r in acknowledged_relations(kb) if r in rules.unknown_relations(kb.relations)]
    for w in warnings:
        if not any(t in w for t in told):
            print(f"warning: {w}", file=sys.stderr)


def _targets(args, kb) -> list[int]:
    """``--target``: fact ids; errors name the flag and the KB file."""
    from ...kg.refs import resolve_target

    return resolve_target(kb, args.target, kb_file=args.kb, flag="--target")


def _evaluator(args, kb, rules, known):
    from ...cli import CLIError
    from ..metrics import Evaluator
    from ..stored import stored_sets

    if args.seeds is not None and args.seeds < 1:
        raise CLIError(f"--seeds must be at least 1, got {args.seeds}")
    spec, stored = args.sets, None
    if spec == "exact" and args.seeds is not None:
        raise CLIError("--sets exact enumerates all minimal sets: --seeds applies to --sets mdus, release or DIR")
    if spec == "mdus" and args.exact:
        raise CLIError("--sets mdus and --exact contradict each other")
    if spec in (None, "exact", "mdus"):
        exact = spec != "mdus" and args.seeds is None
    else:
        if spec != "release" and not Path(spec).is_dir():
            raise CLIError(f"--sets {spec}: expected exact, mdus, release or a folder of <row>.pt minimal-set files")
        stored = stored_sets(kb, spec)
        exact = bool(args.exact)  # a target without stored sets: MDUS (the reference's fallback) unless --exact
    return Evaluator(kb, rules=rules, known=known, exact=exact, seeds=args.seeds or 100,
                     time_budget=args.time_budget, progress=len(kb.facts) > 200_000, sets=stored,
                     tie=getattr(args, "tie", "accuracy"), max_groundings=args.grounding_budget)


def _fact(kb, f: int) -> list[str]:
    return list(kb.facts[f])


# ---------------------------------------------------------------------------------------- handlers
def _closure(args) -> int:
    from ...cli import emit
    from ..closure import closure

    if args.output is not None:  # -o "" is one line, not "no output"
        from ...output_kinds import CLOSURE_DOC
        from ...outputs import check_output

        check_output(args.output, force=args.force, ours=CLOSURE_DOC, what="a closure of 'rules closure'",
                     inputs={"--kb": args.kb, "--rules": args.rules, "--known": args.known})
    kb, rules, known, warnings = _load(args)
    t0 = time.perf_counter()
    c = closure(kb, rules, engine=args.engine, known=known, progress=len(kb.facts) > 200_000,
                max_groundings=args.grounding_budget, time_budget=args.time_budget)
    out = {**c.to_dict(), "rules": rules.name, "kb_facts": len(kb.facts),
           "warnings": warnings, "seconds": round(time.perf_counter() - t0, 4)}
    if args.output is not None:
        from ...errors import atomic_write_text

        out["output"] = str(atomic_write_text(args.output, json.dumps([list(f) for f in c.facts], ensure_ascii=False) + "\n"))

    def text() -> str:
        lines = [f"{args.kb} with rules {rules.name!r} ({args.engine} engine, {out['seconds']:.3f} s):",
                 f"  K's facts the rules use  {out['facts']}",
                 f"  closure                  {out['closure']}",
                 f"  derived                  {out['derived']}",
                 f"  passing through          {out['passthrough']} (relations no rule uses)"]
        if "groundings" in out:
            lines.append(f"  rule groundings          {out['groundings']} in {out['rounds']} rounds")
        if out["derived_by_relation"]:
            lines.append("  derived by relation: " + ", ".join(f"{r} {n}" for r, n in out["derived_by_relation"].items()))
        return "\n".join(lines)

    emit(args, out, text)
    return 0


def _sets_obj(ev, t: int) -> dict:
    ms = ev.minimal_sets(t)
    return {"target": _fact(ev.kb, t), "target_id": t, "exact": ms.exact, "method": ms.method,
            "sets": [[_fact(ev.kb, f) for f in sorted(s)] for s in ms.sets],
            "set_ids": [sorted(s) for s in ms.sets], "seconds": round(ms.seconds, 4)}


def _sets_text(kb, objs: list[dict]) -> str:
    lines = []
    for o in objs:
        kind = "exact" if o["exact"] else ("stored, approximate" if o["method"] == "stored" else f"approximate, {o['method']}")
        s, r, ob = o["target"]
        lines.append(f"[{o['target_id']}] ({s}, {r}, {ob}): {len(o['sets'])} minimal sets ({kind})")
        for i, ids in enumerate(o["set_ids"], start=1):
            lines.append(f"  {i}. " + "; ".join(f"[{f}] {kb.facts[f][0]} {kb.facts[f][1]} {kb.facts[f][2]}" for f in ids))
    return "\n".join(lines)


def _sets(args) -> int:
    from ...cli import emit

    kb, rules, known, warnings = _load(args)
    targets = _targets(args, kb)
    ev = _evaluator(args, kb, rules, known)
    if args.target == "all":
        from tqdm import tqdm

        objs = [_sets_obj(ev, t) for t in tqdm(targets, desc="minimal sets", unit=" target", file=sys.stderr,
                                                  disable=len(targets) < 20, leave=False)]
        out = {"targets": objs, "exact": all(o["exact"] for o in objs), "total_sets": sum(len(o["sets"]) for o in objs),
               "rules": rules.name}
    else:
        objs = [_sets_obj(ev, targets[0])]
        out = {**objs[0], "rules": rules.name}
    emit(args, out, lambda: _sets_text(kb, objs))
    return 0


def _recall(args) -> int:
    import numpy as np

    from ...cli import CLIError, emit
    from ...errors import load_json
    from ...kg.refs import FactRefError, fact_list

    kb, rules, known, warnings = _load(args)
    if args.target == "all":
        raise CLIError("rules recall: --target must be one fact (the one the forgotten facts were unlearned for)")
    t = _targets(args, kb)[0]
    if args.known_after is not None:
        from ..recall_inputs import read_known_after

        known_after = read_known_after(kb, args.known_after)
        doc = None
        forgotten = sorted(set(known if known is not None else range(len(kb.facts))) - set(known_after))
    else:
        from ..recall_inputs import refuse_probe_output

        doc = load_json(args.forgotten, flag="--forgotten", error=FactRefError)
        refuse_probe_output(doc, args.forgotten)
        forgotten = fact_list(kb, doc, path=args.forgotten, flag="--forgotten", key="forgotten")
    if known is None and isinstance(doc, dict) and isinstance(doc.get("forgotten"), list) \
            and isinstance(doc.get("fact_ids"), list):
        # `unlearn -o` records K (what the model knew before) beside the forgotten facts: the
        # point's recall and accuracy are over that K, not over the whole KB.
        known = fact_list(kb, doc, path=args.forgotten, flag="--forgotten", key="fact_ids")
        if not args.quiet:
            print(f"deepunlearn rules recall: K = the {len(known)} facts {args.forgotten} records as known "
                  "before unlearning (--known overrides)", file=sys.stderr)
    ev = _evaluator(args, kb, rules, known)
    e = ev.evaluate(t, forgotten)
    from ..recall_inputs import deep_after

    # what the model still knows: K_B as probed, else K minus the forgotten facts
    still = known_after if args.known_after is not None else sorted({int(i) for i in np.flatnonzero(ev.known)} - set(forgotten))
    deep = deep_after(kb, rules, still, t, args.grounding_budget)
    out = {"recall": e.recall, "accuracy": e.accuracy, "exact": e.exact, "set": [_fact(kb, f) for f in e.set],
           "set_ids": e.set, "target": _fact(kb, t), "target_id": t, "target_forgotten": e.target_forgotten,
           **e.group_fields(),
           "accuracy_groups": e.accuracy_groups, "accuracy_rule": e.accuracy_rule, "accuracy_other": e.accuracy_other,
           "minimal_sets": e.n_sets, "forgotten": len(set(forgotten)), "rules": rules.name,
           "sets_source": ev.minimal_sets(t).method, "tie": ev.tie, **deep}

    def text() -> str:
        kind = "exact" if e.exact else ("stored" if out["sets_source"] == "stored" else "approximate")
        return "\n".join([
            f"target [{t}] {kb.facts[t]}: recall {e.recall:.4f} over {e.n_sets} minimal sets ({kind}), "
            f"target itself forgotten: {e.target_forgotten}, deep: {'yes' if deep['deep'] else 'no'}"
            + (" (superficial: the rules still derive it)" if deep["superficial"] else ""),
            f"  accuracy {e.accuracy:.4f}  ("
            + ", ".join(f"{g} {a:.4f}" for g, a in e.accuracy_groups.items()) + "; "
            f"rule relations {e.accuracy_rule:.4f}, other {e.accuracy_other:.4f})",
            f"  best minimal set U* (ties: {ev.tie}): " + "; ".join(f"[{f}] {' '.join(kb.facts[f])}" for f in e.set)]
            + (["  surviving derivation:", deep["surviving_text"]] if deep["superficial"] else []))

    emit(args, out, text)
    return 0


def _explain(args) -> int:
    from ...cli import CLIError, emit
    from ...kg.figures import figure_path
    from ..explain import draw_explanation, explain, explain_text

    if args.output:  # a folder, FIG.txt or another file is refused before any work
        from ...outputs import check_output, figure_file

        check_output(figure_path(args.output, flag="-o")[0], force=args.force, ours=figure_file, what="a figure this tool drew")
    kb, rules, known, warnings = _load(args)
    if args.target == "all":
        raise CLIError("rules explain: --target must be one fact")
    t = _targets(args, kb)[0]
    if args.after is not None:
        from .explain import explain_after

        return explain_after(args, kb, rules, t)
    ev = _evaluator(args, kb, rules, known)
    ex = explain(ev.graph, t, ev.minimal_sets(t), depth=args.depth, max_groundings=args.max_groundings)
    out = {**ex.to_dict(), "rules": rules.name}
    if args.output:
        out["figure"] = str(draw_explanation(ex, args.output, max_sets=args.max_sets))
    emit(args, out, lambda: explain_text(ex) + (f"\nfigure: {out['figure']}" if args.output else ""))
    return 0


def _show(args) -> int:
    from ...cli import emit
    from ..load import load_rules

    rules = load_rules(args.rules)
    warnings = list(rules.warnings)  # found when read (cartesian products); with --kb, check() repeats them
    if args.kb:
        from ...kg.io import load_kb

        warnings = rules.check(load_kb(args.kb, flag="--kb"))
    out = {"name": rules.name, "rules": len(rules), "relations": sorted(rules.relations),
           "attributes": sorted(rules.attributes), "warnings": warnings, "datalog": rules.to_datalog()}
    emit(args, out, lambda: rules.to_datalog() + "".join(f"\n% warning: {w}" for w in warnings))
    return 0
