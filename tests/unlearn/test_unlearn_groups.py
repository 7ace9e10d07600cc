"""Unlearning points carry the accuracy per relation group: the point JSON,
the per-target summary (``acc_at_recall_{t}_{group}``) and the text table."""

from __future__ import annotations

import json

import pytest

from deepunlearn.cli import main
from deepunlearn.kg.io import save_kb
from tests.rules.test_rules_groups import RULES, org_kb

#: the model keeps these after unlearning target 4 (A superior C): it lost 0, 4, 6 and 7
KEPT = {1, 2, 3, 5, 8}


@pytest.fixture
def org_files(tmp_path, monkeypatch):
    from deepunlearn.probe import build_tiny_model

    kb = org_kb()
    model = build_tiny_model(kb, tmp_path / "m", hidden=16, heads=2, layers=1)
    (tmp_path / "org.dl").write_text(RULES)
    # what the model answers after unlearning, fixed so the figures are the hand computation's
    monkeypatch.setattr("deepunlearn.unlearn.loop.TargetRunner.known_after", lambda self, model_fn=None: set(KEPT))
    return ["unlearn", "--model", str(model), "--kb", str(save_kb(kb, tmp_path / "org.json")), "--rules",
            str(tmp_path / "org.dl"), "--method", "ga", "--target", "4", "--grid", "1", "--k-mode", "dataset",
            "--sets", "exact"]


def test_an_unlearn_point_and_its_summary_carry_every_group(org_files, tmp_path, capsys):
    assert main([*org_files, "--json", "-o", str(tmp_path / "points.json")]) == 0
    d = json.loads(capsys.readouterr().out)
    (p,) = d["points"]
    # hand computation (tests/rules/test_rules_groups.py): U* = {0, 4}, 6 and 7 lost outside it
    assert p["accuracy_groups"] == {"reporting": 1.0, "location": 0.5, "profile": 0.5}
    # flat, named after the domain's groups; no family / biography keys in another domain
    assert (p["accuracy_reporting"], p["accuracy_location"], p["accuracy_profile"]) == (1.0, 0.5, 0.5)
    assert "accuracy_family" not in p and "accuracy_biography" not in p
    s = d["summary"]
    # one point at recall 1: Acc@Recall>=0.8 per group is that point's group accuracy
    assert (s["acc_at_recall_0.8_reporting"], s["acc_at_recall_0.8_location"], s["acc_at_recall_0.8_profile"]) \
        == (1.0, 0.5, 0.5)
    assert "acc_at_recall_0.8_family" not in s
    saved = json.loads((tmp_path / "points.json").read_text())
    assert saved["points"][0]["accuracy_groups"] == p["accuracy_groups"]


def test_the_unlearn_table_shows_a_column_per_group(org_files, capsys):
    assert main(org_files) == 0
    out = capsys.readouterr().out
    assert "     param  recall     acc  reporting  location  profile  forgot  target     deep" in out
    assert "         1   1.000   0.714      1.000     0.500    0.500       4  forgotten" in out


def test_a_batch_point_takes_each_groups_accuracy_over_k_minus_every_targets_set(tmp_path, monkeypatch):
    from deepunlearn.probe import build_tiny_model, load_model
    from deepunlearn.rules import parse_datalog
    from deepunlearn.unlearn.loop import TargetRunner
    from deepunlearn.unlearn.requests import run_batch

    kb = org_kb()
    bundle = load_model(build_tiny_model(kb, tmp_path / "m", hidden=16, heads=2, layers=1), device="cpu")
    monkeypatch.setattr(TargetRunner, "known_after", lambda self, model_fn=None: set(KEPT))
    runner = TargetRunner(bundle, kb, rules=parse_datalog(RULES), k_mode="dataset", sets="exact",
                          cache_dir=tmp_path / "cache", progress=False)
    (points,) = list(run_batch(runner, [4, 3], "ga", grid=[1]))
    # sets {0, 4} and {1, 3}: keep {2, 5, 6, 7, 8}, of which 6 and 7 are lost
    for p in points:
        assert p.accuracy == pytest.approx(3 / 5)
        assert p.accuracy_groups == {"reporting": 1.0, "location": 0.5, "profile": 0.5}
        assert p.to_dict()["accuracy_groups"] == p.accuracy_groups and "accuracy_family" not in p.to_dict()
