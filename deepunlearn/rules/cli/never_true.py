"""``deepunlearn data never-true``: calibration negatives of a real-world KB
(:func:`deepunlearn.rules.never_true.make_never_true`); joins the kg layer's ``data`` group."""

from __future__ import annotations

from ..never_true import make_never_true


def register(sub) -> None:
    """``deepunlearn data never-true --kb KB -o NEG.json [--seed S]`` (joins the ``data`` group)."""
    from ...cli import add_force, add_json, seed_int
    from ...kg.cli import data_subcommands

    dsub = data_subcommands(sub)
    p = dsub.add_parser("never-true", help="a KB's facts with a wrong object of the same type (calibration negatives "
                                           "for a real-world KB)",
                        description="For every fact (s, r, o) of --kb one fact (s, r, o') with o' another object of "
                                    "r that the KB's rules do not make true: never-true facts for 'probe --calibrate' "
                                    "where 'data holdout' cannot draw new entities (a real-world domain such as geo).")
    p.add_argument("--kb", required=True, help="KB file")
    p.add_argument("--seed", type=seed_int, default=0, help="random seed (default 0)")
    p.add_argument("-o", "--output", required=True, metavar="NEG.json", help="KB file to write")
    add_force(p)
    add_json(p)
    p.set_defaults(handler=_never_true)


def _never_true(args) -> int:
    from ...cli import emit
    from ...kg.io import load_kb, save_kb
    from ...outputs import check_output, kb_file

    check_output(args.output, force=args.force, ours=kb_file, what="a KB file", inputs={"--kb": args.kb})
    kb = load_kb(args.kb, flag="--kb")
    neg = make_never_true(kb, args.seed)
    out = save_kb(neg, args.output)
    emit(args, {"output": str(out), "of": str(args.kb), "seed": args.seed, "facts": len(neg.facts)},
         lambda: f"wrote {out}: {len(neg.facts)} never-true facts for the {len(kb.facts)} of {args.kb} "
                 f"(seed {args.seed})")
    return 0
