"""``deepunlearn data check-domain NAME|DIR``: the warnings of :mod:`deepunlearn.kg.domain_check`
on a domain folder, before any KB is made from it (``data generate --domain`` prints them too).
It samples a KB to count the objects per subject of the derived relations, so it lives in the
rules layer."""

from __future__ import annotations

import sys


def register(sub) -> None:
    from ...cli import add_json, int_at_least
    from ...kg.cli import data_subcommands

    dsub = data_subcommands(sub)
    p = dsub.add_parser("check-domain", help="warn about a domain folder a model could not be fairly probed on",
                        description="One line per problem, naming domain.toml, the relation or entity type and the "
                                    "fix: a relation answered by its own name with a template no other relation "
                                    "shares (the same answer for every pair); a question asking for the one object "
                                    "of a relation whose subjects have several; name pools too small for the counts "
                                    "or for 'data holdout'. Exit 0 (1 with --strict when there are warnings).")
    p.add_argument("domain", metavar="NAME|DIR", help="a domain folder (domain.toml + rules.dl) or a domain's name")
    p.add_argument("--people", type=int_at_least(2), default=None,
                   help="entities of the domain's first type, as 'data generate --people' (default: its count)")
    p.add_argument("--strict", action="store_true", help="exit 1 when there is any warning")
    add_json(p)
    p.set_defaults(handler=_check)


def print_warnings(warnings) -> list[str]:
    """Print each warning on stderr as ``warning: FILE: KEY: ...``; the lines."""
    lines = [w.line() for w in warnings]
    for line in lines:
        print(f"warning: {line}", file=sys.stderr)
    return lines


def _check(args) -> int:
    from ...cli import emit
    from ...kg.domain import load_domain
    from ..domain_check import domain_warnings
    from ..generate import domain_rules

    from ...limits import MAX_GENERATE_PEOPLE, check_at_most

    if args.people is not None:  # it samples a KB of that size: a billion would fill memory
        check_at_most(args.people, MAX_GENERATE_PEOPLE, where=f"--people {args.people}", unit="entities",
                      field="--people")
    dom = load_domain(args.domain)
    domain_rules(dom)  # rules.dl read and checked against domain.toml: an error there is one line, exit 1
    warnings = domain_warnings(dom, people=args.people)
    obj = {"domain": dom.name, "folder": str(dom.folder), "warnings": [w.to_json() | {"line": w.line()}
                                                                      for w in warnings]}
    emit(args, obj, lambda: "\n".join([f"warning: {w.line()}" for w in warnings]
                                      + [f"{dom.folder}: {len(warnings) or 'no'} warning{'s' * (len(warnings) != 1)}"]))
    return 1 if args.strict and warnings else 0
