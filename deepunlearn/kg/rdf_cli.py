"""``deepunlearn data import-rdf FILE -o KB.json`` and ``data export --format ttl|nt`` (:mod:`.rdf`,
:mod:`.rdf_kb`, :mod:`.rdf_export`). rdflib is imported inside the handlers."""

from __future__ import annotations

import argparse
import re
import sys

EXPORT_FORMATS = {"ttl": "turtle", "nt": "nt"}


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``import-rdf`` to the ``data`` group and the RDF formats to its ``export``."""
    from ..cli import add_force, add_json, positive_int
    from .cli import data_subcommands
    from .rdf import FORMATS

    dsub = data_subcommands(sub)
    p = dsub.add_parser(
        "import-rdf", help="import a knowledge graph given as RDF (Turtle, N-Triples, JSON-LD)",
        description="Nodes become entities named by their rdfs:label (or the mapping's name predicates; else the "
                    "IRI's local name), predicates relations named by --mapping, their label or local name; a "
                    "triple with a literal object is a value fact. Every problem is listed with its file and line "
                    "(N-Triples) or triple (exit 1, nothing written). A graph 'data export --format ttl' wrote is "
                    "read back with its templates, attributes and targets.")
    p.add_argument("file", metavar="FILE", help="RDF file (.ttl, .nt, .jsonld; else --format)")
    p.add_argument("--format", choices=(*FORMATS, "ttl"), default=None,
                   help="turtle (ttl), nt or json-ld (default: from FILE's suffix; turtle when it says nothing)")
    p.add_argument("--mapping", default=None, metavar="MAP.toml",
                   help="TOML file: names = [label predicates], [prefixes], [relations] predicate -> relation "
                        "(\"\" drops it), [entities] node -> name (docs/data.md)")
    p.add_argument("--max-problems", type=positive_int, default=20, metavar="N",
                   help="problems listed before the rest are counted (default 20)")
    p.add_argument("-o", "--output", required=True, metavar="KB.json", help="KB file to write (missing folders are "
                                                                            "created)")
    add_force(p)
    add_json(p)
    p.set_defaults(handler=_import)

    e = dsub.choices["export"]
    fmt_action = e._option_string_actions["--format"]
    fmt_action.help = (fmt_action.help or "").replace("; default:", "; ttl or nt (the KB as RDF: what 'data "
                                                     "import-rdf' reads; .ttl and .nt outputs too); default:", 1)
    e.add_argument("--base", default=None, metavar="IRI",
                   help="with --format ttl or nt: the namespace of the IRIs of entities and relations the KB was not "
                        "imported with (default http://deepunlearn.invalid/KB-NAME/)")
    e.set_defaults(export_formats={**e.get_default("export_formats"), **{f: _export for f in EXPORT_FORMATS}},
                   export_suffixes={**(e.get_default("export_suffixes") or {}), ".ttl": "ttl", ".nt": "nt"},
                   export_format_flags={**e.get_default("export_format_flags"), "--base": ("base", "ttl or nt")})


def _import(args: argparse.Namespace) -> int:
    from ..cli import emit
    from ..outputs import check_output, kb_file
    from .cli import summary_text
    from .io import save_kb
    from .rdf import RdfError, read_mapping, rdf_format
    from .rdf_kb import import_rdf

    inputs = {"FILE": args.file, **({"--mapping": args.mapping} if args.mapping else {})}
    check_output(args.output, force=args.force, ours=kb_file, what="a KB file", inputs=inputs)
    fmt = rdf_format(args.file, args.format)
    mapping = read_mapping(args.mapping) if args.mapping else None
    got = import_rdf(args.file, fmt, mapping)
    if got.kb is None:
        for line in got.problems[:args.max_problems]:
            print(line, file=sys.stderr)
        rest = len(got.problems) - args.max_problems
        if rest > 0:
            print(f"{args.file}: ... and {rest} more problems", file=sys.stderr)
        n = len(got.problems)
        raise RdfError(f"{args.file}: {n} problem{'s' * (n != 1)} in the RDF, nothing written", file=args.file)
    kb = got.kb
    if not kb.facts:
        raise RdfError(f"{args.file}: no facts (no triple between two named nodes or from a node to a literal)",
                       file=args.file)
    out = save_kb(kb, args.output)
    obj = {"output": str(out), "format": fmt, "triples": got.triples, "dropped": got.dropped,
           "entities": len(kb.entities), "facts": len(kb.facts), "targets": len(kb.targets),
           "relations": kb.relation_counts()}
    emit(args, obj, lambda: f"wrote {out}: {got.triples} triples of {args.file} ({fmt}), {got.dropped} dropped by "
                            f"the mapping\n" + summary_text(kb, str(out)))
    return 0


def _rdf_file(p) -> bool:
    """An empty file or one :func:`~.rdf_export.rdf_text` wrote (its first line)."""
    from .rdf_export import HEADER

    with open(p, "rb") as f:
        head = f.read(len(HEADER))
    return not head or head == HEADER.encode()


def _export(args: argparse.Namespace, kb_file: str) -> int:
    from pathlib import Path

    from ..cli import emit
    from ..errors import atomic_write_text
    from ..outputs import check_output
    from .io import load_kb
    from .rdf_export import rdf_text

    fmt = args.format or args.export_suffixes.get(Path(args.output).suffix.lower())
    for flag, (dest, of) in args.export_format_flags.items():
        if dest != "base" and getattr(args, dest, None) not in (None, False):
            args._usage_error(f"argument {flag}: only with --format {of}")
    if args.biography:
        args._usage_error("argument --biography: only with --format graphml (the RDF holds every fact)")
    if args.base is not None and not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s<>\"{}|^`\\]+", args.base):
        args._usage_error(f"argument --base: expected an absolute IRI (http://example.org/kb/), got {args.base!r}")
    out = check_output(args.output, force=args.force, ours=_rdf_file, what="an RDF file of 'data export'",
                       inputs={"KB": kb_file})
    kb = load_kb(kb_file, flag="--kb" if args.kb_flag is not None else None)
    atomic_write_text(out, rdf_text(kb, EXPORT_FORMATS[fmt], args.base))
    emit(args, {"output": str(out), "format": fmt, "entities": len(kb.entities), "facts": len(kb.facts),
                "targets": len(kb.targets)},
         f"wrote {out} ({fmt}: {len(kb.entities)} entities, {len(kb.facts)} facts, {len(kb.targets)} targets)")
    return 0
