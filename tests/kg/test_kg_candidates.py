"""Answer candidates of a fact's type, true answers and seeded perturbed answers."""

from __future__ import annotations

import numpy as np
import pytest

from deepunlearn.kg import candidates as C
from deepunlearn.kg.kb import KBError, KnowledgeBase, Relation


def _kb(**kw) -> KnowledgeBase:
    ents = {"Ann": {}, "Bob": {}, "Cid": {}}
    rel = {"boss": Relation("boss", "family", "Whose boss is {o1}?", "{o2}"),
           "pet": Relation("pet", "biography", "Name {o1}'s pet.", "a {o2} of course"),
           "role": Relation("role", "family", "What is {o2} to {o1}?", "the {r}"),
           "code": Relation("code", "biography", "What is the code of {o1}?", "{o2}")}
    facts = [("Ann", "child", "Bob"), ("Bob", "father", "Ann"), ("Ann", "birthyear", "1950"),
             ("Bob", "birthyear", "1980"), ("Cid", "birthyear", "1950"), ("Ann", "boss", "Cid"),
             ("Ann", "pet", "cat"), ("Bob", "pet", "dog"), ("Bob", "role", "Cid"), ("Cid", "code", "QWERTYUIOP"),
             ("Ann", "son", "Bob")]
    return KnowledgeBase.build(ents, facts, relations=rel, **kw)


def test_candidates_by_template():
    kb = _kb()
    # "{r}" with the "Who is X to Y?" question: the family relations asked the same way
    assert C.answer_candidates(kb, 0) == ["child", "father", "son"]
    assert C.answer_candidates(kb, 2) == ["1950", "1980"]  # biography values, deduplicated
    assert C.answer_candidates(kb, 5) == ["Ann", "Bob", "Cid"]  # "{o2}" with a person as object
    assert C.answer_candidates(kb, 6) == ["a cat of course", "a dog of course"]  # other template over o2
    assert C.answer_candidates(kb, 8) == ["the role"]  # "the {r}": its own question template only
    assert C.answer_candidates(kb, 9) == ["QWERTYUIOP"]


def test_canary_references_and_overrides():
    kb = _kb(metadata={"canaries": {"relation": "code", "length": 10, "alphabet": "AB", "repeat": 1, "facts": [9],
                                    "references": ["ABABABABAB", "BBBBBBBBBB"]}},
             probe_overrides={1: ("Who is Ann to Bob, really?", "dad")})
    assert C.answer_candidates(kb, 9) == ["ABABABABAB", "BBBBBBBBBB", "QWERTYUIOP"]
    assert C.answer_candidates(kb, 1) == ["child", "dad", "father", "son"]
    # "dad" overrides a "father" fact: the "child" fact 0 does not get it
    assert C.answer_candidates(kb, 0) == ["child", "father", "son"]


def test_true_answers_share_the_question():
    kb = _kb()
    assert C.true_answers(kb, 0) == {"child", "son"}  # "Who is Bob to Ann?" has two true answers
    assert C.true_answers(kb, 2) == {"1950"}


def test_perturbed_is_seeded_wrong_and_without_replacement():
    kb = _kb()
    assert C.perturbed(kb, 0, 5, 0) == ["father"]  # child and son are both true
    assert C.perturbed(kb, 5, 5, 3) == C.perturbed(kb, 5, 5, 3)
    wrong = ["Ann", "Bob"]  # Cid is Ann's boss
    got = C.perturbed(kb, 5, 2, 7)
    rng = np.random.default_rng((7, 5))
    assert got == [wrong[j] for j in rng.choice(2, size=2, replace=False)]
    assert sorted(got) == wrong
    assert C.perturbed(kb, 5, 0) == []


def test_candidates_are_cached_per_relation(monkeypatch):
    kb = _kb()
    calls = []
    real = C._relation_candidates
    monkeypatch.setattr(C, "_relation_candidates", lambda kb, r, s: calls.append(r) or real(kb, r, s))
    for i in (2, 3, 4, 2):
        C.answer_candidates(kb, i)
    assert calls == ["birthyear"]


def test_edu_relat_candidates(edu_kb):
    assert len(C.answer_candidates(edu_kb, 0)) == 11  # the family relation names
    job = next(i for i, f in enumerate(edu_kb.facts) if f[1] == "job")
    assert len(C.answer_candidates(edu_kb, job)) == len({o for _, r, o in edu_kb.facts if r == "job"})


@pytest.mark.parametrize("bad", [99, -1, True, "3"])
def test_bad_fact_id(bad):
    with pytest.raises(KBError, match="fact"):
        C.answer_candidates(_kb(), bad)
