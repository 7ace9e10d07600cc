"""du_loop's options against GA on a finetuned model: per target, Success-DU@0.9, deep under the
calibrated adversarial aggregate, deep after relearning and after int8 / 4-bit quantisation, and
seconds per target divided by GA's in the same run; 95 % bootstrap intervals over targets
(:mod:`deepunlearn.bench.bootstrap`). Also the RMU learning-rate scan (``--rmu-scan``) and the
sequential requests (``--sequential``). Writes one JSON line per target and variant as it goes and
skips those already in the output (resumes).

Run::

    python benchmarks/duloop_variants.py --kb edu.json --model tiny-edu-llama --make-calibration hold.json -o cal.json
    python benchmarks/duloop_variants.py --kb edu.json --model tiny-edu-llama --calibration cal.json \\
        --targets 21:29 -o variants.jsonl
    python benchmarks/duloop_variants.py --kb edu.json --model tiny-edu-llama --rmu-scan --targets 0:5 -o rmu.jsonl
    python benchmarks/duloop_variants.py --kb edu.json --model tiny-edu-llama --sequential \\
        --refs 79,220,61,68,127,343,219,349,28,250,214 -o seq.jsonl

Variants: ``ga``, ``npo`` and du_loop's (``du_loop``: its defaults; ``du_loop-margin1``: a margin of
as many steps and no lookahead; ``du_loop-plain``: no margin, no healing; ``du_loop+adv``,
``du_loop+sam``, ``du_loop(rmu)``, the margin and healing settings compared in docs/results-history.md:
``du_loop+over0.5`` ... ``du_loop+over3+heal8``, and ``du_loop+tamper`` / ``du_loop+tamper32``:
``du_loop+over1+heal8`` with the tamper phase, 8 / 32 meta steps; ``du_loop+tamper32win``: after a
meta step first only the halves that won; ``du_loop+tamper32e4``: that and 4 meta steps per
simulation; ``du_loop+linked``: the defaults with a margin of as many steps). Every variant with a
margin pins NPO's loss on it, as its measured tables ran, and every one but ``du_loop+linked`` the
lookahead off. ``--relearn-on split`` relearns on half the target's chosen set and its other forms
instead of on other facts; ``--checks`` drops checks on a slow model (the dropped columns print as
``–``). The adversarial aggregate is asked at each trajectory's last grid point only.

``--targets A:B`` takes the KB's listed targets A..B-1 (0-based, in the order the release lists
them); ``A:B:S`` every S-th of them (``0::5`` on a generated KB: the first target of each relation). CPU, one torch thread.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from deepunlearn.unlearn.attack_kinds import RELEARN_ON, relearn_on_help

EPS = 1e-9
#: the adversarial aggregate's modes (generate, the costliest, left out on this CPU)
MODES = ("exact", "yesno", "rank")
#: the checks of each point (``--checks``): the adversarial aggregate, relearning, int8, int4
CHECKS = ("adversarial", "relearn", "int8", "int4")
#: each check's key in a row: 1 where the target is out of the closure after the check
CHECK_KEYS = ("adv_deep", "relearn_deep", "int8_deep", "int4_deep")
#: every variant but the defaults and ``du_loop+linked`` ran without the lookahead and pins it off
LOOK_OFF = {"lookahead": "off", "tamper_on": "split", "tamper_halves": "random"}
#: the margin variants ran with NPO's loss on the margin's steps; du_loop's default takes GA's
#: (``margin_base = "auto"``), so they pin NPO's to stay the runs their figures come from
NPO_MARGIN = {"margin_base": "npo", **LOOK_OFF}
HEAL8 = {**NPO_MARGIN, "heal": 32, "heal_batch": 8, "heal_every": 8}
VARIANTS = {
    "ga": ("ga", {}),
    "npo": ("npo", {}),
    "du_loop": ("du_loop", {}),  # the defaults
    # a margin of as many steps as the loop took to the deep point, without the lookahead
    "du_loop-margin1": ("du_loop", {"overshoot": 1.0, **LOOK_OFF}),
    # the loop that stops at the deep point: no margin, no healing (the other du_loop variants but
    # the margin and healing ones add their option to it)
    "du_loop-plain": ("du_loop", {**LOOK_OFF, "overshoot": 0.0, "heal": 0}),
    "du_loop+adv": ("du_loop", {**LOOK_OFF, "watch": "adversarial", "overshoot": 0.0, "heal": 0}),
    "du_loop+sam": ("du_loop", {**LOOK_OFF, "sam_rho": 0.05, "overshoot": 0.0, "heal": 0}),
    "du_loop(rmu)": ("du_loop", {**LOOK_OFF, "base": "rmu", "overshoot": 0.0, "heal": 0}),
    "du_loop+over0.5": ("du_loop", {**NPO_MARGIN, "overshoot": 0.5, "heal": 0}),
    "du_loop+over1": ("du_loop", {**NPO_MARGIN, "overshoot": 1.0, "heal": 0}),
    "du_loop+over3": ("du_loop", {**NPO_MARGIN, "overshoot": 3.0, "heal": 0}),
    "du_loop+over1+r32": ("du_loop", {**NPO_MARGIN, "overshoot": 1.0, "heal": 0, "retain_size": 32}),
    "du_loop+over1+w2": ("du_loop", {**NPO_MARGIN, "overshoot": 1.0, "heal": 0, "retain_weight": 2.0}),
    "du_loop+heal": ("du_loop", {**LOOK_OFF, "overshoot": 0.0, "heal": 32, "heal_batch": 32, "heal_every": 4}),
    # healing on batches of 32 facts with a probe every 4 steps (the defaults: 8 and 8)
    "du_loop+over1+heal": ("du_loop", {**NPO_MARGIN, "overshoot": 1.0, "heal": 32, "heal_batch": 32, "heal_every": 4}),
    "du_loop+over1+heal8": ("du_loop", {**HEAL8, "overshoot": 1.0}),  # du_loop-margin1 with NPO's margin
    "du_loop+over3+heal8": ("du_loop", {**HEAL8, "overshoot": 3.0}),
    "du_loop+tamper": ("du_loop", {**HEAL8, "overshoot": 1.0, "tamper": 8}),
    "du_loop+tamper32": ("du_loop", {**HEAL8, "overshoot": 1.0, "tamper": 32}),
    "du_loop+tamper32e4": ("du_loop", {**HEAL8, "overshoot": 1.0, "tamper": 32, "tamper_every_half": False,
                                       "tamper_every": 4}),
    "du_loop+tamper32win": ("du_loop", {**HEAL8, "overshoot": 1.0, "tamper": 32, "tamper_every_half": False}),
    # the lookahead on linked halves of Deeb & Roger's split with a margin of as many steps (the defaults: twice)
    "du_loop+linked": ("du_loop", {"overshoot": 1.0, "lookahead": "margin", "tamper_on": "split-set",
                                   "tamper_halves": "linked"}),
    # 32 guard facts, a step may forget at most 5 % of them (one fact): half of the 10 % of K that
    # Success-DU@0.9 allows in all; at most three halvings (rate factor 1/8). Fixed before any run.
    "du_loop+guard": ("du_loop", {**LOOK_OFF, "guard": 32, "guard_drop": 0.05, "guard_min_scale": 0.125,
                                  "overshoot": 0.0, "heal": 0}),
}


def variant(name: str) -> tuple[str, dict]:
    """(method, params) of a variant: a name of :data:`VARIANTS`, optionally followed by
    ``@key=value`` overrides (values read as JSON, else kept as text).

    >>> variant("du_loop+tamper32@tamper_splits=1@tamper_every_half=false")[1]["tamper_splits"]
    1
    """
    base, *over = name.split("@")
    if base not in VARIANTS:
        raise SystemExit(f"--variants: unknown variant {base!r}; some of: {', '.join(VARIANTS)}")
    method, params = VARIANTS[base]
    params = dict(params)
    for kv in over:
        key, sep, value = kv.partition("=")
        if not sep or not key:
            raise SystemExit(f"--variants: {name!r}: expected @key=value, got {kv!r}")
        try:
            params[key] = json.loads(value)
        except json.JSONDecodeError:
            params[key] = value
    return method, params


def _patch_int4():
    """Every attack also re-probes the model quantised to 4 bits (``recall_int4``)."""
    from deepunlearn.unlearn.attacks import quantize_attack
    from deepunlearn.unlearn.checks import ForgettingChecks

    real = ForgettingChecks._attack

    def attack(self, points, targets, model_fn, lr):
        real(self, points, targets, model_fn, lr)
        r = self.model
        ks = quantize_attack(r.bundle.model, lambda: r.known_after(model_fn), how="int4")
        for p, (rec, acc) in zip(points, self._measure(points, ks)):
            p.notes["recall_int4"], p.notes["accuracy_int4"] = rec, acc

    ForgettingChecks._attack = attack


def _slice(spec: str) -> slice:
    """``A:B`` or ``A:B:S`` (every S-th listed target: one per relation when S is the per-relation count)."""
    return slice(*(int(x) if x else None for x in spec.split(":")))


def _patch_adversarial_last():
    """The adversarial aggregate only at a trajectory's last grid point (the table reads the last
    point's): on a model GA or NPO has collapsed every fact of K is 'forgotten' and re-asked under
    every form and mode, at every grid point otherwise."""
    from deepunlearn.unlearn.checks import ForgettingChecks

    real = ForgettingChecks.annotate

    def annotate(self, points, targets, step, forgotten, *, last, lr):
        from dataclasses import replace

        keep, self.spec = self.spec, replace(self.spec, adversarial=self.spec.adversarial and last)
        try:
            real(self, points, targets, step, forgotten, last=last, lr=lr)
        finally:
            self.spec = keep

    ForgettingChecks.annotate = annotate


def _done(path: Path) -> set[tuple]:
    if not path.exists():
        return set()
    return {(r["variant"], r["target"]) for r in map(json.loads, path.read_text().splitlines()) if r.get("variant")}


def _row(variant, t, points, checks=CHECKS) -> dict:
    from deepunlearn.unlearn.summary import acc_at_recall

    last = points[-1]
    n = last.notes
    check = sum(p.notes.get("check_seconds", 0) for p in points[:-1])
    row = {
        "variant": variant, "target": t,
        "success_du_0.9": float(any(p.notes.get("deep") and p.accuracy >= 0.9 - EPS for p in points)),
        "success_du_0.8": float(any(p.notes.get("deep") and p.accuracy >= 0.8 - EPS for p in points)),
        "deep": float(any(p.notes.get("deep") for p in points)),
        "acc_at_recall_0.8": acc_at_recall([(p.recall, p.accuracy) for p in points], 0.8),
        "accuracy_last": last.accuracy, "deep_last": float(bool(n.get("deep"))),
        "seconds": max(0.0, float(n.get("seconds", 0)) - check),
        "steps_used": n.get("steps_used"), "lr": last.lr,
    }
    steps = n.get("recall_relearn")
    if isinstance(steps, dict) and len(steps) > 1:  # deep after each number of relearning steps
        for k, v in steps.items():
            row[f"relearn_deep@{k}"] = float(v >= 1 - EPS)
    if n.get("returned_relearn"):  # facts back after the longest attack; how many the rules imply
        last = n["returned_relearn"][max(n["returned_relearn"], key=int)]
        row["returned"], row["returned_implied"] = len(last), sum(bool(v) for v in last.values())
    row.update({k: n[k] for k in ("guard_undone", "guard_forced", "guard_scale", "guard_known", "steps_to_deep",
                                  "heal_steps", "heal_known", "tamper_steps_taken", "tamper_robust") if k in n})
    int4 = "recall_int4" if "int8" in checks else "recall_quant"  # 4-bit alone: the run's own quantisation
    for key, on, note in zip(CHECK_KEYS, CHECKS, ("recall_adv", "recall_relearn", "recall_quant", int4)):
        if on in checks:
            v = n.get(note, 0)
            # None: a split with nothing to relearn (split-set, a chosen set that is the target alone)
            row[key] = None if v == {} else float((min(v.values()) if isinstance(v, dict) else v) >= 1 - EPS)
    return row


def runner_for(args, calibration=True):
    from deepunlearn.kg import load_kb
    from deepunlearn.probe import load_model
    from deepunlearn.unlearn import TargetRunner

    kb = load_kb(args.kb)
    bundle = load_model(args.model, device="cpu")
    kw = {"lr": args.lr} if args.lr else {}
    if calibration:
        checks = _checks(args)
        if "adversarial" in checks:
            kw.update(adversarial=True, adversarial_calibration=args.calibration, adversarial_modes=MODES)
        quant = "int8" if "int8" in checks else ("int4" if "int4" in checks else None)
        if quant or "relearn" in checks:
            kw["attacks"] = {"relearn": args.relearn_steps if "relearn" in checks else [], "quantize": quant,
                             "relearn_lr": args.relearn_lr, "relearn_on": args.relearn_on}
    return kb, TargetRunner(bundle, kb, cache_dir=args.cache, progress=False, seed=0, **kw)


def _checks(args) -> tuple[str, ...]:
    got = tuple(x for x in args.checks.split(",") if x)
    bad = [x for x in got if x not in CHECKS]
    if bad:
        raise SystemExit(f"--checks: unknown check {bad[0]!r}; expected some of {', '.join(CHECKS)}")
    return got


def variants(args) -> None:
    if {"int8", "int4"} <= set(_checks(args)):
        _patch_int4()
    _patch_adversarial_last()
    kb, runner = runner_for(args)
    out = Path(args.output)
    done = _done(out)
    served = 0
    for t in kb.targets[_slice(args.targets)]:
        if t not in runner.known:
            continue
        served += 1
        if args.max_targets and served > args.max_targets:
            break
        for name in args.variants.split(","):
            if (name, t) in done:
                continue
            method, params = variant(name)
            u = runner.unlearner(method)
            grid = [128] if method == "du_loop" else list(u.params.grid)
            extra = dict(params)
            if params.get("base") == "rmu":
                extra["lr"] = args.rmu_lr
            u = type(u)(u.params, grid=grid, **extra)
            t0 = time.perf_counter()
            points = list(runner.run(t, u, seed=0))
            row = _row(name, t, points, _checks(args))
            row["wall"] = round(time.perf_counter() - t0, 2)
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps(row), file=sys.stderr, flush=True)


def rmu_scan(args) -> None:
    kb, runner = runner_for(args, calibration=False)
    out = Path(args.output)
    for t in kb.targets[_slice(args.targets)]:
        if t not in runner.known:
            continue
        for lr in [None if x == "default" else float(x) for x in args.lrs.split(",")]:
            u = runner.unlearner("rmu")
            u = type(u)(u.params, grid=[int(g) for g in args.scan_grid.split(",")], lr=lr)
            for p in runner.run(t, u, seed=0):
                row = {"rmu_lr": p.lr, "target": t, "steps": p.param, "target_forgotten": t in p.forgotten,
                       "recall": p.recall, "accuracy": p.accuracy, "deep": bool(p.notes.get("deep")),
                       "forgotten": len(p.forgotten)}
                with out.open("a") as f:
                    f.write(json.dumps(row) + "\n")
                print(json.dumps(row), file=sys.stderr, flush=True)


def make_calibration(args) -> None:
    """The calibrated aggregate on ``MODES`` (every form), thresholds for FPR 0.05 on the holdout."""
    from deepunlearn.kg import load_kb
    from deepunlearn.probe import load_model
    from deepunlearn.probe.calibration import calibrate
    from deepunlearn.probe.evidence import fact_groups, mode_evidence

    kb, hold = load_kb(args.kb), load_kb(args.make_calibration)
    bundle = load_model(args.model, device="cpu")
    pos_ids, neg_ids = list(range(len(kb.facts))), list(range(len(hold.facts)))
    pos = mode_evidence(bundle, kb, pos_ids, MODES, forms="all")
    neg = mode_evidence(bundle, hold, neg_ids, MODES, forms="all")
    cal = calibrate(neg, fact_groups(hold, neg_ids), pos, fact_groups(kb, pos_ids), meta={"forms": "all"})
    Path(args.output).write_text(json.dumps(cal.to_json(), indent=1))


def sequential(args) -> None:
    from deepunlearn.unlearn.requests import run_sequential

    kb, runner = runner_for(args, calibration=False)
    refs = [int(x) for x in args.refs.split(",")]
    out = Path(args.output)
    runs = {"plain": {}, "recheck+guard": {"recheck": True, "min_accuracy": args.min_accuracy},
            "recheck": {"recheck": True}, "heal+recheck": {"recheck": True, "heal_steps": args.heal_steps},
            "heal+recheck+guard": {"recheck": True, "heal_steps": args.heal_steps, "min_accuracy": args.min_accuracy}}
    for label in args.sequences.split(","):
        kw = runs[label]
        t0 = time.perf_counter()
        method, params = variant(args.seq_variant)
        u = runner.unlearner(method)
        u = type(u)(u.params, **params)
        kw = {**kw, "protect": not args.no_protect}
        if kw.get("recheck"):
            kw["recheck"] = args.recheck_mode
        for p in run_sequential(runner, refs, u, seed=0, **kw):
            if "accuracy_after" not in p.notes:
                continue
            e = p.notes["earlier"]
            row = {"sequence": label, "variant": args.seq_variant, "request": p.notes["request"], "target": p.target,
                   "accuracy_after": p.notes["accuracy_after"], "skipped": bool(p.notes.get("skipped")),
                   "accuracy_would_be": p.notes.get("accuracy_would_be"),
                   "served": len(e), "deep": sum(bool(x["deep"]) for x in e),
                   "reunlearned": [x["target"] for x in p.notes.get("reunlearned", [])],
                   "healed": p.notes.get("healed"), "recheck_mode": args.recheck_mode,
                   "protect": not args.no_protect,
                   "seconds": round(time.perf_counter() - t0, 1)}
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps(row), file=sys.stderr, flush=True)


def summarise(path: str, still_deep: bool = False) -> str:
    """The markdown table of a ``variants`` output: means with 95 % bootstrap intervals. With
    ``still_deep`` a check counts a target as deep only where it was deep at the checked (last) point:
    an attack that dislodges a fact of a model that was not deep does not make it "still deep"."""
    from deepunlearn.bench.bootstrap import bootstrap_interval

    rows = [json.loads(x) for x in Path(path).read_text().splitlines()]
    by: dict[str, dict[int, dict]] = {}
    for r in rows:
        by.setdefault(r["variant"], {})[r["target"]] = r
    ga = by.get("ga", {})
    keys = ["success_du_0.8", "success_du_0.9", "acc_at_recall_0.8", "deep", "accuracy_last", *CHECK_KEYS]
    lines = ["| variant | Success-DU@0.8 | Success-DU@0.9 | Acc@R≥0.8 | deep rate | accuracy (last point) "
             "| calibrated-adversarial deep | deep after relearn@8 | deep after int8 | deep after int4 "
             "| s/target ÷ GA's | targets |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, per in by.items():
        cells = []
        for k in keys:
            vals = [r[k] * (r["deep_last"] if still_deep and k in CHECK_KEYS else 1)
                    for r in per.values() if r.get(k) is not None]
            if not vals:
                cells.append("–")
                continue
            lo, hi = bootstrap_interval(vals)[:2]
            mean = sum(vals) / len(vals)
            cells.append(f"{mean:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if lo is not None else ""))
        common = [t for t in per if t in ga and ga[t]["seconds"] > 0]
        ratios = [per[t]["seconds"] / ga[t]["seconds"] for t in common]
        if ratios:
            lo, hi = bootstrap_interval(ratios)[:2]
            mean = sum(ratios) / len(ratios)
            ratio = f"{mean:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if lo is not None else "")
        else:
            ratio = "–"
        lines.append(f"| `{name}` | " + " | ".join(cells) + f" | {ratio} | {len(per)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import torch

    torch.set_num_threads(1)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kb", required=False)
    ap.add_argument("--model", required=False)
    ap.add_argument("--calibration", default=None, help="probe --calibrate output for the adversarial aggregate")
    ap.add_argument("--cache", default="probe-cache")
    ap.add_argument("--targets", default="20:55", help="A:B[:S]: the KB's listed targets A..B-1 (every S-th)")
    ap.add_argument("--variants", default="ga,npo,du_loop-plain,du_loop+adv,du_loop+sam,du_loop(rmu)",
                    help="some of: " + ", ".join(VARIANTS) + "; each may add @key=value overrides")
    ap.add_argument("--max-targets", type=int, default=None, help="at most N of the listed targets the model knows")
    ap.add_argument("--lr", type=float, default=None,
                    help="every variant's learning rate (default: the rule's for the checkpoint)")
    ap.add_argument("--rmu-lr", type=float, default=None, help="du_loop(rmu)'s learning rate")
    ap.add_argument("--relearn-lr", type=float, default=None, help="the relearning attack's rate (default: the run's)")
    ap.add_argument("--relearn-on", default="other", choices=RELEARN_ON,
                    help="what the relearning attack trains on: " + relearn_on_help())
    ap.add_argument("--relearn-steps", type=lambda v: [int(x) for x in v.split(",")], default=[8],
                    help="the relearning attack's step counts (default 8; the table's column is deep after all)")
    ap.add_argument("--seq-variant", default="du_loop-plain",
                    help="the variant that serves the sequential requests")
    ap.add_argument("--checks", default=",".join(CHECKS),
                    help="checks of each target's last point, some of: " + ", ".join(CHECKS))
    ap.add_argument("--rmu-scan", action="store_true")
    ap.add_argument("--lrs", default="default,4e-3,1.6e-2,6.4e-2", help="rates of the RMU scan ('default': the rule's)")
    ap.add_argument("--scan-grid", default="16", help="the RMU scan's step counts")
    ap.add_argument("--sequential", action="store_true")
    ap.add_argument("--refs", default="79,220,61,68,127,343,219,349,28,250,214")
    ap.add_argument("--min-accuracy", type=float, default=0.8)
    ap.add_argument("--sequences", default="plain,recheck+guard",
                    help="which sequences: plain, recheck, recheck+guard, heal+recheck, heal+recheck+guard")
    ap.add_argument("--recheck-mode", default="each", choices=("each", "batch"),
                    help="the re-check unlearns derivable earlier targets one after another or together")
    ap.add_argument("--no-protect", action="store_true",
                    help="let a request's retain term and healing train on the earlier targets' sets")
    ap.add_argument("--heal-steps", type=int, default=64, help="the heal sequences' largest number of healing steps")
    ap.add_argument("--make-calibration", default=None, metavar="HOLD.json",
                    help="write the calibration of the aggregate's modes on this holdout to -o and exit")
    ap.add_argument("--summary", default=None, help="print the table of a variants output and exit")
    ap.add_argument("--still-deep", action="store_true",
                    help="with --summary: the checks' columns count a target only where it was deep before the check")
    ap.add_argument("-o", "--output", default="variants.jsonl")
    args = ap.parse_args(argv)
    if args.summary:
        print(summarise(args.summary, args.still_deep))
        return 0
    if args.make_calibration:
        make_calibration(args)
    elif args.rmu_scan:
        rmu_scan(args)
    elif args.sequential:
        sequential(args)
    else:
        variants(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
