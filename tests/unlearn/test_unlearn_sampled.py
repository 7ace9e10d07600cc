"""Sampled accuracy (deepunlearn.unlearn.sampled): a point probes the target's cone and a
stratified sample of the rest; recall and deep stay exact, accuracy gets a 95 % interval."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from deepunlearn.unlearn.methods import UnlearnError
from deepunlearn.unlearn.sampled import AccuracySampler, allocate, resolve_accuracy, wilson


def _fake_runner(kb, known=None):
    from deepunlearn.rules import Evaluator

    ev = Evaluator(kb, rules=kb.metadata.get("rules", "family"), known=known)
    k = frozenset(range(len(kb))) if known is None else frozenset(known)
    return SimpleNamespace(kb=kb, known=k, evaluator=ev, protocol=SimpleNamespace(name="default"))


def _sampler(runner, mode, sample, seed=0):
    return AccuracySampler(runner.kb, runner.known, runner.evaluator, getattr(runner, "point_for", None), mode, sample, seed=seed,
                           protocol=runner.protocol.name)


def _sampled_eval(runner, sampler, t, lost):
    plan = sampler.plan(t)
    seen = sorted(set(lost) & set(plan["probe"]))
    ev = runner.evaluator.evaluate(t, seen, weights=plan["weights"])
    return ev, seen, sampler.interval(t, ev.set, seen)


def test_recall_and_deep_match_the_full_probe_on_random_losses(small_kb):
    """The cone argument, checked: for every target and random losses of K (sparse and dense, and
    losses that hit the cone), recall, U*_A (tie 'first') and deep equal the full probe's."""
    from deepunlearn.rules import derivable

    runner = _fake_runner(small_kb)
    runner.evaluator.tie = "first"
    sampler = _sampler(runner, "sampled", 20, seed=3)
    rng = np.random.default_rng(0)
    g = runner.evaluator.graph
    for t in sorted(set(small_kb.targets)):
        cone = sampler.plan(t)["exact"]
        for share in (0.05, 0.3, 0.7):
            lost = sorted(set(rng.choice(len(small_kb), int(share * len(small_kb)), replace=False).tolist())
                          | set(rng.choice(cone, max(1, len(cone) // 2), replace=False).tolist()))
            full = runner.evaluator.evaluate(t, lost)
            ev, seen, _ = _sampled_eval(runner, sampler, t, lost)
            assert ev.recall == full.recall and ev.set == full.set and ev.target_forgotten == full.target_forgotten
            assert derivable(g, t, removed=seen) == derivable(g, t, removed=lost)


def test_sample_is_deterministic_from_the_seed_and_stratified(small_kb):
    runner = _fake_runner(small_kb)
    t = small_kb.targets[0]
    a, b = _sampler(runner, "sampled", 30, seed=7), _sampler(runner, "sampled", 30, seed=7)
    c = _sampler(runner, "sampled", 30, seed=8)
    assert a.plan(t)["sample"] == b.plan(t)["sample"] and a.plan(t)["sample"] != c.plan(t)["sample"]
    plan = a.plan(t)
    assert len(plan["sample"]) == 30 and not set(plan["sample"]) & set(plan["exact"])
    groups = {small_kb.group_of(i) for i in plan["sample"]}
    assert groups == {small_kb.group_of(i) for i in runner.known - set(plan["exact"])}  # every group drawn
    # the weights of the sample add up to the facts it stands for
    assert plan["weights"][plan["sample"]].sum() == pytest.approx(len(runner.known) - len(plan["exact"]))


def test_interval_covers_the_full_accuracy(small_kb):
    """Seeded: over 60 random loss patterns the 95 % interval covers the full probe's accuracy
    at least 90 % of the time, and the estimate is unbiased to within a few points."""
    runner = _fake_runner(small_kb)
    rng = np.random.default_rng(1)
    hits, errs = 0, []
    targets = sorted(set(small_kb.targets))
    for k in range(60):
        t = targets[k % len(targets)]
        sampler = _sampler(runner, "sampled", 40, seed=k)
        lost = rng.choice(len(small_kb), int(rng.uniform(0.05, 0.5) * len(small_kb)), replace=False).tolist()
        full = runner.evaluator.evaluate(t, lost)
        ev, _, iv = _sampled_eval(runner, sampler, t, lost)
        if ev.set == full.set:
            hits += iv["accuracy_low"] - 1e-12 <= full.accuracy <= iv["accuracy_high"] + 1e-12
            errs.append(ev.accuracy - full.accuracy)
            assert iv["accuracy_low"] <= ev.accuracy <= iv["accuracy_high"]
    assert hits >= 0.9 * len(errs) and len(errs) >= 50
    assert abs(float(np.mean(errs))) < 0.03


def test_a_sample_as_large_as_the_rest_is_the_full_probe(small_kb):
    runner = _fake_runner(small_kb)
    t = small_kb.targets[0]
    sampler = _sampler(runner, "sampled", 10_000)
    lost = list(range(0, len(small_kb), 3))
    full = runner.evaluator.evaluate(t, lost)
    ev, _, iv = _sampled_eval(runner, sampler, t, lost)
    assert ev.accuracy == pytest.approx(full.accuracy)
    assert iv["accuracy_low"] == pytest.approx(full.accuracy) == iv["accuracy_high"]


def test_resolution_and_errors():
    assert resolve_accuracy("auto", 300, n_known=2000) == "full"
    assert resolve_accuracy("auto", 300, n_known=2001) == "sampled"
    assert resolve_accuracy("auto", 300, n_known=9000, full_only="scores") == "full"
    assert resolve_accuracy("full", 300, n_known=9000) == "full"
    with pytest.raises(UnlearnError, match="reference protocol"):
        resolve_accuracy("sampled", 300, n_known=10, protocol="reference")
    with pytest.raises(UnlearnError, match="scores"):
        resolve_accuracy("sampled", 300, n_known=10, full_only="scores")
    with pytest.raises(UnlearnError, match="accuracy_sample"):
        resolve_accuracy("sampled", 0, n_known=10)
    with pytest.raises(UnlearnError, match="accuracy must be one of"):
        resolve_accuracy("half", 300, n_known=10)
    assert allocate([10, 0, 5], 6) == [4, 0, 2]
    lo, hi = wilson(1.0, 50, 1.96)
    assert hi == 1.0 and 0.9 < lo < 1.0


def test_sampled_points_match_full_points_on_the_model(five_people_runner):
    """On the fixture model: the same seeded trajectories measured with the full probe and with a
    3-fact sample give the same recall, deep, target_forgotten and U*_A (tie 'first' here)."""
    r = five_people_runner
    r.evaluator.tie = "first"
    targets = sorted(r.known)[:4]
    full = [p for t in targets for p in r.run(t, "ga", grid=[1, 4, 8], seed=0)]
    assert r.sampler.mode == "full"  # auto: 25 facts
    r.sampler = _sampler(r, "sampled", 3, seed=0)
    samp = [p for t in targets for p in r.run(t, "ga", grid=[1, 4, 8], seed=0)]
    for f, s in zip(full, samp):
        assert (s.recall, s.notes["deep"], s.target_forgotten, s.set) == (f.recall, f.notes["deep"],
                                                                           f.target_forgotten, f.set)
        assert set(s.forgotten) <= set(f.forgotten)
        assert s.notes["accuracy_low"] <= s.accuracy <= s.notes["accuracy_high"]
        assert "accuracy_low" not in f.notes
    assert any(f.recall > 0 for f in full)


def test_cli_flags(five_people_model_dir, five_people_kb, tmp_path, capsys):
    """``unlearn --accuracy sampled --accuracy-sample N``: the JSON records the choice and the
    points their intervals; under the reference protocol the flag is refused in one line."""
    import json

    from deepunlearn.cli import main
    from deepunlearn.kg.io import save_kb

    save_kb(five_people_kb, tmp_path / "kb.json")
    t = str(sorted(five_people_kb.targets)[0]) if five_people_kb.targets else "0"
    common = ["unlearn", "--model", str(five_people_model_dir), "--kb", str(tmp_path / "kb.json"), "--method", "ga",
              "--target", t, "--grid", "1,4", "--device", "cpu", "--cache-dir", str(tmp_path / "c"), "--json"]
    assert main(common + ["--accuracy", "sampled", "--accuracy-sample", "3"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert (obj["accuracy"], obj["accuracy_sample"]) == ("sampled", 3)
    assert all(p["accuracy_low"] <= p["accuracy"] <= p["accuracy_high"] for p in obj["points"])
    assert main(common + ["--accuracy", "sampled", "--protocol", "reference"]) != 0
    err = capsys.readouterr().err.strip()
    assert "--accuracy" in err and "reference protocol" in err and "\n" not in err


def test_allocation_invariants():
    """Every allocation draws min(n, total), never more than a stratum holds, and at least one
    from every non-empty stratum when n allows."""
    import random

    rng = random.Random(0)
    for _ in range(3000):
        sizes = [rng.choice([0, 1, 2, 5, 50, 1000]) for _ in range(rng.randint(1, 5))]
        n = rng.randint(1, 60)
        out = allocate(sizes, n)
        assert sum(out) == min(n, sum(sizes)) and all(0 <= o <= s for o, s in zip(out, sizes))
        if n >= sum(1 for s in sizes if s):
            assert all(o >= 1 for o, s in zip(out, sizes) if s)
