"""``model_derived = true`` in a sweep: every point stores ``deep_model`` beside the rules' ``deep``,
and the aggregates and the deep-unlearning table add the model-derived Success-DU and deep rate.

The compose answers are scripted (every compose question is answered with the object of the first
target, whatever the weights), so the outcome is known: the first target is model-derived at every
point, the second exactly where the run's own probe still answers it directly."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from deepunlearn.bench.config import ConfigError, parse_config
from deepunlearn.bench.metrics import format_du_table
from deepunlearn.bench.store import ResultsStore
from deepunlearn.cli import main
from deepunlearn.kg.io import save_kb

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "probe"))
from scripted import answer_fn, derived_pair  # noqa: E402


def test_sweep_records_model_derived_deep(five_people_model_dir, five_people_kb, tmp_path, monkeypatch, capsys):
    import deepunlearn.unlearn.derived as derived

    kb = five_people_kb
    first, second = derived_pair(five_people_model_dir, kb)
    answer = kb.facts[first][2]
    real = derived.model_derived

    def scripted(bundle, kb_, target, rules, **kw):
        return real(bundle, kb_, target, rules, **{**kw, "model_fn": answer_fn(bundle, answer)})

    monkeypatch.setattr(derived, "model_derived", scripted)
    save_kb(kb, tmp_path / "kb.json")
    (tmp_path / "sweep.toml").write_text(f'''kb = "kb.json"
output = "out"
model_derived = true
[[models]]
name = "m"
path = "{five_people_model_dir}"
lr = 1e-3
[methods]
ga = [1, 4]
[targets]
refs = [{first}, {second}]
''')
    assert main(["bench", "--config", str(tmp_path / "sweep.toml"), "--json", "--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out)["models"]
    with ResultsStore(tmp_path / "out", readonly=True) as store:
        pts = {(p.target, p.param): p for p in store.points()}
    assert set(pts) == {(t, g) for t in (first, second) for g in (1, 4)}
    for (t, _), p in pts.items():
        md = p.extra["model_derived"]
        assert md["compose_questions"] >= 1 and md["direct"] is (not p.target_forgotten)
        if t == first:  # every compose question of the first target is answered
            assert md["compose_answered"] == md["compose_questions"] and p.extra["deep_model"] is False
        else:  # none of the second's: model-derived exactly when answered directly
            assert md["compose_answered"] == 0 and p.extra["deep_model"] is p.target_forgotten
    s = summary["m"]["ga"]
    second_deep = any(pts[(second, g)].target_forgotten for g in (1, 4))
    assert s["deep_model_rate"] == pytest.approx((0 + second_deep) / 2)
    ok = any(pts[(second, g)].target_forgotten and pts[(second, g)].accuracy >= 0.8 for g in (1, 4))
    assert s["success_du_model_0.8"] == pytest.approx(ok / 2)
    table = format_du_table(summary)
    assert "deep rate (model)" in table and "Success-DU@0.8 (model)" in table
    report = (tmp_path / "out" / "report" / "report.md").read_text()
    assert "deep rate (model)" in report
    # a sweep without model-derived verdicts has no such column
    assert "(model)" not in format_du_table({"m": {"ga": {k: v for k, v in s.items() if "model" not in k}}})


def test_model_derived_refuses_whp():
    with pytest.raises(ConfigError, match="model_derived"):
        parse_config({"kb": "kb.json", "models": ["m"], "methods": {"whp": []}, "model_derived": True})

