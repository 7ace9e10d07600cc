"""A measured sweep end to end (scores, a retain model per target, holdout facts) stores
the baseline rows and every point's measures, reports them, and resumes without recomputing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepunlearn.cli import main
from deepunlearn.kg.holdout import make_holdout
from deepunlearn.kg.io import save_kb


@pytest.fixture(scope="module")
def setup(five_people_kb, tmp_path_factory) -> Path:
    from deepunlearn.probe import build_tiny_model, load_model
    from deepunlearn.unlearn.finetune import FinetuneConfig, finetune

    d = tmp_path_factory.mktemp("measured")
    save_kb(five_people_kb, d / "kb.json")
    save_kb(make_holdout(five_people_kb, seed=3), d / "hold.json")
    build_tiny_model(five_people_kb, d / "model", seed=0, hidden=64, layers=1, heads=4)
    res = finetune(load_model(d / "model", device="cpu"), five_people_kb, FinetuneConfig.tiny(epochs=60, batch_size=4),
                   out_dir=d / "model", progress=False)
    assert res.share >= 0.95
    return d


def _known_family_fact(d: Path, kb) -> int:
    from deepunlearn.probe import load_model, probe

    known = probe(load_model(d / "model", device="cpu"), kb, progress=False).known_ids()
    return next(i for i in kb.entity_facts() if i in known)


def _config(d: Path, extra: str = "", target: int = 0) -> Path:
    cfg = d / "sweep.toml"
    cfg.write_text(f'''kb = "kb.json"
output = "out"
scores = true
reference = "retrain"
holdout = "hold.json"
{extra}
[[models]]
name = "m"
path = "model"
[methods]
ga = [1, 4]
[targets]
refs = [{target}]
''')
    return cfg


def test_measured_sweep_stores_baselines_and_measures(setup, five_people_kb, capsys):
    from deepunlearn.bench.store import ResultsStore

    cfg = _config(setup, target=_known_family_fact(setup, five_people_kb))
    assert main(["bench", "--config", str(cfg), "--json", "--quiet"]) == 0
    first = json.loads(capsys.readouterr().out)
    with ResultsStore(setup / "out", readonly=True) as store:
        points = store.points()
    targets = {p.target for p in points}
    assert len(targets) == 1
    by = {(p.target, p.method, p.param): p for p in points}
    for t in targets:
        orig, ret, ga = by[(t, "original", 0)], by[(t, "retrain", 0)], by[(t, "ga", 4)]
        assert (orig.recall, orig.accuracy) == (0.0, 1.0)
        assert isinstance(ret.extra["answers_target"], bool) and isinstance(ret.extra["answers_set"], list)
        F = orig.measures["reference_set"]
        assert t in F and set(ret.extra["answers_set"]) <= set(F)
        # the retain model never saw F: its answers of F are what it infers, not what it was taught
        meta = json.loads(next((setup / "out" / "cache" / "retrain").glob("*/deepunlearn.json")).read_text())
        assert sorted(meta["trained"]["excluded"]) == sorted(F)
        for key in ("forget_quality", "privleak", "genex", "min_k_auc", "model_utility"):
            assert ga.measures[key] is not None, key
        assert 0.0 <= ga.measures["forget_quality"] <= 1.0
        assert ret.measures["forget_quality"] is None  # a retain model is not compared with itself
    # the paper's metrics ignore the baseline rows: only GA is summarised
    assert set(first["methods"]) == {"ga"}
    report = (setup / "out" / "report" / "report.md").read_text()
    assert "## How much remains" in report and "retrain (retain model)" in report
    assert (setup / "out" / "report" / "measures.csv").stat().st_size > 0

    # resuming computes nothing again (baseline rows included)
    assert main(["bench", "--config", str(cfg), "--json", "--quiet"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["computed"] == 0 and again["points"] == first["points"]


def test_holdout_sharing_a_person_is_refused(setup, five_people_kb, capsys):
    bad = five_people_kb.subset(range(3))
    save_kb(bad, setup / "bad_hold.json")
    cfg = _config(setup).read_text().replace('holdout = "hold.json"', 'holdout = "bad_hold.json"')
    (setup / "bad.toml").write_text(cfg.replace('output = "out"', 'output = "out-bad"'))
    assert main(["bench", "--config", str(setup / "bad.toml"), "--json", "--quiet"]) == 1
    err = json.loads(capsys.readouterr().out)
    assert err["field"] == "holdout" and "bad_hold.json" in err["error"] and "also in KB" in err["error"]
    assert not (setup / "out-bad" / "results.sqlite").exists()


def test_holdout_without_scores_is_a_config_error(setup, capsys):
    cfg = setup / "noscores.toml"
    cfg.write_text(_config(setup).read_text().replace("scores = true\nreference = \"retrain\"\n", ""))
    assert main(["bench", "--config", str(cfg), "--json", "--quiet"]) == 1
    err = json.loads(capsys.readouterr().out)
    assert "holdout" in err["error"] and "scores = true" in err["error"]


def test_min_k_outside_range_is_a_config_error(setup, capsys):
    cfg = setup / "mink.toml"
    cfg.write_text(_config(setup, "min_k = 0").read_text())
    assert main(["bench", "--config", str(cfg), "--json", "--quiet"]) == 1
    err = json.loads(capsys.readouterr().out)
    assert "min_k" in err["error"]
