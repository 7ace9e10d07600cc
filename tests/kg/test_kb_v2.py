"""KB file version 2: relations carry a group and lists of question and statement
templates; version-1 files (the imported release, every KB written before domains) still load and
mean what they meant."""

from __future__ import annotations

import json

import pytest

from deepunlearn.kg.forms import forms_of, templates_for
from deepunlearn.kg.domains.family.generate import generate_family
from deepunlearn.kg.io import KBFileError, dumps_kb, from_dict, load_kb, to_dict
from deepunlearn.kg.kb import KBError, KnowledgeBase, Relation

V1 = {
    "format": "deepunlearn-kb", "version": 1, "name": "old",
    "entities": {"Ann": {"gender": "female"}, "Bob": {"gender": "male"}},
    "relations": {"husband": {"kind": "family", "question": "Who is {o2} to {o1}?", "answer": "{r}"},
                  "job": {"kind": "biography", "question": "What is the {r} of {o1}?", "answer": "{o2}"}},
    "facts": [["Ann", "husband", "Bob"], ["Bob", "job", "Baker"]],
    "targets": [0],
}


def test_a_version_1_file_loads_as_entity_and_value_relations_in_groups_family_and_biography(tmp_path):
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(V1))
    kb = load_kb(path)
    husband, job = kb.relations["husband"], kb.relations["job"]
    assert (husband.kind, husband.group, husband.questions) == ("entity", "family", ("Who is {o2} to {o1}?",))
    assert (job.kind, job.group, job.statements) == ("value", "biography", ())
    assert kb.groups == ["family", "biography"]
    assert {g: m.tolist() for g, m in kb.group_masks.items()} == {"family": [True, False], "biography": [False, True]}
    assert kb.probe(0).question == "Who is Bob to Ann?" and kb.probe(1).answer == "Baker"
    # the built-in forms of a family relation are still there (no1 needs a wrong relation: the KB has one)
    assert [f.name for f in forms_of(kb, 0)] == ["primary", "qa1", "qa2", "qa3", "st1", "st2", "st3", "yes1"]
    # written again, it is a version-2 file that reads back the same
    again = from_dict(json.loads(dumps_kb(kb)))
    assert json.loads(dumps_kb(kb))["version"] == 2 and again.relations == kb.relations


def test_version_1_keeps_its_own_schema():
    doc = json.loads(json.dumps(V1))
    doc["relations"]["husband"]["group"] = "family"  # a v2 key in a v1 file
    with pytest.raises(KBFileError, match=r"field relations\.husband\.group: Extra inputs are not permitted"):
        from_dict(doc, source="v1.json")
    doc = json.loads(json.dumps(V1))
    doc["relations"]["husband"]["kind"] = "entity"  # the v2 word in a v1 file
    with pytest.raises(KBFileError, match=r"field relations\.husband\.kind: Input should be 'family' or 'biography'"):
        from_dict(doc, source="v1.json")


def test_an_unknown_version_is_one_line_naming_the_versions_read():
    with pytest.raises(KBFileError, match=r"^x\.json: field version: this deepunlearn reads versions 1, 2, the file is "
                                          r"version 3$"):
        from_dict({**V1, "version": 3}, source="x.json")


def test_version_2_round_trips_group_paraphrases_and_statements():
    rel = Relation("manager", "entity", "Who is {o1}'s manager?", "{o2}", "reporting",
                   ("Who manages {o1}?",), ("{o1} reports to {o2}.", "{o1}'s manager is {o2}."))
    kb = KnowledgeBase.build({"Ann": {}, "Bob": {}}, [("Ann", "manager", "Bob")], relations={"manager": rel})
    doc = to_dict(kb)
    assert doc["relations"]["manager"] == {"kind": "entity", "group": "reporting",
                                           "questions": ["Who is {o1}'s manager?", "Who manages {o1}?"],
                                           "statements": ["{o1} reports to {o2}.", "{o1}'s manager is {o2}."],
                                           "answer": "{o2}"}
    back = from_dict(doc)
    assert back.relations["manager"] == rel and back.groups == ["reporting"]
    # its templates are its forms: qa1 from the second question, st1/st2 from the statements
    forms = {f.name: (f.kind, f.text, f.answer, f.prompt) for f in forms_of(back, 0)}
    assert forms == {"primary": ("qa", "Who is Ann's manager?", "Bob", "Who is Ann's manager?"),
                     "qa1": ("qa", "Who manages Ann?", "Bob", "Who manages Ann?"),
                     "st1": ("statement", "Ann reports to Bob.", "Bob", "Ann reports to "),
                     "st2": ("statement", "Ann's manager is Bob.", "Bob", "Ann's manager is ")}


def test_a_relation_checks_its_kind_and_every_template():
    with pytest.raises(KBError, match=r"relation 'r': kind must be entity or value, found 'person'"):
        Relation("r", "person", "Who is {o1}'s r?", "{o2}")
    with pytest.raises(KBError, match=r"relation 'r': statements\.1 template '\{o3\}': placeholder \{o3\}"):
        Relation("r", "entity", "Who is {o1}'s r?", "{o2}", statements=("{o1} has {o2}.", "{o3}"))


def test_a_generated_family_kb_carries_the_family_domains_templates_and_the_same_forms():
    kb = generate_family(30, seed=3)
    assert to_dict(kb)["version"] == 2 and kb.groups == ["family", "biography"]
    assert kb.relations["father"].paraphrases == ("What relation is {o2} to {o1}?", "How is {o2} related to {o1}?",
                                                  "In the family of {o1}, who is {o2}?")
    # the forms the relation's own templates give are the built-in ones a version-1 KB gets
    v1 = KnowledgeBase(kb.entities, {n: Relation(n, r.kind, r.question, r.answer) for n, r in kb.relations.items()},
                       kb.facts)
    for r in kb.relations:
        assert [(t.name, t.kind, t.text) for t in templates_for(kb, r)] == \
               [(t.name, t.kind, t.text) for t in templates_for(v1, r)]
    assert [f.text for f in forms_of(kb, 5)] == [f.text for f in forms_of(v1, 5)]
