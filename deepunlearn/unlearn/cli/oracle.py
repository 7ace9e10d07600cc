"""``deepunlearn oracle``: exact unlearning of a target, the reference verdicts are checked against.

``deepunlearn oracle --model A --kb KB --target T [--target T2 ...] [--set smallest|IDS] [--seed S]
[--cache-dir D] -o DIR [--json]`` retrains A's own recipe (base, training recipe, seed, read from
A's ``deepunlearn.json``) on KB minus a minimal deep-unlearning set of each target (several
targets: the union of their sets, so one oracle serves a batch) and writes the model to DIR
with an ``oracle`` record (targets, sets, recipe, seed) in its ``deepunlearn.json``
(:mod:`deepunlearn.unlearn.oracle`). Oracles are cached (``--cache-dir``, default
``$DEEPUNLEARN_CACHE/oracle``): one already trained is copied, not retrained ("cached"). Training
writes into the cache atomically, so an interrupted run leaves nothing half-written and a rerun
trains again. ``evaluate --oracle DIR`` judges unlearned models relative to it.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    from ...cli import add_force, add_json, add_threads, nonneg_int

    p = sub.add_parser(
        "oracle", help="exact unlearning: retrain a model's recipe without a target's minimal deep-unlearning set",
        description="Retrain the model's own recipe (base, training recipe, seed from its deepunlearn.json) on the "
                    "KB minus a minimal deep-unlearning set of each target: by construction the rules cannot derive "
                    "the targets from what it was taught. The oracle is cached and written to -o with a record of "
                    "its targets, sets, recipe and seed; evaluate --oracle judges unlearned models relative to it.")
    p.add_argument("--model", required=True, metavar="A",
                   help="the original model: a checkpoint folder deepunlearn finetune wrote (its recipe is retrained)")
    p.add_argument("--kb", required=True, help="KB file (the one the model was finetuned on)")
    p.add_argument("--target", required=True, action="append", metavar="T",
                   help="fact index or 'subject|relation|object'; repeat for a batch (the union of their sets is "
                        "excluded)")
    p.add_argument("--set", default="smallest", metavar="smallest|IDS", dest="set",
                   help="the facts to exclude: 'smallest' (default: each target's minimal set with the fewest facts, "
                        "ties by the fewest other facts sharing an entity, then the smallest ids), comma-separated "
                        "fact ids or 'S|r|O' references, or a JSON file of them; an explicit set must make every "
                        "target underivable")
    p.add_argument("--seed", type=nonneg_int, default=None,
                   help="train with this seed instead of the model's (data order and, for a tiny model, initial "
                        "weights): a second oracle to judge against the first")
    p.add_argument("--rules", default=None, help="rule set name or rule file (default: the KB's, else family)")
    p.add_argument("--cache-dir", default=None,
                   help="oracle cache (default: $DEEPUNLEARN_CACHE/oracle or ~/.cache/deepunlearn/oracle)")
    p.add_argument("--device", default=None, help="cuda, cpu, ... (default: cuda when present)")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="folder to write the oracle to (replaced only once complete; a non-empty folder that is not "
                        "a model folder is refused without --force)")
    add_force(p, "-o")
    add_threads(p)
    add_json(p)
    p.set_defaults(handler=_oracle)


def _parse_set(kb, value: str, kb_file: str):
    """``smallest``, a JSON file of facts, or comma-separated ids / references -> 'smallest' or ids."""
    from ...cli import CLIError
    from ...kg.kb import KBError

    if value.strip() == "smallest":
        return "smallest"
    if Path(value).is_file():
        from ...kg.refs import read_fact_list

        return read_fact_list(kb, value, flag="--set", key="exclude")
    ids = []
    for item in (x.strip() for x in value.split(",")):
        if not item:
            continue
        try:
            ids.append(kb.resolve(int(item) if item.lstrip("-").isdigit() else item))
        except KBError as e:
            raise CLIError(f"--set {value!r}: {e} (KB {kb_file})", field="--set") from None
    if not ids:
        raise CLIError(f"--set {value!r}: expected 'smallest', fact ids or a JSON file of facts", field="--set")
    return ids


def _oracle(args: argparse.Namespace) -> int:
    from ...cli import CLIError, apply_threads, emit
    from ...kg.io import load_kb
    from ...outputs import check_output, model_dir
    from ..evaluate import resolve_target_ref
    from ..oracle import SetChoice, build_oracle, recipe_meta

    out_dir = check_output(args.output, force=args.force, folder=True, ours=model_dir,
                           what="a model folder (no config.json)")
    kb = load_kb(args.kb)
    targets = [resolve_target_ref(kb, t, args.kb) for t in args.target]
    chosen = _parse_set(kb, args.set, args.kb)
    recipe_meta(args.model)  # a model the tool cannot retrain is refused before anything else
    if args.cache_dir is not None and Path(args.cache_dir).exists() and not Path(args.cache_dir).is_dir():
        raise CLIError(f"--cache-dir {args.cache_dir}: exists and is not a folder", file=args.cache_dir,
                       field="--cache-dir")
    apply_threads(args)
    res = build_oracle(args.model, kb, targets, SetChoice(chosen=chosen, rules=args.rules), seed=args.seed,
                       cache_dir=args.cache_dir, out_dir=out_dir, progress=not args.json, device=args.device)
    out = {**res.to_json(), "model": args.model, "kb": str(args.kb)}

    def text() -> str:
        lines = [f"oracle of {args.model} for {len(res.targets)} target(s) "
                 f"({'cached' if res.cached else 'trained'}, {res.seconds:.1f}s, seed {res.record['seed']}): "
                 f"{res.folder}"]
        for t, s in res.sets.items():
            su, r, o = kb.facts[t]
            lines.append(f"  target [{t}] ({su}, {r}, {o}): excluded set of {len(s)} facts {s}")
        lines.append(f"  trained on {len(kb.facts) - len(res.record['removed'])} of {len(kb.facts)} facts"
                     + ("" if res.record["exact"] else " (minimal sets approximate: MDUS)"))
        return "\n".join(lines)

    emit(args, out, text)
    return 0
