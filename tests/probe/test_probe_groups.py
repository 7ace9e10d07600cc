"""``deepunlearn probe`` reports what the model knows per relation group."""

from __future__ import annotations

import json

import numpy as np

from deepunlearn.cli import main
from deepunlearn.kg.io import save_kb
from tests.rules.test_rules_groups import org_kb


def _fake_probe(known):
    from deepunlearn.probe.result import ProbeResult

    def probe(bundle, kb, **kw):
        return ProbeResult(fact_ids=np.arange(len(kb.facts)), known=known, logprob=np.zeros(len(kb.facts)))
    return probe


def test_probe_summary_counts_known_facts_per_group(tmp_path, capsys, monkeypatch):
    from deepunlearn.probe import build_tiny_model

    kb = org_kb()
    model = build_tiny_model(kb, tmp_path / "m", hidden=16, heads=2, layers=1)
    kb_file = save_kb(kb, tmp_path / "org.json")
    # known: 0 1 4 (reporting), 6 (location), none of profile
    known = np.zeros(9, dtype=bool)
    known[[0, 1, 4, 6]] = True
    monkeypatch.setattr("deepunlearn.probe.probing.probe", _fake_probe(known))
    assert main(["probe", "--model", str(model), "--kb", str(kb_file), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["known_by_group"] == {"reporting": [3, 5], "location": [1, 2], "profile": [0, 2]}
    assert d["known"] == 4 and not any(k.startswith(("family_", "biography_")) for k in d)
    assert main(["probe", "--model", str(model), "--kb", str(kb_file)]) == 0
    assert "knows 4 of 9 facts (44.4%; reporting 3/5, location 1/2, profile 0/2) [" in capsys.readouterr().out


def test_probe_summary_of_a_family_kb_keeps_its_family_and_biography_keys(mini_model_dir, tmp_path, capsys,
                                                                           monkeypatch):
    from deepunlearn.kg.kb import KnowledgeBase

    kb = KnowledgeBase.build({"Ann": {}, "Bob": {}}, [("Ann", "child", "Bob"), ("Bob", "parent", "Ann"),
                                                      ("Ann", "job", "Pilot")], name="mini")
    kb_file = save_kb(kb, tmp_path / "fam.json")
    monkeypatch.setattr("deepunlearn.probe.probing.probe", _fake_probe(np.array([True, False, True])))
    assert main(["probe", "--model", str(mini_model_dir), "--kb", str(kb_file), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["family_known"], d["family_total"], d["biography_known"], d["biography_total"]) == (1, 2, 1, 1)
    assert d["known_by_group"] == {"family": [1, 2], "biography": [1, 1]}
