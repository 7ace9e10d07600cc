#!/usr/bin/env python
"""The release sweep judged under mined rules beside the hand-written ones, in one command::

    python benchmarks/mine_sweep.py --out mine-sweep [--methods ga,npo] [--accuracy sampled]

Stages (each kept in ``--out`` and reused): ``edu.json`` and the tiny model finetuned on it (as
``release_sweep.py`` builds them), ``mined.dl`` (``rules mine --kb edu.json --min-std-confidence 1``:
the rules that hold without a counter-example in the release), then the same sweep twice, the
55 targets x the methods x the paper's grids: once with ``rules = "family"`` (the 48 hand-written
rules) and once with ``rules = "mined.dl"``. The trajectories are the same model steps; what
changes is every rule-based figure (minimal sets, recall, deep). The script prints, per method
and rule set, the mean recall and the share of deep points at the grid's last point, and the
Acc@R>=0.8 the sweep's summary reports. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from release_sweep import cli  # noqa: E402


def sweep(out: Path, name: str, model: Path, rules: str, methods: list[str], accuracy: str) -> tuple[Path, dict]:
    lines = [f'kb = "{out / "edu.json"}"', f'output = "{out / name}"', f'rules = "{rules}"', "threads = 1",
             f'accuracy = "{accuracy}"', "[[models]]", 'name = "tiny"', f'path = "{model}"', "[methods]",
             *(f"{m} = []" for m in methods), "[targets]", "all = true"]
    cfg = out / f"{name}.toml"
    cfg.write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = cli("bench", "--config", str(cfg), "--threads", "1", "--quiet")
    print(f"{name}: {r['json'].get('computed', 0)} points computed, {r['wall_s']} s wall", flush=True)
    return out / name, r["json"].get("methods", {})


def last_points(folder: Path) -> dict[str, list]:
    """Per method, the point at the largest grid value of each target."""
    from deepunlearn.bench.store import ResultsStore

    best: dict[tuple, object] = {}
    for p in ResultsStore(folder, readonly=True).points():
        key = (p.method, p.target)
        if key not in best or p.param > best[key].param:
            best[key] = p
    out: dict[str, list] = {}
    for (m, _), p in sorted(best.items()):
        out.setdefault(m, []).append(p)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--methods", default="ga,npo")
    ap.add_argument("--accuracy", choices=("full", "sampled", "auto"), default="sampled")
    a = ap.parse_args()
    out = a.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    methods = a.methods.split(",")
    if not (out / "edu.json").is_file():
        cli("data", "import-edu-relat", "-o", str(out / "edu.json"))
    model = out / "tiny-edu"
    if not (model / "config.json").is_file():
        cli("finetune", "--kb", str(out / "edu.json"), "--model", "tiny", "--tiny-hidden", "256", "--threads", "1",
            "-o", str(model))
    mined = out / "mined.dl"
    if not mined.is_file():
        r = cli("rules", "mine", "--kb", str(out / "edu.json"), "--min-std-confidence", "1", "-o", str(mined))
        print(f"mined in {r['wall_s']} s: {json.dumps(r['json'])[:300]}", flush=True)
    table = {}
    for label, rules in (("family.dl", "family"), ("mined.dl", str(mined))):
        table[label] = sweep(out, f"sweep-{label.split('.')[0]}", model, rules, methods, a.accuracy)
    print("\n| method | rules | targets | mean recall (last point) | deep (last point) | Acc@R>=0.8 |")
    print("|---|---|---|---|---|---|")
    from deepunlearn.unlearn.summary import is_deep

    for label, (folder, summary) in table.items():
        for m, pts in last_points(folder).items():
            rec = sum(p.recall for p in pts) / len(pts)
            deep = sum(bool(is_deep(p)) for p in pts)
            acc = summary.get(m, {}).get("acc_at_recall_0.8", "?")
            print(f"| {m} | {label} | {len(pts)} | {rec:.3f} | {deep}/{len(pts)} | {acc} |")


if __name__ == "__main__":
    main()
