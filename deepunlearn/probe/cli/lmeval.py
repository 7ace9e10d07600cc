"""``deepunlearn data export --format lm-eval`` and ``deepunlearn data import-lm-eval-samples``.

The export needs the model's answer format, which lives in this layer, so the probe layer adds
the ``lm-eval`` format and its options to the kg layer's ``data export`` and the import to the
``data`` group (:func:`deepunlearn.kg.cli.data_subcommands`). :mod:`deepunlearn.probe.lmeval`
documents both; :mod:`deepunlearn.probe.lmeval_model` the ``deepunlearn-hf`` model that scores
the tasks as the exact probe does.
"""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    from ...cli import add_force, add_json
    from ...kg.cli import data_subcommands

    dsub = data_subcommands(sub)
    p = dsub.choices["export"]
    g = p.add_argument_group("--format lm-eval", "an lm-eval task folder (-o DIR): one loglikelihood task per "
                                                 "relation group and a group task over all, each fact's question "
                                                 "in the model's answer format; run it with lm_eval --include_path "
                                                 "DIR (python -m deepunlearn.probe.lmeval_model --model "
                                                 "deepunlearn-hf scores it as 'probe --mode exact' does)")
    g.add_argument("--model", default=None, metavar="DIR",
                   help="checkpoint folder whose deepunlearn.json (else config.json model type) gives the answer "
                        "format")
    g.add_argument("--prompt-format", default=None, metavar="NAME|TEMPLATE",
                   help="answer format instead of --model's: llama, phi, gpt2, bare, or 'START{question}END[|TAG]'")
    g.add_argument("--task-prefix", default=None, metavar="NAME",
                   help="group task name; the tasks are NAME_<group> (default: deepunlearn)")
    p.set_defaults(export_formats={**p.get_default("export_formats"), "lm-eval": _export},
                   export_format_flags={**p.get_default("export_format_flags"),
                                        **{f: (f.lstrip("-").replace("-", "_"), "lm-eval")
                                           for f in ("--model", "--prompt-format", "--task-prefix")}})

    q = dsub.add_parser("import-lm-eval-samples", help="lm-eval --log_samples output -> the known facts 'probe -o' "
                                                       "writes",
                        description="Read the samples_*.jsonl files lm_eval --log_samples wrote for tasks of 'data "
                                    "export --format lm-eval' and write the known facts as 'probe -o' does: a fact "
                                    "is known when its sample's acc (is_greedy) is 1.")
    q.add_argument("samples", nargs="+", metavar="FILE", help="samples_*.jsonl files (one per task)")
    q.add_argument("--kb", required=True, help="the KB the tasks were exported from")
    q.add_argument("-o", "--output", required=True, metavar="KNOWN.json",
                   help="known-facts file to write (as 'probe -o'; missing folders are created)")
    add_force(q)
    add_json(q)
    q.set_defaults(handler=_import)


def _export(args: argparse.Namespace, kb_file: str) -> int:
    from ...cli import emit
    from ...kg.io import load_kb
    from ..lmeval import export_tasks, resolve_prompt

    prompt, source = resolve_prompt(args.model, args.prompt_format)
    kb = load_kb(kb_file, flag="--kb" if args.kb_flag is not None else None)
    res = export_tasks(kb, args.output, prompt, prefix=args.task_prefix or "deepunlearn", force=args.force,
                       kb_file=kb_file, prompt_source=source)
    if not args.json:
        for n in res["notes"]:
            print(f"note: {n}; run the tasks with python -m deepunlearn.probe.lmeval_model --model deepunlearn-hf "
                  "(lm-eval's hf model with the exact probe's cut)", file=sys.stderr)
    emit(args, res, lambda: (f"wrote {res['output']} (lm-eval): group {res['group']}, "
                             + ", ".join(f"{t} {n}" for t, n in res["tasks"].items())
                             + f" facts; format {prompt.spec!r} ({source})\nrun: {res['run']}"))
    return 0


def _import(args: argparse.Namespace) -> int:
    import json

    from ...cli import emit
    from ...errors import atomic_write_text
    from ...kg.io import load_kb
    from ..lmeval import known_from_samples
    from ...output_kinds import KNOWN_DOC
    from ...outputs import check_output

    check_output(args.output, force=args.force, ours=KNOWN_DOC, what="a known-facts file of 'deepunlearn probe'",
                 inputs={"--kb": args.kb, "FILE": list(args.samples)})
    kb = load_kb(args.kb, flag="--kb")
    doc = known_from_samples(kb, list(args.samples), kb_file=args.kb)
    out = atomic_write_text(args.output, json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
    summary = {k: v for k, v in doc.items() if k not in ("fact_ids", "facts")} | {"output": str(out)}
    emit(args, summary, lambda: f"wrote {out}: {doc['known']} of {doc['total']} facts known per lm-eval ("
                                + ", ".join(f"{g} {k}/{n}" for g, (k, n) in doc["known_by_group"].items()) + ")")
    return 0
