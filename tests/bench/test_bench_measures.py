"""Issue 13 on the bench side: the stored ``measures`` column, baseline rows kept out of the paper's
metrics, the per-grid-point table with bootstrap intervals, stopping rules, the ID vs canary
comparison and the report's new sections and figures. Synthetic points with known values; the
statistics are checked against scipy itself."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest
import scipy.stats

from deepunlearn.bench.metrics import BASELINES, mean_curve, summarize
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


#: the points table as it was before issue 13 (no measures column)
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
    assert cols[-1] == "measures"


# ---------------------------------------------------------------------------------------------
# baseline rows stay out of the paper's metrics


def test_baselines_do_not_change_summarize():
    pts = [pt(t, "ga", p, r, a, forgotten=r > 0.5) for t in (0, 1) for p, r, a in [(1, 0.4, 0.9), (2, 0.9, 0.6)]]
    before, curve = summarize(pts), mean_curve(pts)
    with_rows = pts + [row for t in (0, 1) for row in baselines(t)]
    assert BASELINES == ("original", "retrain")
    assert summarize(with_rows) == before and list(summarize(with_rows)["tiny"]) == ["ga"]
    assert mean_curve(with_rows) == curve
