"""``deepunlearn rules compose``: the compose questions of a KB under its rules (torch-free).

    deepunlearn rules compose --kb KB [--rules R] [--known K.json] [-o COMPOSE.json] [--json]

Writes one question per grounding that derives a KB fact from other KB facts through a chain of
two or more atoms (:mod:`deepunlearn.kg.compose`), and says which rules have none and why.
``deepunlearn probe --mode compose --compose COMPOSE.json`` asks them.
"""

from __future__ import annotations

import argparse
import json


def register(rsub, common, load) -> None:
    """The ``compose`` action: ``common`` adds --kb/--rules/--known, ``load`` reads them."""
    from ...cli import add_force, add_json

    p = rsub.add_parser("compose", help="multi-hop questions composing rule bodies, for probe --mode compose")
    common(p, target=False)
    p.add_argument("-o", "--output", default=None, metavar="COMPOSE.json",
                   help="write the questions (with each one's derived fact, rule and body facts) to this file")
    p.add_argument("--show", type=int, default=3, metavar="N", help="questions printed per rule (default 3)")
    add_force(p)
    add_json(p)
    p.set_defaults(handler=lambda args: _compose(args, load))


def _compose(args: argparse.Namespace, load) -> int:
    from ...cli import emit
    from ...kg.compose import ComposeError
    from ..compose import compose_set

    if args.output is not None:
        from ...output_kinds import COMPOSE_DOC
        from ...outputs import check_output

        check_output(args.output, force=args.force, ours=COMPOSE_DOC, what="a question set of 'rules compose'",
                     inputs={"--kb": args.kb, "--rules": args.rules, "--known": getattr(args, "known", None)})
    kb, rules, known, _ = load(args)
    try:
        cs = compose_set(kb, rules, known=known, max_groundings=args.grounding_budget)
    except ComposeError as e:
        raise ComposeError(f"--kb {args.kb}: {e}", field="--kb") from None
    by_rule: dict[str, int] = {}
    for q in cs.questions:
        by_rule[q.rule] = by_rule.get(q.rule, 0) + 1
    out = {"kb": str(args.kb), "rules": rules.name, "questions": len(cs.questions),
           "derived_facts": len(cs.fact_ids()), "by_rule": by_rule, "skipped": cs.skipped}
    if args.output:
        from ...errors import atomic_write_text

        doc = {**cs.to_json(), "kb": str(args.kb), "rule_set": rules.name}
        out["output"] = str(atomic_write_text(args.output, json.dumps(doc, ensure_ascii=False, indent=1) + "\n"))

    def text() -> str:
        lines = [f"{len(cs.questions)} compose questions over {len(cs.fact_ids())} derived facts ({rules.name})"]
        for rule, n in by_rule.items():
            lines.append(f"  {rule}  [{n}]")
            lines += [f"    {q.text} -> {q.answer}" for q in cs.questions if q.rule == rule][:max(args.show, 0)]
        lines += [f"  no question: {rule}  ({why})" for rule, why in cs.skipped.items()]
        return "\n".join(lines + ([f"written to {out['output']}"] if args.output else []))

    emit(args, out, text)
    return 0
