"""Rules mined by ``rules mine`` work wherever a rule file does: minimal sets, a sweep and
``evaluate`` read ``--rules mined.dl`` (its measures comments included)."""

from __future__ import annotations

import json

import pytest

from deepunlearn.cli import main


@pytest.fixture(scope="module")
def w(tmp_path_factory, small_kb, tiny_model_dir):
    from deepunlearn.kg.io import save_kb

    d = tmp_path_factory.mktemp("mined")
    save_kb(small_kb, d / "kb.json")
    (d / "ck").symlink_to(tiny_model_dir)
    assert main(["rules", "mine", "--kb", str(d / "kb.json"), "-o", str(d / "mined.dl"),
                 "--min-std-confidence", "1", "--json"]) == 0
    return d


@pytest.fixture(scope="module")
def derived(w):
    """A target the mined rules derive from other facts, and the evaluator of the whole KB."""
    from deepunlearn.kg.io import load_kb
    from deepunlearn.rules import load_rules
    from deepunlearn.rules.metrics import Evaluator

    kb, rules = load_kb(w / "kb.json"), load_rules(w / "mined.dl")
    ev = Evaluator(kb, rules=rules, known=list(range(len(kb.facts))))
    ts = [t for t in kb.targets if len(ev.evaluate(t, [t]).set) > 1]
    assert ts, "the mined rules derive some target from other facts"
    return kb, rules, ev, ts[0]


def test_minimal_sets_under_mined_rules(w, derived, capsys):
    from deepunlearn.rules import derivation_graph, minimal_sets

    kb, rules, _, t = derived
    capsys.readouterr()
    assert main(["rules", "sets", "--kb", str(w / "kb.json"), "--rules", str(w / "mined.dl"), "--target", str(t),
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert rules and all(r.measures["std_confidence"] == 1.0 for r in rules)
    got = d["targets"][0] if "targets" in d else d
    sets = {frozenset(s) for s in minimal_sets(derivation_graph(kb, rules), t).sets}
    assert got["target_id"] == t and len(got["sets"]) == len(sets) > 1
    assert all(t in s for s in sets)


def test_a_sweep_reads_mined_rules(w, derived, monkeypatch):
    monkeypatch.chdir(w)
    (w / "sweep.toml").write_text('kb = "kb.json"\nrules = "mined.dl"\noutput = "res"\nseeds = 1\n'
                                  '[[models]]\nname = "tiny"\npath = "ck"\n[methods]\nga = [1]\n'
                                  f'[targets]\nrefs = [{derived[3]}]\n')
    assert main(["bench", "--config", "sweep.toml", "--quiet", "--json"]) == 0
    summary = json.loads((w / "res" / "report" / "summary.json").read_text())
    assert {"models", "by_relation"} <= set(summary)


def test_the_verdict_under_mined_rules(derived):
    """evaluate's judgement (after probing) with the mined rules: forgetting the target alone
    is superficial when the mined rules derive it back; forgetting a minimal set is deep."""
    from deepunlearn.unlearn.evaluate import judge_known

    kb, rules, ev, t = derived
    known = set(range(len(kb.facts)))
    kw = dict(original="A", unlearned="B", kb_name="kb", mode="exact", forms=None, budget=None)
    alone = judge_known(kb, rules, ev, known, known - {t}, t, **kw)
    assert alone.target_forgotten and alone.superficial and not alone.deep
    gone = set(ev.evaluate(t, [t]).set)
    full = judge_known(kb, rules, ev, known, known - gone, t, **kw)
    assert full.deep and full.recall == 1.0


def test_evaluate_reads_mined_rules(w, derived, capsys, monkeypatch):
    monkeypatch.chdir(w)
    capsys.readouterr()
    assert main(["evaluate", "--original", "ck", "--unlearned", "ck", "--kb", "kb.json", "--rules", "mined.dl",
                 "--target", str(derived[3]), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    v = out["verdicts"][0] if "verdicts" in out else out
    assert v["forgotten"] == [] and v["target_id"] == derived[3] and not v["deep"]
