"""``deepunlearn evaluate-report VERDICTS.jsonl -o DIR``: the verdicts of ``evaluate --manifest``
as a results store and a report, the same as a sweep's.

Each verdict line becomes one point of the store (:mod:`.store`): model = the original, target,
method = the row's method (``evaluate`` when it names none), param = the row's param (its row
number when it names none), with recall, accuracy, the forgotten facts and, in ``extra``,
``deep``, ``superficial`` and the checkpoint. A verdict with checks (``evaluate --adversarial``,
``--relearn``, ``--quantize``, ``--scores``) stores them under the keys a sweep's point uses
(``recall_adv``, ``superficial``, ``recall_relearn``, ``recall_quant``, ..., and the measures), so
the report shows the adversarial and attack columns as a sweep's does; a verdict's ``p_chance``
(``evaluate --calibration``) is kept too, with its standard error and method. Rows of one
(method, target) at several params make a trajectory, so the report's Acc@Recall and AUC figures read them as they read a sweep.
Error lines are left out; points already in the store are kept (running it again after more
rows were judged adds the new ones).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..errors import UserError, atomic_write_text, read_text, text_lines


class VerdictFileError(UserError, ValueError):
    """A verdicts file that is not what ``evaluate --manifest -o`` writes."""


def read_verdicts(path: str | Path) -> list[dict[str, Any]]:
    """The verdict lines of a JSON-lines file (error lines and torn lines skipped)."""
    out = []
    for n, line in enumerate(text_lines(read_text(path, flag="VERDICTS", error=VerdictFileError)), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue  # a line torn by an interrupted run: its row is judged again on resume
        if not isinstance(obj, dict) or "error" in obj:
            continue
        if not {"original", "target_id", "recall", "accuracy", "forgotten"} <= set(obj):
            raise VerdictFileError(f"{path}:{n}: not a verdict of 'deepunlearn evaluate' (fields original, target_id, "
                                   "recall, accuracy, forgotten expected)", file=path, field=f"line {n}")
        check_verdict(obj, path, n)
        obj["_line"] = n
        out.append(obj)
    if not out:
        raise VerdictFileError(f"{path}: no verdicts in it", file=path)
    return out


def check_verdict(obj: dict[str, Any], path: str | Path, n: int, n_facts: int | None = None) -> None:
    """Refuse a verdict line the store cannot hold (:mod:`.verdict_model`), naming file, line and field."""
    from .verdict_model import verdict_problem

    bad = verdict_problem(obj, n_facts)
    if bad is not None:
        raise VerdictFileError(f"{path}:{n}: field {bad[0]}: {bad[1]}", file=path, field=bad[0])


def _kb_facts(kb: str | None) -> int | None:
    """The fact count of the KB the report will read (None when there is none to read)."""
    if not kb or not Path(kb).is_file():
        return None
    from ..kg.io import load_kb

    return len(load_kb(kb, flag="--kb").facts)


#: the attack result's keys a sweep's point records under the same name
ATTACK_KEYS = ("recall_relearn", "accuracy_relearn", "relearn_lr", "recall_quant", "accuracy_quant")
#: a verdict's chance figures (``evaluate --calibration``), kept under the same names
CHANCE_KEYS = ("p_chance", "p_chance_se", "p_chance_method")
#: a verdict's probability under soft rules (:mod:`deepunlearn.rules.soft`), kept under the same name
SOFT_KEYS = ("deep_p",)


def check_keys(v: dict[str, Any]) -> dict[str, Any]:
    """A verdict's checks as a sweep's point keys (``measures`` for the scores)."""
    out: dict[str, Any] = {}
    adv = v.get("adversarial")
    if isinstance(adv, dict):
        out.update({k: x for k, x in adv.items() if k != "modes"})
    att = v.get("attacks")
    if isinstance(att, dict):
        out.update({k: att[k] for k in ATTACK_KEYS if att.get(k) not in (None, {})})
    if isinstance(v.get("scores"), dict):
        out["measures"] = v["scores"]
    return out


def store_verdicts(path: str | Path, output: str | Path, *, kb_file: str | None = None) -> dict[str, Any]:
    """Write the verdicts of ``path`` into the results store in ``output`` (see the module
    docstring) and its ``config.yaml``; returns ``{"points", "added", "output"}``."""
    import yaml

    from .store import Point, ResultsStore

    verdicts = read_verdicts(path)
    kb = kb_file or next((v.get("kb") for v in verdicts if v.get("kb")), None)
    n_facts = _kb_facts(kb)
    for v in verdicts:  # fact ids past the KB's end (the report names every target by its fact)
        check_verdict(v, path, v["_line"], n_facts)
    out = Path(output)
    points, methods = [], {}
    for v in verdicts:
        row = v.get("row") if isinstance(v.get("row"), dict) else {}
        method = str(v.get("method") or row.get("method") or "evaluate")
        param = v.get("param", row.get("param"))
        try:
            param = float(param)
        except (TypeError, ValueError):
            param = float(v["_line"])  # a row without a numeric param: its place in the file
        methods.setdefault(method, []).append(param)
        points.append(Point.from_dict({
            "model": v["original"], "target": v["target_id"], "method": method, "param": param,
            "recall": v["recall"], "accuracy": v["accuracy"], "accuracy_rule": v.get("accuracy_rule"),
            "accuracy_other": v.get("accuracy_other"), "accuracy_groups": v.get("accuracy_groups"),
            "target_forgotten": v.get("target_forgotten", False), "forgotten": v["forgotten"],
            "exact": v.get("exact", True), "deep": v.get("deep"), "superficial": v.get("superficial"),
            "checkpoint": row.get("checkpoint", v.get("unlearned")), **check_keys(v),
            **{k: v[k] for k in CHANCE_KEYS + SOFT_KEYS if v.get(k) is not None}}))
    added = 0
    with ResultsStore(out) as store:
        have = {(p.model, p.target, p.method, float(p.param)) for p in store.points()}
        for p in points:
            key = (p.model, p.target, p.method, float(p.param))
            if key not in have:  # two rows at one param of one trajectory: the first counts
                store.add_point(p)
                have.add(key)
                added += 1
        for p in points:
            store.finish_job(p.model, p.target, p.method)
    cfg = {"kb": str(Path(kb).resolve()) if kb and Path(kb).exists() else kb,
           "methods": {m: sorted(set(ps)) for m, ps in methods.items()},
           "models": [{"name": m} for m in dict.fromkeys(v["original"] for v in verdicts)],
           "source": str(path)}
    atomic_write_text(out / "config.yaml", yaml.safe_dump(cfg, sort_keys=False))  # a link there is replaced, never followed
    return {"points": len(points), "added": added, "output": str(out)}


def register(sub: argparse._SubParsersAction) -> None:
    from ..cli import add_force, add_json

    p = sub.add_parser("evaluate-report", help="store the verdicts of 'evaluate --manifest' and write their report",
                       description="Write the verdict lines of 'deepunlearn evaluate --manifest ... -o VERDICTS.jsonl' "
                                   "into a results store (DIR/results.sqlite) and build the sweep report "
                                   "(DIR/report/report.md) from them; running it again adds new verdicts.")
    p.add_argument("verdicts", metavar="VERDICTS.jsonl", help="the output of 'deepunlearn evaluate --manifest'")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="results folder (store and report)")
    p.add_argument("--kb", default=None, help="KB file for the report (default: the one the verdicts name)")
    add_force(p, "-o (an existing folder that holds no results.sqlite)")
    add_json(p)
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from ..cli import emit
    from ..outputs import check_output
    from .guard import check_children, results_folder
    from .report import write_report

    # before anything is written: a file, a link, a folder of other files (a checkpoint, a user's
    # config.yaml), an input, or a results folder whose report/ or store is a link or a file
    out = check_output(args.output, force=args.force, folder=True, ours=results_folder(strict=True),
                       what="a results folder (no results.sqlite)", inputs={"VERDICTS": args.verdicts, "--kb": args.kb})
    check_children(out, f"-o {out}")
    res = store_verdicts(args.verdicts, args.output, kb_file=args.kb)
    res["report"] = str(write_report(args.output))
    emit(args, res, lambda: f"{res['points']} verdicts, {res['added']} new points in {res['output']}; "
                            f"report: {res['report']}")
    return 0
