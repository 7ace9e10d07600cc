"""``deepunlearn data domains | holdout | import-edu-relat | show | forms | export | draw``.

``data generate`` needs the rules' closure for domains other than family, so the rules layer
registers it (:mod:`deepunlearn.rules.cli.generate`) through :func:`data_subcommands`.

Every ``-o`` is written atomically (a temporary sibling renamed into place, missing folders
created), and every numeric flag has a strict argparse type (a bad value is a usage error, exit 2).
"""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    from ..cli import add_force, add_json, nonneg_int, positive_int, seed_int

    data = sub.add_parser("data", help="knowledge bases: generate, import, show, export, draw")
    dsub = data.add_subparsers(dest="data_command", metavar="ACTION")
    dsub.required = True

    p = dsub.add_parser("domains", help="list the domains: built-in, and those other packages register",
                        description="One line per domain: name, relations, groups, rules (statements in its "
                                    "rules.dl), description. Domains are folders with domain.toml and rules.dl; "
                                    "other packages add theirs under the entry-point group deepunlearn.domains.")
    add_json(p)
    p.set_defaults(handler=_domains)

    p = dsub.add_parser("holdout", help="facts of a KB's domain it does not hold (for membership tests)",
                        description="Generate people and facts disjoint from --kb with the same generator and "
                                    "templates, named and valued with the KB's own words (first names, surnames, "
                                    "attribute values), for 'probe --mia --holdout'.")
    p.add_argument("--kb", required=True, help="KB file the holdout must be disjoint from")
    p.add_argument("--seed", type=seed_int, default=0, help="random seed (default 0)")
    p.add_argument("--people", type=positive_int, default=None, metavar="N",
                   help="new entities of the domain's first type (people for family; default: as many as the KB "
                        "has)")
    p.add_argument("-o", "--output", required=True, metavar="HOLD.json",
                   help="holdout KB file to write (missing folders are created)")
    add_force(p)
    add_json(p)
    p.set_defaults(handler=_holdout)

    p = dsub.add_parser("import-edu-relat", help="convert the paper's public EDU-RELAT release (shipped with deepunlearn)")
    p.add_argument("folder", nargs="?", default=None,
                   help="a folder with the release's .pt files (default: the copy shipped with deepunlearn)")
    p.add_argument("--questions", choices=("relation", "entity", "person"), default="relation",
                   help="relation (default, the release's \"Who is {o2} to {o1}?\" -> \"father\"), entity "
                        "(father, mother, husband, wife asked \"Who is {o1}'s father?\" -> the person) or person "
                        "(every relation asked for the person; the other right answers of a question set aside); "
                        "recorded in the KB")
    p.add_argument("-o", "--output", required=True, help="KB file to write (missing folders are created)")
    add_force(p)
    add_json(p)
    p.set_defaults(handler=_import)

    p = dsub.add_parser("show", help="summarise a KB file")
    p.add_argument("kb", help="KB file")
    p.add_argument("--shortcuts", default=None, metavar="FLOOR.json",
                   help="also print the KB's shortcut floor, as 'data shortcuts' measured it")
    add_json(p)
    p.set_defaults(handler=_show)

    p = dsub.add_parser("forms", help="list a KB's probe forms; add forms from a file; give forms a split",
                        description="Without --add/--label: list the KB's forms (name, kind, count, split). "
                                    "--add FILE adds the forms of a JSON-lines forms file (one "
                                    '{"fact": [o1, r, o2], "question"|"text": ..., "answer": ...} a line; exact '
                                    "duplicates of forms the KB holds are skipped and counted); --label NAMES "
                                    "--split S gives forms a split. Nothing is written without -o.")
    p.add_argument("--kb", required=True, help="KB file")
    p.add_argument("--add", action="append", default=[], metavar="FILE",
                   help="forms file to add (JSON lines; repeatable); its forms are named after the file's stem "
                        "unless a line gives a \"name\"")
    p.add_argument("--split", choices=("train", "test", "unlearn", "none"), default=None,
                   help="split of the added forms (a line's own \"split\" wins) and of the --label forms; "
                        "'none': no split (with --label: clears it)")
    p.add_argument("--label", default=None, metavar="NAMES",
                   help="comma list of form names (templates such as qa1, st2, or explicit ones) to give --split")
    p.add_argument("-o", "--output", default=None, metavar="OUT.json",
                   help="write the KB with the changes here (atomically; may be --kb itself); without it "
                        "nothing is written")
    add_force(p)
    add_json(p)
    p.set_defaults(handler=_forms, _usage_error=p.error)

    p = dsub.add_parser("export", help="export a KB as GraphML, TSV triples, its probes as JSON lines, or an lm-eval "
                                       "task folder")
    p.add_argument("kb", nargs="?", default=None, help="KB file (or --kb)")
    p.add_argument("--kb", dest="kb_flag", default=None, metavar="KB", help="KB file (instead of the positional)")
    p.add_argument("-o", "--output", required=True,
                   help="output file: .jsonl writes the probes as JSON lines, .tsv the facts as TSV, anything "
                        "else GraphML; a folder with --format lm-eval")
    p.add_argument("--format", default=None, metavar="FORMAT",
                   help="graphml, probes-jsonl, tsv (the stored facts: what 'data import-triples' reads), or lm-eval "
                        "(an lm-eval task folder; see its options below); "
                        "default: from the suffix of -o")
    p.add_argument("--biography", action="store_true", help="include biography values as nodes (GraphML)")
    add_force(p)
    add_json(p)
    p.set_defaults(handler=_export, export_formats={}, export_format_flags={}, export_suffixes={},
                   _usage_error=p.error)

    p = dsub.add_parser("draw", help="draw a family (or one person's neighbourhood) to PNG; another domain's KB: "
                                     "the entity graph around one entity")
    p.add_argument("kb", help="KB file")
    p.add_argument("-o", "--output", required=True, metavar="FIG.png",
                   help="figure file; the suffix picks the format (.png, .svg, .pdf, ...; no suffix: .png is added)")
    p.add_argument("--person", default=None, help="draw only this person's neighbourhood (another domain: the "
                                                  "entity to centre on; default the first target's subject)")
    p.add_argument("--radius", type=nonneg_int, default=None,
                   help="neighbourhood radius in family links (with --person; default 2); another domain: in links "
                        "of any entity relation (default 1)")
    add_force(p)
    add_json(p)
    p.set_defaults(handler=_draw)


def data_subcommands(sub: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """The sub-commands action of the ``data`` group registered on ``sub``: other layers add their
    ``data`` actions there (the rules layer adds ``data generate``, which needs the closure)."""
    data = sub.choices["data"]
    return next(a for a in data._actions if isinstance(a, argparse._SubParsersAction))


def summary(kb) -> dict:
    from .forms import forms_table

    from .domains.family.questions import describe_data, question_format
    from .other_answers import other_answers_rule

    forms = {"forms": forms_table(kb, explicit_only=True), "form_splits": dict(sorted(kb.form_splits.items()))}
    data = {}
    if describe_data(kb) is not None:  # a family KB: how it names people and asks its questions
        params = kb.metadata.get("params")
        data = {"questions": question_format(kb)}
        if isinstance(params, dict):
            data = {"names": params.get("names", "inherited"), **data}
    return {
        "name": kb.name,
        "people": len(kb.entities),  # every entity (people for a family KB; an org KB counts its offices too)
        "facts": len(kb.facts),
        "groups": {g: int(m.sum()) for g, m in kb.group_masks.items()},
        "relations": kb.relation_counts(),
        "targets": [list(kb.facts[t]) for t in kb.targets],
        "target_ids": list(kb.targets),  # what --target takes; targets[i] is fact target_ids[i]
        **(forms if kb.forms or kb.form_splits else {}),  # only for a KB with forms: older output unchanged
        **data,
        **({"other_answers": other_answers_rule(kb)} if other_answers_rule(kb) != "wrong" else {}),
    }


def summary_text(kb, path: str) -> str:
    s = summary(kb)
    rel = ", ".join(f"{r} {n}" for r, n in s["relations"].items())
    lines = [
        f"{path}: {s['name']}",
        f"  entities {s['people']}",
        f"  facts   {s['facts']} (" + ", ".join(f"{n} {g}" for g, n in s["groups"].items()) + ")",
        f"  relations: {rel}",
    ]
    from .domains.family.questions import describe_data

    if describe_data(kb) is not None:
        lines.append(f"  data    {describe_data(kb)}")
    elif "other_answers" in s:
        lines.append("  data    a question with several right answers probes each with the others set aside")
    lines.append(f"  targets {len(s['targets'])}:")
    lines += [f"    [{t}] {kb.facts[t][2]} is {kb.facts[t][0]}'s {kb.facts[t][1]}" for t in kb.targets[:10]]
    if len(kb.targets) > 10:
        lines.append(f"    ... and {len(kb.targets) - 10} more")
    if "forms" in s:
        lines.append("  forms   " + (", ".join(f"{n} {r['count']} {r['kind']}" + (f" ({r['split']})" if r["split"] else "")
                                            for n, r in s["forms"].items()) or "(templates only)"))
        if s["form_splits"]:
            lines.append("  template splits: " + ", ".join(f"{n} {sp}" for n, sp in s["form_splits"].items()))
    return "\n".join(lines)


def forms_text(table: dict[str, dict]) -> str:
    """The ``data forms`` table: name, kind, count, split."""
    w = max([4] + [len(n) for n in table])
    rows = [f"  {'name':<{w}}  {'kind':<14} {'count':>6}  split"]
    for n, r in table.items():
        split = r["split"] or "-"
        if "splits" in r:
            split = ", ".join(f"{k} {v}" for k, v in r["splits"].items())
        rows.append(f"  {n:<{w}}  {r['kind'] + ('' if r['template'] else ' *'):<14} {r['count']:>6}  {split}")
    return "\n".join(rows + ["  (* explicit forms: imported or added; the others are built-in templates)"])


def domain_summary(d) -> dict:
    """What ``data domains --json`` says of one domain."""
    return {"name": d.name, "description": d.description, "folder": str(d.folder), "relations": list(d.relations),
            "groups": d.groups(), "rules": d.rule_count()}


def _domains(args) -> int:
    from ..cli import emit
    from .domain import list_domains, load_domain

    rows = [domain_summary(load_domain(n)) for n in list_domains()]

    def text() -> str:
        w = max([4] + [len(r["name"]) for r in rows])
        return "\n".join(f"{r['name']:<{w}}  {len(r['relations'])} relations ({', '.join(r['groups'])}), "
                         f"{r['rules']} rules  {r['description']}" for r in rows)

    emit(args, {"domains": rows}, text)
    return 0


def _holdout(args) -> int:
    from ..cli import emit
    from ..outputs import check_output, kb_file
    from .holdout import check_disjoint, make_holdout
    from ..limits import MAX_HOLDOUT_PEOPLE, check_at_most
    from .domain_check import plural
    from .io import load_kb, save_kb

    if args.people is not None:  # checked before the KB is read: 10^8 people would fill memory
        check_at_most(args.people, MAX_HOLDOUT_PEOPLE, where=f"--people {args.people}", unit="people", field="--people")
    check_output(args.output, force=args.force, ours=kb_file, what="a KB file", inputs={"--kb": args.kb})
    kb = load_kb(args.kb, flag="--kb")
    hold = make_holdout(kb, args.seed, people=args.people)
    check_disjoint(kb, hold, args.output, flag="-o")  # by construction; checked before anything is written
    out = save_kb(hold, args.output)
    s = summary(hold)
    s["people"] = hold.metadata["holdout"]["people"]  # new people (an org holdout also names the KB's offices)
    noun = _first_type(kb)
    emit(args, {"output": str(out), "of": str(args.kb), "seed": args.seed,
                **{k: s[k] for k in ("people", "facts", "relations")}},
         lambda: f"wrote {out}: {s['people']} {plural(noun, s['people'])} and {s['facts']} facts disjoint from "
                 f"{args.kb} (seed {args.seed})")
    return 0


def _first_type(kb) -> str:
    """The entity type a KB's holdout draws anew: its domain's first type (``person`` for family)."""
    from .domain import DomainError, load_domain

    where = kb.metadata.get("domain_folder") or kb.metadata.get("domain")
    try:
        return load_domain(where).people_type if isinstance(where, str) else "person"
    except DomainError:
        return "person"


def _import(args) -> int:
    from ..cli import emit
    from ..outputs import check_output, kb_file
    from .edu_relat import import_edu_relat, release_notes
    from .io import save_kb

    check_output(args.output, force=args.force, ours=kb_file, what="a KB file")
    kb = import_edu_relat(args.folder)
    if args.questions != "relation":
        from .domains.family.questions import use_question_format

        use_question_format(kb, args.questions)
    out = save_kb(kb, args.output)
    notes = release_notes(kb)
    for n in notes:  # said once, here; the rules commands on this KB do not repeat it
        print(f"note: {n}", file=sys.stderr)
    emit(args, {"output": str(out), "people": len(kb.entities), "facts": len(kb.facts), "targets": len(kb.targets),
                "notes": notes},
         lambda: f"wrote {out}\n" + summary_text(kb, str(out)))
    return 0


def _show(args) -> int:
    from ..cli import emit
    from .io import load_kb

    kb = load_kb(args.kb)
    if args.shortcuts is None:
        emit(args, summary(kb), lambda: summary_text(kb, args.kb))
        return 0
    from .shortcut_floor import floor_text, read_floor

    floor = read_floor(args.shortcuts, kb)
    emit(args, {**summary(kb), "shortcuts": floor}, lambda: summary_text(kb, args.kb) + "\n" + floor_text(floor))
    return 0


def _forms(args) -> int:
    from ..cli import emit
    from .forms import forms_table, label_forms
    from .forms_file import add_forms, read_forms_file
    from .io import load_kb, save_kb

    changes = bool(args.add or args.label is not None)
    if args.label is not None and args.split is None:
        args._usage_error("argument --label: give --split S too (--split none clears the split)")
    if args.split is not None and not changes:
        args._usage_error("argument --split: only with --add or --label")
    if args.output is not None and not changes:
        args._usage_error("argument -o/--output: nothing to write without --add or --label")
    if args.output is not None:
        from ..outputs import check_output, kb_file

        # -o may be --kb itself (the KB updated in place), never a forms file it reads
        check_output(args.output, force=args.force, ours=kb_file, what="a KB file", inputs={"--add": list(args.add)})
    kb = load_kb(args.kb, flag="--kb")
    split = None if args.split in (None, "none") else args.split
    added = skipped = 0
    for path in args.add:  # every file is read and checked before anything is written
        done = add_forms(kb, read_forms_file(kb, path, split=split, flag="--add"))
        added, skipped = added + done.added, skipped + done.skipped
    labelled = 0
    if args.label is not None:
        from .forms import FormError

        names = [n.strip() for n in args.label.split(",") if n.strip()]
        if not names:
            raise FormError(f"--label: no form names in {args.label!r}", field="--label")
        labelled = label_forms(kb, names, split)
    out = save_kb(kb, args.output) if args.output is not None else None
    table = forms_table(kb)
    obj = {"kb": str(args.kb), "added": added, "skipped": skipped, "labelled": labelled,
           "facts_with_forms": len({f.fact_id for f in kb.forms}), "forms": table,
           "output": None if out is None else str(out)}

    def text() -> str:
        lines = [f"{args.kb}: {len(kb.facts)} facts, {obj['facts_with_forms']} with explicit forms", forms_text(table)]
        if changes:
            what = f"added {added} forms ({skipped} exact duplicates skipped)" if args.add else ""
            if args.label is not None:
                what += ("; " if what else "") + f"gave {labelled} form names the split {args.split}"
            lines.append(what + (f"; wrote {out}" if out is not None else "; nothing written (give -o OUT.json to write)"))
        return "\n".join(lines)

    emit(args, obj, text)
    return 0


def _export(args) -> int:
    import json
    from pathlib import Path

    from ..cli import emit
    from ..errors import atomic_write_text
    from .io import load_kb

    if (args.kb is None) == (args.kb_flag is None):
        args._usage_error("give the KB file once: as the positional KB or as --kb")
    kb_file = args.kb if args.kb is not None else args.kb_flag
    fmt = args.format
    if fmt is None:  # a suffix another layer's format claims (.tsv)
        fmt = args.export_suffixes.get(Path(args.output).suffix.lower())
    known = ("graphml", "probes-jsonl", *args.export_formats)
    if fmt is not None and fmt not in known:
        args._usage_error(f"argument --format: invalid choice: {fmt!r} (choose from {', '.join(known)})")
    if fmt in args.export_formats:  # formats other layers add (lm-eval: the probe layer)
        return args.export_formats[fmt](args, kb_file)
    for flag, (dest, of) in args.export_format_flags.items():  # their options, given without their format
        if getattr(args, dest, None) not in (None, False):
            args._usage_error(f"argument {flag}: only with --format {of}")
    from ..output_kinds import PROBES_JSONL
    from ..outputs import check_output, graphml_file

    jsonl = fmt == "probes-jsonl" or (fmt is None and Path(args.output).suffix == ".jsonl")
    out = check_output(args.output, force=args.force, ours=PROBES_JSONL if jsonl else graphml_file,
                       what="a probes file of 'data export'" if jsonl else "a GraphML file",
                       inputs={"KB": kb_file})
    kb = load_kb(kb_file, flag="--kb" if args.kb_flag is not None else None)
    if jsonl:
        atomic_write_text(out, "".join(
            json.dumps({"fact_id": p.fact_id, "fact": list(kb.facts[p.fact_id]), "question": p.question,
                        "answer": p.answer}, ensure_ascii=False) + "\n" for p in kb.probes()))
        fmt = "probes-jsonl"
    else:
        from .graph import write_graphml

        write_graphml(kb, out, include_biography=args.biography)
        fmt = "graphml"
    emit(args, {"output": str(out), "format": fmt}, f"wrote {out} ({fmt})")
    return 0


def _draw(args) -> int:
    from ..cli import emit
    from .figures import figure_path
    from .graph import draw_family
    from .io import load_kb

    from ..outputs import check_output, figure_file

    # before loading anything: a folder, fig.txt or another file is refused at once
    check_output(figure_path(args.output, flag="-o")[0], force=args.force, ours=figure_file, what="a figure this tool drew")
    kb = load_kb(args.kb)
    if "family" in kb.groups:
        out = draw_family(kb, args.output, person=args.person, radius=2 if args.radius is None else args.radius)
    else:  # another domain: the entity graph around one entity
        from .graph_draw import draw_graph

        out = draw_graph(kb, args.output, person=args.person, radius=1 if args.radius is None else args.radius)
    emit(args, {"output": str(out)}, f"wrote {out}")
    return 0
