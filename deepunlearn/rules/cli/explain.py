"""``deepunlearn rules explain --after``: whether a target is still derivable from what the model
knows after unlearning (:func:`deepunlearn.rules.recall_inputs.deep_after`)."""

from __future__ import annotations


def explain_after(args, kb, rules, t: int) -> int:
    """``rules explain --after``: is the target still derivable from what the model knows after
    unlearning, and by which facts, rule by rule."""
    from ...cli import CLIError, emit
    from ..recall_inputs import deep_after, read_known_after

    if args.output:
        raise CLIError("rules explain: -o draws the derivations from K; with --after the surviving derivation is "
                       "printed (or given with --json)", field="-o")
    after = read_known_after(kb, args.after, flag="--after")
    d = deep_after(kb, rules, after, t, args.grounding_budget)
    known_t = t in set(after)
    out = {"target": list(kb.facts[t]), "target_id": t, "known_after": len(after), "target_known": known_t,
           "rules": rules.name, **d}
    verdict = ("the model still knows the target" if known_t else
               "superficial: the rules still derive it from what the model knows" if d["superficial"] else
               "yes: the target is not derivable from what the model knows")
    emit(args, out, lambda: "\n".join(
        [f"target [{t}] {kb.facts[t]}: deep: {'yes' if d['deep'] else 'no'} ({verdict}; {len(after)} facts known)"]
        + (["  surviving derivation:", d["surviving_text"]] if d["superficial"] else [])))
    return 0
