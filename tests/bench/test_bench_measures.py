"""The measures on the bench side: the stored ``measures`` column, baseline rows kept out of the paper's
metrics, the per-grid-point table with bootstrap intervals, stopping rules, the ID vs canary
comparison and the report's new sections and figures. Synthetic points with known values; the
statistics are checked against scipy itself."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest
import scipy.stats

from deepunlearn.bench.metrics import BASELINES, json_safe, mean_curve, summarize
from deepunlearn.bench.store import Point, ResultsStore

# ---------------------------------------------------------------------------------------------
# synthetic points


def part(prob, tr=0.5, exp=1.0, rouge=0.5, mc=0.3):
    return {"prob": prob, "truth_ratio": tr, "exposure": exp, "rouge_l": rouge, "mc_prob": mc}


def measures(*, tp=0.5, fp=0.5, rp=0.9, fq=None, mu=0.6, privleak=None, genex=None, canary=False, texp=1.0,
             trs=None):
    m = {"target": part(tp, exp=texp), "forget": part(fp), "retain": part(rp), "forget_quality": fq,
         "model_utility": mu, "privleak": privleak, "min_k_auc": None, "genex": genex, "canary": canary}
    if trs is not None:
        m["forget_truth_ratios"] = trs
    return m


def pt(target, method, param, recall, accuracy, forgotten=False, model="tiny", meas=None, **extra):
    d = dict(model=model, target=target, method=method, param=param, recall=recall, accuracy=accuracy,
             accuracy_family=accuracy, accuracy_biography=accuracy, target_forgotten=forgotten,
             forgotten=[target] if forgotten else [], exact=True, **extra)
    if meas is not None:
        d["measures"] = meas
    return d


def baselines(target, *, mu_retrain=0.7, model="tiny", canary=False, texp=5.0):
    """The two baseline rows of a target: before unlearning, and the retain model."""
    return [pt(target, "original", 0, 0.0, 1.0, model=model,
               meas=measures(tp=0.9, fp=0.9, rp=0.9, mu=0.8, canary=canary, texp=texp, trs=[0.2, 0.3])),
            pt(target, "retrain", 0, 0.7, 0.95, model=model, answers_target=target == 0, answers_set=[],
               meas=measures(tp=0.1, fp=0.2, rp=0.9, fq=1.0, mu=mu_retrain, privleak=0.0, genex=0.0,
                             canary=canary, trs=[0.8, 0.9]))]


# ---------------------------------------------------------------------------------------------
# the store's measures column


def test_point_round_trip_with_measures(tmp_path):
    m = measures(fq=1e-19, privleak=-0.25, genex=2.5)
    d = pt(3, "ga", 2, 0.5, 0.9, meas=m)
    p = Point.from_dict(d)
    assert p.measures == m and p.to_dict()["measures"] == m
    assert "measures" not in Point.from_dict(pt(3, "ga", 2, 0.5, 0.9)).to_dict()   # off: absent, not null
    with ResultsStore(tmp_path) as s:
        s.add_point(p)
        s.add_point(Point.from_dict(pt(3, "ga", 4, 0.5, 0.9)))
    with ResultsStore(tmp_path, readonly=True) as s:
        got = s.points()
    assert got[0].measures == m and got[0].measures["forget_quality"] == 1e-19
    assert got[0].measures["privleak"] == -0.25 and got[0].measures["forget"]["prob"] == 0.5
    assert got[1].measures is None
    raw = sqlite3.connect(tmp_path / "results.sqlite").execute("SELECT measures FROM points ORDER BY param").fetchall()
    assert raw[1] == (None,)           # SQL NULL, not the text 'null'
    assert json.loads(raw[0][0])["forget_quality"] == 1e-19 and json.loads(raw[0][0])["genex"] == 2.5


def test_measures_nan_is_stored_as_null(tmp_path):
    with ResultsStore(tmp_path) as s:
        s.add_point(Point.from_dict(pt(1, "ga", 1, 0.5, 0.9, meas=measures(mu=float("nan")))))
        assert s.points()[0].measures["model_utility"] is None


def test_measures_must_be_a_dict():
    with pytest.raises(TypeError, match="measures must be a dict or None, not list"):
        Point.from_dict(pt(1, "ga", 1, 0.5, 0.9, meas=[1, 2]))


#: the points table of a store written before the measures column existed
OLD_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE points (
    model TEXT NOT NULL, target INTEGER NOT NULL, method TEXT NOT NULL, param REAL NOT NULL,
    recall REAL, accuracy REAL, accuracy_family REAL, accuracy_biography REAL,
    accuracy_rule REAL, accuracy_other REAL,
    target_forgotten INTEGER NOT NULL, forgotten TEXT NOT NULL, exact INTEGER NOT NULL,
    extra TEXT NOT NULL DEFAULT '{}', written_at REAL NOT NULL,
    PRIMARY KEY (model, target, method, param)
);
INSERT INTO points VALUES ('tiny', 3, 'ga', 1.0, 0.5, 0.9, NULL, NULL, NULL, NULL, 1, '[3]', 1, '{"k": 1}', 0.0);
"""


def test_old_store_opens(tmp_path):
    db = sqlite3.connect(tmp_path / "results.sqlite")
    db.executescript(OLD_SCHEMA)
    db.close()
    with ResultsStore(tmp_path, readonly=True) as s:   # read-only: no ALTER, measures read as None
        (p,) = s.points()
    assert (p.target, p.method, p.recall, p.forgotten, p.extra, p.measures) == (3, "ga", 0.5, (3,), {"k": 1}, None)
    with ResultsStore(tmp_path) as s:                  # a writer adds the column and can store measures
        s.add_point(Point.from_dict(pt(3, "ga", 2, 0.6, 0.8, meas=measures())))
        got = s.points()
    assert [q.measures is None for q in got] == [True, False] and got[1].measures["retain"]["prob"] == 0.9
    cols = [r[1] for r in sqlite3.connect(tmp_path / "results.sqlite").execute("PRAGMA table_info(points)")]
    assert cols[-4:] == ["measures", "accuracy_low", "accuracy_high", "seed"]  # appended in this order


# ---------------------------------------------------------------------------------------------
# baseline rows stay out of the paper's metrics


def test_baselines_do_not_change_summarize():
    pts = [pt(t, "ga", p, r, a, forgotten=r > 0.5) for t in (0, 1) for p, r, a in [(1, 0.4, 0.9), (2, 0.9, 0.6)]]
    before, curve = summarize(pts), mean_curve(pts)
    with_rows = pts + [row for t in (0, 1) for row in baselines(t)]
    assert BASELINES == ("original", "retrain")
    assert summarize(with_rows) == before and list(summarize(with_rows)["tiny"]) == ["ga"]
    assert mean_curve(with_rows) == curve


# ---------------------------------------------------------------------------------------------
# the per-grid-point table: means and scipy's bootstrap intervals over targets


def scipy_ci(vals):
    r = scipy.stats.bootstrap((np.asarray(vals, float),), np.mean, n_resamples=9999, confidence_level=0.95,
                              rng=np.random.default_rng(0))
    return r.confidence_interval.low, r.confidence_interval.high


def test_table_means_and_intervals_equal_scipy():
    from deepunlearn.bench.report.measures_tables import measures_table

    rng = np.random.default_rng(7)
    n = 6
    vals = {k: rng.random((n, 2)) for k in ("recall", "tp", "fq", "mu")}
    pts = []
    for t in range(n):
        for j, p in enumerate((1, 4)):
            fq = None if t == 0 else float(vals["fq"][t, j])           # target 0 has no retain model
            pts.append(pt(t, "ga", p, float(vals["recall"][t, j]), 0.8, meas=measures(
                tp=float(vals["tp"][t, j]), fq=fq, mu=float(vals["mu"][t, j]))))
        pts += baselines(t)
    rows = measures_table(pts)
    assert [(r["method"], r["param"]) for r in rows] == [("original", 0), ("retrain", 0), ("ga", 1), ("ga", 4)]
    ga4 = rows[3]
    assert ga4["n_targets"] == n and ga4["baseline"] is False and rows[0]["baseline"] is True
    for col, v in (("recall", vals["recall"][:, 1]), ("target.prob", vals["tp"][:, 1]),
                   ("model_utility", vals["mu"][:, 1]), ("forget_quality", vals["fq"][1:, 1])):
        assert ga4[col] == pytest.approx(np.mean(v), abs=1e-12), col
        lo, hi = scipy_ci(v)
        assert (ga4[f"{col}_lo"], ga4[f"{col}_hi"]) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))
        assert ga4[f"{col}_lo"] < ga4[col] < ga4[f"{col}_hi"]
    assert ga4["forget_quality_n"] == n - 1                     # the None is left out, not counted as 0
    # nothing measured: None (never 0), no interval
    assert ga4["privleak"] is None and ga4["privleak_lo"] is None and ga4["privleak_n"] == 0
    assert ga4["genex"] is None and rows[1]["genex"] == 0.0 and rows[1]["genex_lo"] == 0.0   # all equal: (v, v)
    assert ga4["target.mc_prob"] == pytest.approx(0.3)


def test_bootstrap_ci_small_cases():
    from deepunlearn.bench.report.measures_tables import bootstrap_ci

    assert bootstrap_ci([]) == (None, None) and bootstrap_ci([0.3, None]) == (None, None)
    assert bootstrap_ci([0.5, float("nan"), 0.5]) == (0.5, 0.5)
    v = [0.1, 0.9, 0.4, 0.7]
    lo, hi = scipy_ci(v)
    assert bootstrap_ci(v) == (pytest.approx(lo), pytest.approx(hi))
    r = scipy.stats.bootstrap((np.asarray(v),), np.mean, n_resamples=500, confidence_level=0.9,
                              rng=np.random.default_rng(3))
    assert bootstrap_ci(v, level=0.9, n_resamples=500, seed=3) == (
        pytest.approx(r.confidence_interval.low), pytest.approx(r.confidence_interval.high))


def test_measures_csv_leaves_missing_values_empty(tmp_path):
    import csv

    from deepunlearn.bench.report.measures_tables import measures_table
    from deepunlearn.bench.report.measures import write_measures_csv

    pts = [pt(t, "ga", 1, 0.5, 0.9, meas=measures(tp=0.2 * t)) for t in range(3)]
    rows = list(csv.DictReader(write_measures_csv(measures_table(pts), tmp_path / "m.csv").open()))
    assert len(rows) == 1
    assert rows[0]["privleak"] == "" and rows[0]["forget_quality"] == "" and rows[0]["privleak_n"] == "0"
    assert float(rows[0]["target.prob"]) == pytest.approx(0.2) and rows[0]["baseline"] == "0"


# ---------------------------------------------------------------------------------------------
# stopping rules on hand-made trajectories

#: target -> [(param, recall, accuracy, forgotten, model_utility)]
TRAJ = {
    0: [(1, 0.2, 0.95, False, 0.80), (2, 0.5, 0.90, False, 0.75), (4, 0.8, 0.70, True, 0.60),
        (8, 1.0, 0.40, True, 0.50)],
    1: [(1, 0.1, 0.90, False, 0.50), (2, 0.2, 0.85, False, 0.50), (4, 0.4, 0.80, False, 0.45),
        (8, 0.6, 0.60, False, 0.40)],
}


def traj_points(model="tiny", with_retrain=True):
    pts = []
    for t, traj in TRAJ.items():
        pts += [pt(t, "ga", p, r, a, f, model=model, meas=measures(mu=mu)) for p, r, a, f, mu in traj]
        pts += baselines(t, model=model) if with_retrain else baselines(t, model=model)[:1]
    return pts


def test_stopping_rules_pick_the_right_points():
    from deepunlearn.bench.report.measures_tables import stopping_rules

    rules = stopping_rules(traj_points() + traj_points("m2", with_retrain=False))
    ga = rules["tiny"]["ga"]
    # first forgotten: target 0 at 4; target 1 never: the last grid point, and the rule did not fire
    assert ga["first_forgotten"]["params"] == {"0": 4, "1": 8} and ga["first_forgotten"]["n_fired"] == 1
    assert ga["first_forgotten"]["recall"] == pytest.approx((0.8 + 0.6) / 2)
    assert ga["first_forgotten"]["accuracy"] == pytest.approx((0.7 + 0.6) / 2)
    assert ga["first_forgotten"]["target_forgotten"] == 0.5
    # MUSE (retain model utility 0.7): target 0 falls below at 4 -> stop at 2; target 1 at the first
    # point already -> stop before unlearning (recall 0, accuracy 1)
    assert ga["muse"]["params"] == {"0": 2, "1": None} and ga["muse"]["n_fired"] == 2
    assert ga["muse"]["recall"] == pytest.approx(0.25) and ga["muse"]["accuracy"] == pytest.approx(0.95)
    assert ga["muse"]["target_forgotten"] == 0.0
    # oracle = Acc@Recall>=0.8's point: target 0 at 4 (0.8 counts), target 1 the end point (1, 0)
    assert ga["oracle"]["params"] == {"0": 4, "1": None}
    assert ga["oracle"]["accuracy"] == pytest.approx(summarize(traj_points())["tiny"]["ga"]["acc_at_recall_0.8"])
    assert ga["oracle"]["target_forgotten"] == 1.0
    # no retrain rows: no MUSE rule, the others unchanged
    assert rules["m2"]["ga"]["muse"] is None and rules["m2"]["ga"]["first_forgotten"] == ga["first_forgotten"]
    assert set(rules["tiny"]) == {"ga"}                       # baselines are no method here either


def test_muse_rule_never_falls_below_stops_at_the_end():
    from deepunlearn.bench.report.measures_tables import stopping_rules

    pts = [pt(0, "npo", p, p / 8, 0.9, meas=measures(mu=0.9)) for p in (1, 2, 8)] + baselines(0, mu_retrain=0.7)
    muse = stopping_rules(pts)["tiny"]["npo"]["muse"]
    assert muse["params"] == {"0": 8} and muse["n_fired"] == 0


# ---------------------------------------------------------------------------------------------
# in-distribution vs canary targets, and what the retain model still answers


def test_canary_comparison():
    from deepunlearn.bench.report.measures_tables import canary_comparison, retrain_inference

    pts = []
    for t, canary, first, exps in ((0, False, 2, (4.0, 1.0, 0.5)), (1, False, 4, (2.0, 3.0, 1.5)),
                                   (5, True, 8, (9.0, 8.0, 6.0))):
        for (p, e) in zip((2, 4, 8), exps):
            pts.append(pt(t, "ga", p, 0.5, 1 - p / 20, forgotten=p >= first,
                          meas=measures(canary=canary, texp=e)))
        pts += baselines(t, canary=canary, texp=10.0 + t)
    pts.append(pt(6, "ga", 2, 0.1, 0.99, meas=measures(canary=True, texp=7.0)))    # a canary never forgotten
    c = canary_comparison(pts)["tiny"]["ga"]
    assert c["id"] == {"n_targets": 2, "n_forgotten": 2, "steps": 3.0, "exposure_before": 10.5,
                       "exposure_at_forgotten": pytest.approx((4.0 + 3.0) / 2), "exposure_last": 1.0,
                       "accuracy_at_forgotten": pytest.approx((0.9 + 0.8) / 2)}
    assert c["canary"]["n_targets"] == 2 and c["canary"]["n_forgotten"] == 1 and c["canary"]["steps"] == 8.0
    assert c["canary"]["exposure_before"] == 15.0 and c["canary"]["exposure_at_forgotten"] == 6.0
    assert c["canary"]["exposure_last"] == pytest.approx((6.0 + 7.0) / 2)
    assert retrain_inference(pts)["tiny"] == {"n_targets": 3, "answers_target": 1, "n_recorded": 3,
                                              "answers_set_mean": 0.0}


# ---------------------------------------------------------------------------------------------
# the report: new sections and figures only with measures


def sweep_points(with_measures=True):
    """Two methods over four grid values for four targets (target 9 a canary), with baseline rows."""
    rng = np.random.default_rng(1)
    pts = []
    for t in (0, 1, 2, 9):
        canary = t == 9
        for k, method in enumerate(("ga", "npo")):
            for j, p in enumerate((1, 2, 4, 8)):
                x = (j + 1) / 4
                m = measures(tp=1 - x, fp=0.9 - 0.6 * x, rp=0.9 - 0.2 * x, fq=float(10.0 ** (-8 * (1 - x) - k)),
                             mu=0.8 - 0.3 * x, privleak=0.4 - 0.5 * x, genex=3 - 2 * x, canary=canary,
                             texp=8 * (1 - x) + 2 * canary, trs=list(rng.uniform(0.1 + x, 1 + x, 5)))
                pts.append(pt(t, method, p, min(1.0, x + 0.1 * k), 1 - 0.5 * x, forgotten=x >= 0.5,
                              meas=m if with_measures else None))
        if with_measures:
            pts += baselines(t, canary=canary)
    return pts


def check_png(path):
    import matplotlib.image as mpimg

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
    img = mpimg.imread(path)
    assert img.shape[0] >= 200 and img.shape[1] >= 300 and img[..., :3].std() > 0.05, path


def test_report_with_measures(tmp_path):
    from deepunlearn.bench.report import build_report

    with ResultsStore(tmp_path / "sweep") as s:            # through the store: Point objects, measures round-trip
        for d in sweep_points():
            s.add_point(Point.from_dict(d))
        points = s.points()
    rep = tmp_path / "rep"
    text = build_report(points, rep, methods=["ga", "npo"]).read_text()
    assert "## How much remains" in text and "### Stopping rules" in text
    assert "### In-distribution vs canary targets" in text and "still answers the target for 1 of 4 targets" in text
    assert "| tiny | retrain (retain model) | – | 4 |" in text and "| tiny | GA | 8 | 4 |" in text
    assert "**baseline rows** (before unlearning, retain model): 8" in text and "**points**: 32;" in text
    for name in ("truth_ratios", "fq_mu", "privleak", "exposure"):
        assert f"]({name}_tiny.png)" in text
        check_png(rep / f"{name}_tiny.png")
    rows = (rep / "measures.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 + 2 * 4 and rows[1].startswith("tiny,original,0,1,4,")
    summary = json.loads((rep / "summary.json").read_text())
    assert list(summary["models"]["tiny"]) == ["ga", "npo"]            # no baseline in the paper's metrics
    assert summary["models"] == json_safe(summarize(sweep_points(False)))   # the same as without measures
    ff = summary["stopping_rules"]["tiny"]["ga"]["first_forgotten"]
    assert ff["params"] == {"0": 2, "1": 2, "2": 2, "9": 2} and ff["recall"] == pytest.approx(0.5)
    assert summary["stopping_rules"]["tiny"]["ga"]["muse"] is not None
    assert summary["canary_comparison"]["tiny"]["ga"]["canary"]["n_targets"] == 1
    assert summary["retrain_inference"]["tiny"]["answers_target"] == 1


def test_report_without_reference_leaves_fields_empty(tmp_path):
    """Scores but no retain model and no truth ratios: no trade-off, PrivLeak or histogram figure,
    the reference columns are "–" (never 0)."""
    from deepunlearn.bench.report import build_report

    pts = [pt(t, "ga", p, p / 4, 0.9, forgotten=p >= 2, meas=measures(tp=0.5 / p)) for t in (0, 1) for p in (1, 2, 4)]
    text = build_report(pts, tmp_path / "rep", methods=["ga"]).read_text()
    assert "## How much remains" in text
    second = [ln for ln in text.splitlines() if ln.startswith("| tiny | GA | 4 | 2 |")][1]   # the retain table
    cells = [c.strip() for c in second.strip("|").split("|")]
    assert cells[-4:] == ["–", "–", "–", "–"]                    # forget quality, PrivLeak, Min-K% AUC, genex
    files = {f.name for f in (tmp_path / "rep").iterdir()}
    assert "exposure_tiny.png" in files and not files & {"fq_mu_tiny.png", "privleak_tiny.png", "truth_ratios_tiny.png"}
    assert json.loads((tmp_path / "rep" / "summary.json").read_text())["stopping_rules"]["tiny"]["ga"]["muse"] is None


def test_report_without_measures_is_unchanged(tmp_path):
    from deepunlearn.bench.report import build_report

    pts = sweep_points(with_measures=False)
    text = build_report(pts, tmp_path / "rep", methods=["ga", "npo"]).read_text()
    files = sorted(f.name for f in (tmp_path / "rep").iterdir())
    assert files == ["by_relation.png", "curves.png", "family_biography.png", "headline.png", "points.csv", "report.html",
                     "report.md", "success_du.png", "summary.json", "superficial.png", "trajectories_tiny.png"]  # success_du.png: the Success-DU figure
    assert "How much remains" not in text and "baseline rows" not in text and "**points**: 32;" in text
    assert set(json.loads((tmp_path / "rep" / "summary.json").read_text())) == {"models", "intervals", "by_relation", "curves"}
