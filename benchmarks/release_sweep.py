#!/usr/bin/env python
"""The release sweep on CPU, timed: 55 targets x GA, NPO, TV, WHP x the paper's grids (1,100
points) on the tiny model finetuned on the release, one torch thread, in one command::

    python benchmarks/release_sweep.py --out release-sweep                      # default protocol
    python benchmarks/release_sweep.py --out release-sweep --accuracy sampled   # cone + 300 sampled facts
    python benchmarks/release_sweep.py --out release-sweep --only-reference     # the comparison alone

Stages (each kept in ``--out`` and reused by the next run): ``edu.json`` (``data
import-edu-relat``), the model (``finetune --model tiny --tiny-hidden 256 --threads 1``, or
``--model PATH``), then the sweep itself as ``deepunlearn bench --config sweep-<accuracy>.toml``
in a fresh process (a finished sweep is reported from its store, not recomputed: remove its folder
to time it again). Beside it the reference protocol (``protocol = "reference"``: generate-mode
probe of the whole dataset at every point, the release's stored sets) runs on the first
``--ref-targets`` targets x the four methods, and the default protocol on the same points, each
in its own results folder, and the script prints seconds per point of both and their ratio.

Every figure is wall time of the whole command (process start, model load, closure and minimal
sets included) with the 1-minute load average before and after: on a shared machine the times are
upper bounds and only the ratios measured in the same run compare. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("ga", "npo", "tv", "whp")


def cli(*args: str, out: Path | None = None) -> dict:
    """``python -m deepunlearn ARGS --json`` in a fresh process, one torch thread: its JSON, wall
    seconds, CPU seconds of the child and the load average before and after."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    load0, t0 = os.getloadavg()[0], time.perf_counter()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "deepunlearn", *args, "--json"], env=env, capture_output=True,
                          text=True, cwd=out)
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        sys.exit(f"release_sweep: deepunlearn {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    lines = done.stdout.strip().splitlines()
    return {"json": json.loads(lines[-1]) if lines else {}, "wall_s": round(time.perf_counter() - t0, 1),
            "cpu_s": round(cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 1),
            "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2)}


def sweep_config(out: Path, name: str, model: Path, *, targets: str, accuracy: str, protocol: str = "default") -> Path:
    lines = [f'kb = "{out / "edu.json"}"', f'output = "{out / name}"', f'protocol = "{protocol}"', "threads = 1",
             f'accuracy = "{accuracy}"', "[[models]]", 'name = "tiny"', f'path = "{model}"', "[methods]",
             *(f"{m} = []" for m in METHODS), "[targets]", targets]
    path = out / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def points(result: dict) -> int:
    """Points computed by this run (a resumed sweep reuses the stored ones)."""
    return int(result["json"].get("computed", 0))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for the KB, model, configs and results")
    ap.add_argument("--model", type=Path, help="a finetuned checkpoint (default: the tiny model, built in --out)")
    ap.add_argument("--accuracy", choices=("full", "sampled", "auto"), default="full",
                    help="the sweep's accuracy option (docs/sweeps.md); full: every known fact at every point")
    ap.add_argument("--ref-targets", type=int, default=2, help="targets of the reference-protocol comparison")
    ap.add_argument("--only-reference", action="store_true", help="skip the full sweep")
    args = ap.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {}
    if not (out / "edu.json").is_file():
        cli("data", "import-edu-relat", "-o", str(out / "edu.json"))
    model = args.model.resolve() if args.model else out / "tiny-edu"
    if not args.model and not (model / "config.json").is_file():
        report["finetune"] = cli("finetune", "--kb", str(out / "edu.json"), "--model", "tiny", "--tiny-hidden", "256",
                                 "--threads", "1", "-o", str(model))
        print(f"finetune: {report['finetune']['wall_s']} s wall", flush=True)
    if not args.only_reference:
        cfg = sweep_config(out, f"sweep-{args.accuracy}", model, targets="all = true", accuracy=args.accuracy)
        r = report["sweep"] = cli("bench", "--config", str(cfg), "--threads", "1", "--quiet")
        n = points(r)
        print(f"release sweep ({args.accuracy} accuracy): {n} points computed ({r['json'].get('targets')} targets, "
              f"{r['json'].get('skipped')} jobs skipped), {r['wall_s']} s wall ({r['wall_s'] / 60:.1f} min), "
              f"{r['cpu_s']} CPU s, load {r['load_before']} -> {r['load_after']}", flush=True)
    # the reference protocol on a few of the same points, and the default protocol on those points
    kb = json.loads((out / "edu.json").read_text(encoding="utf-8"))
    refs = ", ".join(str(t) for t in kb["targets"][:args.ref_targets])
    per_point = {}
    for protocol in ("default", "reference"):
        cfg = sweep_config(out, f"points-{protocol}", model, targets=f"refs = [{refs}]", accuracy="full",
                           protocol=protocol)
        r = report[f"points_{protocol}"] = cli("bench", "--config", str(cfg), "--threads", "1", "--quiet")
        n = points(r)
        if n == 0:
            print(f"{protocol} protocol: every point already stored in {out / cfg.stem} (remove it to time again)")
            continue
        per_point[protocol] = (r["wall_s"] / n, r["cpu_s"] / n)
        print(f"{protocol} protocol, targets {refs}: {n} points, {r['wall_s']} s wall, {r['cpu_s']} CPU s, "
              f"{per_point[protocol][0]:.2f} s/point ({per_point[protocol][1]:.2f} CPU s), "
              f"load {r['load_before']} -> {r['load_after']}", flush=True)
    if len(per_point) == 2:
        wall, cpu = (round(per_point["reference"][k] / per_point["default"][k], 2) for k in (0, 1))
        report["reference_over_default"] = {"wall": wall, "cpu": cpu}
        print(f"reference / default, per point on the same points: {wall} (wall), {cpu} (CPU)")
    (out / f"timings-{args.accuracy}.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
