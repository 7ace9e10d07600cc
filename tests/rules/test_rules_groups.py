"""Accuracy per relation group: a KB whose relations are in three groups gets
one accuracy per group, equal to a hand computation; the family domain keeps family/biography."""

from __future__ import annotations

import json
import math

import pytest

from deepunlearn.cli import main
from deepunlearn.kg.io import save_kb
from deepunlearn.kg.kb import KnowledgeBase, Relation
from deepunlearn.rules import Evaluator, parse_datalog

RULES = ("superior(X, Y) :- manager(X, Y).\n"
         "superior(X, Z) :- manager(X, Y), superior(Y, Z).\n")


def org_kb() -> KnowledgeBase:
    """Three people, three groups: reporting (manager, superior), location (office), profile (job).

    0 A manager B, 1 B manager C, 2 A superior B, 3 B superior C, 4 A superior C,
    5 A office Lyon, 6 B office Oslo, 7 C job Chef, 8 A job Pilot."""
    rels = {
        "manager": Relation("manager", "entity", "Who is {o1}'s manager?", "{o2}", group="reporting"),
        "superior": Relation("superior", "entity", "Who is above {o1}?", "{o2}", group="reporting"),
        "office": Relation("office", "value", "Where is {o1}'s office?", "{o2}", group="location"),
        "job": Relation("job", "value", "What is {o1}'s job?", "{o2}", group="profile"),
    }
    facts = [("A", "manager", "B"), ("B", "manager", "C"), ("A", "superior", "B"), ("B", "superior", "C"),
             ("A", "superior", "C"), ("A", "office", "Lyon"), ("B", "office", "Oslo"), ("C", "job", "Chef"),
             ("A", "job", "Pilot")]
    return KnowledgeBase.build({"A": {}, "B": {}, "C": {}}, facts, relations=rels, name="org-3")


def test_three_groups_get_the_hand_computed_accuracies():
    kb = org_kb()
    assert kb.groups == ["reporting", "location", "profile"]
    ev = Evaluator(kb, rules=parse_datalog(RULES))
    # A superior C needs manager(A,B) and superior(B,C); superior(B,C) is stored and derivable
    assert sorted(sorted(s) for s in ev.minimal_sets(4).sets) == [[0, 4], [1, 3, 4]]
    e = ev.evaluate(4, forgotten=[0, 4, 6, 7])
    # recall 2/2 on {0, 4}; keep {1, 2, 3, 5, 6, 7, 8}, of which 6 and 7 are lost
    assert e.recall == 1.0 and e.set == [0, 4]
    assert e.accuracy == pytest.approx(5 / 7)
    # reporting keeps {1, 2, 3}: all kept; location {5, 6}: 6 lost; profile {7, 8}: 7 lost
    assert e.accuracy_groups == {"reporting": 1.0, "location": 0.5, "profile": 0.5}
    assert list(e.accuracy_groups) == kb.groups
    assert math.isnan(e.accuracy_family) and math.isnan(e.accuracy_biography)
    # rule relations (manager, superior) {1, 2, 3}: 1; the others {5, 6, 7, 8}: 2/4
    assert (e.accuracy_rule, e.accuracy_other) == (1.0, 0.5)
    # a batch's accuracies: K minus the union of the targets' sets, the same parts by name
    a = ev.accuracies([0, 4], [0, 4, 6, 7])
    assert a[0] == a.overall == pytest.approx(5 / 7)
    assert a.groups == e.accuracy_groups and (a.rule, a.other) == (1.0, 0.5) and math.isnan(a.family)


def test_the_family_groups_are_the_entity_and_value_facts():
    from tests.rules.test_rules_metrics import tiny_kb

    kb = tiny_kb()
    ev = Evaluator(kb, rules="family")
    e = ev.evaluate(0, forgotten=[0, 1, 4])
    assert e.accuracy_groups == {"family": e.accuracy_family, "biography": e.accuracy_biography} == \
        {"family": 1.0, "biography": 0.5}
    a = ev.accuracies(e.set, [0, 1, 4])
    assert (a.family, a.biography) == (1.0, 0.5) and a.groups == e.accuracy_groups


def test_rules_recall_reports_every_group(tmp_path, capsys):
    kb_path = save_kb(org_kb(), tmp_path / "org.json")
    (tmp_path / "org.dl").write_text(RULES)
    (tmp_path / "f.json").write_text(json.dumps([0, 4, 6, 7]))
    args = ["rules", "recall", "--kb", str(kb_path), "--rules", str(tmp_path / "org.dl"), "--target", "4",
            "--forgotten", str(tmp_path / "f.json")]
    assert main([*args, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["accuracy_groups"] == {"reporting": 1.0, "location": 0.5, "profile": 0.5}
    # flat, named after the KB's groups; no family / biography keys in another domain
    assert (d["accuracy_reporting"], d["accuracy_location"], d["accuracy_profile"]) == (1.0, 0.5, 0.5)
    assert "accuracy_family" not in d and "accuracy_biography" not in d
    assert main(args) == 0
    assert "(reporting 1.0000, location 0.5000, profile 0.5000; rule relations 1.0000, other 0.5000)" \
        in capsys.readouterr().out
