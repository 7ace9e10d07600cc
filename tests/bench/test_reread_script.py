"""benchmarks/reread.py's table: per method the raw deep rate, deep_oracle and the established
superficial share over the targets stored with every method and the oracle."""

from __future__ import annotations

import json

from benchmark_scripts import load_benchmark

from deepunlearn.bench.store import Point, ResultsStore


def _point(target, method, param, deep, accuracy=0.9, **extra):
    return Point.from_dict({"model": "A", "target": target, "method": method, "param": param, "recall": 1.0 if deep
                            else 0.5, "accuracy": accuracy, "deep": deep, **extra})


def test_table_counts_complete_targets_only(tmp_path):
    reread = load_benchmark("reread")
    with ResultsStore(tmp_path / "sweep") as store:
        store.bind("fp", {})
        for t in (1, 2):
            for m in reread.METHODS:
                # GA: superficial at both steps, established at the last on target 1 only
                store.add_point(_point(t, m, 1, m != "ga", deep_oracle=m != "ga" or t == 2, p_chance=None
                                       if m != "ga" else 0.5))
                store.add_point(_point(t, m, 2, m != "ga", accuracy=0.8, deep_oracle=m != "ga" or t == 2,
                                       **({"p_chance": 0.01 if t == 1 else 0.3} if m == "ga" else {})))
            store.add_point(_point(t, "oracle", 0, False, accuracy=0.97, p_chance=0.6))
        store.add_point(_point(3, "ga", 1, False))  # target 3: only GA stored (a stopped run)
    reread.table(tmp_path)
    md = (tmp_path / "table.md").read_text()
    assert md.startswith("2 targets with every method and the oracle stored: [1, 2]")
    assert "| A | ga | 2 | 0/2 = 0.00 [0.00, 0.66] | 1/2 = 0.50 [0.09, 0.91] | 2 | 1/2 = 0.50 [0.09, 0.91] |" in md
    assert "| A | oracle | 2 | 0/2 = 0.00 [0.00, 0.66] | – | 2 | 0/2 = 0.00 [0.00, 0.66] |" in md
    assert "| ga | 0.00 | 0.00 | – (n = 0) | 0.900 (n = 1) |" in md.replace(" [0.00, 0.00]", "")
    assert "mean 0.970, min 0.970 (n = 2 targets)" in md
    rows = json.loads((tmp_path / "table.json").read_text())
    assert rows["targets"] == [1, 2] and {r["method"] for r in rows["rows"]} == {*reread.METHODS, "oracle"}
