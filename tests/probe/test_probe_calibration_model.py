"""Calibration on the real tiny fixture model (finetuned on the 25-person KB) against a holdout:
the evidence reproduces every mode's raw verdicts, exact keeps a high TPR at a 5 % FPR, and
``probe --calibrate -o`` / ``probe --calibration`` write and apply the thresholds."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from deepunlearn.cli import main


@pytest.fixture(scope="module")
def hold_kb(small_kb):
    from deepunlearn.kg.holdout import make_holdout

    return make_holdout(small_kb, seed=0, people=12)


@pytest.fixture(scope="module")
def evidence(tiny_model_dir, small_kb, hold_kb):
    import torch

    from deepunlearn.probe import load_model
    from deepunlearn.probe.evidence import mode_evidence

    torch.set_num_threads(1)
    bundle = load_model(tiny_model_dir, device="cpu")
    return bundle, mode_evidence(bundle, small_kb), mode_evidence(bundle, hold_kb)


def test_evidence_reproduces_the_raw_verdicts(evidence, small_kb):
    from deepunlearn.probe import probe

    bundle, pos, _ = evidence
    for m in ("exact", "yesno", "rank"):
        res = probe(bundle, small_kb, mode=m, forms="all", progress=False)
        assert np.array_equal(pos[m] > -math.inf, res.known), m


def test_exact_keeps_a_high_tpr_at_the_set_fpr(evidence, small_kb, hold_kb):
    from deepunlearn.probe.calibration import calibrate
    from deepunlearn.probe.evidence import fact_groups

    _, pos, neg = evidence
    cal = calibrate(neg, fact_groups(hold_kb, range(len(hold_kb.facts))), pos,
                    fact_groups(small_kb, range(len(small_kb.facts))), fpr=0.05)
    fam = cal.entry("exact", "family")
    assert fam.fpr <= 0.05 and fam.tpr >= 0.6 and fam.informative
    for g in cal.entries["any"]:
        assert cal.entries["any"][g].fpr <= 0.05
    # yes/no forms were never trained: yesno is uninformative and says why
    assert not cal.entry("yesno", "family").informative and "TPR" in cal.entry("yesno", "family").reason


def test_probe_calibrate_then_calibration(capsys, tiny_model_dir, small_kb, hold_kb, tmp_path):
    from deepunlearn.kg.io import save_kb

    kb, hold, out = tmp_path / "kb.json", tmp_path / "hold.json", tmp_path / "known.json"
    save_kb(small_kb, kb)
    save_kb(hold_kb, hold)
    base = ["probe", "--model", str(tiny_model_dir), "--kb", str(kb), "--device", "cpu"]
    assert main([*base, "--calibrate", str(hold), "-o", str(out), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["mode"] == "any" and d["calibrated"] and d["known"] <= d["known_raw"]
    assert d["calibration"]["meta"]["holdout_seed"] == 0 and "yesno" in d["uninformative"]
    doc = json.loads(out.read_text())
    assert doc["calibration"]["format"] == "deepunlearn-calibration" and len(doc["fact_ids"]) == d["known"]
    assert main([*base, "--calibration", str(out), "--mode", "rank", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["mode"] == "rank" and r["known"] <= r["known_raw"]
    assert main([*base, "--calibration", str(out), "--calibrate", str(hold)]) == 1
    err = capsys.readouterr().err
    assert "--calibration" in err and len(err.strip().splitlines()) == 1


def test_probe_calibrates_on_excluded_facts(capsys, tiny_model_dir, small_kb, tmp_path):
    """--exclude: the never-seen facts are KB facts a retain model was finetuned without (here
    the fixture model stands in for it: the mechanics, not the rates)."""
    from deepunlearn.kg.io import save_kb

    kb, excl = tmp_path / "kb.json", tmp_path / "excl.json"
    save_kb(small_kb, kb)
    ids = [i for i in range(len(small_kb.facts)) if i % 6 == 0]
    excl.write_text(json.dumps({"exclude": ids}))
    assert main(["probe", "--model", str(tiny_model_dir), "--kb", str(kb), "--device", "cpu", "--exclude", str(excl),
                 "--retain", str(tiny_model_dir), "--fpr", "0.1", "--mode", "exact", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    meta = d["calibration"]["meta"]
    assert d["total"] == len(small_kb.facts) - len(ids) and meta["negatives"] == "excluded"
    assert meta["negatives_n"] == len(ids) and d["calibration"]["fpr"] == 0.1
    assert main(["probe", "--model", str(tiny_model_dir), "--kb", str(kb), "--fpr", "0.1"]) == 1
    assert "--fpr: is for --calibrate or --exclude" in capsys.readouterr().err
