"""The calibrated adversarial aggregate at grid points: with a calibration the superficial rate
and recall_adv count only facts known above the never-seen floor, the raw values and the floor
are recorded beside them; without one nothing changes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from deepunlearn.unlearn import TargetRunner


@pytest.fixture(scope="module")
def calibration(five_people_model_dir, five_people_kb):
    import torch

    from deepunlearn.kg.holdout import make_holdout
    from deepunlearn.probe import load_model
    from deepunlearn.probe.calibration import calibrate
    from deepunlearn.probe.evidence import fact_groups, mode_evidence

    torch.set_num_threads(1)
    hold = make_holdout(five_people_kb, seed=0, people=8)
    bundle = load_model(five_people_model_dir, device="cpu")
    ids = range(len(five_people_kb.facts))
    return calibrate(mode_evidence(bundle, hold), fact_groups(hold, range(len(hold.facts))),
                     mode_evidence(bundle, five_people_kb), fact_groups(five_people_kb, ids), fpr=0.05)


def test_calibrated_points_record_raw_values_and_the_floor(five_people_model_dir, five_people_kb, calibration,
                                                           tmp_path):
    from deepunlearn.probe import load_model

    runner = TargetRunner(load_model(five_people_model_dir, device="cpu"), five_people_kb, cache_dir=tmp_path,
                          progress=False, lr=3e-3, adversarial=True, adversarial_calibration=calibration.to_json())
    t = sorted(runner.known)[0]
    points = list(runner.run(t, "ga", grid=[1, 16], seed=0))
    assert any(p.forgotten for p in points)
    for p in points:
        n = p.notes
        assert n["adv_fpr"] == 0.05 and n["adv_floor"] == calibration.floor()
        assert n["superficial_n"][1] == n["superficial_raw_n"][1] == len(p.forgotten)
        assert n["superficial_n"][0] <= n["superficial_raw_n"][0]  # calibration only takes verdicts away
        assert n["recall_adv_raw"] - 1e-12 <= n["recall_adv"] <= p.recall + 1e-12


def test_scripted_guesser_is_superficial_at_chance_raw_but_not_calibrated(five_people_model_dir, five_people_kb,
                                                                          tmp_path, monkeypatch):
    """A model whose every mode guesses (evidence drawn like a never-seen fact's) looks
    superficial raw; the calibrated aggregate keeps it near the floor."""
    from deepunlearn.probe import evidence, load_model
    from deepunlearn.unlearn.checks_calibrated import calibrated_known

    rng = np.random.default_rng(0)

    def guess(bundle, kb, ids, modes, **kw):
        ids = list(ids)
        out = {}
        for m in modes:  # raw "known" half the time, with the small scores of a guess
            v = rng.uniform(-1, 0.001, size=len(ids))
            out[m] = np.where(rng.random(len(ids)) < 0.5, v, -math.inf)
        return out

    from deepunlearn.probe.calibration import calibrate

    modes = ("exact", "yesno", "rank", "generate")
    groups = sorted(five_people_kb.groups)
    neg_groups = [groups[i % len(groups)] for i in range(400)]
    neg = guess(None, None, range(400), modes)
    pos = {m: rng.uniform(1, 2, size=200) for m in modes}  # the scripted model's own facts: sure
    scripted = calibrate(neg, neg_groups, pos, [groups[i % len(groups)] for i in range(200)], fpr=0.05)
    monkeypatch.setattr(evidence, "mode_evidence", guess)
    runner = TargetRunner(load_model(five_people_model_dir, device="cpu"), five_people_kb, cache_dir=tmp_path,
                          progress=False, adversarial=True, adversarial_calibration=scripted)
    ids = sorted(runner.known)
    cal_known, raw_known = calibrated_known(runner.checks, ids)
    assert len(raw_known) > 0.8 * len(ids)  # four coin-flip modes: raw any ~ 94 %
    assert len(cal_known) <= 0.25 * len(ids)  # calibrated any: the 5 % floor plus small-n slack


def test_calibration_needs_the_adversarial_aggregate(five_people_model_dir, five_people_kb, calibration, tmp_path):
    from deepunlearn.probe import load_model
    from deepunlearn.unlearn.methods import UnlearnError

    with pytest.raises(UnlearnError, match="adversarial_calibration"):
        TargetRunner(load_model(five_people_model_dir, device="cpu"), five_people_kb, cache_dir=tmp_path,
                     progress=False, adversarial_calibration=calibration)


def test_unlearn_cli_records_calibrated_and_raw(five_people_model_dir, five_people_kb, calibration, tmp_path, capsys):
    import json

    from deepunlearn.cli import main
    from deepunlearn.kg.io import save_kb

    kb_file, cal_file = tmp_path / "kb.json", tmp_path / "cal.json"
    save_kb(five_people_kb, kb_file)
    cal_file.write_text(json.dumps(calibration.to_json()))
    base = ["unlearn", "--model", str(five_people_model_dir), "--kb", str(kb_file), "--method", "ga", "--grid", "8",
            "--cache-dir", str(tmp_path / "cache"), "--lr", "3e-3", "--target", str(next(iter(five_people_kb.targets)))]
    assert main(base + ["--adversarial", "--adversarial-calibration", str(cal_file), "--json"]) == 0
    (p,) = json.loads(capsys.readouterr().out)["points"]
    assert p["adv_fpr"] == 0.05 and "superficial_raw" in p and p["recall_adv"] >= p["recall_adv_raw"] - 1e-12
    assert main(base + ["--adversarial-calibration", str(cal_file), "--json"]) == 1
    captured = capsys.readouterr()
    err = json.loads(captured.out)
    assert err["field"] == "--adversarial-calibration" and "give --adversarial" in err["error"]
    assert main(base + ["--adversarial", "--adversarial-calibration", str(kb_file), "--json"]) == 1
    assert "not a calibration file" in json.loads(capsys.readouterr().out)["error"]
