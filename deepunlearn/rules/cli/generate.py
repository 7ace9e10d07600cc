"""``deepunlearn data generate --domain family|org|PATH``: a KB of any domain.

``--domain family`` (the default) runs the family generator (:func:`deepunlearn.kg.domains.family.generate.
generate_family`: generations, marriages, names), byte for byte as before; any other domain runs
the declarative generator (:func:`.generate.generate_domain`), which needs the rules' closure: so
this command lives in the rules layer and joins the kg layer's ``data`` group
(:func:`deepunlearn.kg.cli.data_subcommands`).
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from ...cli import add_force, add_json, int_at_least, nonneg_int, number_in, positive_int, seed_int
    from ...kg.cli import data_subcommands

    dsub = data_subcommands(sub)
    p = dsub.add_parser(
        "generate", help="generate a KB of a domain (family: paper section 4; org; geo: real countries; a domain folder)",
        description="--domain family (default) grows families over generations as EDU-RELAT does; any other "
                    "domain (a built-in name, a domain folder or an entry-point name) samples its shaped "
                    "relations and attributes, computes the closure of its rules.dl and stores every sampled "
                    "fact plus a share of the derived ones. The same seed and options give the same file, "
                    "byte for byte.")
    dsub._choices_actions.insert(0, dsub._choices_actions.pop())  # listed first in 'data -h', as before
    p.add_argument("--domain", default="family", metavar="NAME|PATH",
                   help="family (default), org, geo, another domain name or a domain folder (domain.toml + rules.dl)")
    p.add_argument("--people", type=int_at_least(2), default=None,
                   help="entities of the domain's first type, at least 2 (default: 100 for family, as EDU-RELAT; "
                        "else the domain's count)")
    p.add_argument("--countries", type=positive_int, default=None, metavar="N",
                   help="a domain whose first entity type is country (geo): the N most populous countries "
                        "(--people under its own name; geo default 40)")
    p.add_argument("--seed", type=seed_int, default=0,
                   help="random seed (default 0); the same seed and options give the same file, byte for byte")
    p.add_argument("--stored-derived", type=_share_or_release, default=None, metavar="F|release",
                   help="not family: share in [0, 1] of the derived facts the KB stores, or 'release': as many as "
                        "make stored / closure = 400 / 562, as the release (default: the domain's stored_derived, "
                        "org 0.3; else release)")
    p.add_argument("--stored-share", type=number_in(0, 1, lo_open=True), default=None, metavar="S",
                   help="family only: share in (0, 1] of true family relations stored in the KB (the rest is left "
                        "to the rules; default: the generator's, which matches the release's mix)")
    p.add_argument("--targets-per-relation", type=nonneg_int, default=5, metavar="N",
                   help="evaluation targets drawn per family relation (family) or per relation the rules use "
                        "(other domains); default 5; 0: no targets")
    p.add_argument("--canaries", type=positive_int, default=None, metavar="C",
                   help="family only: also add C canary facts (person, code, <random 10-character string>) for C "
                        "distinct people: out-of-distribution targets outside every rule (Baluta et al.), with 999 "
                        "reference codes for exposure")
    p.add_argument("--repeat", type=positive_int, default=None, metavar="R",
                   help="with --canaries: how many times finetuning shows each canary per epoch (default 1; the "
                        "issue compares 1 and 10)")
    p.add_argument("--names", choices=("inherited", "independent"), default=None,
                   help="family only: inherited (default, the paper's: a child takes the father's surname) or "
                        "independent (every surname drawn on its own: names carry no kinship); recorded in the KB")
    p.add_argument("--questions", choices=("relation", "entity", "person"), default=None,
                   help="family only: relation (default, the paper's \"Who is {o2} to {o1}?\" -> \"father\"), "
                        "entity (father, mother, husband, wife asked \"Who is {o1}'s father?\" -> the person) or "
                        "person (every relation asked for the person, \"Who is {o1}'s child?\"; the other right "
                        "answers of a question are set aside when one is probed); recorded in the KB, so finetune "
                        "and probe ask it")
    p.add_argument("--other-answers", choices=("wrong", "aside"), default=None,
                   help="how a question with several right answers (\"Which country borders X?\") is probed: "
                        "wrong (default; another right answer counts as wrong) or aside (each right answer is "
                        "probed with the others set aside: filtered greedy answer and rank); recorded in the KB "
                        "(--questions person sets aside)")
    p.add_argument("-o", "--output", required=True, help="KB file to write (missing folders are created)")
    add_force(p)
    add_json(p)
    p.set_defaults(handler=_generate, _usage_error=p.error)


def _share_or_release(text: str) -> float | str:
    """``--stored-derived``: ``release`` or a number in [0, 1]."""
    from ...cli import fraction

    return "release" if text.strip() == "release" else fraction(text)


def _family(args):
    from ...kg.domains.family.generate import FamilyParams, generate_family

    params = FamilyParams()
    if args.stored_share is not None:
        params = params.model_copy(update={"stored_share": args.stored_share})
    params = params.model_copy(update={"targets_per_relation": args.targets_per_relation,
                                       "names": args.names or "inherited"})
    if args.repeat is not None and args.canaries is None:
        args._usage_error("argument --repeat: only with --canaries")  # exits 2
    people = 100 if args.people is None else args.people
    if args.canaries is not None and args.canaries > people:
        args._usage_error(f"argument --canaries: {args.canaries} canaries need as many people "
                          f"(--people is {people})")
    kb = generate_family(people, seed=args.seed, params=params, questions=args.questions or "relation")
    if args.canaries is not None:
        from ...kg.canaries import add_canaries

        kb = add_canaries(kb, args.canaries, repeat=args.repeat or 1, seed=args.seed)
    return kb


def _other_answers(kb, args) -> None:
    if args.other_answers is not None:
        from ...kg.other_answers import set_other_answers

        set_other_answers(kb, args.other_answers)


def _check_sizes(args) -> None:
    """``--people``, ``--canaries``, ``--repeat`` bounded: a billion people or repeats would fill
    memory long before any file is written."""
    from ...limits import MAX_GENERATE_PEOPLE, MAX_REPEAT, check_at_most

    for flag, value, bound, unit in (("--people", args.people, MAX_GENERATE_PEOPLE, "people"),
                                     ("--canaries", args.canaries, MAX_GENERATE_PEOPLE, "canaries"),
                                     ("--repeat", args.repeat, MAX_REPEAT, "repeats")):
        if value is not None:
            check_at_most(value, bound, where=f"{flag} {value}", unit=unit, field=flag)


def _check_domain_flags(args, family: bool) -> None:
    """``--countries`` (a country domain's ``--people``) and the flags of one kind of domain only."""
    from ...limits import MAX_GENERATE_PEOPLE, check_at_most

    if args.countries is not None:  # --people under the name a country domain gives its first type
        from ...kg.domain import load_domain

        if args.people is not None:
            args._usage_error("argument --countries: give --countries or --people, not both")
        if family or load_domain(args.domain).people_type != "country":
            args._usage_error("argument --countries: only with a domain whose first entity type is country (geo)")
        check_at_most(args.countries, MAX_GENERATE_PEOPLE, where=f"--countries {args.countries}", unit="countries",
                      field="--countries")
        args.people = args.countries
    for flag, value, only in (("--stored-share", args.stored_share, True), ("--canaries", args.canaries, True),
                              ("--repeat", args.repeat, True), ("--names", args.names, True),
                              ("--questions", args.questions, True), ("--stored-derived", args.stored_derived, False)):
        if value is not None and family != only:
            args._usage_error(f"argument {flag}: only with --domain family" if only
                              else f"argument {flag}: not with --domain family (its generator stores by "
                                   "--stored-share)")


def _generate_family(args) -> int:
    """``--domain family``: the family generator, canaries, then the KB written."""
    from ...cli import emit
    from ...kg.cli import summary_text, summary
    from ...kg.io import save_kb

    kb = _family(args)
    _other_answers(kb, args)
    out = save_kb(kb, args.output)
    s = summary(kb)
    extra = {"canaries": len(kb.metadata["canaries"]["facts"])} if "canaries" in kb.metadata else {}
    emit(args, {"output": str(out), "domain": "family", **{k: s[k] for k in ("people", "facts", "relations")},
                "targets": len(kb.targets), **extra},
         lambda: f"wrote {out}\n" + summary_text(kb, str(out)))
    return 0


def _generate_domain(args) -> int:
    """Any other domain: sampled facts, the closure, a share of the derived facts stored; its
    warnings and deepest deduction reported."""
    from ...cli import emit
    from ...kg.io import save_kb
    from ...kg.domain import load_domain
    from ...kg.domain_check import plural
    from ..depths import deepest_chain, derivation_depths
    from ..domain_check import name_pool_warnings, relation_warnings
    from .check_domain import print_warnings
    from ..generate import generate_domain
    from ..graph import derivation_graph

    dom = load_domain(args.domain)
    warned = print_warnings(name_pool_warnings(dom, args.people))  # before sampling, which a too small pool stops
    kb = generate_domain(dom, args.people, args.seed, stored_derived=args.stored_derived,
                         targets_per_relation=args.targets_per_relation)
    graph = derivation_graph(kb, kb.metadata["rules"])  # the KB as stored: what the rules commands see
    warned += print_warnings(relation_warnings(dom, graph))
    depths = derivation_depths(graph)
    chain = deepest_chain(graph, depths)
    _other_answers(kb, args)
    out = save_kb(kb, args.output)
    st = kb.metadata["stats"]
    obj = {"output": str(out), "domain": kb.metadata["domain"], "rules": kb.metadata["rules"],
           "people": kb.metadata["people"], "entities": len(kb.entities), "facts": len(kb.facts),
           "relations": kb.relation_counts(), "sampled": st["sampled"], "derived": st["derived"],
           "stored_derived": st["stored_derived"], "closure": st["closure"], "passthrough": st["passthrough"],
           "targets": len(kb.targets), "deepest": int(depths.max(initial=0)), "deepest_chain": chain,
           "deepest_from_sampled": st["depth"], **({"warnings": warned} if warned else {})}

    def text() -> str:
        first = plural(dom.people_type, obj["people"])
        lines = [f"wrote {out}: {obj['domain']} domain, {obj['people']} {first} ({obj['entities']} entities in all), "
                 f"{obj['facts']} facts, {obj['targets']} targets",
                 f"  sampled {obj['sampled']} facts ({obj['passthrough']} no rule uses); the rules derive "
                 f"{obj['derived']} more, {obj['stored_derived']} of them stored; closure {obj['closure']} "
                 f"(over the relations the rules use)",
                 "  relations: " + ", ".join(f"{r} {n}" for r, n in obj["relations"].items()),
                 f"  deepest deduction from the stored facts: {obj['deepest']} steps (from the sampled facts "
                 f"alone: {obj['deepest_from_sampled']})"]
        return "\n".join(lines + [f"    {c}" for c in chain])

    emit(args, obj, text)
    return 0


def _generate(args) -> int:
    from ...outputs import check_output, kb_file
    from ..generate import is_family

    _check_sizes(args)
    check_output(args.output, force=args.force, ours=kb_file, what="a KB file")
    family = is_family(args.domain)
    _check_domain_flags(args, family)
    return _generate_family(args) if family else _generate_domain(args)
