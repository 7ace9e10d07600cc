"""The sweep metrics against values computed by hand (end points included)."""

import math

import pytest

from deepunlearn.bench.metrics import format_table, mean_curve, per_target, summarize, summarize_by

# (target, param, recall, accuracy, accuracy_family, accuracy_biography, target_forgotten)
GA = [
    (10, 1, 0.2, 0.95, 0.9, 1.0, False), (10, 2, 0.6, 0.85, 0.8, 0.9, True), (10, 4, 1.0, 0.5, 0.4, 0.6, True),
    (11, 1, 0.1, 0.99, 0.99, 1.0, False), (11, 2, 0.3, 0.9, 0.85, 0.95, False), (11, 4, 0.5, 0.7, 0.6, 0.8, False),
    (12, 1, 0.8, 0.81, 0.7, 0.95, True), (12, 2, 0.9, 0.6, 0.5, 0.8, True), (12, 4, 1.0, 0.2, 0.1, 0.4, True),
]
WHP = [(10, 10, 0.05, 0.97, 0.96, None, False)]


def _points():
    out = []
    for method, rows in (("ga", GA), ("whp", WHP)):
        for t, param, r, a, fam, bio, tf in rows:
            out.append(dict(model="tiny", method=method, target=t, param=param, recall=r, accuracy=a,
                            accuracy_family=fam, accuracy_biography=bio, target_forgotten=tf))
    return out


# Hand computation, per GA target (end points (0, 1) and (1, 0) added to every curve):
#   t10: Acc@R>=.8 = max(.5, 0) = .5;  Recall@Acc>=.8 = max(.2, .6, 0) = .6;
#        AUC = .2*.95 + .4*.85 + .4*.5 = .73;  Acc@Sup = .85;  family .4;  biography .6
#   t11: Acc@R = 0 (only the end point);  R@A = .3;  AUC = .1*.99 + .2*.9 + .2*.7 + .5*0 = .419;  Sup 0
#   t12: Acc@R = .81;  R@A = .8;  AUC = .8*.81 + .1*.6 + .1*.2 = .728;  Sup .81;  family .7;  biography .95
HAND = {
    10: {"acc_at_recall_0.8": 0.5, "recall_at_acc_0.8": 0.6, "auc": 0.73, "acc_at_superficial": 0.85,
         "superficial_rate": 1.0, "acc_at_recall_0.8_family": 0.4, "acc_at_recall_0.8_biography": 0.6},
    11: {"acc_at_recall_0.8": 0.0, "recall_at_acc_0.8": 0.3, "auc": 0.419, "acc_at_superficial": 0.0,
         "superficial_rate": 0.0, "acc_at_recall_0.8_family": 0.0, "acc_at_recall_0.8_biography": 0.0},
    12: {"acc_at_recall_0.8": 0.81, "recall_at_acc_0.8": 0.8, "auc": 0.728, "acc_at_superficial": 0.81,
         "superficial_rate": 1.0, "acc_at_recall_0.8_family": 0.7, "acc_at_recall_0.8_biography": 0.95},
}


def test_per_target_metrics_match_hand_computation():
    pt = per_target(_points())
    for t, want in HAND.items():
        got = pt[("tiny", "ga", t)]
        for k, v in want.items():
            assert got[k] == pytest.approx(v, abs=1e-12), (t, k)


def test_summary_means_and_spreads_match_hand_computation():
    s = summarize(_points())["tiny"]["ga"]
    assert s["n_targets"] == 3
    assert s["acc_at_recall_0.8"] == pytest.approx((0.5 + 0.0 + 0.81) / 3)
    assert s["recall_at_acc_0.8"] == pytest.approx((0.6 + 0.3 + 0.8) / 3)
    assert s["auc"] == pytest.approx((0.73 + 0.419 + 0.728) / 3)
    assert s["acc_at_superficial"] == pytest.approx((0.85 + 0 + 0.81) / 3)
    assert s["superficial_rate"] == pytest.approx(2 / 3)
    assert s["acc_at_recall_0.8_family"] == pytest.approx((0.4 + 0 + 0.7) / 3)
    assert s["acc_at_recall_0.8_biography"] == pytest.approx((0.6 + 0 + 0.95) / 3)
    # sample std (ddof 1) of [.5, 0, .81]: sqrt(((.0633)^2 + (.4367)^2 + (.3733)^2) / 2)
    m = 1.31 / 3
    std = math.sqrt(((0.5 - m) ** 2 + (0 - m) ** 2 + (0.81 - m) ** 2) / 2)
    assert s["acc_at_recall_0.8_std"] == pytest.approx(std)
    assert s["acc_at_recall_0.8_sem"] == pytest.approx(std / math.sqrt(3))


def test_single_target_and_missing_part():
    s = summarize(_points())["tiny"]["whp"]
    assert s["n_targets"] == 1
    assert s["acc_at_recall_0.8"] == 0.0          # recall .05 never reaches .8: only the end point (1, 0)
    assert s["recall_at_acc_0.8"] == pytest.approx(0.05)
    assert s["auc"] == pytest.approx(0.05 * 0.97)
    assert math.isnan(s["acc_at_recall_0.8_std"])  # one target: no spread
    assert math.isnan(s["acc_at_recall_0.8_biography"])  # no biography facts measured
    assert s["acc_at_recall_0.8_family"] == 0.0


def test_threshold_is_inclusive_and_other_thresholds():
    pts = [dict(model="m", method="ga", target=0, param=1, recall=4 / 5, accuracy=0.8, accuracy_family=0.8,
                accuracy_biography=0.8, target_forgotten=True)]
    s = summarize(pts)["m"]["ga"]
    assert s["acc_at_recall_0.8"] == pytest.approx(0.8)
    assert s["recall_at_acc_0.8"] == pytest.approx(0.8)
    s5 = summarize(pts, threshold=0.9)["m"]["ga"]
    assert s5["acc_at_recall_0.9"] == 0.0 and s5["recall_at_acc_0.9"] == 0.0


def test_mean_curve_and_grouping():
    c = mean_curve(_points())["tiny"]["ga"]
    assert [p["param"] for p in c] == [1, 2, 4]
    assert c[0]["recall"] == pytest.approx((0.2 + 0.1 + 0.8) / 3)
    assert c[0]["accuracy"] == pytest.approx((0.95 + 0.99 + 0.81) / 3)
    by = summarize_by(_points(), lambda t: "even" if t % 2 == 0 else "odd")
    assert by["tiny"]["ga"]["even"]["n_targets"] == 2
    assert by["tiny"]["ga"]["odd"]["acc_at_recall_0.8"] == 0.0
    assert by["tiny"]["ga"]["even"]["recall_at_acc_0.8"] == pytest.approx(0.7)


def test_table_has_paper_shape():
    text = format_table(summarize(_points()), show_spread=True)
    lines = text.splitlines()
    assert "Recall@Acc>=0.8" in lines[0] and "Acc@Recall>=0.8" in lines[0]
    assert lines[1].split() == ["Method", "GA", "WHP", "GA", "WHP"]
    assert lines[2].split()[0] == "tiny"
    # 95 % bootstrap intervals over targets; WHP has one target: no interval, its n instead
    assert "0.57 [0.30, 0.80]" in lines[2] and "0.44 [0.00, 0.81]" in lines[2] and "0.05, n=1" in lines[2]
    assert lines[3].startswith("[low, high]: 95 % bootstrap interval over targets (percentile")
