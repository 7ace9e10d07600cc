"""``deepunlearn data export --format hf -o DIR`` and ``deepunlearn data import-hf DIR -o KB.json``.

The export writes a Hugging Face dataset folder (:mod:`deepunlearn.kg.hf_dataset`, its card
:mod:`deepunlearn.kg.hf_card`); its forget/retain configurations need each target's minimal
deep-unlearning sets, so the format lives in this layer and joins the kg layer's ``data export``
(:func:`deepunlearn.kg.cli.data_subcommands`), as ``--format tsv`` does.
"""

from __future__ import annotations

import argparse

#: this format's own options of ``data export`` (flag -> dest)
_FLAGS = {"--license": "license", "--holdout": "holdout"}


def register(sub: argparse._SubParsersAction) -> None:
    from ...cli import add_force, add_json
    from ...kg.cli import data_subcommands

    dsub = data_subcommands(sub)
    p = dsub.choices["export"]
    g = p.add_argument_group("--format hf", "a Hugging Face dataset folder (-o DIR) that datasets.load_dataset(DIR, "
                                            "CONFIG) reads: configs facts, forms, paraphrased, forget_<t>/retain_<t> "
                                            "per target, entities, relations (and holdout), a dataset card README.md")
    g.add_argument("--license", default=None, metavar="ID",
                   help="the card's licence (a hub licence id such as mit, cc-by-4.0; default: mit for the paper's "
                        "release, else other)")
    g.add_argument("--holdout", default=None, metavar="HOLD.json",
                   help="a holdout KB ('data holdout') to add as the holdout configuration")
    p.set_defaults(export_formats={**p.get_default("export_formats"), "hf": _export},
                   export_format_flags={**p.get_default("export_format_flags"),
                                        **{f: (d, "hf") for f, d in _FLAGS.items()}})

    q = dsub.add_parser("import-hf", help="a dataset folder 'data export --format hf' wrote -> the KB file",
                        description="Rebuild the KB from the folder's tables (facts, entities, relations, the KB's "
                                    "own forms) and deepunlearn.json: the KB file written has the bytes of the "
                                    "exported one.")
    q.add_argument("folder", metavar="DIR", help="the dataset folder (a local copy of the hub repository)")
    q.add_argument("-o", "--output", required=True, metavar="KB.json", help="KB file to write (missing folders are "
                                                                            "created)")
    add_force(q)
    add_json(q)
    q.set_defaults(handler=_import)


def chosen_sets(kb) -> tuple[dict[int, dict], str]:
    """Per target, the minimal deep-unlearning set a rule-aware method forgets (``choose_set``'s
    ``fewest`` over every stored fact) with its index among the target's sets; and a note saying
    how they were computed."""
    from ..choice import Collateral, choose_set
    from ..metrics import Evaluator

    ev = Evaluator(kb)
    col = Collateral(kb, range(len(kb.facts)))
    out: dict[int, dict] = {}
    for t in kb.targets:
        ms = ev.minimal_sets(int(t))
        chosen = choose_set(ms.sets, col, ())
        out[int(t)] = {"set": sorted(int(i) for i in chosen), "set_id": ms.sets.index(chosen),
                       "n_sets": len(ms.sets), "exact": bool(ms.exact), "method": ms.method}
    note = (f"all minimal deep-unlearning sets of each target under the rule set '{ev.rules.name}' "
            "(exact enumeration with clingo within 10 s per target, else MDUS sampling), the chosen "
            "one by 'fewest' (deepunlearn.rules.choice.choose_set)")
    return out, note


def _export(args: argparse.Namespace, kb_file: str) -> int:
    from pathlib import Path

    from ...cli import emit
    from ...kg.hf_dataset import dataset_folder, write_hf
    from ...kg.io import load_kb
    from ...outputs import check_output

    for flag, (dest, of) in args.export_format_flags.items():
        if of != "hf" and getattr(args, dest, None) not in (None, False):
            args._usage_error(f"argument {flag}: only with --format {of}")
    if args.biography:
        args._usage_error("argument --biography: only with --format graphml")
    inputs = {"KB": kb_file, **({"--holdout": args.holdout} if args.holdout else {})}
    out = check_output(args.output, force=args.force, folder=True, ours=dataset_folder,
                       what="a dataset folder of 'data export --format hf' (no deepunlearn.json)", inputs=inputs)
    kb = load_kb(kb_file, flag="--kb" if args.kb_flag is not None else None)
    hold = load_kb(args.holdout, flag="--holdout") if args.holdout else None
    sets, note = chosen_sets(kb)
    license = args.license or ("mit" if kb.metadata.get("rules") == "edu-relat" and "release_dir" in kb.metadata
                               else "other")
    res = write_hf(kb, out, sets, holdout=hold, license=license, sets_note=note, kb_file=Path(kb_file).name,
                   holdout_file=None if args.holdout is None else Path(args.holdout).name)
    counts = res["configs"]
    pairs = sum(n.startswith("forget_") for n in counts)
    emit(args, res, lambda: (f"wrote {out} (hf): {len(counts)} configurations (facts {counts['facts']}, forms "
                             f"{counts['forms']}, {pairs} forget/retain pairs"
                             + (f", holdout {counts['holdout']}" if "holdout" in counts else "")
                             + f"); licence {license}\nload: datasets.load_dataset({str(out)!r}, 'facts'); publish: "
                               "see README.md"))
    return 0


def _import(args: argparse.Namespace) -> int:
    from ...cli import emit
    from ...kg.hf_dataset import read_hf
    from ...kg.io import save_kb
    from ...outputs import check_output, kb_file

    check_output(args.output, force=args.force, ours=kb_file, what="a KB file", inputs={"DIR": args.folder})
    kb = read_hf(args.folder, flag="DIR")
    out = save_kb(kb, args.output)
    emit(args, {"output": str(out), "entities": len(kb.entities), "facts": len(kb.facts), "targets": len(kb.targets)},
         lambda: f"wrote {out}: {len(kb.entities)} entities, {len(kb.facts)} facts, {len(kb.targets)} targets "
                 f"from {args.folder}")
    return 0
