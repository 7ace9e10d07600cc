"""A sweep's calibrated adversarial aggregate: the config option reaches the runner with the
thresholds themselves, and the report shows the raw values and the floor beside the calibrated
ones (a sweep without a calibration keeps its table)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest


def _calibration_file(path):
    from deepunlearn.probe.calibration import calibrate

    rng = np.random.default_rng(0)
    g = ["family", "biography"] * 100
    neg = {"rank": np.where(rng.random(200) < 0.1, rng.random(200), -math.inf)}
    pos = {"rank": rng.uniform(1, 2, 200)}
    path.write_text(json.dumps(calibrate(neg, g, pos, g).to_json()))
    return path


def test_adversarial_calibration_needs_adversarial_and_reaches_the_runner(tmp_path):
    from deepunlearn.bench.config import ConfigError, parse_config
    from deepunlearn.bench.config_probe import probe_results_key, runner_probe_options

    cal = _calibration_file(tmp_path / "cal.json")
    base = {"kb": "kb.json", "models": [{"name": "m", "path": "m"}], "methods": {"ga": [1]}}
    with pytest.raises(ConfigError, match="field adversarial_calibration: .*set adversarial = true too"):
        parse_config({**base, "adversarial_calibration": str(cal)})
    cfg = parse_config({**base, "adversarial": True, "adversarial_calibration": str(cal)})
    opts = runner_probe_options(cfg)
    assert opts["adversarial_calibration"]["format"] == "deepunlearn-calibration"
    assert probe_results_key(cfg)["probe"]["adversarial_calibration"] == opts["adversarial_calibration"]


def test_report_shows_raw_and_floor_beside_calibrated():
    from deepunlearn.bench.report.forms import forgetting_table, scope_table

    def pt(t, **kw):
        return dict(model="m", method="ga", target=t, param=1, recall=1.0, accuracy=0.9, target_forgotten=True,
                    forgotten=[t], exact=True, recall_adv=0.8, accuracy_adv=0.9, superficial=0.1,
                    superficial_n=[1, 10], **kw)

    cal = forgetting_table([pt(1, recall_adv_raw=0.2, superficial_raw=0.7, superficial_raw_n=[7, 10],
                                adv_floor=0.03, adv_fpr=0.05)])
    s = cal["m"]["ga"]["last"]
    assert s["recall_adv_raw"] == 0.2 and s["superficial_raw"] == 0.7 and s["adv_floor"] == 0.03
    lines = scope_table(cal, ["ga"], "last")
    assert "floor (FPR)" in lines[0] and "0.70 (7/10)" in lines[2] and "0.030" in lines[2]
    plain = forgetting_table([pt(1)])
    assert "recall_adv_raw" not in plain["m"]["ga"]["last"] and "floor" not in scope_table(plain, ["ga"], "last")[0]
