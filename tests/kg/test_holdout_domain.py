"""``data holdout`` for a KB of a declarative domain (org): new people sampled by the domain's own
shapes, named with the KB's words, related to the KB's own offices and departments; no person and
no fact shared with the KB."""

from __future__ import annotations

import json

import pytest
from kg_helpers import cli

from deepunlearn.kg.holdout import check_disjoint, make_holdout
from deepunlearn.kg.io import dumps_kb, save_kb
from deepunlearn.rules.generate import generate_domain


@pytest.fixture(scope="module")
def org():
    return generate_domain("org", 30, seed=2)


def test_org_holdout_has_new_people_the_kb_s_objects_and_the_sampled_relations(org):
    hold = make_holdout(org, seed=1)
    kb_people = {s for s, r, _ in org.facts if r == "manager"} | {o for _, r, o in org.facts if r == "manager"}
    hold_people = {s for s, _, _ in hold.facts}
    assert len(hold_people) == 30 and not hold_people & set(org.entities)
    assert not set(hold.facts) & set(org.facts)
    # sampled relations whose subject is a person; the rules' relations are not drawn
    assert set(hold.relations) == {"manager", "mentor_buddy", "department", "skill", "office"}
    assert sum(1 for _, r, _ in hold.facts if r == "manager") == 29  # one tree over 30 new people
    # offices, departments, skills are the KB's own entities; people are named with the KB's people's words
    for _, r, o in hold.facts:
        assert (o in hold_people) if r in ("manager", "mentor_buddy") else (o in org.entities)
    firsts, lasts = {n.split()[0] for n in kb_people}, {n.split()[-1] for n in kb_people}
    assert all(p.split()[0] in firsts and p.split()[-1] in lasts for p in hold_people)
    check_disjoint(org, hold)
    assert dumps_kb(make_holdout(org, seed=1)) == dumps_kb(hold) != dumps_kb(make_holdout(org, seed=2))


def test_org_holdout_through_the_cli(org, tmp_path, capsys):
    kb_path, out = tmp_path / "org.json", tmp_path / "hold.json"
    save_kb(org, kb_path)
    code, stdout, err = cli(capsys, "data", "holdout", "--kb", str(kb_path), "--seed", "3", "--people", "12",
                            "-o", str(out), "--json")
    assert (code, err) == (0, "")
    obj = json.loads(stdout)
    assert obj["people"] == 12 and obj["relations"]["manager"] == 11 and out.exists()


def test_a_holdout_that_shares_a_person_is_still_refused(org):
    """The KB's offices may be a holdout's objects; a KB person the holdout says something about,
    or names without any fact, is refused."""
    from deepunlearn.kg.kb import KBError

    hold = make_holdout(org, seed=1)
    person = next(s for s, r, _ in org.facts if r == "office")
    new_boss = hold.facts[0][0]
    hold.facts.append((person, "manager", new_boss))
    hold.entities[person] = {}
    with pytest.raises(KBError, match=f"person {person!r} is also in KB"):
        check_disjoint(org, hold)
