"""A question with several right answers, probed with the others set aside or counted wrong.

Ann has three children, Bob, Cara and Dan, asked "Who is Ann's child?" (``--questions person``).
The scripted model answers that question Bob first, Cara second, and a word that is nobody's
answer third; it never prefers Dan. By construction: under ``wrong`` only Bob is known; under
``aside`` Bob and Cara are (each is the greedy answer once the other right answers are set
aside) and Dan is not, under ``exact`` and under ``rank`` alike.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from deepunlearn.kg.kb import KnowledgeBase
from deepunlearn.kg.domains.family.questions import use_question_format
from deepunlearn.kg.other_answers import form_others, other_answers_rule, primary_others, set_other_answers
from deepunlearn.probe import build_tiny_model, load_model, probe
from deepunlearn.probe.passes import answer_blocks, teacher_forced

from scripted import ranked_fn

PEOPLE = {"Ann": "female", "Bob": "male", "Cara": "female", "Dan": "male", "Eve": "female"}


def _kb(rule: str) -> KnowledgeBase:
    kb = KnowledgeBase.build({p: {"gender": g} for p, g in PEOPLE.items()},
                             [("Ann", "child", "Bob"), ("Ann", "child", "Cara"), ("Ann", "child", "Dan"),
                              ("Bob", "mother", "Ann")], name="kids")
    use_question_format(kb, "person")
    return set_other_answers(kb, rule)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return load_model(build_tiny_model(_kb("aside"), tmp_path_factory.mktemp("kids") / "m", hidden=16, heads=2,
                                       layers=1), device="cpu")


def test_the_rule_is_the_kbs_and_wrong_by_default():
    kb = _kb("wrong")
    assert other_answers_rule(kb) == "wrong" and "other_answers" not in kb.metadata
    assert primary_others(kb, 1) == set()
    kb = _kb("aside")
    assert other_answers_rule(kb) == "aside"
    assert primary_others(kb, 1) == {"Bob", "Dan"} and primary_others(kb, 3) == set()
    from deepunlearn.kg.forms import forms_of

    st = next(f for f in forms_of(kb, 0) if f.name == "st2")
    assert st.prompt == "Ann's child is " and form_others(kb, st) == {"Cara", "Dan"}
    no = next(f for f in forms_of(kb, 0) if f.name == "no1")   # a distractor is never a right answer
    assert not any(c in no.text for c in ("Cara", "Dan")) and no.answer == "no"


@pytest.mark.parametrize("mode", ["exact", "rank"])
def test_each_right_answer_is_known_with_the_others_set_aside(bundle, mode):
    fn = ranked_fn(bundle, ["Bob", "Cara"], junk="Eve")
    forms = None if mode == "exact" else "default"
    known = {r: probe(bundle, _kb(r), [0, 1, 2], mode=mode, forms=forms, model_fn=fn, progress=False).known.tolist()
             for r in ("wrong", "aside")}
    assert known["wrong"] == [True, False, False]           # Bob only: Cara and Dan lose to Bob
    assert known["aside"] == [True, True, False]            # Cara wins once Bob and Dan are aside; Dan never


def test_exact_over_forms_sets_aside_too(bundle):
    fn = ranked_fn(bundle, ["Bob", "Cara"], junk="Eve")
    got = {r: probe(bundle, _kb(r), [0, 1, 2], mode="exact", forms="primary,qa1", model_fn=fn,
                    progress=False).known.tolist() for r in ("wrong", "aside")}
    assert got == {"wrong": [True, False, False], "aside": [True, True, False]}


def test_a_model_preferring_a_non_answer_knows_none_but_its_favourite_answer(bundle):
    # "Eve" (not Ann's child) first: no child is the greedy answer, even with the others aside
    fn = ranked_fn(bundle, ["Eve", "Cara"], junk="Bob")
    assert probe(bundle, _kb("aside"), [0, 1, 2], model_fn=fn, progress=False).known.tolist() == [False] * 3


def test_the_log_probability_is_the_models_own(bundle):
    fn = ranked_fn(bundle, ["Bob", "Cara"], junk="Eve")
    a = probe(bundle, _kb("wrong"), [0, 1, 2], model_fn=fn, progress=False)
    b = probe(bundle, _kb("aside"), [0, 1, 2], model_fn=fn, progress=False)
    assert np.array_equal(a.logprob, b.logprob) and a.logprob[0] > a.logprob[1] > a.logprob[2]


def test_teacher_forced_leaves_out_only_the_blocked_tokens():
    # one row, prompt [1, 2], answer [5, 6]: the model prefers 9 then 5 at the first answer position
    def fn(ids, mask):
        logits = torch.zeros(ids.shape[0], ids.shape[1], 12)
        logits[:, 1, 9], logits[:, 1, 5] = 2.0, 1.0      # predicts answer token 0
        logits[:, 2, 6] = 1.0                              # predicts answer token 1
        return logits

    rows = [([1, 2], [5, 6])]
    lp0, hit0 = teacher_forced(rows, fn, None, 0, "cpu")
    lp1, hit1 = teacher_forced(rows, fn, None, 0, "cpu", [answer_blocks(rows[0], [([1, 2], [9, 3])])])
    # an answer leaving the row at position 1 sets aside its token there, not the 9 at position 0
    lp2, hit2 = teacher_forced(rows, fn, None, 0, "cpu", [answer_blocks(rows[0], [([1, 2], [5, 7])])])
    assert answer_blocks(rows[0], [([1, 2], [5, 7])]) == [(1, 7)]
    assert (hit0.tolist(), hit1.tolist(), hit2.tolist()) == ([False], [True], [False])
    assert lp0[0] == lp1[0] == lp2[0]


def test_the_fingerprint_and_the_file_keep_the_rule(tmp_path):
    from deepunlearn.kg.fingerprint import kb_fingerprint
    from deepunlearn.kg.io import load_kb, save_kb

    wrong, aside = _kb("wrong"), _kb("aside")
    assert kb_fingerprint(wrong) != kb_fingerprint(aside)
    assert kb_fingerprint(set_other_answers(_kb("aside"), "wrong")) == kb_fingerprint(wrong)
    back = load_kb(save_kb(aside, tmp_path / "kb.json"))
    assert other_answers_rule(back) == "aside" and kb_fingerprint(back) == kb_fingerprint(aside)
    with pytest.raises(Exception, match="--other-answers: expected one of wrong, aside"):
        set_other_answers(back, "right")
