"""``deepunlearn bench --config FILE`` and ``deepunlearn demo``.

Both print, with ``--json``, ``{"methods": {name: {"acc_at_recall_0.8": ..., "recall_at_acc_0.8": ...,
...}}, "report": PATH, ...}`` (docs/safety.md); ``methods`` is the first model's, ``models``
holds every model's. Progress goes to stderr. Running either again on the same output folder
resumes the sweep; a folder holding another sweep's results is refused unless ``--overwrite``, and
a folder of other files the run would replace (``config.yaml``, ``report/``, ...) unless ``--force``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    from ..cli import add_json, positive_int, seed_int

    p = sub.add_parser(
        "bench", help="run (or resume) a sweep from a TOML/YAML config and write its report",
        description=BENCH_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, metavar="FILE",
                   help="sweep configuration (.toml, .yaml or .json): KB, rules, models, methods and grids, targets")
    p.add_argument("-o", "--output", default=None, metavar="DIR",
                   help="results folder (overrides the config's output; default: the config's, else ./bench-results)")
    from .tracking import TRACKER_HELP

    p.add_argument("--tracker", default=None, metavar="mlflow[=URI]",
                   help=TRACKER_HELP + " (overrides the config's tracker)")
    _common(p)
    add_json(p)
    p.set_defaults(handler=_bench)

    p = sub.add_parser(
        "demo", help="the whole evaluation on a generated KB (family, or --domain) and a tiny local model (2-5 min)",
        description=DEMO_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kb", default=None, metavar="FILE", help="use this KB file instead of generating one")
    p.add_argument("--domain", default=None, metavar="NAME|PATH",
                   help="generate the KB from this domain: family (default), org, another installed one or a "
                        "domain folder (deepunlearn data domains lists them)")
    p.add_argument("-o", "--output", default="deepunlearn-demo", metavar="DIR",
                   help="output folder (default ./deepunlearn-demo); running again resumes")
    p.add_argument("--people", type=positive_int, default=None,
                   help="people in the generated KB (default 50; the domain's first entity type)")
    p.add_argument("--seed", type=seed_int, default=0, help="seed of the KB, the model and the target draw (default 0)")
    p.add_argument("--per-relation", type=positive_int, default=1, help="targets per relation (default 1)")
    from ..unlearn.methods import catalog

    p.add_argument("--methods", default=None, help=f"comma-separated methods (default {','.join(catalog.demo_methods())}; "
                                                   f"any of {catalog.help_names()})")
    _common(p)
    add_json(p)
    p.set_defaults(handler=_demo, _usage_error=p.error)


BENCH_DESCRIPTION = """\
Run a sweep: every (model, target, method) unlearning trajectory over the method's grid,
each point probed and scored (recall of a minimal deep-unlearning set, accuracy on the
other known facts), then write OUTPUT/report/ (report.md, figures, summary.json, points.csv).

Every point is stored the moment it exists (OUTPUT/results.sqlite): run the same command
again to resume after an interruption. The folder is locked while a sweep runs.

How long: set by the config: one unlearning run and one probe of the KB per point, and
models x targets x methods x grid values points (the demo's sweep, a tiny model on a
50-person family, takes 2-3 minutes on a 2-core CPU; a 7B model wants a GPU). The
progress bar counts points.
"""

DEMO_DESCRIPTION = """\
The paper's whole evaluation, end to end, with nothing to download:
  1. generate a 50-person family KB (--domain org, or a domain folder: that domain's; or use --kb),
  2. build and finetune a tiny model on its facts,
  3. sweep GA, NPO, TV and WHP (the paper's grids), GradDiff and du_loop over one target per relation,
  4. write the report (OUTPUT/report/report.md) and print Table 3.

How long: 2-3 minutes on a 2-core CPU with --threads 1 (the default; measured 2:50; --domain org 4:30). Running it again
reuses the model and the stored points.
"""


def _common(p: argparse.ArgumentParser) -> None:
    from ..cli import positive_int, threads_int

    p.add_argument("--executor", choices=("local", "ray"), default=None, help="where jobs run (default local)")
    p.add_argument("--ray-address", default=None,
                   help="existing Ray cluster ('auto', 'ray://head:10001'); default: start a local one")
    p.add_argument("--overwrite", action="store_true", help="discard results of a different sweep, or a damaged results store, in the output folder")
    p.add_argument("--force", action="store_true",
                   help="write into an output folder that is not a results folder although it holds files the run "
                        "writes (config.yaml, report/, ...), replacing them, or that is a symbolic link (the run "
                        "writes into the folder it points to)")
    p.add_argument("--threads", type=threads_int, default=None, metavar="N",
                   help="torch threads per worker (bench default: the config's, else torch's choice; demo default: 1, "
                        "the fastest for the tiny model on a small machine)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def result_json(outcome, report_path, protocols: dict[str, str] | None = None) -> dict[str, Any]:
    """The command's JSON: the first model's methods, every model, each model's protocol
    preset, and where things are."""
    from .metrics import json_safe

    models = list(outcome.summary)
    first = outcome.summary[models[0]] if models else {}
    return json_safe({
        "methods": first,
        "models": outcome.summary,
        "report": str(report_path),
        "protocols": protocols or {},
        "output": str(outcome.output),
        "targets": len(outcome.targets),
        "points": len(outcome.points),
        "computed": outcome.computed,
        "resumed": outcome.resumed,
        "exact": all(p.exact for p in outcome.points),
        "skipped": len(outcome.skipped),
        "seconds": round(outcome.seconds, 3),
    })


def _wrap_errors(fn):
    # ConfigError and StoreError are UserErrors: the CLI prints them with their file and field
    def handler(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except KeyboardInterrupt:
            print("\nstopped; every finished point is saved. Run the same command again to resume.", file=sys.stderr)
            raise
    return handler


def _finish(args: argparse.Namespace, outcome, methods, cfg, tracker=None) -> int:
    from ..cli import emit
    from .report.forms import console_lines, forgetting_table, has_forgetting_checks
    from .metrics import format_du_table, format_table, json_safe
    from .oracle import with_oracle
    from .report import nothing_evaluated_text, write_report

    report = write_report(outcome.output)
    if tracker is not None:  # the points it missed, the summary and the report
        from .store import ResultsStore

        with ResultsStore(outcome.output, readonly=True) as store:
            tracker.finish(store, outcome.summary, report.parent,
                           [outcome.output / name for name in ("config.yaml", "manifest.json")])
    if not outcome.points:
        print(f"warning: {nothing_evaluated_text(outcome.skipped)}", file=sys.stderr)
    methods = _labels(outcome.summary, None if methods is None else with_oracle(methods, cfg.oracle))
    table = format_table(outcome.summary, methods=methods, show_spread=True)
    if outcome.summary:
        table += "\n\nDeep unlearning (Success-DU: some grid point deep with accuracy >= 0.8 / 0.9)\n" + format_du_table(
            outcome.summary, methods=methods)
    protocols = {m.name: cfg.protocol_for(m).name for m in cfg.models}
    obj = result_json(outcome, report, protocols)
    tracked = ""
    if tracker is not None:
        obj["tracker"] = tracker.describe()
        tracked = f"\ntracker: {obj['tracker']['kind']} {obj['tracker']['uri']} (sweep run {obj['tracker']['run_id']})"
    if has_forgetting_checks(outcome.points):  # primary vs adversarial recall, attacks
        checks = forgetting_table(outcome.points)
        table += ("\n\nHas it really forgotten? (mean recall at each target's last grid point)\n"
                  + "\n".join(console_lines(checks, methods)))
        obj["forgetting_checks"] = json_safe(checks)
    if args.json:
        print(table, file=sys.stderr)
    used = ", ".join(f"{m} {p}" for m, p in protocols.items())
    emit(args, obj, lambda: f"{table}\n\nprotocol: {used}\nreport: {report}\nresults: {outcome.output}{tracked}")
    return 0


def _labels(summary: dict, methods) -> list[str] | None:
    """The rows to print: each configured method's own label, or its batch / sequential labels
    (``ga@b5``, ``ga@seq``) when the sweep ran requests."""
    if methods is None:
        return None
    present = list(dict.fromkeys(m for per in summary.values() for m in per))
    out = []
    for m in methods:
        out += [m] if m in present else [x for x in present if x.split("@")[0] == m]
    return out or list(methods)


@_wrap_errors
def _bench(args: argparse.Namespace) -> int:
    from .config import load_config
    from .runner import run_sweep

    from ..outputs import check_output
    from .guard import check_children, results_folder

    # before any work: a file, a device, a link or a folder of other files is refused; -o as given
    # (the configuration resolves it, which would follow a link)
    check = dict(force=args.force, folder=True, ours=results_folder(), what="a results folder (no results.sqlite)")
    if args.output is not None:
        check_children(check_output(args.output, flag="-o", **check), f"-o {args.output}")
    cfg = load_config(args.config, output=args.output, executor=args.executor, ray_address=args.ray_address,
                      threads=args.threads)
    where = "-o" if args.output is not None else f"--config {args.config}: output"
    out = check_output(cfg.output_dir, flag=where, **check)
    check_children(out, f"{where} {out}")
    tracker = _tracker(args, cfg)
    outcome = run_sweep(cfg, overwrite=args.overwrite, progress=not args.quiet, tracker=tracker)
    return _finish(args, outcome, list(cfg.methods), cfg, tracker)


def _tracker(args: argparse.Namespace, cfg):
    """The sweep's tracker (``--tracker``, else the config's ``tracker``), opened before any work."""
    from pathlib import Path

    from .tracking import open_tracker, parse_tracker

    if args.tracker is not None:
        spec = parse_tracker(args.tracker)
    else:
        spec = parse_tracker(cfg.tracker, where=f"{args.config}: field tracker", base=Path(args.config).resolve().parent,
                             file=args.config)
    return None if spec is None else open_tracker(spec, cfg.output_dir)


@_wrap_errors
def _demo(args: argparse.Namespace) -> int:
    from .demo import DEFAULT_PEOPLE, DEMO_THREADS, run_demo

    from ..limits import MAX_GENERATE_PEOPLE, check_at_most

    if args.people is not None:
        check_at_most(args.people, MAX_GENERATE_PEOPLE, where=f"--people {args.people}", unit="people", field="--people")
    methods = [m.strip().lower() for m in args.methods.split(",")] if args.methods else None
    if args.kb and args.domain:
        args._usage_error("argument --domain: not allowed with --kb (the KB file already has its domain)")
    outcome = run_demo(
        args.output, kb_path=args.kb, domain=args.domain or "family", people=args.people or DEFAULT_PEOPLE,
        seed=args.seed,
        per_relation=args.per_relation, methods=methods, executor=args.executor or "local",
        ray_address=args.ray_address, threads=args.threads or DEMO_THREADS, overwrite=args.overwrite,
        force=args.force, progress=not args.quiet,
    )
    return _finish(args, outcome, methods, outcome.config)
