#!/usr/bin/env python
"""Every method table read again against exact unlearning: GA, NPO, TV, WHP and du_loop on one KB,
an oracle per target, each point judged raw, relative to its target's oracle (``deep_oracle``) and
against chance (``p_chance``), on the CPU with one torch thread, in one command per KB::

    python benchmarks/reread.py --kb release --out reread-release            # EDU-RELAT, tiny 256 wide
    python benchmarks/reread.py --kb family --out reread-family              # 40 people, seed 73019, mistral
    python benchmarks/reread.py --kb org --out reread-org                    # an org KB, seed 73019

Stages, each kept in ``--out`` and reused by the next run (a stopped run resumes where it was):

1. ``kb.json`` (``data import-edu-relat`` / ``data generate [--domain org]``), ``hold.json``
   (``data holdout --seed 5``: never-seen facts), the model A (``finetune --model tiny`` with the
   KB's architecture, one thread; or ``--model PATH``), ``cal.json`` (``probe --calibrate hold.json``:
   the raw false-positive rates per relation that ``p_chance`` uses);
2. (``--stage oracles`` only) ``oracles/``: a sweep with ``oracle = true`` and GA at one step only,
   which trains each target's oracle into the shared cache ``cache/retrain`` and stops;
3. ``sweep/``: the five methods at their default grids, ``oracle = true`` and ``chance_calibration =
   "cal.json"``, ``accuracy = "auto"``, sharing ``cache/`` (an oracle is trained when its target's
   first job starts, or found there);
4. ``table.md`` / ``table.json``: per method, over the targets A knows, the raw deep rate, the
   ``deep_oracle`` rate and the share of superficial verdicts established (p_chance < 0.05 at the
   target's last grid point), each as k / n with its 95 % Wilson interval, Acc@R>=0.8 and
   Success-DU@0.8 with their bootstrap intervals, and the oracle row's accuracy.

``--targets N`` (default 20): the first N targets A knows, round robin over relations in the KB's
target order (``benchmarks/verdict_check.py``'s choice). Nothing is tuned on these KBs: every method
runs its default grid and parameters. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
METHODS = ("ga", "npo", "tv", "whp", "du_loop")
#: the fresh KBs: a seed and an architecture no other figure of the docs or tests uses
KBS = {
    "release": {"data": ["import-edu-relat"], "finetune": ["--tiny-hidden", "256"]},
    "family": {"data": ["generate", "--people", "40", "--seed", "73019"],
               "finetune": ["--arch", "mistral", "--tiny-hidden", "128"]},
    "org": {"data": ["generate", "--domain", "org", "--people", "40", "--seed", "73019"], "finetune": ["--arch", "mistral", "--tiny-hidden", "128"]},
}


def cli(*args: str, log: Path) -> dict:
    """``python -m deepunlearn ARGS --json``, one torch thread, stderr to ``log``; its JSON."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    with open(log, "a", encoding="utf-8") as err:
        err.write(f"\n$ deepunlearn {' '.join(args)}\n")
        err.flush()
        done = subprocess.run([sys.executable, "-m", "deepunlearn", *args, "--json"], env=env, stdout=subprocess.PIPE,
                              stderr=err, text=True)
    if done.returncode:
        sys.exit(f"reread: deepunlearn {' '.join(args)} failed (exit {done.returncode}); see {log}")
    lines = done.stdout.strip().splitlines()
    print(f"deepunlearn {args[0]} {args[1] if len(args) > 1 else ''}: {time.perf_counter() - t0:.0f} s", flush=True)
    return json.loads(lines[-1]) if lines else {}


def prepare(out: Path, kind: str, model: Path | None, log: Path) -> Path:
    spec = KBS[kind]
    kb = out / "kb.json"
    if not kb.is_file():
        cli("data", *spec["data"], "-o", str(kb), log=log)
    if not (out / "hold.json").is_file():
        cli("data", "holdout", "--kb", str(kb), "--seed", "5", "-o", str(out / "hold.json"), log=log)
    a = model.resolve() if model else out / "A"
    if not (a / "config.json").is_file():
        cli("finetune", "--kb", str(kb), "--model", "tiny", *spec["finetune"], "--threads", "1", "-o", str(a), log=log)
    if not (out / "cal.json").is_file():
        cli("probe", "--model", str(a), "--kb", str(kb), "--calibrate", str(out / "hold.json"), "--threads", "1",
            "-o", str(out / "cal.json"), log=log)
    return a


def pick_targets(out: Path, a: Path, n: int) -> list[int]:
    """The first ``n`` targets A knows under the default protocol's probe (the sweep's K)."""
    from benchmarks.verdict_check import pick_targets as round_robin
    from deepunlearn.kg.io import load_kb
    from deepunlearn.probe import get_protocol, load_model, probe
    from deepunlearn.probe.answer_rule import rule_of

    import torch

    torch.set_num_threads(1)
    kb, proto = load_kb(out / "kb.json"), get_protocol("default")
    bundle = load_model(str(a), device="cpu", answer_format=proto.answer_format)
    bundle.answer_rule = rule_of(proto)
    known = {int(i) for i in probe(bundle, kb, list(kb.targets), mode=proto.probe_mode, progress=False).known_ids()}
    return round_robin(kb, known, n)


def config(out: Path, name: str, a: Path, targets: list[int], methods: dict[str, str], extra: list[str]) -> Path:
    lines = [f'kb = "{out / "kb.json"}"', f'output = "{out / name}"', f'cache_dir = "{out / "cache"}"', "threads = 1",
             "oracle = true", *extra, "[[models]]", 'name = "A"', f'path = "{a}"', "[methods]",
             *(f"{m} = {g}" for m, g in methods.items()), "[targets]", f"refs = {targets}"]
    path = out / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kb", choices=sorted(KBS), required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--model", type=Path, help="A, finetuned by deepunlearn finetune on this KB (default: built)")
    ap.add_argument("--targets", type=int, default=20)
    ap.add_argument("--stage", choices=("oracles", "sweep", "table"), default="table", help="stop after this stage")
    args = ap.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    log = out / "log.txt"
    a = prepare(out, args.kb, args.model, log)
    targets = pick_targets(out, a, args.targets)
    print(f"targets ({len(targets)}): {targets}", flush=True)
    if args.stage == "oracles":  # only train them (the sweep trains each when its target comes)
        cli("bench", "--config", str(config(out, "oracles", a, targets, {"ga": "[1]"}, [])), "--quiet", log=log)
        return
    cfg = config(out, "sweep", a, targets, {m: "[]" for m in METHODS}, [f'chance_calibration = "{out / "cal.json"}"'])
    cli("bench", "--config", str(cfg), "--quiet", log=log)
    if args.stage == "sweep":
        return
    table(out)


def table(out: Path) -> None:
    """``table.md`` and ``table.json`` from the sweep's store (module docstring, stage 4)."""
    from deepunlearn.bench.metrics import summarize
    from deepunlearn.bench.report.controls import control_rows, control_table
    from deepunlearn.bench.store import ResultsStore

    with ResultsStore(out / "sweep", readonly=True) as store:
        points = store.points()
    # a target counts once all five methods and its oracle are stored (a stopped run: the finished ones)
    rows_by = {}
    for p in points:
        rows_by.setdefault(p.target, set()).add(p.method)
    done = {t for t, ms in rows_by.items() if {*METHODS, "oracle"} <= ms}
    points = [p for p in points if p.target in done]
    rows = control_rows(points)
    summary = summarize(points)
    lines = [f"{len(done)} targets with every method and the oracle stored: {sorted(done)}", ""]
    lines += control_table(rows) + ["", "| method | Acc@R≥0.8 | Success-DU@0.8 | accuracy at the first deep point "
                                     "| accuracy at the first deep_oracle point |", "|---|---|---|---|---|"]
    for r in rows:
        s = summary.get(r["model"], {}).get(r["method"], {})
        lines.append(f"| {r['method']} | {_ci(s, 'acc_at_recall_0.8')} | {_ci(s, 'success_du_0.8')} | "
                     f"{_first(points, r['method'], 'deep')} | {_first(points, r['method'], 'deep_oracle')} |")
        r["summary"] = {k: v for k, v in s.items() if k.startswith(("acc_at_recall_0.8", "success_du_0.8", "n_"))}
    lines += ["", *first_forgotten(points)]
    acc = [p.accuracy for p in points if p.method == "oracle"]
    if acc:
        lines += ["", f"The oracle's accuracy (exact unlearning): mean {sum(acc) / len(acc):.3f}, min {min(acc):.3f} "
                      f"(n = {len(acc)} targets)."]
    (out / "table.json").write_text(json.dumps({"targets": sorted(done), "rows": rows}, indent=1, default=str) + "\n",
                                    encoding="utf-8")
    (out / "table.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


def first_forgotten(points, methods=("ga", "npo")) -> list[str]:
    """True positives: each gradient method stopped at its target's first grid point where the
    target is forgotten (most of its set still answered): the share of superficial verdicts raw,
    not deep relative to the oracle, and established (p_chance < 0.05), on the same targets."""
    from deepunlearn.bench.report.controls import share

    lines = ["| method stopped at the first point forgetting the target | targets | superficial (raw) | not "
             "deep_oracle | p_chance < 0.05 | set facts still answered | accuracy |", "|---|---|---|---|---|---|---|"]
    for method in methods:
        by: dict[int, list] = {}
        for p in points:
            if p.method == method:
                by.setdefault(p.target, []).append(p)
        firsts = [hit[0] for pts in by.values()
                  if (hit := [p for p in sorted(pts, key=lambda p: p.param) if p.target_forgotten])]
        n = len(firsts)
        if not n:
            continue
        sup = sum(not p.extra.get("deep") for p in firsts)
        not_do = sum(p.extra.get("deep_oracle") is False for p in firsts)
        est = sum(p.extra.get("p_chance") is not None and p.extra["p_chance"] < 0.05 for p in firsts)
        kept = sum(len(set(p.extra.get("set") or []) - set(p.forgotten)) for p in firsts)
        total = sum(len(p.extra.get("set") or []) for p in firsts)
        acc = [p.accuracy for p in firsts]
        lines.append(f"| {method} | {n} | {share(sup, n)} | {share(not_do, n)} | {share(est, n)} | {kept} / {total} | "
                     f"{sum(acc) / n:.3f} (min {min(acc):.3f}) |")
    return lines


def _ci(s: dict, key: str) -> str:
    if s.get(key) is None:
        return "–"
    lo, hi = s.get(f"{key}_ci_lo"), s.get(f"{key}_ci_hi")
    return f"{s[key]:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None else "")


def _first(points, method: str, flag: str) -> str:
    """Mean accuracy (and n targets) at each target's first grid point where ``flag`` holds."""
    by: dict[int, list] = {}
    for p in points:
        if p.method == method:
            by.setdefault(p.target, []).append(p)
    accs = []
    for pts in by.values():
        hit = [p for p in sorted(pts, key=lambda p: p.param) if p.extra.get(flag)]
        if hit:
            accs.append(hit[0].accuracy)
    return f"{sum(accs) / len(accs):.3f} (n = {len(accs)})" if accs else "– (n = 0)"


if __name__ == "__main__":
    main()
