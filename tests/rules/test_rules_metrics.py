"""Recall and accuracy: the release's worked example, hand computations, ties and K."""

from __future__ import annotations

import numpy as np
import pytest

from deepunlearn.kg.edu_relat import load_release_example
from deepunlearn.kg.kb import KnowledgeBase
from deepunlearn.rules import Evaluation, Evaluator, RulesError, accuracy, recall


@pytest.mark.parametrize("exact", [True, False])
def test_release_example_target_272(edu_kb, edu_dir, exact):
    ex = load_release_example(edu_dir)
    ev = Evaluator(edu_kb, rules="edu-relat", exact=exact)
    e = ev.evaluate(272, ex.forgotten())
    assert isinstance(e, Evaluation) and e.exact is exact
    assert e.recall == pytest.approx(ex.recall) == 0.75
    assert e.accuracy == pytest.approx(ex.accuracy, abs=1e-12)
    assert round(e.accuracy, 4) == 0.1523
    # the reference's "accuracy of relationships" is the family part, its "accuracy of
    # biographies" the biography part (no biography fact is in a minimal set)
    assert e.accuracy_family == pytest.approx(ex.accuracy_relationships)
    assert e.accuracy_biography == pytest.approx(ex.accuracy_biographies)
    assert (e.accuracy_rule, e.accuracy_other) == (e.accuracy_family, e.accuracy_biography)
    assert e.set == [75, 272, 347, 379] and e.target_forgotten
    assert e.to_dict()["recall"] == 0.75


def tiny_kb():
    # 0 Ann's child is Cy, 1 Cy's father is Bob, 2 Bob is Ann's husband, 3 Ann is Cy's mother,
    # 4-5 biographies. Minimal sets of fact 0: {0, 1, 3} and {0, 2, 3}.
    return KnowledgeBase.build(
        {"Ann": {"gender": "female"}, "Bob": {"gender": "male"}, "Cy": {"gender": "male"}},
        [("Ann", "child", "Cy"), ("Cy", "father", "Bob"), ("Ann", "husband", "Bob"),
         ("Cy", "mother", "Ann"), ("Cy", "birthyear", "1990"), ("Ann", "job", "Pilot")])


def test_hand_computed_metrics():
    ev = Evaluator(tiny_kb(), rules="family")
    assert [sorted(s) for s in ev.minimal_sets(0).sets] == [[0, 1, 3], [0, 2, 3]]
    e = ev.evaluate(0, forgotten=[0, 1, 4])
    # recall: {0,1,3} -> 2/3, {0,2,3} -> 1/3
    assert e.recall == pytest.approx(2 / 3) and e.set == [0, 1, 3]
    # keep K \ U* = {2, 4, 5}; lost 4 -> 2/3; family {2}: 1; biography {4, 5}: 1/2
    assert e.accuracy == pytest.approx(2 / 3)
    assert (e.accuracy_family, e.accuracy_biography) == (1.0, 0.5)
    assert not Evaluator(tiny_kb(), rules="family").evaluate(0, [1]).target_forgotten


def test_ties_on_recall_take_the_highest_accuracy():
    from deepunlearn.rules import parse_datalog

    # t is derivable from {a, b}, {a, c} or {d, e}: its minimal sets are the hitting sets
    # {t,a,d}, {t,a,e}, {t,b,c,d}, {t,b,c,e}
    kb = KnowledgeBase.build({"p": {}, "q": {}},
                             [("p", r, "q") for r in "tabcde"] + [("p", "job", "x")])
    rules = parse_datalog("t(X, Y) :- a(X, Y), b(X, Y).\nt(X, Y) :- a(X, Y), c(X, Y).\n"
                          "t(X, Y) :- d(X, Y), e(X, Y).")
    ev = Evaluator(kb, rules=rules)
    assert [sorted(s) for s in ev.minimal_sets(0).sets] == [[0, 1, 4], [0, 1, 5], [0, 2, 3, 4], [0, 2, 3, 5]]
    # lost {t, a, b, c, d}: recall 1 for {t,a,d} (then b, c are lost outside it: accuracy 2/4)
    # and for {t,b,c,d} (a lost outside: accuracy 2/3). The tie goes to the higher accuracy.
    e = ev.evaluate(0, forgotten=[0, 1, 2, 3, 4])
    assert e.recall == 1.0 and e.set == [0, 2, 3, 4] and e.accuracy == pytest.approx(2 / 3)
    # equal accuracy too: the smaller set, then the smaller ids
    e = ev.evaluate(0, forgotten=[0])
    assert e.recall == pytest.approx(1 / 3) and e.set == [0, 1, 4]
    rec, tied = recall(ev.minimal_sets(0).sets, forgotten=[0, 1])
    assert rec == pytest.approx(2 / 3) and [sorted(s) for s in tied] == [[0, 1, 4], [0, 1, 5]]


def test_accuracy_function():
    keep = np.array([True, True, False, True])
    lost = np.array([False, True, True, False])
    assert accuracy(keep, lost) == pytest.approx(2 / 3)
    assert accuracy(np.zeros(3, bool), lost[:3]) == 1.0


def test_k_is_what_the_model_knew():
    kb = tiny_kb()
    # the model never knew fact 1 (Cy's father): then {0, 3} suffices and 1 is not "forgotten"
    ev = Evaluator(kb, rules="family", known=[0, 2, 3, 4, 5])
    assert [sorted(s) for s in ev.minimal_sets(0).sets] == [[0, 3]]
    e = ev.evaluate(0, forgotten=[0, 1, 3])
    assert e.recall == 1.0
    assert e.accuracy == 1.0  # K \ U* = {2, 4, 5}, nothing of it lost; fact 1 is outside K
    with pytest.raises(RulesError, match="not in K"):
        ev.evaluate(1, [1])
    with pytest.raises(RulesError, match="out of range"):
        ev.evaluate(0, [99])
    with pytest.raises(RulesError, match="out of range"):
        ev.minimal_sets(-1)


def test_rules_default_to_the_kb_metadata(edu_kb):
    assert Evaluator(edu_kb).rules.name == "edu-relat"
    assert Evaluator(tiny_kb()).rules.name == "family"


def test_minimal_sets_are_cached(edu_kb):
    ev = Evaluator(edu_kb, rules="edu-relat", exact=False, seeds=10)
    assert ev.minimal_sets(311) is ev.minimal_sets(311)
