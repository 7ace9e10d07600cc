"""``deepunlearn data generate | import-edu-relat | show | export | draw``."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    from ..cli import add_json

    data = sub.add_parser("data", help="knowledge bases: generate, import, show, export, draw")
    dsub = data.add_subparsers(dest="data_command", metavar="ACTION")
    dsub.required = True

    p = dsub.add_parser("generate", help="generate a synthetic family KB (paper section 4)")
    p.add_argument("--people", type=int, default=100, help="number of people (default 100, as EDU-RELAT)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stored-share", type=float, default=None,
                   help="share of true family relations stored in the KB (the rest is left to the rules)")
    p.add_argument("--targets-per-relation", type=int, default=5)
    p.add_argument("-o", "--output", required=True, help="KB file to write")
    add_json(p)
    p.set_defaults(handler=_generate)

    p = dsub.add_parser("import-edu-relat", help="convert the public EDU-RELAT release folder")
    p.add_argument("folder", help="folder with the release's .pt files")
    p.add_argument("-o", "--output", required=True, help="KB file to write")
    add_json(p)
    p.set_defaults(handler=_import)

    p = dsub.add_parser("show", help="summarise a KB file")
    p.add_argument("kb", help="KB file")
    add_json(p)
    p.set_defaults(handler=_show)

    p = dsub.add_parser("export", help="export a KB as GraphML (or its probes as JSON lines)")
    p.add_argument("kb", help="KB file")
    p.add_argument("-o", "--output", required=True, help="output file (.graphml or .jsonl)")
    p.add_argument("--biography", action="store_true", help="include biography values as nodes (GraphML)")
    add_json(p)
    p.set_defaults(handler=_export)

    p = dsub.add_parser("draw", help="draw a family (or one person's neighbourhood) to PNG")
    p.add_argument("kb", help="KB file")
    p.add_argument("-o", "--output", required=True, help="PNG file")
    p.add_argument("--person", default=None, help="draw only this person's neighbourhood")
    p.add_argument("--radius", type=int, default=2, help="neighbourhood radius in family links (with --person)")
    add_json(p)
    p.set_defaults(handler=_draw)


def summary(kb) -> dict:
    return {
        "name": kb.name,
        "people": len(kb.entities),
        "facts": len(kb.facts),
        "family_facts": int(kb.family_mask.sum()),
        "biography_facts": int((~kb.family_mask).sum()),
        "relations": kb.relation_counts(),
        "targets": [list(kb.facts[t]) for t in kb.targets],
    }


def _summary_text(kb, path: str) -> str:
    s = summary(kb)
    rel = ", ".join(f"{r} {n}" for r, n in s["relations"].items())
    lines = [
        f"{path}: {s['name']}",
        f"  people  {s['people']}",
        f"  facts   {s['facts']} ({s['family_facts']} family, {s['biography_facts']} biography)",
        f"  relations: {rel}",
        f"  targets {len(s['targets'])}:",
    ]
    lines += [f"    [{t}] {kb.facts[t][2]} is {kb.facts[t][0]}'s {kb.facts[t][1]}" for t in kb.targets[:10]]
    if len(kb.targets) > 10:
        lines.append(f"    ... and {len(kb.targets) - 10} more")
    return "\n".join(lines)


def _generate(args) -> int:
    from ..cli import CLIError, emit
    from .generate import FamilyParams, generate_family
    from .io import save_kb

    if args.people < 2:
        raise CLIError("--people must be at least 2")
    params = FamilyParams()
    if args.stored_share is not None:
        if not 0.0 < args.stored_share <= 1.0:
            raise CLIError("--stored-share must be in (0, 1]")
        params = params.model_copy(update={"stored_share": args.stored_share})
    params = params.model_copy(update={"targets_per_relation": args.targets_per_relation})
    kb = generate_family(args.people, seed=args.seed, params=params)
    out = save_kb(kb, args.output)
    s = summary(kb)
    emit(args, {"output": str(out), **{k: s[k] for k in ("people", "facts", "relations")}, "targets": len(kb.targets)},
         lambda: f"wrote {out}\n" + _summary_text(kb, str(out)))
    return 0


def _import(args) -> int:
    from ..cli import emit
    from .edu_relat import import_edu_relat
    from .io import save_kb

    kb = import_edu_relat(args.folder)
    out = save_kb(kb, args.output)
    emit(args, {"output": str(out), "people": len(kb.entities), "facts": len(kb.facts), "targets": len(kb.targets)},
         lambda: f"wrote {out}\n" + _summary_text(kb, str(out)))
    return 0


def _show(args) -> int:
    from ..cli import emit
    from .io import load_kb

    kb = load_kb(args.kb)
    emit(args, summary(kb), lambda: _summary_text(kb, args.kb))
    return 0


def _export(args) -> int:
    import json

    from ..cli import emit
    from .io import load_kb

    kb = load_kb(args.kb)
    out = Path(args.output)
    if out.suffix == ".jsonl":
        with out.open("w", encoding="utf-8") as f:
            for p in kb.probes():
                f.write(json.dumps({"fact_id": p.fact_id, "fact": list(kb.facts[p.fact_id]),
                                    "question": p.question, "answer": p.answer}, ensure_ascii=False) + "\n")
        fmt = "probes-jsonl"
    else:
        from .graph import write_graphml

        write_graphml(kb, out, include_biography=args.biography)
        fmt = "graphml"
    emit(args, {"output": str(out), "format": fmt}, f"wrote {out} ({fmt})")
    return 0


def _draw(args) -> int:
    from ..cli import emit
    from .graph import draw_family
    from .io import load_kb

    kb = load_kb(args.kb)
    out = draw_family(kb, args.output, person=args.person, radius=args.radius)
    emit(args, {"output": str(out)}, f"wrote {out}")
    return 0
