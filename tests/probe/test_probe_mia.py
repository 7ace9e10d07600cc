"""Membership inference: ROC against scikit-learn and by hand; ``probe --mia`` and
``probe --scores`` on the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from deepunlearn.cli import main
from deepunlearn.kg.io import save_kb
from deepunlearn.kg.kb import KnowledgeBase
from deepunlearn.probe.mia import roc


def test_roc_agrees_with_sklearn_on_random_data():
    rng = np.random.default_rng(0)
    m, n = rng.normal(0.5, 1, 70), rng.normal(0, 1, 90)
    got = roc(m, n)
    assert got["auc"] == roc_auc_score(np.r_[np.ones(70), np.zeros(90)], np.r_[m, n])
    assert got["members"] == 70 and got["nonmembers"] == 90
    # TPR at the largest FPR <= 5 %: brute force over thresholds
    best = max(np.mean(m >= t) for t in np.r_[m, n] if np.mean(n >= t) <= 0.05)
    assert got["tpr_at_5_fpr"] == pytest.approx(best)


def test_roc_by_hand():
    assert roc([3, 4], [1, 2]) == {"auc": 1.0, "tpr_at_5_fpr": 1.0, "members": 2, "nonmembers": 2}
    assert roc([1, 3], [2, 4])["auc"] == 0.25  # pairs (m > n): (3 > 2) only
    assert roc([], [1.0])["auc"] is None


def _mia_report_signs():
    from deepunlearn.probe.mia import mia_report
    from deepunlearn.probe.scores import FactScores

    def fs(min_k, ppl):
        n = len(min_k)
        z = np.zeros(n)
        return FactScores(fact_ids=np.arange(n), logprob=z, n_tokens=z + 1, prob=z, rank=z, n_candidates=z,
                          exposure=z, mc_prob=z, truth_ratio=z, rouge_l=z, min_k=min_k, ppl=ppl, zlib=np.log(ppl))

    return mia_report(fs([-1.0, -2.0], [2.0, 3.0]), fs([-5.0, -6.0], [9.0, 8.0]))


def test_mia_report_directions():
    rep = _mia_report_signs()
    assert rep["min_k"]["auc"] == rep["ppl"]["auc"] == rep["zlib"]["auc"] == 1.0
    assert rep["members"] == rep["nonmembers"] == 2


@pytest.fixture(scope="module")
def holdout_file(tmp_path_factory):
    kb = KnowledgeBase.build({"Cy": {}, "Di": {}}, [("Cy", "child", "Di"), ("Di", "parent", "Cy")], name="hold")
    return save_kb(kb, tmp_path_factory.mktemp("hold") / "hold.json")


def test_cli_mia(mini_model_dir, mini_kb_file, holdout_file, capsys):
    rc = main(["probe", "--model", str(mini_model_dir), "--kb", str(mini_kb_file), "--mia", "--holdout",
               str(holdout_file), "--min-k", "50", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out["mia"]["members"] == 2 and out["mia"]["nonmembers"] == 2 and out["mia"]["k"] == 50
    assert set(out["mia"]) >= {"min_k", "ppl", "zlib"}


def test_cli_scores_writes_every_fact(mini_model_dir, mini_kb_file, tmp_path, capsys):
    out_file = tmp_path / "scores.json"
    rc = main(["probe", "--model", str(mini_model_dir), "--kb", str(mini_kb_file), "--scores", "-o", str(out_file),
               "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["facts"] == 2 and 0 < out["means"]["prob"] < 1
    doc = json.loads(out_file.read_text())
    assert doc["scores"]["fact_ids"] == [0, 1] and len(doc["scores"]["rouge_l"]) == 2


def _err(capsys, argv, code=1):
    rc = main(argv)
    cap = capsys.readouterr()
    assert rc == code, cap.err
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1, cap.err
    return lines[0], cap.out


def test_cli_mia_bad_holdout(mini_model_dir, mini_kb_file, mini_kb, tmp_path, capsys):
    base = ["probe", "--model", str(mini_model_dir), "--kb", str(mini_kb_file), "--mia"]
    line, _ = _err(capsys, base + ["--holdout", str(tmp_path / "none.json")])
    assert line.startswith(f"deepunlearn probe: error: --holdout {tmp_path / 'none.json'}")
    bad = tmp_path / "bad.json"
    bad.write_text("{ nope")
    line, out = _err(capsys, base + ["--holdout", str(bad), "--json"])
    assert line.startswith(f"deepunlearn probe: error: --holdout {bad}")
    assert json.loads(out)["field"] == "--holdout"
    shared = save_kb(KnowledgeBase.build({"Ann": {}, "Eve": {}}, [("Ann", "child", "Eve")]), tmp_path / "shared.json")
    line, _ = _err(capsys, base + ["--holdout", str(shared)])
    assert f"--holdout {shared}" in line and "person 'Ann' is also in KB" in line
    same = save_kb(mini_kb, tmp_path / "same.json")
    line, _ = _err(capsys, base + ["--holdout", str(same)])
    assert f"--holdout {same}" in line and "is also in KB" in line and "fact" in line
    line, _ = _err(capsys, base)
    assert line == "deepunlearn probe: error: --mia needs --holdout HOLD.json (a KB of facts the model never saw)"


@pytest.mark.parametrize("k", ["0", "101", "nan", "x"])
def test_cli_bad_min_k_is_a_usage_error(k, mini_model_dir, mini_kb_file, capsys):
    with pytest.raises(SystemExit) as e:
        main(["probe", "--model", str(mini_model_dir), "--kb", str(mini_kb_file), "--scores", "--min-k", k])
    assert e.value.code == 2
    assert f"--min-k: expected a number in (0, 100], got '{k}'" in capsys.readouterr().err
