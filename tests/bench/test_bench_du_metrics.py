"""The deep-unlearning metrics against hand computations: Success-DU, deep rate and seconds per
target on hand-made trajectories, their aggregation and summary.json keys, the deep-unlearning
table, the batch and sequential tables (came-back detection) and the figures for method names no
colour table knows."""

import json
import math
from dataclasses import dataclass, field

import pytest

from deepunlearn.bench.report.deep_tables import batch_table, sequential_table
from deepunlearn.bench.metrics import format_du_table, per_target, summarize
from deepunlearn.bench.report import build_report
from deepunlearn.bench.store import Point
from deepunlearn.unlearn.summary import metric_names, target_metrics

PNG = b"\x89PNG\r\n\x1a\n"


def pt(t, param, recall, acc, method="ga", model="m", **kw):
    return dict(model=model, method=method, target=t, param=param, recall=recall, accuracy=acc,
                accuracy_family=acc, accuracy_biography=acc, target_forgotten=recall > 0, forgotten=[t], exact=True,
                **kw)


def test_metric_names_keep_the_old_order_and_add_the_new_keys():
    assert metric_names() == ["acc_at_recall_0.8", "recall_at_acc_0.8", "auc", "acc_at_superficial", "superficial_rate",
                              "acc_at_recall_0.8_family", "acc_at_recall_0.8_biography",
                              "success_du_0.8", "success_du_0.9", "deep_rate",
                              "success_du_model_0.8", "success_du_model_0.9", "deep_model_rate", "seconds"]


def test_success_du_counts_a_deep_point_at_its_accuracy_only():
    # deep at accuracy 0.85: a success at 0.8, not at 0.9; the earlier point is accurate but not deep
    m = target_metrics([pt(0, 1, 0.5, 0.95, deep=False, seconds=3.0), pt(0, 2, 1.0, 0.85, deep=True, seconds=7.5)])
    assert (m["success_du_0.8"], m["success_du_0.9"], m["deep_rate"], m["seconds"]) == (1.0, 0.0, 1.0, 7.5)
    # the thresholds are inclusive: accuracy 9/10 counts at 0.9
    assert target_metrics([pt(0, 1, 1.0, 9 / 10, deep=True)])["success_du_0.9"] == 1.0


def test_end_points_never_count():
    # no grid point deep: the end point (1, 0) is deep but adds nothing (not even to the deep rate),
    # although it does enter Acc@Recall (0.0 here) as before
    m = target_metrics([pt(0, 1, 0.6, 0.99, deep=False)])
    assert (m["success_du_0.8"], m["success_du_0.9"], m["deep_rate"]) == (0.0, 0.0, 0.0)
    assert m["acc_at_recall_0.8"] == 0.0 and m["recall_at_acc_0.8"] == pytest.approx(0.6)
    assert math.isnan(m["seconds"])          # no point recorded seconds
    assert target_metrics([])["success_du_0.8"] == 0.0


def test_old_points_without_deep_fall_back_to_recall_and_a_stored_flag_wins():
    old = target_metrics([pt(0, 1, 0.99, 0.95), pt(0, 2, 1.0, 0.92)])       # no `deep` key anywhere
    assert (old["success_du_0.8"], old["success_du_0.9"], old["deep_rate"]) == (1.0, 1.0, 1.0)
    assert target_metrics([pt(0, 1, 0.99, 0.95)])["deep_rate"] == 0.0
    # recall 1 over an inexact set but t still derivable: the stored flag says not deep
    assert target_metrics([pt(0, 1, 1.0, 0.95, deep=False)])["deep_rate"] == 0.0
    # a stored flag read from a Point's extra (the results store) and from an unlearn point's notes
    store_pt = Point("m", 0, "ga", 1, recall=0.4, accuracy=0.93, extra={"deep": True, "seconds": 2.0})
    assert target_metrics([store_pt])["success_du_0.9"] == 1.0 and target_metrics([store_pt])["seconds"] == 2.0

    @dataclass
    class UnlearnPoint:
        recall: float
        accuracy: float
        target_forgotten: bool = True
        accuracy_family: float | None = None
        accuracy_biography: float | None = None
        notes: dict = field(default_factory=dict)

    assert target_metrics([UnlearnPoint(0.5, 0.88, notes={"deep": True})])["success_du_0.8"] == 1.0


def test_summarize_aggregates_over_targets():
    pts = [pt(0, 1, 1.0, 0.95, deep=True, seconds=4.0),                                  # 0.8 yes, 0.9 yes
           pt(1, 1, 0.5, 0.9, deep=False, seconds=1.0), pt(1, 2, 1.0, 0.85, deep=True, seconds=6.0),  # yes, no
           pt(2, 1, 0.7, 0.9, deep=False), pt(2, 2, 1.0, 0.3, deep=True)]               # no, no (deep at 0.3)
    s = summarize(pts)["m"]["ga"]
    assert s["n_targets"] == 3
    assert s["success_du_0.8"] == pytest.approx(2 / 3) and s["success_du_0.9"] == pytest.approx(1 / 3)
    # sample std (ddof 1) of [1, 1, 0] = sqrt(((1/3)^2 * 2 + (2/3)^2) / 2) = sqrt(1/3)
    assert s["success_du_0.8_std"] == pytest.approx(math.sqrt(1 / 3))
    assert s["success_du_0.8_sem"] == pytest.approx(math.sqrt(1 / 3) / math.sqrt(3))
    assert s["deep_rate"] == 1.0 and "deep_rate_std" not in s
    assert s["seconds"] == pytest.approx((4.0 + 6.0) / 2)     # target 2 has no seconds: left out
    # a batch's seconds are shared by its targets
    b = [pt(t, 1, 1.0, 0.9, method="ga@b4", deep=True, seconds=20.0, batch_size=4, batch=0) for t in range(4)]
    assert summarize(b)["m"]["ga@b4"]["seconds"] == pytest.approx(5.0)
    assert per_target(b)[("m", "ga@b4", 0)]["success_du_0.9"] == 1.0


def test_format_du_table():
    s = {"tiny": {"ga": {"acc_at_recall_0.8": 0.25, "recall_at_acc_0.8": 0.764, "auc": 0.5, "success_du_0.8": 0.1,
                         "success_du_0.9": 0.0, "deep_rate": 0.9, "seconds": 12.34, "n_targets": 10},
                  "du_loop": {"acc_at_recall_0.8": 0.95, "recall_at_acc_0.8": 1.0, "auc": 0.9, "success_du_0.8": 0.95,
                              "success_du_0.9": 0.9, "deep_rate": 1.0, "seconds": float("nan"), "n_targets": 10}}}
    lines = format_du_table(s).splitlines()
    assert lines[0] == ("| model | method | Acc@R≥0.8 | R@A≥0.8 | AUC | Success-DU@0.8 | Success-DU@0.9 | deep rate | "
                        "s/target | targets |")
    assert lines[2] == "| tiny | ga | 0.25 | 0.76 | 0.50 | 0.10 | 0.00 | 0.90 | 12.3 | 10 |"
    assert lines[3] == "| tiny | du_loop | 0.95 | 1.00 | 0.90 | 0.95 | 0.90 | 1.00 | – | 10 |"
    assert [ln.split(" | ")[1] for ln in format_du_table(s, methods=["du_loop"]).splitlines()[2:]] == ["du_loop"]


def batch_points():
    pts = []
    # ga@b2, batch 0 = targets 1, 2 (grid 1, 2); batch 1 = targets 3, 4 (grid 1 only)
    for t, rows in ((1, [(1, 0.5, 0.95, False), (2, 1.0, 0.8, True)]), (2, [(1, 1.0, 0.95, True), (2, 1.0, 0.8, True)]),
                    (3, [(1, 0.2, 0.9, False)]), (4, [(1, 1.0, 0.9, True)])):
        for param, r, a, d in rows:
            pts.append(pt(t, param, r, a, method="ga@b2", deep=d, base_method="ga", batch_size=2,
                          batch=0 if t < 3 else 1, batch_targets=[1, 2] if t < 3 else [3, 4]))
    # the single-target ga rows of the same model: batch size 1
    pts += [pt(1, 1, 1.0, 0.85, deep=True), pt(1, 2, 1.0, 0.5, deep=True), pt(2, 1, 0.5, 0.9, deep=False)]
    pts += [pt(1, 1, 1.0, 0.2, method="original")]       # a baseline row never counts
    return pts


def test_batch_table_by_hand():
    rows = batch_table([Point.from_dict(p) for p in batch_points()])     # extras read from Point.extra
    assert [(r["method"], r["batch_size"]) for r in rows] == [("ga", 1), ("ga@b2", 2)]
    one, two = rows
    # size 1: last grid points (1, 2: recall 1, acc .5, deep) and (2, 1: recall .5, acc .9, not deep)
    assert one["n_targets"] == 2 and one["accuracy"] == pytest.approx(0.7) and one["recall"] == pytest.approx(0.75)
    assert one["deep"] == 0.5 and one["success_du_0.8"] == 0.5
    # size 2: batch 0 at param 2 (acc .8, recalls 1, 1), batch 1 at param 1 (acc .9, recalls .2, 1)
    assert two["n_batches"] == 2 and two["n_targets"] == 4
    assert two["accuracy"] == pytest.approx((0.8 * 2 + 0.9 * 2) / 4)
    assert two["recall"] == pytest.approx((1 + 1 + 0.2 + 1) / 4) and two["deep"] == pytest.approx(3 / 4)
    assert two["success_du_0.8"] == pytest.approx(3 / 4)      # targets 1 (p2), 2, 4; not 3
    assert json.loads(json.dumps(rows)) == rows


def seq_points():
    """ga@seq over targets 5, 6, 7: 5 is deep after its request, still deep after 6's, back after 7's;
    6 is never deep (so never "came back"); rows at param 1 carry no `earlier` and are ignored."""
    def row(req, t, recall, deep, acc, earlier=None):
        extra = dict(request=req, base_method="ga")
        if earlier is not None:
            extra.update(earlier=[dict(target=u, recall=r, deep=d) for u, r, d in earlier], accuracy_after=acc)
        return pt(t, 2 if earlier is not None else 1, recall, acc, method="ga@seq", deep=deep, **extra)

    return [row(0, 5, 0.5, False, 0.97), row(0, 5, 1.0, True, 0.95, [(5, 1.0, True)]),
            row(1, 6, 0.6, False, 0.9, [(5, 1.0, True), (6, 0.6, False)]),
            row(2, 7, 1.0, True, 0.8, [(5, 0.5, False), (6, 0.4, False), (7, 1.0, True)]),
            row(2, 7, 0.3, False, 0.85)]


def test_sequential_table_detects_targets_that_came_back():
    rows = sequential_table(seq_points())
    got = [(r["requests"], r["target"], r["accuracy"], r["mean_recall_earlier"], r["deep_earlier"], r["came_back"])
           for r in rows]
    assert got == [(1, 5, 0.95, 1.0, 1.0, []),
                   (2, 6, 0.9, pytest.approx(0.8), 0.5, []),
                   (3, 7, 0.8, pytest.approx(1.9 / 3), pytest.approx(1 / 3), [5])]
    assert {r["method"] for r in rows} == {"ga@seq"} and {r["base_method"] for r in rows} == {"ga"}


NEW = ("graddiff", "npo_gdr", "idk", "simnpo", "rmu", "du_oracle", "du_loop")


def test_report_with_new_methods_batch_and_sequential(tmp_path):
    pts = batch_points() + seq_points()
    for k, m in enumerate(NEW):
        for t in (1, 2):
            pts += [pt(t, 1, 0.5, 0.97, method=m, deep=False, seconds=1.0 + k),
                    pt(t, 2, 1.0, 0.9 - 0.05 * k, method=m, deep=True, seconds=2.0 + k)]
    # the configured methods name only ga and the new ones: the @b / @seq labels join them
    path = build_report(pts, tmp_path / "rep", methods=["ga", *NEW])
    out = tmp_path / "rep"
    for name in ("curves", "headline", "success_du", "batch", "sequential", "trajectories_m"):
        data = (out / f"{name}.png").read_bytes()
        assert data[:8] == PNG and len(data) > 5000, name
    summary = json.loads((out / "summary.json").read_text())
    per = summary["models"]["m"]
    assert set(per) == {"ga", *NEW, "ga@b2", "ga@seq"}
    assert per["du_loop"]["success_du_0.8"] == 0.0 and per["graddiff"]["success_du_0.9"] == 1.0   # acc .6 / .9
    assert per["npo_gdr"]["success_du_0.8"] == 1.0 and per["npo_gdr"]["success_du_0.9"] == 0.0    # acc .85
    assert per["graddiff"]["seconds"] == 2.0
    assert [r["batch_size"] for r in summary["batch"]] == [1, 2]
    assert [r["came_back"] for r in summary["sequential"]] == [[], [], [5]]
    text = path.read_text()
    assert "## Deep unlearning" in text and "![success_du](success_du.png)" in text
    assert "| m | npo_gdr | " in text and "### Batch requests" in text and "### Sequential requests" in text
    assert "| m | ga@seq | 3 | 7 | 0.80 | 0.63 | 0.33 | 5 |" in text


def test_report_without_batch_or_sequential_rows_has_no_such_keys(tmp_path):
    build_report([pt(0, 1, 1.0, 0.9, deep=True)], tmp_path / "rep", methods=["ga"])
    summary = json.loads((tmp_path / "rep" / "summary.json").read_text())
    assert set(summary) == {"models", "intervals", "by_relation", "curves"}
    assert summary["models"]["m"]["ga"]["success_du_0.9"] == 1.0 and summary["models"]["m"]["ga"]["seconds"] is None
    assert not (tmp_path / "rep" / "batch.png").exists() and not (tmp_path / "rep" / "sequential.png").exists()
