"""``deepunlearn rules mine``: Horn rules mined from a KB with AMIE's measures (:mod:`..mine`).

    deepunlearn rules mine --kb KB -o mined.dl [--max-body 2] [--min-head-coverage 0.01]
        [--min-pca-confidence 0.1] [--min-std-confidence 0] [--min-support 1] [--max-guards 2]
        [--head-relations R,..] [--exclude-relations R,..] [--no-skyline]
        [--grounding-budget N] [--time-budget S] [--force] [--json]

The file holds each rule followed by its measures comment; ``--rules mined.dl`` reads it in
every command. The confidence thresholds act here, at mine time: a rule set for deep unlearning
asks ``--min-std-confidence 1`` (no counter-example in the KB) or a PCA threshold near 1.
"""

from __future__ import annotations

import argparse
import sys


def _mined_file(path) -> bool:
    """An empty file or a rule file written by this command (its marker in the header)."""
    from ...output_kinds import read_head

    head = read_head(path)
    return not head.strip() or b"by deepunlearn rules mine" in head


def register(rsub) -> None:
    """The ``mine`` action of the ``rules`` group."""
    from ...cli import add_force, add_json, int_at_least, number_in, positive_int
    from ..budget import DEFAULT_MAX_GROUNDINGS
    from ..mine import DEFAULT_MINE_SECONDS, MAX_BODY_ATOMS

    def body_int(text: str) -> int:
        v = positive_int(text)
        if v > MAX_BODY_ATOMS:
            raise argparse.ArgumentTypeError(f"expected an integer from 1 to {MAX_BODY_ATOMS}, got {text!r}")
        return v

    def seconds(text: str) -> float:
        return number_in(0, lo_open=True)(text)

    share = number_in(0, 1)

    def names(text: str) -> tuple[str, ...]:
        out = tuple(sorted({t.strip() for t in text.split(",") if t.strip()}))
        if not out:
            raise argparse.ArgumentTypeError(f"expected relation names separated by commas, got {text!r}")
        return out
    p = rsub.add_parser("mine", help="mine Horn rules from a KB with AMIE's measures (support, head coverage, "
                                     "standard and PCA confidence)",
                        description="Mine closed, connected Horn rules from --kb as AMIE does and write them, each "
                                    "followed by its measures in a comment line that the rule parser reads back, "
                                    "sorted by PCA confidence. Guards (attribute atoms such as male(X) on a head "
                                    "variable, and X != Y) specialise a rule as hand-written rule sets do.")
    p.add_argument("--kb", required=True, help="KB file")
    p.add_argument("-o", "--output", required=True, metavar="MINED.dl", help="rule file to write")
    p.add_argument("--max-body", type=body_int, default=2, metavar="N",
                   help=f"most relation atoms in a rule's body (1 to {MAX_BODY_ATOMS}; default 2, AMIE's default "
                        "rule length of 3 atoms with the head)")
    p.add_argument("--max-guards", type=int_at_least(0), default=2, metavar="N",
                   help="most guards (attribute atoms on head variables, X != Y) added to a rule (default 2; 0: "
                        "AMIE's plain language)")
    p.add_argument("--min-head-coverage", type=share, default=0.01, metavar="H",
                   help="least head coverage (support / facts of the head relation) of a rule, and the pruning "
                        "threshold of the search (default 0.01, AMIE's)")
    p.add_argument("--min-support", type=positive_int, default=1, metavar="N",
                   help="least support (head facts the rule predicts), besides --min-head-coverage (default 1)")
    p.add_argument("--min-pca-confidence", type=share, default=0.1, metavar="C",
                   help="least PCA confidence of a rule written (default 0.1, AMIE's)")
    p.add_argument("--min-std-confidence", type=share, default=0.0, metavar="C",
                   help="least standard confidence of a rule written (default 0; 1 keeps only rules without a "
                        "counter-example in the KB)")
    p.add_argument("--head-relations", type=names, default=None, metavar="R,R,...",
                   help="mine only rules whose head is one of these relations (default: every relation)")
    p.add_argument("--exclude-relations", type=names, default=(), metavar="R,R,...",
                   help="leave these relations out of heads and bodies (e.g. value relations such as "
                        "birthplace, whose shared values make large joins)")
    p.add_argument("--no-skyline", action="store_true",
                   help="also write rules whose PCA confidence is not above that of a more general rule "
                        "(AMIE writes only those that improve on it)")
    p.add_argument("--grounding-budget", type=positive_int, default=DEFAULT_MAX_GROUNDINGS, metavar="N",
                   help=f"most rows one join step may build (default {DEFAULT_MAX_GROUNDINGS:,}); a candidate rule "
                        "whose join would build more is skipped, counted and named on stderr")
    p.add_argument("--time-budget", type=seconds, default=DEFAULT_MINE_SECONDS, metavar="S",
                   help=f"stop with an error after S seconds (default {DEFAULT_MINE_SECONDS:g})")
    add_force(p)
    add_json(p)
    p.set_defaults(handler=_mine)


def _mine(args) -> int:
    from ...cli import emit
    from ...errors import atomic_write_text
    from ...kg.io import load_kb
    from ...outputs import check_output
    from ..mine import mine_rules

    check_output(args.output, force=args.force, ours=_mined_file, what="a rule file of 'rules mine'",
                 inputs={"--kb": args.kb})
    kb = load_kb(args.kb, flag="--kb")
    from pathlib import Path

    res = mine_rules(kb, name=Path(args.output).stem or "mined", max_body=args.max_body,
                     max_guards=args.max_guards, min_head_coverage=args.min_head_coverage,
                     min_support=args.min_support, min_pca_confidence=args.min_pca_confidence,
                     min_std_confidence=args.min_std_confidence, skyline=not args.no_skyline,
                     grounding_budget=args.grounding_budget, time_budget=args.time_budget,
                     head_relations=args.head_relations, exclude_relations=args.exclude_relations)
    out = atomic_write_text(args.output, res.to_datalog())
    if res.skipped and not args.json:
        print(f"warning: {len(res.skipped)} candidate rules skipped: their joins pass --grounding-budget "
              f"{args.grounding_budget:,} (first: {res.skipped[0]})", file=sys.stderr)
    obj = {"output": str(out), "kb": str(args.kb), **res.to_dict()}

    def text() -> str:
        lines = [f"wrote {out}: {len(res.rules)} rules mined from {args.kb} ({res.candidates} closed candidates "
                 f"measured, {res.seconds:.2f} s)"]
        for r in res.rules[:10]:
            m = r.measures or {}
            lines.append(f"  {m.get('pca_confidence', 0):.3f} {m.get('std_confidence', 0):.3f} "
                         f"{int(m.get('support', 0)):>6}  {r.to_datalog()}")
        if len(res.rules) > 10:
            lines.append(f"  ... {len(res.rules) - 10} more (PCA conf., std conf., support, rule)")
        return "\n".join(lines)

    emit(args, obj, text)
    return 0
