"""Sweep option ``accuracy`` (full / sampled / auto): config, fingerprint, store columns and the
summary's interval keys; one real sweep on the fixture model compares sampled with full."""

from __future__ import annotations

import sqlite3

import pytest

from deepunlearn.bench.config import ConfigError, load_config, parse_config
from deepunlearn.bench.metrics import format_du_table, summarize
from deepunlearn.bench.runner import check_config
from deepunlearn.bench.store import Point, ResultsStore


def test_defaults_leave_the_fingerprint_alone_and_options_change_it(sweep_files):
    base = load_config(sweep_files())
    auto = load_config(sweep_files("b.toml", extra='accuracy = "auto"\naccuracy_sample = 300'))
    samp = load_config(sweep_files("c.toml", extra='accuracy = "sampled"\naccuracy_sample = 50'))
    assert base.accuracy == "auto" and base.fingerprint("kb") == auto.fingerprint("kb") != samp.fingerprint("kb")
    assert "accuracy: sampled" in samp.to_yaml() and "accuracy_sample: 50" in samp.to_yaml()


@pytest.mark.parametrize("extra, needle", [
    ('accuracy = "sampled"\nprotocol = "reference"', "reference protocol"),
    ('accuracy = "sampled"\nscores = true', "scores"),
    ('accuracy = "sampled"\nadversarial = true', "adversarial"),
])
def test_sampled_is_refused_where_all_of_k_is_needed(sweep_files, extra, needle):
    cfg = load_config(sweep_files(extra=extra))
    with pytest.raises(ConfigError, match=needle) as e:
        check_config(cfg)
    assert "field accuracy" in str(e.value) and "sweep.toml" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("extra", ['accuracy = "half"', "accuracy_sample = 0", 'accuracy_sample = "many"'])
def test_bad_values_name_the_field(sweep_files, extra):
    with pytest.raises(ConfigError, match="field accuracy"):
        load_config(sweep_files(extra=extra))


def _pt(target, param, recall, acc, low=None, high=None, deep=False):
    d = dict(model="m", method="ga", target=target, param=param, recall=recall, accuracy=acc,
             target_forgotten=recall > 0, forgotten=[target], exact=True, deep=deep)
    if low is not None:
        d.update(accuracy_low=low, accuracy_high=high, accuracy_probed=40)
    return d


def test_store_round_trip_and_old_store(tmp_path):
    p = Point.from_dict(_pt(3, 1, 1.0, 0.85, 0.8, 0.9, deep=True))
    assert (p.accuracy_low, p.accuracy_high, p.extra["accuracy_probed"]) == (0.8, 0.9, 40)
    with ResultsStore(tmp_path / "s") as s:
        s.add_point(p)
        s.add_point(Point.from_dict(_pt(3, 2, 0.5, 0.9)))
    with ResultsStore(tmp_path / "s", readonly=True) as s:
        a, b = s.points()
    assert (a.accuracy_low, a.accuracy_high, b.accuracy_low) == (0.8, 0.9, None)
    assert a.to_dict()["accuracy_low"] == 0.8 and "accuracy_low" not in b.to_dict()
    # a store written before the columns existed: read-only readers see None, writers add them
    db = sqlite3.connect(tmp_path / "s" / "results.sqlite")
    db.executescript("CREATE TABLE p2 AS SELECT model, target, method, param, recall, accuracy, accuracy_family, "
                     "accuracy_biography, accuracy_rule, accuracy_other, target_forgotten, forgotten, exact, extra, "
                     "written_at, measures FROM points; DROP TABLE points; ALTER TABLE p2 RENAME TO points;")
    db.close()
    with ResultsStore(tmp_path / "s", readonly=True) as s:
        assert [q.accuracy_low for q in s.points()] == [None, None]
    with ResultsStore(tmp_path / "s") as s:
        s.add_point(Point.from_dict(_pt(4, 1, 1.0, 0.7, 0.6, 0.75)))
        assert [q.accuracy_low for q in s.points()] == [None, None, 0.6]


def test_summary_brackets_the_headline_metrics():
    pts = [_pt(0, 1, 0.5, 0.95, 0.9, 0.99), _pt(0, 2, 1.0, 0.82, 0.78, 0.86, deep=True),
           _pt(1, 1, 1.0, 0.9, 0.85, 0.93, deep=True)]
    s = summarize(pts)["m"]["ga"]
    assert s["acc_at_recall_0.8_low"] == pytest.approx((0.78 + 0.85) / 2)
    assert s["acc_at_recall_0.8_high"] == pytest.approx((0.86 + 0.93) / 2)
    assert s["success_du_0.8_low"] == 0.5 and s["success_du_0.8"] == 1.0 == s["success_du_0.8_high"]
    for k in ("acc_at_recall_0.8", "recall_at_acc_0.8", "success_du_0.8", "success_du_0.9"):
        assert s[f"{k}_low"] <= s[k] <= s[f"{k}_high"]
    assert "(sampled 0.81–0.90)" in format_du_table({"m": {"ga": s}})
    full = summarize([{k: v for k, v in p.items() if not k.startswith("accuracy_")} for p in pts])["m"]["ga"]
    assert not any(k.endswith("_low") for k in full)


def test_sampled_sweep_agrees_with_full_on_the_fixture_model(tiny_model_dir, small_kb, tmp_path):
    """The same seeded sweep with the full probe and with a 40-fact sample: recall, deep and the
    forgotten target agree point for point; full accuracies lie inside the sampled intervals for
    (nearly) every point and the summary's intervals cover the full metrics."""
    from deepunlearn.bench.runner import run_sweep
    from deepunlearn.kg.io import save_kb

    save_kb(small_kb, tmp_path / "kb.json")
    base = {"kb": str(tmp_path / "kb.json"), "models": [{"name": "tiny", "path": str(tiny_model_dir)}],
            "methods": {"ga": [2, 8, 16]}, "targets": {"refs": sorted(set(small_kb.targets))[:4]}, "tie": "first",
            "threads": 1}
    out = {}
    for mode in ("full", "sampled"):
        cfg = parse_config({**base, "accuracy": mode, "accuracy_sample": 40, "output": str(tmp_path / mode)})
        out[mode] = run_sweep(cfg, progress=False)
    full = {(p.target, p.param): p for p in out["full"].points}
    samp = {(p.target, p.param): p for p in out["sampled"].points}
    assert full.keys() == samp.keys() and full
    inside = 0
    for k, f in full.items():
        s = samp[k]
        assert (s.recall, s.extra["deep"], s.target_forgotten, s.exact) == (f.recall, f.extra["deep"],
                                                                          f.target_forgotten, f.exact)
        assert f.accuracy_low is None and s.accuracy_low is not None
        inside += s.accuracy_low - 1e-9 <= f.accuracy <= s.accuracy_high + 1e-9
    assert inside >= len(full) - 1
    fs, ss = out["full"].summary["tiny"]["ga"], out["sampled"].summary["tiny"]["ga"]
    for key in ("acc_at_recall_0.8", "recall_at_acc_0.8", "success_du_0.8"):
        assert ss[f"{key}_low"] - 1e-9 <= fs[key] <= ss[f"{key}_high"] + 1e-9
    # the report: the DU table brackets the values, points.csv gets the bounds (full sweeps do not)
    from deepunlearn.bench.report import write_report

    for mode in ("full", "sampled"):
        md = write_report(tmp_path / mode).read_text()
        header = (md_path := tmp_path / mode / "report" / "points.csv").read_text().splitlines()[0]
        assert ("accuracy_low" in header) == (mode == "sampled") == ("95 % interval" in md), md_path
