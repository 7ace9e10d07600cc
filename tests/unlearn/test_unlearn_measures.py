"""Points carry how much remains. The runner's measures must be the probe layer's scores of
the right facts (target, the point's U*_A, the retain facts), the reference-based fields must stay
empty (None, never 0) without a retain model, and the baseline rows must be what they claim."""

from __future__ import annotations

import numpy as np
import pytest

from deepunlearn.probe import measures as pm
from deepunlearn.probe.scores import score_facts


@pytest.fixture
def runner(tiny_bundle, small_kb):
    from deepunlearn.unlearn import TargetRunner

    return TargetRunner(tiny_bundle, small_kb, scores=True, progress=False)


def _target(runner, kb) -> int:
    return next(t for t in kb.targets if t in runner.known)


def test_original_row_measures_are_the_probe_scores_of_the_right_facts(runner, small_kb, tiny_bundle):
    t = _target(runner, small_kb)
    p = runner.original_point(t)
    assert (p.method, p.param, p.recall, p.accuracy, p.forgotten) == ("original", 0, 0.0, 1.0, [])
    m = p.measures
    known = sorted(runner.known)
    s = score_facts(tiny_bundle, small_kb, known, progress=False)
    pos = {int(f): i for i, f in enumerate(s.fact_ids)}
    assert m["target"]["prob"] == pytest.approx(s.prob[pos[t]], rel=1e-6)
    assert m["target"]["exposure"] == pytest.approx(s.exposure[pos[t]], rel=1e-6)
    forget = [pos[i] for i in p.set]
    assert t in p.set
    assert m["forget"]["truth_ratio"] == pytest.approx(float(np.mean(s.truth_ratio[forget])), rel=1e-6)
    retain = [pos[i] for i in known if i not in set(p.set)]
    assert m["retain"]["rouge_l"] == pytest.approx(float(np.mean(s.rouge_l[retain])), rel=1e-6)
    assert m["model_utility"] == pytest.approx(
        pm.model_utility(s.prob[retain], s.rouge_l[retain], s.truth_ratio[retain]), rel=1e-6)
    # the reference set is a minimal deep-unlearning set of the target, one of the smallest
    sets = runner.evaluator.minimal_sets(t).sets
    assert frozenset(m["reference_set"]) in sets and len(m["reference_set"]) == min(len(u) for u in sets)
    assert m["forget_truth_ratios"] == pytest.approx([float(s.truth_ratio[pos[i]]) for i in m["reference_set"]])
    # without a retain model and a holdout, the reference fields are empty, never 0
    for key in ("forget_quality", "privleak", "genex", "min_k_auc"):
        assert m[key] is None, key
    assert m["canary"] is False


def test_unlearning_lowers_the_target_probability_and_points_carry_measures(runner, small_kb):
    t = _target(runner, small_kb)
    before = runner.original_point(t).measures["target"]["prob"]
    points = list(runner.run(t, "ga", [8]))
    assert [p.param for p in points] == [8]
    assert all(p.measures is not None for p in points)
    assert points[-1].measures["target"]["prob"] < before
    assert "measures" in points[0].to_dict() and "notes" not in points[0].to_dict()


def test_scores_off_means_no_measures(tiny_bundle, small_kb):
    from deepunlearn.unlearn import TargetRunner

    r = TargetRunner(tiny_bundle, small_kb, progress=False)
    t = _target(r, small_kb)
    assert next(iter(r.run(t, "ga", [1]))).measures is None


def test_holdout_needs_scores(tiny_bundle, small_kb):
    from deepunlearn.unlearn import TargetRunner, UnlearnError

    with pytest.raises(UnlearnError, match="scores=True"):
        TargetRunner(tiny_bundle, small_kb, holdout=small_kb, progress=False)
