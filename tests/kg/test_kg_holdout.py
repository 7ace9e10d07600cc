"""Holdout facts (``make_holdout``, ``check_disjoint``, ``data holdout``): facts
of the KB's domain that share no person and no fact with it, in the KB's own words."""

from __future__ import annotations

import json

import pytest

from deepunlearn.kg import KBError, KnowledgeBase, load_kb, save_kb
from deepunlearn.kg.fingerprint import kb_fingerprint
from deepunlearn.kg.domains.family.generate import FamilyParams, generate_family
from deepunlearn.kg.holdout import check_disjoint, make_holdout
from kg_helpers import cli


@pytest.fixture(scope="module")
def release_holdout(edu_kb):
    return make_holdout(edu_kb, seed=0)


def test_release_holdout_is_disjoint_and_of_the_same_domain(edu_kb, release_holdout):
    hold = release_holdout
    assert len(hold.entities) == len(edu_kb.entities) == 100
    assert not set(hold.entities) & set(edu_kb.entities)
    assert not set(hold.facts) & set(edu_kb.facts)
    check_disjoint(edu_kb, hold)  # no error
    # the same relations, each with the KB's own template object
    assert set(hold.relations) == set(edu_kb.relations)
    assert all(hold.relations[r] == edu_kb.relations[r] for r in hold.relations)
    assert hold.targets == [] and hold.probe(0).question.startswith("Who is ")
    # three attributes per person, values drawn from the KB's values for that attribute
    for attr in ("birthyear", "birthplace", "job"):
        held = {o for _, r, o in edu_kb.facts if r == attr}
        mine = [o for _, r, o in hold.facts if r == attr]
        assert len(mine) == 100 and set(mine) <= held
    assert hold.metadata["holdout"] == {"of": "edu-relat", "kb_fingerprint": kb_fingerprint(edu_kb),
                                        "seed": 0, "people": 100}


def test_every_word_of_the_holdout_is_a_word_of_the_kb(edu_kb, release_holdout):
    """A word-level tiny tokenizer built on the KB reads every holdout probe without <unk>: the
    membership test then measures facts, not unknown words."""
    from deepunlearn.probe.tiny import build_tokenizer, probe_texts

    tok = build_tokenizer(probe_texts(edu_kb))
    texts = probe_texts(release_holdout)
    assert len(texts) == len(release_holdout.facts) > 600
    unk = [t for t in texts if tok.unk_token_id in tok(t).input_ids]
    assert unk == []
    # names are "First Last" from the KB's first names (same gender) and surnames
    firsts = {n.split()[0]: a["gender"] for n, a in edu_kb.entities.items()}
    lasts = {n.split()[-1] for n in edu_kb.entities}
    for name, attrs in release_holdout.entities.items():
        first, last = name.split()
        assert firsts[first] == attrs["gender"] and last in lasts


def test_deterministic_per_seed(edu_kb, release_holdout):
    again = make_holdout(edu_kb, seed=0)
    assert again.facts == release_holdout.facts and again.entities == release_holdout.entities
    other = make_holdout(edu_kb, seed=1)
    assert other.facts != release_holdout.facts


def test_people_and_generator_parameters_follow_the_kb():
    params = FamilyParams(stored_share=0.5)
    kb = generate_family(30, seed=2, params=params)
    hold = make_holdout(kb, seed=2, people=12)
    assert len(hold.entities) == 12
    assert hold.metadata["params"]["stored_share"] == 0.5
    # seed 2 of the holdout does not replay the KB's own seed 2 network under new names
    assert [r for _, r, _ in hold.facts] != [r for _, r, _ in generate_family(12, seed=2, params=params).facts]


def test_a_kb_outside_the_family_domain_is_refused():
    kb = KnowledgeBase.build({"A": {}}, [("A", "colour", "red")], name="paint")
    with pytest.raises(KBError, match=r"KB 'paint' has no relation the family generator makes"):
        make_holdout(kb, seed=0)


def test_shared_person_or_fact_names_the_file(edu_kb, release_holdout, tmp_path):
    # a holdout with one KB person in it
    person = next(iter(edu_kb.entities))
    ents = dict(release_holdout.entities)
    ents[person] = {"gender": edu_kb.entities[person]["gender"]}
    bad = KnowledgeBase(entities=ents, relations=release_holdout.relations, facts=release_holdout.facts,
                        name="bad")
    path = save_kb(bad, tmp_path / "hold.json")
    with pytest.raises(KBError) as e:
        check_disjoint(edu_kb, load_kb(path), path)
    assert str(e.value) == (f"--holdout {path}: person {person!r} is also in KB 'edu-relat' (entities of the "
                            "holdout); a holdout must share no person and no fact with the KB")
    assert e.value.file == str(path)
    # a holdout holding a KB fact: named with its index
    fact = edu_kb.facts[5]
    shared = KnowledgeBase.build({**release_holdout.entities, **edu_kb.entities},
                                 list(release_holdout.facts) + [fact], name="bad2")
    with pytest.raises(KBError) as e:
        check_disjoint(edu_kb, shared, "h2.json")
    n = len(release_holdout.facts)
    assert str(e.value).startswith(f"--holdout h2.json: fact {list(fact)} (facts[{n}]) is also in KB 'edu-relat'")


def test_cli_writes_a_disjoint_holdout(tmp_path, capsys):
    kb_path = tmp_path / "kb.json"
    assert cli(capsys, "data", "generate", "--people", "15", "--seed", "4", "-o", str(kb_path))[0] == 0
    out = tmp_path / "sub" / "hold.json"
    code, stdout, err = cli(capsys, "data", "holdout", "--kb", str(kb_path), "--seed", "3", "-o", str(out), "--json")
    assert code == 0 and err == ""
    doc = json.loads(stdout)
    assert doc["people"] == 15 and doc["seed"] == 3 and doc["output"] == str(out)
    kb, hold = load_kb(kb_path), load_kb(out)
    check_disjoint(kb, hold, out)
    assert hold.metadata["holdout"]["kb_fingerprint"] == kb_fingerprint(kb)
    assert len(hold.facts) == doc["facts"]


def test_cli_errors(tmp_path, capsys):
    missing = tmp_path / "none.json"
    code, out, err = cli(capsys, "data", "holdout", "--kb", str(missing), "-o", str(tmp_path / "h.json"), "--json")
    assert code == 1 and err.count("\n") == 1 and str(missing) in err and "--kb" in err
    assert json.loads(out)["file"] == str(missing)
    assert not (tmp_path / "h.json").exists()
    code, out, err = cli(capsys, "data", "holdout", "--kb", str(missing), "--people", "0", "-o", "h.json")
    assert code == 2 and "argument --people" in err
