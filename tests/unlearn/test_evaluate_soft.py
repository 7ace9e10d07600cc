"""``deep_p`` in verdicts: soft rules give each verdict the probability that the target is still
derivable; certain rules give none, and rules that all hold with probability 1 give the exact
verdict's answer. The command line reads ``--rule-prob`` and refuses a rule set without measures
in one line."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _soft(rules, p):
    return dataclasses.replace(rules, rules=tuple(dataclasses.replace(r, prob=p) for r in rules))


def test_verdicts_carry_deep_p_with_soft_rules(five_people_kb):
    from deepunlearn.rules import Evaluator, derivable, derivation_graph, load_rules
    from deepunlearn.unlearn.evaluate import judge_known

    kb = five_people_kb
    rules = load_rules(kb.metadata.get("rules", "family"))
    known = set(range(len(kb.facts)))
    g = derivation_graph(kb, rules)
    derived = [t for t in sorted(known) if derivable(g, t, removed=[t])]
    assert derived, "the five-person KB has facts the rules derive from the others"
    t = derived[0]
    ev = Evaluator(kb, rules=rules, known=sorted(known))
    kw = dict(original="A", unlearned="B", kb_name="kb", mode="exact", forms=None, budget=None)
    certain = judge_known(kb, rules, ev, known, known - {t}, t, **kw)
    assert certain.deep_p is None and "deep_p" not in certain.text()
    ones = judge_known(kb, _soft(rules, 1.0), ev, known, known - {t}, t, **kw)
    assert not ones.deep and ones.deep_p == 1.0
    soft = judge_known(kb, _soft(rules, 0.5), ev, known, known - {t}, t, **kw)
    assert soft.deep == certain.deep and 0.0 < soft.deep_p < 1.0
    assert f"deep_p: {soft.deep_p:.4g}" in soft.text()
    assert soft.model_dump()["deep_p"] == soft.deep_p
    # K_B without the target and every fact of its cone: nothing derives it, under any probability
    cone = set(g.cone(t).nodes.tolist()) & known
    gone = judge_known(kb, _soft(rules, 0.5), ev, known, known - cone, t, **kw)
    assert gone.deep and gone.deep_p == 0.0


def _run(*args: str, tmp: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DEEPUNLEARN_CACHE": str(tmp / "cache")}
    return subprocess.run([sys.executable, "-m", "deepunlearn", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def test_cli_deep_p_and_rule_prob(five_people_kb, five_people_model_dir, tmp_path, capsys):
    from deepunlearn.cli import main
    from deepunlearn.kg.io import save_kb
    from deepunlearn.rules import load_rules

    kb = five_people_kb
    kb_file = save_kb(kb, tmp_path / "kb.json")
    soft = tmp_path / "soft.dl"
    soft.write_text(_soft(load_rules(kb.metadata.get("rules", "family")), 0.8).to_datalog() + "\n")
    a = str(five_people_model_dir)
    common = ["evaluate", "--original", a, "--unlearned", a, "--kb", str(kb_file), "--device", "cpu"]
    # the model judged against itself forgot nothing: the target is known, so derivable for sure
    res = _run(*common, "--target", str(kb.targets[0]), "--rules", str(soft), "--json", tmp=tmp_path)
    if res.returncode == 1 and "does not know it" in res.stdout + res.stderr:
        pytest.fail("the fixture model should know the KB's first target")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["deep_p"] == 1.0 and out["deep"] is False
    # --rule-prob on rules without measures or probabilities: one line naming the file and line
    plain = tmp_path / "plain.dl"
    plain.write_text("child(A, B) :- father(B, A).\n")
    capsys.readouterr()
    assert main([*common, "--target", str(kb.targets[0]), "--rules", str(plain), "--rule-prob", "pca_confidence"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{plain}:1: rule 1 has no pca_confidence measure" in err


def test_sweep_points_carry_deep_p_with_soft_rules(five_people_kb, five_people_model_dir, tmp_path, monkeypatch):
    """A runner on soft rules stores deep_p beside deep at each point, as deep_p of its graph with
    the forgotten facts removed; on certain rules a point has none."""
    from deepunlearn.probe import load_model
    from deepunlearn.rules import derivable, load_rules
    from deepunlearn.rules.soft import deep_p
    from deepunlearn.unlearn import TargetRunner

    kb = five_people_kb
    rules = _soft(load_rules(kb.metadata.get("rules", "family")), 0.7)
    runner = TargetRunner(load_model(five_people_model_dir, device="cpu"), kb, rules=rules, cache_dir=tmp_path,
                          progress=False)
    g = runner.evaluator.graph
    t = next(t for t in sorted(runner.known) if derivable(g, t, removed=[t]))
    assert runner.soft(t, [t]) == {"deep_p": deep_p(g, t, removed=[t])}
    assert 0.0 < runner.soft(t, [t])["deep_p"] < 1.0
    p, = runner.run(t, "ga", grid=[1])
    assert p.notes["deep_p"] == deep_p(g, t, removed=p.forgotten)
    assert (p.notes["deep_p"] == 0.0) == p.notes["deep"]
    import deepunlearn.rules.soft as soft_module

    monkeypatch.setattr(soft_module, "DEFAULT_MAX_NODES", 2)  # past the budget a point records why, the run goes on
    monkeypatch.setattr(soft_module, "MAX_SUBSET_FACTS", 0)
    over = runner.soft(t, [t])
    assert over["deep_p"] is None and "--soft-budget" in over["deep_p_error"]
    plain = TargetRunner(load_model(five_people_model_dir, device="cpu"), kb, cache_dir=tmp_path, progress=False)
    assert plain.soft(t, [t]) == {}
