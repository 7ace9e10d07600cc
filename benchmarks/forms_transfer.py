"""Does forgetting on the primary question reach the other forms? (Eval-DU+; docs/results.md)

    python benchmarks/forms_transfer.py --kb edu-forms.json --model tiny-forms -o transfer.jsonl \
        [--targets 12] [--refs T,T,...] [--methods ga:4,npo:4] [--forms primary,qa1,st2,question,qa2,qa3,st1,st3]

Per (method, target): the target is probed (exact) under each form of ``--forms`` on the model as
finetuned, then unlearnt on its primary question at one grid value, and probed again under each
form at that point (the first ``--targets`` of ``--refs`` the model knows). One JSON line per (method, value, target) with the forms known before and after,
appended as it goes; a rerun skips the lines already there. ``--table A.jsonl,B.jsonl --held-out
qa2,qa3,st3`` prints the markdown table: per file and method, the share of targets forgotten under
the primary form and, among the targets known under a held-out form before, the share forgotten
under it (per form, and under every form of ``--every`` it knew), with 95 % bootstrap intervals
over targets and the number of targets behind each.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def _run(args) -> None:
    import torch

    from deepunlearn.kg.io import load_kb
    from deepunlearn.probe import load_model, probe
    from deepunlearn.unlearn import TargetRunner

    torch.set_num_threads(1)
    forms = args.forms.split(",")
    methods = [(m.split(":")[0], float(m.split(":")[1])) for m in args.methods.split(",")]
    out = Path(args.output)
    done = set()
    if out.exists():
        done = {(r["method"], r["value"], r["target"]) for r in map(json.loads, out.read_text().splitlines())}
    kb = load_kb(args.kb)
    bundle = load_model(args.model, device="cpu")
    runner = TargetRunner(bundle, kb, cache_dir=args.cache_dir, progress=False)
    refs = [int(t) for t in args.refs.split(",")] if args.refs else kb.targets
    targets = [t for t in refs if t in runner.known][:args.targets]

    def known_forms(ids, model_fn=None) -> dict[int, list[str]]:
        per = {int(t): [] for t in ids}
        for f in forms:
            for t in probe(bundle, kb, ids, mode="exact", forms=f, model_fn=model_fn, progress=False).known_ids():
                per[int(t)].append(f)
        return per

    before = known_forms(targets)
    with out.open("a") as fh:
        for method, value in methods:
            for t in targets:
                if (method, value, t) in done:
                    continue
                t0 = time.perf_counter()
                for p in runner.run(t, method, grid=[value], seed=0):  # the model is unlearnt while suspended here
                    after = known_forms([t])[t]
                row = {"model": args.model, "method": method, "value": value, "target": t, "before": before[t],
                       "after": after, "recall": p.recall, "accuracy": p.accuracy,
                       "seconds": round(time.perf_counter() - t0, 1)}
                fh.write(json.dumps(row) + "\n")
                fh.flush()
                print(method, t, row["seconds"], "s", flush=True)


def _table(args) -> None:
    from deepunlearn.bench.bootstrap import bootstrap_interval

    held = args.held_out.split(",")
    group = args.every.split(",") if args.every else held

    def cell(values):
        if not values:
            return "–"
        lo, hi, n = bootstrap_interval(values)
        mean = sum(values) / len(values)
        return f"{mean:.2f} [{lo:.2f}, {hi:.2f}] ({n})" if lo is not None else f"{mean:.2f} ({n})"

    print("| model | method (value) | primary | " + " | ".join(f"`{f}`" for f in held)
          + f" | every form of {', '.join(group)} known before | accuracy |")
    print("|---|---|---|" + "---|" * len(held) + "---|---|")
    for path in args.table.split(","):
        rows = [json.loads(x) for x in Path(path).read_text().splitlines()]
        for method, value in dict.fromkeys((r["method"], r["value"]) for r in rows):
            mine = [r for r in rows if (r["method"], r["value"]) == (method, value) and "primary" in r["before"]]
            prim = [float("primary" not in r["after"]) for r in mine]
            per = [[float(f not in r["after"]) for r in mine if f in r["before"]] for f in held]
            every = [float(not any(f in r["after"] for f in group if f in r["before"]))
                     for r in mine if any(f in r["before"] for f in group)]
            acc = [r["accuracy"] for r in mine]
            print(f"| {mine[0]['model']} | `{method}` ({mine[0]['value']:g}) | {cell(prim)} | "
                  + " | ".join(cell(v) for v in per) + f" | {cell(every)} | {cell(acc)} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kb")
    p.add_argument("--model")
    p.add_argument("-o", "--output")
    p.add_argument("--targets", type=int, default=12)
    p.add_argument("--methods", default="ga:4,npo:4")
    p.add_argument("--refs", default=None, help="the targets (fact ids, comma-separated; default: the KB's)")
    p.add_argument("--forms", default="primary,qa1,st2,question,qa2,qa3,st1,st3")
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--table", default=None, help="print the table of these results files (comma-separated) and stop")
    p.add_argument("--held-out", default="qa1,st2,question,qa2,qa3,st1,st3", help="the forms of the table's columns")
    p.add_argument("--every", default=None, help="the forms of its 'every form' column (default: --held-out)")
    args = p.parse_args()
    _table(args) if args.table else _run(args)


if __name__ == "__main__":
    main()
