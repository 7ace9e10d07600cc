"""Time of ``rules mine`` (default options) on the release, org, geo and generated family KBs of
growing size, on one thread, and the fitted exponent of time against facts on the family KBs.

    OMP_NUM_THREADS=1 python benchmarks/mine_timing.py [--people 1000 10000 100000] [--out T.json]

Each line: the KB, its facts, the rules mined, the candidates measured and skipped (over the
grounding budget), and the seconds (mining only; generating the KB is not counted).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--people", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--max-body", type=int, default=2)
    ap.add_argument("--time-budget", type=float, default=3600.0)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    import deepunlearn
    from deepunlearn.kg.edu_relat import import_edu_relat
    from deepunlearn.rules.generate import generate_domain
    from deepunlearn.rules.mine import mine_rules

    def cases():
        yield "release", import_edu_relat()
        yield "org", generate_domain("org", seed=1)
        yield "geo", generate_domain("geo", seed=1)
        for n in a.people:
            yield f"family {n}", deepunlearn.generate_family(n, seed=1)

    rows = []
    for name, kb in cases():
        res = mine_rules(kb, max_body=a.max_body, time_budget=a.time_budget)
        row = {"kb": name, "facts": len(kb.facts), "rules": len(res.rules), "candidates": res.candidates,
               "skipped": len(res.skipped), "seconds": round(res.seconds, 2)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    fam = [r for r in rows if r["kb"].startswith("family")]
    if len(fam) >= 2:
        slope = np.polyfit(np.log([r["facts"] for r in fam]), np.log([r["seconds"] for r in fam]), 1)[0]
        print(f"fitted exponent of time vs facts on the family KBs: {slope:.2f}")
        rows.append({"exponent": round(float(slope), 3)})
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
