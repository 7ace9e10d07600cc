"""``deepunlearn data import-triples FILE --domain NAME|DIR -o KB.json`` and ``data export --format tsv``.

The import (:mod:`deepunlearn.kg.triples`) checks triples against a domain: which relations are
symmetric comes from the domain's ``rules.dl`` (``r(Y, X) :- r(X, Y).``), so this command lives in
the rules layer and joins the kg layer's ``data`` group (:func:`deepunlearn.kg.cli.data_subcommands`),
as ``data generate`` does. The TSV export writes what the import reads, so a KB exported and
imported again with its domain has the same entities, facts, targets and templates.
"""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    from ...cli import add_force, add_json, positive_int
    from ...kg.cli import data_subcommands
    from ...kg.triples import FORMATS

    dsub = data_subcommands(sub)
    p = dsub.add_parser(
        "import-triples", help="import a knowledge graph given as triples (TSV, CSV, JSON lines) into a domain",
        description="Rows are subject, relation, object, optionally split (train, test, unlearn: unlearn facts "
                    "become targets) and aliases (other names of the subject, separated by |); a TSV or CSV may "
                    "open with a header naming these columns. Relations, entity types, templates and rules come "
                    "from --domain. Every problem is listed with its file and line (exit 1, nothing written): an "
                    "unknown relation, an entity of the wrong type, a duplicate, a fact of a symmetric relation "
                    "stored one way only. --repair drops duplicates and adds the missing reverse facts, and says "
                    "so.")
    p.add_argument("file", metavar="FILE", help="triples file (.tsv, .csv, .jsonl; else --format)")
    p.add_argument("--domain", required=True, metavar="NAME|DIR",
                   help="the domain the triples belong to: a built-in name (family, org, geo, regions), a domain folder "
                        "(domain.toml + rules.dl) or an entry-point name")
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="tsv, csv or jsonl (default: from FILE's suffix; tsv when it says nothing)")
    p.add_argument("--repair", action="store_true",
                   help="drop duplicate facts and add the reverse of symmetric facts stored one way, listing each")
    p.add_argument("--max-problems", type=positive_int, default=20, metavar="N",
                   help="problems listed before the rest are counted (default 20)")
    p.add_argument("-o", "--output", required=True, metavar="KB.json", help="KB file to write (missing folders are "
                                                                            "created)")
    add_force(p)
    add_json(p)
    p.set_defaults(handler=_import)

    e = dsub.choices["export"]
    e.set_defaults(export_formats={**e.get_default("export_formats"), "tsv": _export},
                   export_suffixes={**(e.get_default("export_suffixes") or {}), ".tsv": "tsv"})


#: what --repair would do about a repairable problem it was not asked to repair
_WOULD = {"dropped": "--repair drops it", "added the reverse fact": "--repair adds the reverse fact"}


def _problem_lines(file: str, problems, *, done: bool = False) -> list[str]:
    return [f"{file}:{p.line}: {p.message}" + (f" ({p.repair if done else _WOULD.get(p.repair, p.repair)})"
                                               if p.repair else "") for p in problems]


def _import(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ...cli import emit
    from ...kg.cli import summary_text
    from ...kg.domain import load_domain
    from ...kg.io import save_kb
    from ...kg.triples import TriplesError, check_triples, read_triples, triples_format, triples_kb
    from ...outputs import check_output, kb_file
    from ..generate import domain_rules, is_builtin, symmetric_relations

    check_output(args.output, force=args.force, ours=kb_file, what="a KB file", inputs={"FILE": args.file})
    dom = load_domain(args.domain)
    symmetric = symmetric_relations(domain_rules(dom))
    fmt = triples_format(args.file, args.format)
    rows, unread = read_triples(args.file, fmt)
    checked = check_triples(rows, dom, symmetric, repair=args.repair)
    problems = sorted(unread + checked.problems, key=lambda p: p.line)
    if not rows and not problems:
        raise TriplesError(f"{args.file}: no triples (one subject, relation, object a line)", file=args.file)
    for line in _problem_lines(args.file, checked.repairs, done=True):
        print(f"repaired: {line}", file=sys.stderr)
    if problems:
        shown = _problem_lines(args.file, problems[:args.max_problems])
        for line in shown:
            print(line, file=sys.stderr)
        rest = len(problems) - len(shown)
        if rest:
            print(f"{args.file}: ... and {rest} more problems", file=sys.stderr)
        fixable = sum(p.repair is not None for p in problems)
        hint = f"; --repair fixes {fixable} of them (duplicates, one-way symmetric facts)" if fixable else ""
        raise TriplesError(f"{args.file}: {len(problems)} problem{'s' * (len(problems) != 1)} in the triples, "
                           f"nothing written{hint}", file=args.file)
    metadata = {"generator": "deepunlearn.kg.triples", "domain": dom.name,
                **({} if is_builtin(dom) else {"domain_folder": str(Path(dom.folder).resolve())}),
                "rules": dom.name if is_builtin(dom) else str(Path(dom.rules_path).resolve()),
                "source": str(args.file), "format": fmt,
                "repaired": {"dropped": sum(p.repair == "dropped" for p in checked.repairs),
                             "added": sum(p.repair != "dropped" for p in checked.repairs)}}
    kb = triples_kb(checked, dom, name=f"{dom.name}-{Path(args.file).stem}", metadata=metadata)
    out = save_kb(kb, args.output)
    rep = metadata["repaired"]
    obj = {"output": str(out), "domain": dom.name, "format": fmt, "rows": len(rows), "entities": len(kb.entities),
           "facts": len(kb.facts), "targets": len(kb.targets), "relations": kb.relation_counts(),
           "aliases": sum(len(a) for a in checked.aliases.values()), "alias_forms": len(kb.forms),
           "dropped": rep["dropped"], "added": rep["added"],
           "repairs": [{"line": p.line, "problem": p.message, "repair": p.repair} for p in checked.repairs]}

    def text() -> str:
        lines = [f"wrote {out}: {len(rows)} rows of {args.file} ({fmt}) into the {dom.name} domain"]
        if checked.repairs:
            lines.append(f"  repaired: dropped {rep['dropped']} duplicate facts, added {rep['added']} reverse facts "
                         "of symmetric relations")
        if obj["aliases"]:
            lines.append(f"  aliases: {obj['aliases']} (kept in the KB; {obj['alias_forms']} probe forms named "
                         "'alias')")
        return "\n".join(lines + [summary_text(kb, str(out))])

    emit(args, obj, text)
    return 0


def _tsv_file(p) -> bool:
    """An empty file or a TSV this command writes (its header)."""
    with open(p, "rb") as f:
        head = f.read(64)
    return not head or head.startswith(b"subject\trelation\tobject")


def _export(args: argparse.Namespace, kb_file: str) -> int:
    from ...cli import emit
    from ...errors import atomic_write_text
    from ...kg.io import load_kb
    from ...kg.triples import tsv_text
    from ...outputs import check_output

    for flag, (dest, of) in args.export_format_flags.items():
        if getattr(args, dest, None) not in (None, False):
            args._usage_error(f"argument {flag}: only with --format {of}")
    if args.biography:
        args._usage_error("argument --biography: only with --format graphml (the TSV holds every fact)")
    out = check_output(args.output, force=args.force, ours=_tsv_file, what="a TSV file", inputs={"KB": kb_file})
    kb = load_kb(kb_file, flag="--kb" if args.kb_flag is not None else None)
    atomic_write_text(out, tsv_text(kb))
    emit(args, {"output": str(out), "format": "tsv", "facts": len(kb.facts), "targets": len(kb.targets)},
         f"wrote {out} (tsv: {len(kb.facts)} facts, {len(kb.targets)} targets marked unlearn)")
    return 0
