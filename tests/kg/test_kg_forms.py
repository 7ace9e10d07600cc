"""Probe forms: built-in templates, the release's four forms, selections,
splits and the KB file round trip. Checked against the release files read independently and
against the templates' own text."""

import json

import pytest

from deepunlearn.kg import KBFileError, KnowledgeBase
from deepunlearn.kg.candidates import answer_candidates, true_answers
from deepunlearn.kg.forms import (
    BIOGRAPHY_TEMPLATES, FAMILY_TEMPLATES, TEMPLATE_NAMES, Form, FormError, form_names, forms_of, label_forms,
    select_forms,
)
from deepunlearn.kg.domains.family.generate import generate_family
from deepunlearn.kg.io import dumps_kb, from_dict, to_dict
from deepunlearn.kg.kb import FAMILY_RELATIONS
from deepunlearn.kg.safe_pickle import safe_load


@pytest.fixture(scope="module")
def gen_kb():
    return generate_family(40, seed=3)


def _by_name(forms):
    return {f.name: f for f in forms}


def _check_templates(kb, i):
    s, r, o = kb.facts[i]
    forms = forms_of(kb, i)
    primary = forms[0]
    assert primary.name == "primary" and primary.answer == kb.probe(i).answer
    qa = [f for f in forms if f.kind == "qa" and f.name != "primary" and f.name in TEMPLATE_NAMES]
    st = [f for f in forms if f.kind == "statement" and f.name in TEMPLATE_NAMES]
    assert len(qa) >= 3 and len(st) >= 3, (r, [f.name for f in forms])
    assert len({f.text for f in qa}) == len(qa)  # three different questions
    templates = FAMILY_TEMPLATES if r in FAMILY_RELATIONS else BIOGRAPHY_TEMPLATES[r]
    slot = "{r}" if r in FAMILY_RELATIONS else "{o2}"
    for f in qa + st:
        assert f.answer == primary.answer
    for f in st:
        t = next(t for t in templates if t.name == f.name)
        before, after = t.text.split(slot)
        assert f.prompt == before.format(o1=s, r=r, o2=o) and f.prompt.strip()
        assert f.rest == after.format(o1=s, r=r, o2=o)
        assert f.prompt + f.answer + f.rest == f.text
    yes, no = _by_name(forms)["yes1"], _by_name(forms)["no1"]
    assert yes.answer == "yes" and no.answer == "no"
    # the distractor: the one word where yes1 and no1 differ is a wrong answer of the fact's type
    d = [c for c in answer_candidates(kb, i) if no.text == yes.text.replace(primary.answer, c, 1)]
    assert len(d) == 1 and d[0] not in true_answers(kb, i) and d[0] != primary.answer


def test_every_built_in_relation_has_three_questions_and_three_statements(edu_kb, gen_kb):
    for kb in (edu_kb, gen_kb):
        seen = set()
        for i, (_, r, _) in enumerate(kb.facts):
            if r not in seen:
                seen.add(r)
                _check_templates(kb, i)
        assert seen >= {"birthyear", "birthplace", "job"}
    assert set(FAMILY_RELATIONS) <= {r for _, r, _ in edu_kb.facts} | {r for _, r, _ in gen_kb.facts}


def test_every_statement_form_of_the_release_is_cut_at_its_slot(edu_kb):
    for i in range(len(edu_kb.facts)):
        for f in forms_of(edu_kb, i):
            if f.kind == "statement":
                assert f.prompt + f.answer + f.rest == f.text and f.prompt.strip()


def test_a_name_holding_the_answer_does_not_cut_a_template_statement_early():
    # "The job of Ann Smith is Ann.": the first "Ann" after position 0 is in the name, so st2 would
    # ask with "The job of " -- that template form is left out; st1 and st3 ("Ann Smith's job is
    # Ann.": position 0 does not count) stay
    kb = KnowledgeBase.build({"Ann Smith": {"gender": "female", "job": "Ann"}}, [("Ann Smith", "job", "Ann")])
    forms = _by_name(forms_of(kb, 0))
    assert "st2" not in forms
    assert forms["st1"].prompt == "Ann Smith's job is " and forms["st3"].prompt == "Ann Smith earns a living as "
    assert [n for n in forms if n.startswith("qa")] == ["qa1", "qa2", "qa3"]


def test_release_forms_match_the_release_files(edu_kb, edu_dir):
    rel = safe_load(edu_dir / "family_relationships.pt")
    bio = safe_load(edu_dir / "family_biographies.pt")
    counts = {}
    for f in edu_kb.forms:
        counts[f.name] = counts.get(f.name, 0) + 1
    assert counts == {"question": 700, "question2": 400, "question3": 400, "question4": 700}
    for i in (0, 1, 57, 399):
        forms = _by_name(f for f in forms_of(edu_kb, i) if f.name.startswith("question"))
        assert forms["question"].kind == "statement"
        assert forms["question"].prompt.rstrip() == rel["question"][i].rstrip()
        assert forms["question"].answer == rel["answer"][i] and forms["question"].text == rel["fact"][i]
        assert (forms["question2"].text, forms["question2"].answer) == (rel["question2"][i], "yes")
        assert (forms["question3"].text, forms["question3"].answer) == (rel["question3"][i], "no")
        assert (forms["question4"].text, forms["question4"].answer) == (rel["question4"][i], rel["answer4"][i])
    for j in (0, 1, 299):
        forms = _by_name(f for f in forms_of(edu_kb, 400 + j) if f.name.startswith("question"))
        assert set(forms) == {"question", "question4"}
        assert forms["question"].prompt.rstrip() == bio["question"][j].rstrip()
        assert forms["question"].answer == bio["answer"][j]
        assert (forms["question4"].text, forms["question4"].answer) == (bio["question4"][j], bio["answer4"][j])


def _small():
    kb = KnowledgeBase.build({"A": {"gender": "female"}, "B": {"gender": "male"}, "C": {"gender": "male"}},
                             [("A", "father", "B"), ("A", "brother", "C"), ("B", "child", "A")])
    kb.forms = [Form(0, "qa", "Who is B for A?", "father", "para", "test"),
                Form(1, "statement", "A has C as a brother.", "brother", "para"),
                Form(1, "yesno", "Is C A's brother?", "yes", "yn", "unlearn")]
    return kb


def test_select_forms_default_all_split_names_and_fallback():
    kb = _small()
    sel = select_forms(kb, None)
    assert sel.spec == "default" and sel.fallback == []
    assert {i: [f.name for f in fs] for i, fs in sel.forms.items()} == {0: ["primary"], 1: ["primary"], 2: ["primary"]}
    sel = select_forms(kb, "all")
    assert [f.name for f in sel.forms[1]] == [f.name for f in forms_of(kb, 1)]
    assert len(sel.forms[1]) == 1 + 3 + 3 + 2 + 2
    sel = select_forms(kb, "test")
    assert [f.name for f in sel.forms[0]] == ["para"] and sel.fallback == [1, 2]
    assert [f.name for f in sel.forms[1]] == ["primary"]  # a fallback fact gets its primary form
    sel = select_forms(kb, "para,qa2", kinds=("qa", "statement"))
    assert [f.name for f in sel.forms[0]] == ["qa2", "para"]
    assert [(f.name, f.kind) for f in sel.forms[1]] == [("qa2", "qa"), ("para", "statement")]
    sel = select_forms(kb, "yn", kinds=("yesno",))
    assert [f.name for f in sel.forms[1]] == ["yn"] and sel.fallback == [0, 2] and sel.forms[0] == []
    sel = select_forms(kb, "unlearn,default", fact_ids=[1])
    assert list(sel.forms) == [1] and [f.name for f in sel.forms[1]] == ["primary", "yn"]
    with pytest.raises(FormError, match=r"--forms: 'nope' is not a form of this KB"):
        select_forms(kb, "default,nope")


def test_label_forms_templates_and_explicit():
    kb = _small()
    assert label_forms(kb, ["qa1", "para", "qa1"], "train") == 2
    assert kb.form_splits == {"qa1": "train"}
    assert all(f.split == "train" for f in kb.forms if f.name == "para")
    assert _by_name(forms_of(kb, 2))["qa1"].split == "train"  # the cache was refreshed
    assert [f.name for f in select_forms(kb, "train").forms[1]] == ["qa1", "para"]
    label_forms(kb, ["qa1"], None)
    assert kb.form_splits == {}
    with pytest.raises(FormError, match=r"--label: 'zz' is not a form of this KB"):
        label_forms(kb, ["zz"], "test")
    with pytest.raises(FormError, match=r"--split: expected one of train, test, unlearn, got 'dev'"):
        label_forms(kb, ["qa1"], "dev")


def test_kb_file_round_trip_with_forms_and_splits():
    kb = _small()
    label_forms(kb, ["st2"], "test")
    text = dumps_kb(kb)
    doc = json.loads(text)
    assert doc["form_splits"] == {"st2": "test"} and len(doc["forms"]) == 3
    again = from_dict(doc)
    assert dumps_kb(again) == text
    assert again.forms == kb.forms and [f.split for f in forms_of(again, 0)] == [f.split for f in forms_of(kb, 0)]


def test_a_kb_without_forms_writes_no_forms_keys(gen_kb):
    doc = to_dict(gen_kb)
    assert "forms" not in doc and "form_splits" not in doc
    assert dumps_kb(from_dict(json.loads(dumps_kb(gen_kb)))) == dumps_kb(gen_kb)


@pytest.mark.parametrize("name, needle", [
    ("qa1", "form name 'qa1' is a built-in template's name"),
    ("test", "form name 'test' is a --forms selection word"),
    ("a,b", "form name 'a,b' holds a comma"),
    ("", "form name '' is empty"),
])
def test_a_kb_file_form_named_like_a_template_or_selection_word_is_refused(name, needle):
    doc = to_dict(_small())
    doc["forms"][0]["name"] = name
    with pytest.raises(KBFileError, match=rf"^kb\.json: forms\[0\]: {needle}") as e:
        from_dict(doc, source="kb.json")
    assert e.value.file == "kb.json" and e.value.field == "forms.0.name"


def test_kb_file_form_splits_must_name_templates():
    doc = to_dict(_small())
    doc["form_splits"] = {"para": "test"}
    with pytest.raises(KBFileError, match=r"^kb\.json: form_splits: 'para' is not a template form's name"):
        from_dict(doc, source="kb.json")


def test_a_form_with_an_empty_question_is_refused():
    with pytest.raises(FormError, match=r"form 'x': the question is empty"):
        Form(0, "qa", "  ", "father", "x")
    with pytest.raises(FormError, match=r"is only at the start of its text"):
        Form(0, "statement", "father of B", "father", "x")


def test_form_names_lists_templates_then_explicit():
    kb = _small()
    assert form_names(kb) == list(TEMPLATE_NAMES) + ["para", "yn"]
