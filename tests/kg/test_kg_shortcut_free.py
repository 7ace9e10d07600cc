"""Shortcut-free family data: ``--names independent`` (surnames carry no kinship) and
``--questions entity`` (father, mother, husband, wife answered with the person)."""

from __future__ import annotations

import json

import pytest

from deepunlearn.kg import KBError, KnowledgeBase, load_kb, save_kb
from deepunlearn.kg.candidates import answer_candidates, true_answers
from deepunlearn.kg.domains.family.generate import FamilyParams, generate_family
from deepunlearn.kg.domains.family.params import name_resources
from deepunlearn.kg.domains.family.questions import FUNCTIONAL_RELATIONS, use_question_format
from deepunlearn.kg.forms import forms_of
from deepunlearn.kg.holdout import make_holdout
from kg_helpers import cli

PARENTS = ("father", "mother")


def _surname(name: str) -> str:
    return name.split()[-1]


def _shared(kb: KnowledgeBase, relations) -> tuple[int, int]:
    pairs = [(s, o) for s, r, o in kb.facts if r in relations]
    return sum(_surname(s) == _surname(o) for s, o in pairs), len(pairs)


def test_independent_names_carry_no_kinship_and_inherited_ones_do():
    paper = generate_family(300, seed=11)
    free = generate_family(300, seed=11, params=FamilyParams(names="independent"))
    # the same families (the network is drawn before any name): only the names differ
    assert paper.relation_counts() == free.relation_counts()
    assert [paper.entities[n]["gender"] for n in paper.entities] == [free.entities[n]["gender"] for n in free.entities]
    shared, n = _shared(paper, ("father",))
    assert n > 100 and shared / n > 0.9                 # the paper's: a child takes the father's surname
    shared, n = _shared(free, PARENTS + ("husband", "wife", "brother", "sister"))
    chance = n / len(name_resources().surnames)          # a pair of independent draws shares one w.p. 1/683
    assert n > 300 and shared <= chance + 3 * chance ** 0.5 + 2, (shared, n, chance)
    assert free.metadata["params"]["names"] == "independent"
    assert "names" not in paper.metadata["params"]       # the paper's KB keeps its bytes


def test_the_default_generator_output_is_unchanged():
    assert "names" not in FamilyParams().model_dump(mode="json")
    kb = generate_family(30, seed=2)
    assert kb.relations["father"].question == "Who is {o2} to {o1}?" and "questions" not in kb.metadata


@pytest.mark.parametrize("relation", FUNCTIONAL_RELATIONS)
def test_entity_forms_ask_each_functional_relation_for_the_person(relation):
    kb = generate_family(40, seed=3, params=FamilyParams(names="independent"), questions="entity")
    i = next(i for i, f in enumerate(kb.facts) if f[1] == relation)
    s, _, o = kb.facts[i]
    p = kb.probe(i)
    assert (p.question, p.answer) == (f"Who is {s}'s {relation}?", o)
    forms = {f.name: f for f in forms_of(kb, i)}
    assert forms["st1"].prompt == f"The {relation} of {s} is " and forms["st1"].answer == o
    assert {f.kind for f in forms.values()} == {"qa", "statement", "yesno"}
    assert forms["yes1"].text == f"Is {o} {s}'s {relation}?"
    wrong = forms["no1"].text.removeprefix("Is ").removesuffix(f" {s}'s {relation}?")
    assert wrong in kb.entities and wrong != o           # the no form names another person
    assert answer_candidates(kb, i) == sorted(kb.entities) and true_answers(kb, i) == {o}
    # the relations with several objects per subject keep the paper's question
    j = next(j for j, f in enumerate(kb.facts) if f[1] == "child")
    assert kb.probe(j).answer == "child" and kb.probe(j).question.startswith("Who is ")
    assert "father" not in answer_candidates(kb, j)      # "Who is X to Y?" is never answered "father" here


def test_question_format_survives_a_file_and_a_holdout(tmp_path):
    kb = generate_family(20, seed=4, params=FamilyParams(names="independent"), questions="entity")
    back = load_kb(save_kb(kb, tmp_path / "kb.json"))
    assert back.relations == kb.relations and back.metadata["questions"] == "entity"
    hold = make_holdout(back, seed=1)
    i = next(i for i, f in enumerate(hold.facts) if f[1] == "mother")
    assert hold.probe(i).answer == hold.facts[i][2]
    assert hold.metadata["params"]["names"] == "independent"


def test_entity_questions_need_a_functional_relation():
    kb = KnowledgeBase.build({"A": {}, "B": {}}, [("A", "friend", "B")])
    with pytest.raises(KBError, match="has none of the functional family relations"):
        use_question_format(kb, "entity")
    with pytest.raises(KBError, match="--questions: expected one of relation, entity"):
        use_question_format(kb, "words")


def test_generate_and_show_record_names_and_questions(tmp_path, capsys):
    out = tmp_path / "kb.json"
    code, _, err = cli(capsys, "data", "generate", "--people", "15", "--seed", "9", "--names", "independent",
                       "--questions", "entity", "-o", str(out))
    assert code == 0, err
    code, text, _ = cli(capsys, "data", "show", str(out))
    assert "names independent" in text and "questions entity" in text
    code, text, _ = cli(capsys, "data", "show", str(out), "--json")
    assert (json.loads(text)["names"], json.loads(text)["questions"]) == ("independent", "entity")
    code, _, err = cli(capsys, "data", "generate", "--domain", "org", "--questions", "entity",
                       "-o", str(tmp_path / "o.json"))
    assert code == 2 and "argument --questions: only with --domain family" in err


def test_report_setup_names_the_data():
    from deepunlearn.bench.report.setup_section import setup_lines

    kb = generate_family(10, seed=1, questions="entity")
    lines = setup_lines({"kb": "kb.json", "models": []}, None, kb, [])
    assert lines[4].startswith("- **data**: names inherited") and "questions entity" in lines[4]


def test_show_prints_a_floor_of_this_kb_and_refuses_another(tmp_path, capsys):
    from deepunlearn.kg.fingerprint import kb_fingerprint

    kb = generate_family(8, seed=5)
    path = save_kb(kb, tmp_path / "kb.json")
    row = {"group": "family", "n": 3, "exact": 2 / 3, "exact_known": 2, "rank": 1.0, "rank_known": 3}
    floor = {"kb": kb.name, "kb_fingerprint": kb_fingerprint(kb), "modes": ["exact", "rank"], "names": "inherited",
             "questions": "relation", "holdout": {"people": 8, "facts": 40, "baseline_known": 39, "baseline_total": 40},
             "relations": {"father": row}, "groups": {"family": row}, "overall": row}
    (tmp_path / "floor.json").write_text(json.dumps(floor))
    code, text, err = cli(capsys, "data", "show", str(path), "--shortcuts", str(tmp_path / "floor.json"))
    assert code == 0, err
    assert "  father       3    0.67    1.00" in text.splitlines()
    other = save_kb(generate_family(8, seed=6), tmp_path / "other.json")
    code, _, err = cli(capsys, "data", "show", str(other), "--shortcuts", str(tmp_path / "floor.json"))
    assert code == 1 and len(err.strip().splitlines()) == 1 and "measured on KB 'family-8-seed5'" in err
    (tmp_path / "bad.json").write_text("[1, 2]")
    code, _, err = cli(capsys, "data", "show", str(path), "--shortcuts", str(tmp_path / "bad.json"))
    assert code == 1 and "not a shortcut floor written by 'deepunlearn data shortcuts'" in err


def test_the_release_can_be_imported_with_entity_questions(tmp_path, capsys):
    out = tmp_path / "edu.json"
    code, _, err = cli(capsys, "data", "import-edu-relat", "--questions", "entity", "-o", str(out))
    assert code == 0, err
    kb = load_kb(out)
    i = next(i for i, f in enumerate(kb.facts) if f[1] == "wife")
    assert kb.probe(i).question == f"Who is {kb.facts[i][0]}'s wife?" and kb.probe(i).answer == kb.facts[i][2]
    assert kb.metadata["questions"] == "entity"
    code, text, _ = cli(capsys, "data", "show", str(out))
    assert any(line.startswith("  data    questions entity") for line in text.splitlines())  # no generator: no names


def test_person_questions_ask_every_relation_for_the_person_and_set_other_answers_aside(tmp_path, capsys):
    from deepunlearn.kg.kb import FAMILY_RELATIONS
    from deepunlearn.kg.other_answers import other_answers_rule, primary_others

    kb = generate_family(60, seed=3, params=FamilyParams(names="independent"), questions="person")
    assert other_answers_rule(kb) == "aside" and kb.metadata["questions"] == "person"
    for r in FAMILY_RELATIONS:
        i = next(i for i, f in enumerate(kb.facts) if f[1] == r)
        s, _, o = kb.facts[i]
        assert kb.probe(i).question == f"Who is {s}'s {r}?" and kb.probe(i).answer == o
        # every other right answer of the question is another stored fact's object, and none is this one
        assert primary_others(kb, i) == {oo for ss, rr, oo in kb.facts if (ss, rr) == (s, r)} - {o}
        no = next(f for f in forms_of(kb, i) if f.name == "no1")
        assert not any(f"Is {x} " in no.text for x in primary_others(kb, i) | {o})
    assert any(primary_others(kb, i) for i, f in enumerate(kb.facts) if f[1] == "child")  # several children
    hold = make_holdout(kb, seed=1)
    assert other_answers_rule(hold) == "aside"
    out = tmp_path / "kb.json"
    code, _, err = cli(capsys, "data", "generate", "--people", "15", "--seed", "9", "--names", "independent",
                       "--questions", "person", "-o", str(out))
    assert code == 0, err
    code, text, _ = cli(capsys, "data", "show", str(out), "--json")
    assert (json.loads(text)["questions"], json.loads(text)["other_answers"]) == ("person", "aside")
    code, _, err = cli(capsys, "data", "generate", "--domain", "geo", "--other-answers", "aside",
                       "-o", str(tmp_path / "geo.json"))
    assert code == 0, err
    geo = load_kb(tmp_path / "geo.json")
    i = next(i for i, f in enumerate(geo.facts) if f[1] == "neighbour" and primary_others(geo, i))
    assert other_answers_rule(geo) == "aside" and geo.facts[i][2] not in primary_others(geo, i)
    code, text, _ = cli(capsys, "data", "show", str(tmp_path / "geo.json"))
    assert "several right answers probes each with the others set aside" in text
