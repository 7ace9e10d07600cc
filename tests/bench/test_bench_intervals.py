"""95 % bootstrap intervals over targets of Acc@R, R@A, Success-DU and the deep rate: the same as
scipy.stats.bootstrap run here on the same per-target values and seed, degenerate samples give
a documented interval without a warning, and summaries written before intervals still print."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from scipy.stats import bootstrap

from deepunlearn.bench.bootstrap import (
    LEVEL, METHOD, N_RESAMPLES, SEED, bootstrap_interval, format_value, interval_keys,
)
from deepunlearn.bench.metrics import format_du_table, format_table, per_target, summarize
from deepunlearn.bench.report import build_report


def pt(target, param, recall, accuracy, deep=None, method="ga"):
    d = dict(model="tiny", method=method, target=target, param=param, recall=recall, accuracy=accuracy,
             accuracy_family=accuracy, accuracy_biography=1.0, target_forgotten=recall > 0,
             forgotten=[target], exact=True)
    if deep is not None:
        d["deep"] = deep
    return d


def points(n=11):
    rng = np.random.default_rng(3)
    out = []
    for t in range(n):
        for param in (1, 2, 3):
            r, a = float(rng.uniform()), float(rng.uniform(0.5, 1.0))
            out.append(pt(t, param, r, a, deep=bool(rng.uniform() < 0.5)))
    return out


def scipy_interval(values):
    x = np.asarray(values, dtype=float)
    res = bootstrap((x,), np.mean, confidence_level=LEVEL, n_resamples=N_RESAMPLES, method=METHOD,
                    rng=np.random.default_rng(SEED), vectorized=True)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def test_the_summary_interval_is_scipy_bootstrap_on_the_per_target_values():
    pts = points()
    s = summarize(pts)["tiny"]["ga"]
    rows = list(per_target(pts).values())
    assert len(rows) == 11
    for key in interval_keys():
        values = [r[key] for r in rows]
        assert len(set(values)) > 1, key  # not degenerate: scipy really runs
        lo, hi = scipy_interval(values)
        assert (s[f"{key}_ci_lo"], s[f"{key}_ci_hi"], s[f"{key}_ci_n"]) == (lo, hi, 11), key
        assert lo <= s[key] <= hi
    assert METHOD == "percentile" and (LEVEL, N_RESAMPLES, SEED) == (0.95, 9999, 0)


def test_all_equal_values_give_the_point_itself_without_a_warning():
    pts = [pt(t, 1, 1.0, 0.95, deep=True) for t in range(5)]  # every target: Success-DU 1, deep
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = summarize(pts)["tiny"]["ga"]
        assert bootstrap_interval([0.3] * 4) == (0.3, 0.3, 4)
    for key in ("success_du_0.8", "success_du_0.9", "deep_rate"):
        assert (s[key], s[f"{key}_ci_lo"], s[f"{key}_ci_hi"], s[f"{key}_ci_n"]) == (1.0, 1.0, 1.0, 5)
    assert format_value(s, "deep_rate", n_targets=5) == "1.00 [1.00, 1.00]"


def test_one_target_gives_no_interval_but_its_n_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = summarize([pt(0, 1, 1.0, 0.85, deep=True)])["tiny"]["ga"]
        table = format_du_table({"tiny": {"ga": s}})
    for key in interval_keys():
        assert s[f"{key}_ci_lo"] is None and s[f"{key}_ci_hi"] is None and s[f"{key}_ci_n"] == 1
    assert "| tiny | ga | 0.85, n=1 | 1.00, n=1 | 0.85 | 1.00, n=1 | 0.00, n=1 | 1.00, n=1 |" in table
    assert bootstrap_interval([]) == (None, None, 0)
    assert bootstrap_interval([float("nan"), None, 0.5]) == (None, None, 1)


def test_console_tables_print_the_interval():
    s = summarize(points())
    du = format_du_table(s).splitlines()[2]
    ga = s["tiny"]["ga"]
    lo, hi = ga["success_du_0.8_ci_lo"], ga["success_du_0.8_ci_hi"]
    assert f"{ga['success_du_0.8']:.2f} [{lo:.2f}, {hi:.2f}]" in du and du.endswith("| 11 |")
    table = format_table(s, show_spread=True)
    assert f"{ga['acc_at_recall_0.8']:.2f} [{ga['acc_at_recall_0.8_ci_lo']:.2f}," in table
    assert "n: tiny GA 11" in table


def test_summaries_written_before_intervals_still_print():
    old = {"tiny": {"ga": {"acc_at_recall_0.8": 0.25, "acc_at_recall_0.8_std": 0.1, "recall_at_acc_0.8": 0.76,
                           "recall_at_acc_0.8_std": None, "auc": 0.5, "success_du_0.8": 0.1, "success_du_0.9": 0.0,
                           "deep_rate": 0.9, "seconds": None, "n_targets": 10}}}
    old = json.loads(json.dumps(old))  # as read back from an old summary.json
    assert format_du_table(old).splitlines()[2] == "| tiny | ga | 0.25 | 0.76 | 0.50 | 0.10 | 0.00 | 0.90 | – | 10 |"
    assert "0.25±0.10" in format_table(old, show_spread=True) and "[low, high]" not in format_table(old, show_spread=True)


def test_the_report_and_summary_json_carry_the_intervals(tmp_path):
    build_report(points(), tmp_path / "rep", methods=["ga"])
    summary = json.loads((tmp_path / "rep" / "summary.json").read_text())
    assert summary["intervals"]["method"] == "percentile" and summary["intervals"]["level"] == 0.95
    ga = summary["models"]["tiny"]["ga"]
    assert ga["deep_rate_ci_n"] == 11 and ga["deep_rate_ci_lo"] <= ga["deep_rate"] <= ga["deep_rate_ci_hi"]
    text = (tmp_path / "rep" / "report.md").read_text()
    assert f"{ga['deep_rate']:.2f} [{ga['deep_rate_ci_lo']:.2f}, {ga['deep_rate_ci_hi']:.2f}]" in text
    assert f"{ga['recall_at_acc_0.8']:.3f} [{ga['recall_at_acc_0.8_ci_lo']:.3f}," in text
    assert "95 % bootstrap interval" in text


@pytest.mark.parametrize("values", [[0, 1], [0.2, 0.4, 0.9]])
def test_bootstrap_interval_is_seeded(values):
    assert bootstrap_interval(values) == bootstrap_interval(values)
    assert bootstrap_interval(values)[:2] == scipy_interval(values)
