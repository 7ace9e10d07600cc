"""A sweep point's controls (deepunlearn.bench.point_controls) on scripted models whose answers are
known by construction: ``deep_oracle`` relative to a scripted exact-unlearning model, ``p_chance``
from calibrations whose raw false-positive rates are set; and the report's table of them."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

import deepunlearn
from deepunlearn.bench.point_controls import PointControls, _JudgeView, _Reference
from deepunlearn.bench.report.controls import control_rows, control_table, controls_section
from deepunlearn.probe.calibration import calibrate
from deepunlearn.unlearn.points import Point

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unlearn"))  # scripted_lm


def scripted(base, kb, facts: dict[int, float]):
    """A bundle answering exactly ``facts`` (``scripted_lm``), with the base's config (the
    runner's probe cache fingerprints it)."""
    from scripted_lm import scripted_bundle

    b = scripted_bundle(base, [(kb, facts)])
    b.model.config = base.model.config
    return b


def calibration(kb, rate: float, n: int = 40) -> dict:
    """A calibration of mode ``exact`` whose raw false-positive rate is ``rate`` on every relation."""
    rels = sorted({f[1] for f in kb.facts})
    gid = {f[1]: kb.group_of(i) for i, f in enumerate(kb.facts)}
    k = round(rate * n)
    ev = [x for _ in rels for x in [1.0] * k + [-math.inf] * (n - k)]
    names = [r for r in rels for _ in range(n)]
    pos = [f[1] for f in kb.facts]
    return calibrate({"exact": np.array(ev)}, [gid[r] for r in names], {"exact": np.full(len(pos), 50.0)},
                     [gid[r] for r in pos], neg_relations=names, pos_relations=pos,
                     meta={"model": "A", "forms": "default"}).to_json()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A runner over a scripted A answering every fact, a target with set-mates, and its set."""
    from deepunlearn.probe import build_tiny_model, load_model
    from deepunlearn.unlearn import TargetRunner
    from deepunlearn.unlearn.measures import reference_set
    from deepunlearn.unlearn.runner_options import ProbeOptions

    d = tmp_path_factory.mktemp("controls")
    kb = deepunlearn.generate_family(8, seed=1)
    base = load_model(build_tiny_model(kb, d / "tiny", hidden=32, layers=1, heads=2), device="cpu")
    every = {i: 6.0 for i in range(len(kb.facts))}
    runner = TargetRunner(scripted(base, kb, every), kb, probing=ProbeOptions(mode="exact"),
                          progress=False)
    assert runner.known == set(every)
    target = next(t for t in kb.targets if len(reference_set(runner.evaluator, t)) >= 2
                  and len(set().union(*runner.evaluator.minimal_sets(t).sets)) <= 12)
    removed = reference_set(runner.evaluator, target)
    return kb, base, runner, target, removed, d


def controls_for(world, oracle_facts: dict[int, float], rate: float | None = None) -> PointControls:
    """Controls whose reference for the target is a scripted oracle answering ``oracle_facts``."""
    kb, base, runner, target, removed, d = world
    folder = d / "oracle"
    folder.mkdir(exist_ok=True)
    (folder / "deepunlearn.json").write_text(json.dumps({"retrain": {"removed": removed, "of": "A", "seed": 0}}))
    o = scripted(base, kb, oracle_facts)
    o.answer_rule = runner.bundle.answer_rule
    negatives = deepunlearn.generate_family(8, seed=2)  # other people: facts neither model saw
    c = PointControls("unused", None if rate is None else calibration(kb, rate))
    ref = _Reference(_JudgeView(runner), folder, negatives, bundle=o)
    ref.exact = ref.derives(target) is False
    c._refs[(id(runner), target)] = ref
    return c


def point_of(world, b_facts: dict[int, float], c: PointControls) -> Point:
    """The point of a scripted B answering ``b_facts``, judged with the controls ``c``."""
    kb, base, runner, target, removed, d = world
    forgotten = sorted(runner.known - set(b_facts))
    p = runner.point_for(target, "ga", 1, forgotten, None)
    p.notes["deep"] = runner.deep(target, forgotten)
    a = runner.bundle
    b = scripted(base, kb, b_facts)
    b.answer_rule = a.answer_rule
    runner.bundle = b
    try:
        c.annotate(runner, p, None, forgotten)
    finally:
        runner.bundle = a
    return p


def test_b_keeping_every_set_mate_is_superficial_under_every_reading(world):
    kb, base, runner, target, removed, d = world
    b = {i: 6.0 for i in runner.known if i != target}           # every fact of A but the target
    oracle = {i: 6.0 for i in runner.known if i not in removed}  # exact unlearning: none of the set
    p = point_of(world, b, controls_for(world, oracle, rate=0.0))
    assert p.notes["deep"] is False and p.notes["deep_oracle"] is False and p.notes["oracle_exact"] is True
    assert sorted(p.notes["deep_oracle_held"]) == sorted(f for f in removed if f != target)
    assert p.notes["p_chance"] == 0.0  # no never-seen fact is ever answered: chance cannot explain it


def test_exact_unlearning_inferring_the_set_mates_is_deep_relative_to_itself(world):
    """The oracle still answers the set-mates it was never taught (from what it kept): B answering
    them no more surely is deep relative to it, though the raw verdict calls it superficial, and
    a calibration that answers every never-seen fact does not establish that verdict."""
    kb, base, runner, target, removed, d = world
    b = {i: 6.0 for i in runner.known if i != target}
    p = point_of(world, b, controls_for(world, dict(b), rate=1.0))
    assert p.notes["deep"] is False and p.notes["deep_oracle"] is True and p.notes["deep_oracle_held"] == []
    assert p.notes["p_chance"] == 1.0


def test_a_deep_point_is_deep_relative_to_the_oracle_and_gets_no_p_chance(world):
    kb, base, runner, target, removed, d = world
    b = {i: 6.0 for i in runner.known if i not in removed}
    p = point_of(world, b, controls_for(world, dict(b), rate=0.5))
    assert p.notes["deep"] is True and p.notes["deep_oracle"] is True and "p_chance" not in p.notes


def test_without_a_calibration_no_p_chance_and_without_an_oracle_no_deep_oracle(world):
    kb, base, runner, target, removed, d = world
    b = {i: 6.0 for i in runner.known if i != target}
    p = point_of(world, b, controls_for(world, dict(b)))
    assert "p_chance" not in p.notes and p.notes["deep_oracle"] is True
    c = PointControls(None, calibration(kb, 0.0))
    q = point_of(world, b, c)
    assert "deep_oracle" not in q.notes and q.notes["p_chance"] == 0.0


def test_control_rows_count_targets_and_leave_out_missing_fields():
    pts = [
        # ga: target 1 superficial everywhere, established at its last point; target 2 deep at step 2;
        # target 3 superficial, its last point judged without a calibration, stored before oracle = true
        {"model": "A", "method": "ga", "target": 1, "param": 1, "deep": False, "deep_oracle": False, "p_chance": 0.9},
        {"model": "A", "method": "ga", "target": 1, "param": 2, "deep": False, "deep_oracle": False, "p_chance": 0.01},
        {"model": "A", "method": "ga", "target": 2, "param": 1, "deep": False, "deep_oracle": True, "p_chance": 0.2},
        {"model": "A", "method": "ga", "target": 2, "param": 2, "deep": True, "deep_oracle": True},
        {"model": "A", "method": "ga", "target": 3, "param": 1, "deep": False},
        {"model": "A", "method": "original", "target": 1, "param": 0, "deep": False, "p_chance": 0.0},
    ]
    r, = control_rows(pts)
    assert (r["targets"], r["deep"], r["deep_oracle"], r["deep_oracle_n"]) == (3, 1, 1, 2)
    assert (r["superficial"], r["established"], r["established_n"]) == (2, 1, 1)
    assert r["deep_ci95"][0] < 1 / 3 < r["deep_ci95"][1] and r["established_ci95"] == (0.207, 1.0)
    row = control_table([r])[-1]
    assert row == "| A | ga | 3 | 1/3 = 0.33 [0.06, 0.79] | 1/2 = 0.50 [0.09, 0.91] | 2 | 1/1 = 1.00 [0.21, 1.00] |"
    md, summary = controls_section(pts, ["ga"])
    assert md[0] == "### Deep against its controls" and summary["controls"] == [r]
    assert controls_section([p for p in pts if p["target"] == 3], ["ga"]) == ([], {})


def test_the_oracle_set_is_chosen_over_what_the_model_was_taught():
    """A model that does not answer one taught fact: a minimal set over its K can leave the target
    derivable from what it was taught (through that fact); the oracle's set then comes from the
    taught facts, and retraining without it leaves the target underivable. Where the set over K
    already does, it is kept (cached oracles keep their keys)."""
    from types import SimpleNamespace

    from deepunlearn.bench.oracle import oracle_set
    from deepunlearn.rules.graph import derivation_graph
    from deepunlearn.rules.metrics import Evaluator
    from deepunlearn.unlearn.measures import reference_set

    kb, rules = deepunlearn.generate_family(8, seed=1), deepunlearn.load_rules("family")
    every = set(range(len(kb.facts)))

    def derivable(removed, t) -> bool:
        return bool(derivation_graph(kb, rules, known=sorted(every - set(removed))).in_closure[t])

    cases = {"changed": 0, "kept": 0}
    for f in range(6):  # the model does not answer fact f
        ev = Evaluator(kb, rules=rules, known=sorted(every - {f}))
        runner = SimpleNamespace(kb=kb, evaluator=ev, bundle=SimpleNamespace(meta={}))
        for t in kb.targets:
            if t == f:
                continue
            over_k, chosen = reference_set(ev, t), oracle_set(runner, t)
            assert not derivable(chosen, t)
            if derivable(over_k, t):
                assert chosen != over_k
                cases["changed"] += 1
            else:
                assert chosen == over_k
                cases["kept"] += 1
    assert cases["changed"] >= 1 and cases["kept"] >= 1
    # facts the model was finetuned without stay out of its oracle too
    runner = SimpleNamespace(kb=kb, evaluator=Evaluator(kb, rules=rules, known=sorted(every - {0})),
                             bundle=SimpleNamespace(meta={"trained": {"excluded": [0]}}))
    assert 0 in oracle_set(runner, kb.targets[1])
