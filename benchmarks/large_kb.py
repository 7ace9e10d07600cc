"""Large family KBs end to end: read the JSON file, close it under the family rules, and find
the exact minimal deep-unlearning sets of the first 55 targets, in one fresh process per size.

    python benchmarks/large_kb.py                      # 10^3, 10^4, 10^5 people
    python benchmarks/large_kb.py 1000 1000000         # any sizes (10^6: ~7 M facts, minutes)
    python benchmarks/large_kb.py --compare 1000 1000000   # and the reference tables beside

``--compare`` also runs each size with the engine's previous tables
(``benchmarks/closure_reference.py``), in its own fresh process, prints the ratio new/reference
of the closure's and the whole run's CPU seconds, and checks that both gave the same derivation
graph (a digest of every array) and the same minimal sets.

KB files are generated once (``deepunlearn data generate --people N --seed 0``) and kept in
``$DEEPUNLEARN_CACHE/bench/`` (default ``~/.cache/deepunlearn/bench/``). For each size it prints
the wall seconds of each stage, the process's CPU seconds (less sensitive to a busy machine),
its peak RSS, and at the end the exponent ``b`` of ``time ~ people^b`` fitted over the sizes
(1.0: linear). Not part of the test suite.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: What one fresh process runs for a KB file: stage times and peak RSS as one JSON line.
STAGES = r"""
import contextlib, hashlib, json, resource, sys, time
marks = [(time.perf_counter(), time.process_time())]
from deepunlearn.kg.io import load_kb
from deepunlearn.rules import derivation_graph, minimal_sets
engine = contextlib.nullcontext()
if sys.argv[2] == "reference":
    sys.path.insert(0, sys.argv[3])
    from closure_reference import reference_engine
    engine = reference_engine()
marks.append((time.perf_counter(), time.process_time()))
kb = load_kb(sys.argv[1])
marks.append((time.perf_counter(), time.process_time()))
with engine:
    g = derivation_graph(kb, "family", max_groundings=None)
    marks.append((time.perf_counter(), time.process_time()))
    sets = [minimal_sets(g, t, time_budget=60.0) for t in kb.targets[:55]]
    marks.append((time.perf_counter(), time.process_time()))
digest = hashlib.sha256()
for a in (g.node_s, g.node_r, g.node_o, g.birth, g.base, g.edge_head, g.edge_rule, g.body_ptr, g.body):
    digest.update(a.tobytes())
digest.update(repr([sorted(sorted(u) for u in m.sets) for m in sets]).encode())
out = {"facts": len(kb.facts), "closure": int(g.in_closure.sum()), "targets": len(sets),
       "exact": all(m.exact for m in sets), "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
       "digest": digest.hexdigest()[:16]}
for k, stage in enumerate(("import", "load", "closure", "sets")):
    out[stage + "_s"] = marks[k + 1][0] - marks[k][0]
    out[stage + "_cpu"] = marks[k + 1][1] - marks[k][1]
out["total_s"], out["cpu_s"] = marks[-1][0] - marks[0][0], marks[-1][1] - marks[0][1]
print(json.dumps(out))
"""


def kb_file(people: int) -> Path:
    from deepunlearn.probe.cache import default_cache_dir

    f = default_cache_dir().parent / "bench" / f"family-{people}.json"
    if not f.is_file():
        f.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "DEEPUNLEARN_ALLOW_LARGE": "1", "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, "-m", "deepunlearn", "data", "generate", "--people", str(people),
                        "--seed", "0", "-o", str(f)], check=True, env=env, stdout=subprocess.DEVNULL)
    return f


def run(people: int, tables: str = "package") -> dict:
    """One fresh process: ``tables`` is ``package`` or ``reference`` (closure_reference.py)."""
    env = {**os.environ, "DEEPUNLEARN_ALLOW_LARGE": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", STAGES, str(kb_file(people)), tables, str(ROOT / "benchmarks")],
                         check=True, env=env, capture_output=True, text=True)
    return {"people": people, "tables": tables, **json.loads(out.stdout.strip().splitlines()[-1])}


def exponent(rows: list[dict], key: str) -> float:
    """Least-squares slope of log(key) over log(people)."""
    xs, ys = [math.log(r["people"]) for r in rows], [math.log(max(r[key], 1e-6)) for r in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def row(r: dict) -> str:
    cols = "".join(f" {r[k + '_s']:>7.2f} ({r[k + '_cpu']:>5.1f})" for k in ("load", "closure", "sets"))
    return (f"{r['people']:>9,} {r['tables']:>9} {r['facts']:>9,} {r['closure']:>9,}{cols} {r['total_s']:>7.2f} "
            f"({r['cpu_s']:>5.1f}) {r['peak_rss_mb']:>8.0f} {r['exact']!s:>5} {r['digest']}")


def main(argv: list[str]) -> None:
    compare = "--compare" in argv
    sizes = [int(a) for a in argv if a != "--compare"] or [1_000, 10_000, 100_000]
    rows, ref_rows = [], []
    print(f"{'people':>9} {'tables':>9} {'facts':>9} {'closure':>9}   load s (CPU)  close s (CPU)   sets s (CPU)"
          f"  total s (CPU) {'peak MB':>8} exact digest")
    for n in sizes:
        rows.append(run(n))
        print(row(rows[-1]), flush=True)
        if compare:
            ref_rows.append(run(n, "reference"))
            r, o = rows[-1], ref_rows[-1]
            print(row(o), flush=True)
            print(f"{'':>9} new/ref: closure CPU {r['closure_cpu'] / max(o['closure_cpu'], 1e-9):.2f}, sets CPU "
                  f"{r['sets_cpu'] / max(o['sets_cpu'], 1e-9):.2f}, total CPU {r['cpu_s'] / max(o['cpu_s'], 1e-9):.2f}; "
                  f"same graph and sets: {r['digest'] == o['digest']}", flush=True)
    for label, rs in (("", rows), ("reference ", ref_rows)):
        if len(rs) > 1:
            print(f"{label}fitted exponent b (CPU time ~ people^b): " + ", ".join(
                f"{k.split('_')[0]} {exponent(rs, k):.2f}" for k in ("load_cpu", "closure_cpu", "sets_cpu", "cpu_s")))


if __name__ == "__main__":
    main(sys.argv[1:])
