"""The never-learned floor of the split relearning check: how often does the attack teach a target
to a model that never saw it?

    python benchmarks/relearn_floor.py --kb kb.json --model tiny-qwen3 --targets 0::5 --max-targets 10 \\
        -o floor.jsonl [--relearn-on split-set] [--steps 8] [--lr 1e-4] [--cache cache]
    python benchmarks/relearn_floor.py --table floor.jsonl [--against variants.jsonl]

The split check (``relearn_on = "split"``) trains ``steps`` AdamW steps on a seeded half of the
target's chosen minimal set and on the target's other question and statement forms, then asks
whether the target is derivable again. Its training data hold the target itself (in other words),
so the attack can teach the fact rather than recover it. This script measures that floor: it
trains a retain model (:func:`~deepunlearn.unlearn.retrain.retrain`: the checkpoint's own base,
recipe and seed on the KB without the served targets and their chosen sets, so it never saw any of
them), runs on it the very attack the check runs on an unlearned model (the same chosen set,
seeded half, forms, steps and rate; the weights put back after each target) and asks the check's
question: is the target out of the closure of what the model answers, relearned facts counted as
before the attack? Targets are served as ``benchmarks/duloop_variants.py`` serves them (those of
``--targets`` the checkpoint knows, at most ``--max-targets``), so a row compares with that
script's ``relearn_deep`` for the same target. ``--per-target`` trains one retain model per
target, without that target and its set only (the retain model of unlearning that one target;
slower). ``--lr`` defaults to GA's rate on the checkpoint (the check's rate for GA and du_loop,
whose rows record it as ``lr``). One JSON line per target, appended as it goes; a rerun skips the
targets already there. ``--table floor.jsonl --against variants.jsonl`` puts each variant's
``relearn_deep`` beside the floor on the same targets, with the paired difference.
``--relearn-on split-set`` runs the check's other split, the half of the
set alone (never the target's forms): there the attack cannot teach the target, so the floor is
what the retain model derives with the half relearned. ``--table`` prints the means with 95 %
bootstrap intervals.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from deepunlearn.unlearn.attack_kinds import SPLIT_ON


def _slice(spec: str) -> slice:
    """``A:B`` or ``A:B:S`` of the KB's listed targets."""
    try:
        return slice(*(int(x) if x else None for x in spec.split(":")))
    except (TypeError, ValueError):
        raise SystemExit(f"relearn_floor: --targets: {spec!r} is not a slice (A:B or A:B:S)") from None


def served_targets(kb, known, spec: str, most: int | None) -> list[int]:
    """The targets of ``spec`` (slices of the KB's listed targets, comma-separated) the checkpoint
    knows, at most ``most`` of each slice."""
    out: list[int] = []
    for one in spec.split(","):
        got = [int(t) for t in kb.targets[_slice(one)] if int(t) in known and int(t) not in out]
        out += got[:most] if most else got
    return out


def _run(args) -> None:
    import torch

    from deepunlearn.kg.io import load_kb
    from deepunlearn.probe import load_model
    from deepunlearn.probe.models import read_meta
    from deepunlearn.unlearn import TargetRunner
    from deepunlearn.unlearn.lr import choose_lr
    from deepunlearn.unlearn.methods import get_method
    from deepunlearn.unlearn.relearn_pool import as_before, run_split, split_batch, split_plan
    from deepunlearn.unlearn.retrain import retrain

    torch.set_num_threads(1)
    out = Path(args.output)
    lines = out.read_text().splitlines() if out.exists() else []
    done = {json.loads(line)["target"] for line in lines if line.strip()}
    kb = load_kb(args.kb)
    bundle = load_model(args.model, device="cpu")
    runner = TargetRunner(bundle, kb, cache_dir=args.cache, progress=False, seed=0)
    targets = served_targets(kb, runner.known, args.targets, args.max_targets)
    chosen = {t: runner.chosen_set(t) for t in targets}
    plans = {t: split_plan(kb, chosen[t], t, seed=0, probe_forms=runner.forms, on=args.relearn_on) for t in targets}
    lr = args.lr or choose_lr(get_method("ga"), meta=read_meta(args.model),
                              n_params=sum(p.numel() for p in bundle.model.parameters())).value
    ids = sorted(runner.known)
    train_kb = load_kb(args.train_kb or args.kb)
    # one retain model without every served target's set, or (--per-target) one per target
    groups = [[t] for t in targets] if args.per_target else [targets]
    for group in groups:
        todo = [t for t in group if t not in done]
        if not todo:
            continue
        removed = sorted({f for t in group for f in [t, *chosen[t]]})
        t0 = time.perf_counter()
        folder = retrain(args.model, train_kb, removed, cache_dir=args.retrain_cache, progress=False, device="cpu")
        rb = load_model(str(folder), device="cpu")

        def answered(rb=rb) -> set[int]:
            return _known(rb, kb, ids, runner)

        start = answered()
        print(f"retain model {folder} ({time.perf_counter() - t0:.0f} s): answers {len(start)} of K's {len(ids)} "
              f"facts, {len(start & set(removed))} of the {len(removed)} removed; lr {lr:g}", file=sys.stderr)
        for t in todo:
            plan = plans[t]
            t1 = time.perf_counter()
            before, after = run_split(rb.model, lambda: split_batch(rb, kb, plan, runner.unlearn_forms), plan,
                                      [args.steps], lr=lr, known=answered, before=start)
            known_after = as_before(plan, before, after.get(args.steps, before))
            row = {"target": t, "relearn_on": plan.on, "steps": args.steps, "lr": lr, "relearned": plan.relearned,
                   "forms": [f.name for f in plan.forms], "removed": len(removed),
                   "deep_before": runner.deep(t, sorted(set(ids) - before)),
                   "target_known_before": t in before,
                   # None: nothing to relearn (split-set, a chosen set that is the target alone)
                   "floor_deep": None if plan.empty else runner.deep(t, sorted(set(ids) - known_after)),
                   "target_learned": t in after.get(args.steps, set()),
                   "seconds": round(time.perf_counter() - t1, 2)}
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps(row), file=sys.stderr, flush=True)


def _known(bundle, kb, ids, runner) -> set[int]:
    """The facts of ``ids`` ``bundle`` answers under the runner's probe."""
    from deepunlearn.probe import probe

    res = probe(bundle, kb, ids, mode=runner.probe_mode, batch_size=runner.batch_size, progress=False,
                **runner._probe_kw)
    return {int(i) for i in res.known_ids()}


def _cell(xs: list[float]) -> str:
    """``mean [low, high]``: the mean with its 95 % bootstrap interval."""
    from deepunlearn.bench.bootstrap import bootstrap_interval

    lo, hi, _ = bootstrap_interval(xs)
    return f"{sum(xs) / len(xs):.2f}" + ("" if lo is None else f" [{lo:.2f}, {hi:.2f}]")


def table(path: str) -> str:
    """Means over targets with 95 % bootstrap intervals."""
    rows = _read(path, "--table")
    cols = [("deep_before", "deep before the attack"), ("target_known_before", "target answered before"),
            ("target_learned", "target answered after"), ("floor_deep", "deep after relearn (never-learned floor)")]
    n = sum(r["floor_deep"] is not None for r in rows)
    attacked = "" if n == len(rows) else f" ({n} with something to relearn)"
    head = "| targets | " + " | ".join(c for _, c in cols) + " |"
    cells = []
    for key, _ in cols:
        xs = [float(r[key]) for r in rows if r[key] is not None]
        cells.append(_cell(xs) if xs else "–")
    return "\n".join([head, "|" + "---|" * (len(cols) + 1), f"| {len(rows)}{attacked} | " + " | ".join(cells) + " |"])


def _read(path: str, flag: str) -> list[dict]:
    if not Path(path).is_file():
        raise SystemExit(f"relearn_floor: {flag} {path}: no such file")
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    if not rows:
        raise SystemExit(f"relearn_floor: {flag} {path}: no rows")
    return rows


def against(path: str, variants: str) -> str:
    """Per variant of a ``duloop_variants.py`` results file: deep after relearning, the floor on
    the same targets and their paired difference (means, 95 % bootstrap intervals)."""
    floor = {int(r["target"]): float(r["floor_deep"]) for r in _read(path, "--table") if r["floor_deep"] is not None}
    rows = [r for r in _read(variants, "--against") if r.get("relearn_deep") is not None]
    if not rows:
        raise SystemExit(f"relearn_floor: --against {variants}: no row has relearn_deep (run it with --checks relearn)")

    out = ["| variant | targets | deep after relearn | never-learned floor | difference |", "|---|---|---|---|---|"]
    for name in dict.fromkeys(r["variant"] for r in rows):
        mine = {int(r["target"]): float(r["relearn_deep"]) for r in rows if r["variant"] == name}
        common = [t for t in mine if t in floor]
        if not common:
            continue
        a, b = [mine[t] for t in common], [floor[t] for t in common]
        out.append(f"| `{name}` | {len(common)} | {_cell(a)} | {_cell(b)} | {_cell([x - y for x, y in zip(a, b)])} |")
    if len(out) == 2:
        raise SystemExit(f"relearn_floor: --against {variants}: no target in common with {path}")
    return "\n".join(out)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kb")
    ap.add_argument("--train-kb", default=None, help="the KB the checkpoint was finetuned on (default --kb)")
    ap.add_argument("--model")
    ap.add_argument("--targets", default=":", help="slices of the KB's listed targets, comma-separated (A:B or A:B:S)")
    ap.add_argument("--max-targets", type=int, default=None, help="at most this many targets of each slice")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--relearn-on", default="split", choices=SPLIT_ON,
                    help="the split check's attack: split (the half and the target's forms, default) or split-set")
    ap.add_argument("--per-target", action="store_true",
                    help="one retain model per target, without that target's set only (default: one for all)")
    ap.add_argument("--lr", type=float, default=None, help="the attack's rate (default: GA's on the checkpoint)")
    ap.add_argument("--cache", default=None, help="probe cache folder")
    ap.add_argument("--retrain-cache", default="retrain-cache", help="where retain models are kept")
    ap.add_argument("-o", "--output", default="floor.jsonl")
    ap.add_argument("--table", default=None, metavar="FLOOR.jsonl")
    ap.add_argument("--against", default=None, metavar="VARIANTS.jsonl",
                    help="with --table: each variant's deep after relearning beside the floor on the same targets")
    args = ap.parse_args(argv)
    if args.table:
        print(against(args.table, args.against) if args.against else table(args.table))
        return
    if not args.kb or not args.model:
        raise SystemExit("relearn_floor: --kb and --model are needed (or --table FILE)")
    for one in args.targets.split(","):
        _slice(one)
    from deepunlearn.errors import UserError

    try:
        _run(args)
    except UserError as e:  # a wrong file, KB or model: one line
        hint = "" if args.train_kb or "own KB" not in str(e) else " (give it with --train-kb)"
        raise SystemExit(f"relearn_floor: {e}{hint}") from None


if __name__ == "__main__":
    main()
