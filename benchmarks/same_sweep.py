"""Whether two sweep folders hold the same results, leaving out what depends on when and where
they ran (wall-clock seconds, timestamps, pids, the output folder's path): the store's points,
jobs and meta, points.csv, summary.json, report.md, every figure's bytes, config.yaml and the
manifest (its run log and store path aside). A refactor that must not change results runs a
fixture sweep with the old and the new code into two folders and compares them:

    python benchmarks/same_sweep.py OLD_OUT NEW_OUT      # exit 0: the same; 1: what differs is listed
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sqlite3
import sys
from pathlib import Path

#: store columns that record when or where a row was written
WHEN = {"written_at", "finished_at", "at", "pid", "seconds"}


def store_rows(out: Path, table: str) -> list[str]:
    """The table's rows without the columns of :data:`WHEN` (and the ``*seconds`` keys of a
    point's ``extra``), the output path replaced by ``OUT``, sorted."""
    con = sqlite3.connect(out / "results.sqlite")
    cols = [r[1] for r in con.execute(f"pragma table_info({table})")]
    keep = [i for i, n in enumerate(cols) if n not in WHEN]
    rows = []
    for row in con.execute(f"select * from {table}"):
        vals = [row[i] for i in keep]
        names = [cols[i] for i in keep]
        if "extra" in names:
            i = names.index("extra")
            extra = json.loads(vals[i]) if vals[i] else {}
            vals[i] = json.dumps({k: v for k, v in extra.items() if not k.endswith("seconds")}, sort_keys=True)
        rows.append(repr(vals).replace(str(out), "OUT"))
    con.close()
    return sorted(rows)


def points_csv(out: Path) -> list[list[str]]:
    with open(out / "report" / "points.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    i = rows[0].index("seconds")
    return [r[:i] + r[i + 1:] for r in rows]


def summary(out: Path) -> str:
    text = json.dumps(json.loads((out / "report" / "summary.json").read_text(encoding="utf-8")), sort_keys=True)
    return re.sub(r'"[^"]*(seconds|time)[^"]*": [0-9.e+-]+', "", text)


def report_md(out: Path) -> str:
    text = (out / "report" / "report.md").read_text(encoding="utf-8").replace(str(out), "OUT")
    text = re.sub(r"Generated \S+", "", text)
    return re.sub(r"\| [0-9.]+ \| (\d+) \|\n", r"| T | \1 |\n", text)  # the headline table's seconds


def differences(a: Path, b: Path) -> list[str]:
    """What differs between the sweep folders ``a`` and ``b`` (empty: the same results)."""
    out = [f"store {t}" for t in ("points", "jobs", "meta") if store_rows(a, t) != store_rows(b, t)]
    for name, read in (("points.csv", points_csv), ("summary.json", summary), ("report.md", report_md)):
        if read(a) != read(b):
            out.append(name)
    figures = sorted(p.name for p in (a / "report").glob("*.png"))
    if figures != sorted(p.name for p in (b / "report").glob("*.png")):
        out.append("the set of figures")
    out += [f for f in figures if (b / "report" / f).exists()
            and (a / "report" / f).read_bytes() != (b / "report" / f).read_bytes()]
    if (a / "config.yaml").read_text().replace(str(a), "OUT") != (b / "config.yaml").read_text().replace(str(b), "OUT"):
        out.append("config.yaml")
    ma, mb = (json.loads((p / "manifest.json").read_text(encoding="utf-8")) for p in (a, b))
    out += [f"manifest {k}" for k in sorted((set(ma) | set(mb)) - {"runs", "store"}) if ma.get(k) != mb.get(k)]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    args = ap.parse_args()
    diff = differences(args.old, args.new)
    print("the same results" if not diff else "differ: " + ", ".join(diff))
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
