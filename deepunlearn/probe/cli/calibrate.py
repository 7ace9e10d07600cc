"""``deepunlearn probe``'s calibration options (:mod:`deepunlearn.probe.calibration`).

``--calibrate HOLD.json`` (never-seen facts: a holdout KB from ``deepunlearn data holdout``) or
``--exclude F.json`` (never-seen facts: these facts of ``--kb``, which the model, or ``--retain R``,
was finetuned without: ``deepunlearn finetune --exclude``) measures every probe mode's evidence
on the never-seen facts and on the KB's facts (the excluded ones left out), sets a threshold per
mode and relation group for ``--fpr`` (default 0.05), and per relation with at least 20
never-seen facts (a relation with fewer takes its group's, said in one line on stderr and in the
file), prints per mode x group the measured FPR and TPR (calibrated and raw), per mode x relation
the raw FPR (the rate ``evaluate --calibration`` turns into p_chance), which modes are informative
(TPR >= ``--min-tpr``, default 0.5), and reports the asked mode's calibrated verdicts. ``-o FILE``
writes the known facts with the calibration inside; ``--calibration FILE`` (that file, or the calibration alone) applies it later:
``--mode any`` is then the OR over the calibrated informative modes, ``any_raw`` the uncalibrated
rule, and a single mode its calibrated verdict. Without a calibration nothing changes: every mode
keeps its raw rule (``any`` = ``any_raw``, uncalibrated). The forms are the calibration's
(default ``all``, the adversarial aggregate's).
"""

from __future__ import annotations

import argparse
import json
from typing import Callable

import numpy as np


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--calibrate", default=None, metavar="HOLD.json",
                   help="calibrate every probe mode on a holdout KB's never-seen facts (deepunlearn data holdout): "
                        "thresholds per mode and relation group for --fpr, a table of FPR/TPR, written with -o")
    p.add_argument("--exclude", default=None, metavar="F.json",
                   help="calibrate on these facts of --kb instead, which the model (or --retain) never saw "
                        "(the list given to finetune --exclude)")
    p.add_argument("--retain", default=None, metavar="MODEL",
                   help="with --exclude or --calibrate: the model whose scores on the never-seen facts set the "
                        "thresholds (a retain model finetuned without them; default: --model)")
    p.add_argument("--fpr", type=float, default=None, metavar="RATE",
                   help="target false-positive rate on never-seen facts (default 0.05)")
    p.add_argument("--min-tpr", type=float, default=None, metavar="RATE",
                   help="a mode whose TPR on the KB's facts is below this is uninformative and left out of the "
                        "calibrated any (default 0.5)")
    p.add_argument("--calibration", default=None, metavar="FILE",
                   help="apply a calibration (probe --calibrate -o FILE): --mode any becomes the OR over the "
                        "calibrated informative modes (any_raw: the uncalibrated rule)")


def wanted(args) -> bool:
    return any(getattr(args, k, None) is not None for k in ("calibrate", "exclude", "calibration", "retain", "fpr",
                                                            "min_tpr"))


def _check(args) -> None:
    from ...cli import CLIError

    if args.calibrate and args.exclude:
        raise CLIError("--exclude: give either --calibrate HOLD.json or --exclude F.json", field="--exclude")
    making = bool(args.calibrate or args.exclude)
    if args.calibration and making:
        raise CLIError("--calibration: applies a calibration; it cannot be given with --calibrate/--exclude",
                       field="--calibration")
    for flag, v in (("--retain", args.retain), ("--fpr", args.fpr), ("--min-tpr", args.min_tpr)):
        if v is not None and not making:
            raise CLIError(f"{flag}: is for --calibrate or --exclude", field=flag)
    if args.cache_dir:
        raise CLIError("--cache-dir: calibrated probing is not cached; leave --cache-dir out", field="--cache-dir")


def run(args, kb, load: Callable) -> int:
    """The calibrated ``probe`` (module docstring); ``load(name)`` loads a model for the CLI."""
    import time

    from ...cli import CLIError, emit
    from ...errors import atomic_write_text
    from ..calibration import CalibrationError, load_calibration, table, verdicts
    from ..calibration_relations import fallbacks, relation_table
    from ..evidence import fact_groups, mode_evidence
    from ..modes import probe_mode

    _check(args)
    mode = args.mode or "any"
    cal = load_calibration(args.calibration) if args.calibration else None
    forms = (cal.meta.get("forms") if cal else None) or args.forms or "all"
    if cal is not None and args.forms is not None and args.forms != forms:
        raise CLIError(f"--forms: the calibration was made on forms {forms!r}; probe with those (or leave --forms out)",
                       field="--forms")
    t0 = time.perf_counter()
    bundle = load(args.model)
    ids = list(range(len(kb.facts)))
    raw = None
    if cal is None:
        cal, raw, ev, ids = _calibrate_now(args, kb, bundle, ids, forms, load)
    else:
        need = list(cal.modes) if mode == "any_raw" or probe_mode(mode).aggregate else [mode]
        ev = mode_evidence(bundle, kb, ids, need, forms=forms, batch_size=args.batch_size)
    groups = fact_groups(kb, ids)
    try:
        known, known_raw = verdicts(cal, mode, ev, groups, _relations(kb, ids))
    except CalibrationError as e:
        raise CLIError(f"--calibration: {e}", file=args.calibration, field="--calibration") from None
    by_group = {g: [int(known[np.array(groups) == g].sum()), int((np.array(groups) == g).sum())]
                for g in dict.fromkeys(groups)}
    out = {"known": int(known.sum()), "total": len(ids), "known_raw": int(known_raw.sum()),
           "known_share": round(float(known.mean()) if len(ids) else 0.0, 6), "known_by_group": by_group,
           "mode": mode, "calibrated": mode != "any_raw", "fpr": cal.fpr, "floor": cal.floor(),
           "uninformative": {m: {g: e.reason for g, e in by.items() if not e.informative}
                             for m, by in cal.entries.items() if any(not e.informative for e in by.values())},
           "model": bundle.name, "kb": str(args.kb), "forms": forms,
           "seconds": round(time.perf_counter() - t0, 3)}
    if raw is not None:
        out["calibration"] = cal.to_json()
        out["raw_rates"] = {m: {g: {"fpr": r[0], "tpr": r[1]} for g, r in by.items()} for m, by in raw.items()}
        out["relation_fallbacks"] = {r: {"group": g, "n_neg": n} for r, (g, n) in fallbacks(cal.relations).items()}
    if args.output:
        kept = sorted(i for i, k in zip(ids, known) if k)
        doc = {**out, "calibration": cal.to_json(), "fact_ids": kept, "facts": [list(kb.facts[i]) for i in kept]}
        out["output"] = str(atomic_write_text(args.output, json.dumps(doc, ensure_ascii=False, indent=1) + "\n"))
    emit(args, out, lambda: (
        f"{bundle.name} knows {out['known']} of {out['total']} facts under calibrated {mode} "
        f"(raw rule: {out['known_raw']}; " + ", ".join(f"{g} {k}/{n}" for g, (k, n) in by_group.items())
        + f") [target FPR {cal.fpr:.0%}, forms {forms!r}, {out['seconds']:.1f}s]"
        + ("\n" + table(cal, raw) if raw is not None else "")
        + ("\n" + relation_table(cal.relations) if raw is not None and cal.relations else "")
        + "".join(f"\n{m} uninformative in {g}: {r}" for m, by in out["uninformative"].items() for g, r in by.items()
                  if raw is None)))
    return 0


def _calibrate_now(args, kb, bundle, ids: list[int], forms: str, load: Callable) -> tuple:
    """Calibrate on the negatives (``--calibrate``'s holdout KB, or the ``--exclude``'d facts,
    which leave ``ids``): the calibration, the raw rule's rates, the positives' evidence and ids."""
    import sys

    from ...cli import CLIError
    from ...kg.fingerprint import kb_fingerprint
    from ..calibration import DEFAULT_FPR, DEFAULT_MIN_TPR, CalibrationError, calibrate, raw_rates
    from ..calibration_relations import fallback_line
    from ..evidence import fact_groups, mode_evidence
    from ...kg.io import load_kb

    if args.calibrate:
        neg_kb = load_kb(args.calibrate)
        neg_ids, what = list(range(len(neg_kb.facts))), "holdout"
    else:
        from ...kg.refs import read_fact_list

        neg_kb, what = kb, "excluded"
        neg_ids = sorted(set(read_fact_list(kb, args.exclude, flag="--exclude", key="exclude")))
        ids = [i for i in ids if i not in set(neg_ids)]
    neg_bundle = load(args.retain) if args.retain else bundle
    pos_ev = mode_evidence(bundle, kb, ids, forms=forms, batch_size=args.batch_size)
    neg_ev = mode_evidence(neg_bundle, neg_kb, neg_ids, forms=forms, batch_size=args.batch_size)
    held = neg_kb.metadata.get("holdout") if isinstance(neg_kb.metadata, dict) else None
    meta = {"model": bundle.name, "retain": neg_bundle.name if args.retain else None, "negatives": what,
            "negatives_file": str(args.calibrate or args.exclude), "negatives_n": len(neg_ids),
            "negatives_fingerprint": kb_fingerprint(neg_kb) + ("" if what == "holdout" else
                                                               f":{len(neg_ids)}"),
            "holdout_seed": held.get("seed") if isinstance(held, dict) else None,
            "kb_fingerprint": kb_fingerprint(kb), "forms": forms, "prompt_format": bundle.prompt.spec,
            "evidence": "exact/generate: answer log-prob per token; rank: gold minus best wrong normalised "
                        "log-prob; yesno: oriented log P(yes) - log P(no)"}
    try:
        cal = calibrate(neg_ev, fact_groups(neg_kb, neg_ids), pos_ev, fact_groups(kb, ids),
                        fpr=DEFAULT_FPR if args.fpr is None else args.fpr,
                        min_tpr=DEFAULT_MIN_TPR if args.min_tpr is None else args.min_tpr, meta=meta,
                        neg_relations=_relations(neg_kb, neg_ids), pos_relations=_relations(kb, ids))
    except CalibrationError as e:
        flag = {"fpr": "--fpr", "min_tpr": "--min-tpr"}.get(e.field, args.calibrate and "--calibrate"
                                                             or "--exclude")
        raise CLIError(f"{flag}: {e}", field=flag) from None
    raw = raw_rates(neg_ev, fact_groups(neg_kb, neg_ids), pos_ev, fact_groups(kb, ids))
    note = fallback_line(cal.relations, cal.min_relation_negatives)
    if note:
        print(f"deepunlearn probe: {note}", file=sys.stderr)
    return cal, raw, pos_ev, ids


def _relations(kb, ids) -> list[str]:
    """The relation of each fact id."""
    return [kb.facts[int(i)][1] for i in ids]
