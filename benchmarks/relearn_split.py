"""Relearning recovery, ``relearn_on = "other"`` vs ``"split"``, per method (docs/results.md).

    python benchmarks/relearn_split.py --kb edu-forms.json --model tiny-primary -o relearn.jsonl \
        [--targets 12] [--steps 1,2,4,8] [--methods ga:4,npo:4,tv:1,whp:100000]

Each (method, target) is unlearnt once, at one grid value; at that point both attacks run on the
same unlearned model (the weights are put back between them): ``other`` (a seeded sample of K
minus the target and its chosen set) and ``split`` (a seeded half of the chosen set and the
target's other forms). Recovery after N steps is the share of the re-probed facts forgotten
before the attack that are known after it: for ``split`` the held-out half and the target, for
``other`` the whole chosen set and the target (nothing of it was trained on); only those facts
are re-probed during the attacks (the point itself is probed on all of K). One JSON line per
(method, target), appended as it goes (``--no-forms``: the split trains on the half of the set
alone, leaving out the target's forms); a rerun skips the lines already there. ``--table`` prints
the markdown table (means with 95 % bootstrap intervals over targets) of a results file; its
last column is the share of the targets forgotten before the attack that are known after the last N.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def _run(args) -> None:
    import torch

    from deepunlearn.kg.io import load_kb
    from deepunlearn.probe import load_model
    from deepunlearn.unlearn import TargetRunner
    from deepunlearn.unlearn.attacks import relearn_attack
    from deepunlearn.unlearn.checks import ForgettingChecks
    from deepunlearn.unlearn.relearn_pool import SplitPlan, recovered, run_split, split_batch, split_plan

    torch.set_num_threads(1)
    steps = [int(s) for s in args.steps.split(",")]
    methods = [(m.split(":")[0], float(m.split(":")[1])) for m in args.methods.split(",")]
    out = Path(args.output)
    done = set()
    if out.exists():
        done = {(r["method"], r["target"]) for r in map(json.loads, out.read_text().splitlines())}
    kb = load_kb(args.kb)
    bundle = load_model(args.model, device="cpu")
    runner = TargetRunner(bundle, kb, cache_dir=args.cache_dir, progress=False,
                          attacks={"relearn": steps, "relearn_on": "split"})
    targets = [t for t in kb.targets if t in runner.known][:args.targets]
    record: dict = {}

    def both(self, points, ts, model_fn, lr):  # both attacks at the same unlearned point
        r, a = self.model, self.attacks
        t = int(ts[0])
        held = [f for f in r.chosen_set(t) if f != t] + [t]
        # recovery needs only the chosen set and the target: probe those, not all of K
        known = lambda: runner.known_among(held, model_fn)  # noqa: E731
        before = known()
        t0 = time.perf_counter()
        other = relearn_attack(r.bundle.model, r.encode, self.relearn_pool(ts), a.relearn, lr=lr,
                               size=a.relearn_size, seed=r.seed, known=known)
        record["other_seconds"] = round(time.perf_counter() - t0, 1)
        whole = SplitPlan(t, [], held)
        record["other"] = {str(n): recovered(whole, before, k) for n, k in other.items()}
        record["other_target"] = {str(n): t in k for n, k in other.items()}
        record["forgotten_before"] = sorted(set(held) - before)
        t0 = time.perf_counter()
        plan = split_plan(r.kb, r.chosen_set(t), t, seed=r.seed, probe_forms=r.forms)
        if args.no_forms:  # the half of the set alone, to see what the target's forms add
            plan = SplitPlan(plan.target, plan.relearned, plan.held_out, [])
        _, after = run_split(r.bundle.model, lambda: split_batch(r.bundle, r.kb, plan, r.unlearn_forms), plan,
                             a.relearn, lr=lr, known=known, before=before)
        record["split_seconds"] = round(time.perf_counter() - t0, 1)
        record.update(split={str(n): recovered(plan, before, k) for n, k in after.items()},
                      split_target={str(n): t in k for n, k in after.items()}, relearn_facts=plan.relearned,
                      relearn_forms=[f.name for f in plan.forms], held_out=plan.held_out, chosen=held[:-1],
                      relearn_lr=lr)

    ForgettingChecks._attack = both  # the runner's checks run both attacks
    with out.open("a") as fh:
        for method, value in methods:
            for t in targets:
                if (method, t) in done:
                    continue
                record.clear()
                t0 = time.perf_counter()
                (p,) = list(runner.run(t, method, grid=[value], seed=0))
                row = {"method": method, "value": value, "target": t, "recall": p.recall, "accuracy": p.accuracy,
                       "target_forgotten": t in p.forgotten, "seconds": round(time.perf_counter() - t0, 1), **record}
                fh.write(json.dumps(row) + "\n")
                fh.flush()
                print(method, t, row["seconds"], "s", flush=True)


def _table(args) -> None:
    from deepunlearn.bench.bootstrap import bootstrap_interval

    rows = [json.loads(x) for x in Path(args.table).read_text().splitlines()]
    steps = sorted({int(n) for r in rows for n in r.get("split", {})})

    def cell(values):
        vals = [v for v in values if v is not None]
        if not vals:
            return "–"
        lo, hi, n = bootstrap_interval(vals)
        mean = sum(vals) / len(vals)
        return f"{mean:.2f} [{lo:.2f}, {hi:.2f}]" if lo is not None else f"{mean:.2f}"

    print("| method (value) | pool | n | " + " | ".join(f"N = {n}" for n in steps) + " | target back (N = "
          f"{steps[-1]}) |")
    print("|---|---|---|" + "---|" * len(steps) + "---|")
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        for pool in ("other", "split"):
            n = sum(1 for r in mine if r[pool].get(str(steps[-1])) is not None)
            tk = [float(r[f"{pool}_target"][str(steps[-1])]) for r in mine
                  if str(steps[-1]) in r[f"{pool}_target"] and r["target"] in r["forgotten_before"]]
            print(f"| `{method}` ({mine[0]['value']:g}) | {pool} | {n} | "
                  + " | ".join(cell([r[pool].get(str(s)) for r in mine]) for s in steps) + f" | {cell(tk)} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kb")
    p.add_argument("--model")
    p.add_argument("-o", "--output")
    p.add_argument("--targets", type=int, default=12)
    p.add_argument("--steps", default="1,2,4,8")
    p.add_argument("--methods", default="ga:4,npo:4,tv:1,whp:100000")
    p.add_argument("--no-forms", action="store_true",
                   help="split without the target's other forms (the half of the chosen set alone)")
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--table", default=None, help="print the table of this results file and stop")
    args = p.parse_args()
    _table(args) if args.table else _run(args)


if __name__ == "__main__":
    main()
