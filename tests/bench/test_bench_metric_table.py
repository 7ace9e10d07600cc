"""One declaration per metric: a metric added to ``deepunlearn.unlearn.summary.METRICS`` (the one
file the extending guide names) reaches the per-target values, the aggregate with its spread and
bootstrap interval, and the deep-unlearning table, with no other file touched."""

from __future__ import annotations

import numpy as np

from deepunlearn.bench import metrics as bm
from deepunlearn.unlearn import summary as us


def _points():
    rng = np.random.default_rng(0)
    out = []
    for t in range(6):
        for param in (1, 2, 4):
            r, a = float(rng.uniform()), float(rng.uniform())
            out.append(dict(model="m", method="ga", target=t, param=param, recall=r, accuracy=a, accuracy_family=a,
                            accuracy_biography=1.0, target_forgotten=r > 0.5, deep=r > 0.7))
    return out


def test_a_metric_added_to_the_table_reaches_every_consumer(monkeypatch):
    best = us.Metric("best_recall", "best recall", lambda pts, c, t, _: max(float(p["recall"]) for p in pts),
                     interval=True, du_table=True)
    monkeypatch.setattr(us, "METRICS", (*us.METRICS, best))
    pts = _points()
    by_target = {}
    for p in pts:
        by_target.setdefault(p["target"], []).append(p["recall"])
    expected = np.mean([max(v) for v in by_target.values()])  # brute force, outside the table
    # the per-target values (the unlearn command's "summary" per target) carry it
    assert us.target_metrics([p for p in pts if p["target"] == 0])["best_recall"] == max(by_target[0])
    s = bm.summarize(pts)["m"]["ga"]
    assert abs(s["best_recall"] - expected) < 1e-12
    assert "best_recall_std" in s and s["best_recall_ci_lo"] <= expected <= s["best_recall_ci_hi"]
    assert s["best_recall_ci_n"] == 6
    table = bm.format_du_table(bm.summarize(pts))
    assert table.splitlines()[0].split(" | ")[-2] == "best recall"   # after the table's own, before targets


def test_the_table_reproduces_the_named_metrics():
    pts = _points()[:3]
    names = us.metric_names()
    assert list(us.target_metrics(pts)) == names
    assert [n for n, _, m in us.metric_columns() if m.interval] == [
        "acc_at_recall_0.8", "recall_at_acc_0.8", "success_du_0.8", "success_du_0.9", "deep_rate"]
    assert [n for n, _, m in us.metric_columns() if not m.spread] == ["superficial_rate", "deep_rate", "deep_model_rate"]
