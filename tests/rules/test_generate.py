"""The declarative generator ``rules.generate.generate_domain``: same seed
same bytes, the stored share of derived facts, targets, metadata, the closure of a generated org
KB against pyDatalog and a naive evaluator, derivation depths against naive rounds, and the errors
of a domain's rules.dl."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from naive_datalog import naive_closure, naive_rounds

from deepunlearn.kg.domain import builtin_folder, load_domain
from deepunlearn.kg.io import dumps_kb
from deepunlearn.rules import RulesError, closure, derivation_graph, load_rules
from deepunlearn.rules.generate import (RELEASE_SHARE, deepest_chain, derivation_depths, generate_domain,
                                        symmetric_relations)
from deepunlearn.rules.parser import parse_datalog

ORG_RULES = load_rules("org")


@pytest.fixture(scope="module")
def org30():
    return generate_domain("org", 30, seed=4)


def sampled_facts(kb):
    """The sampled facts of a generated KB: those of the shaped relations."""
    shaped = {r for r, spec in load_domain(kb.metadata["domain"]).relations.items() if spec.shape}
    return [f for f in kb.facts if f[1] in shaped]


def test_same_seed_same_bytes_another_seed_differs():
    a = dumps_kb(generate_domain("org", 25, seed=3))
    assert a == dumps_kb(generate_domain("org", 25, seed=3))
    assert a != dumps_kb(generate_domain("org", 25, seed=4))
    assert a != dumps_kb(generate_domain("org", 25, seed=3, stored_derived=0.5))


def test_metadata_and_relations_of_a_builtin_domain(org30):
    md = org30.metadata
    assert (md["generator"], md["domain"], md["rules"], md["seed"], md["people"]) == (
        "deepunlearn.rules.generate.generate_domain", "org", "org", 4, 30)
    assert "domain_folder" not in md  # a built-in is found by its name, wherever the package lies
    rel = org30.relations["manager"]
    assert (rel.kind, rel.group, rel.question, rel.answer) == ("entity", "reporting", "Who is {o1}'s manager?", "{o2}")
    assert rel.paraphrases == ("Who does {o1} report to?", "Who manages {o1}?") and len(rel.statements) == 3
    assert org30.background == ("level",)
    assert sum(1 for e in org30.entities.values() if "level" in e) == 30
    st = md["stats"]
    assert st["entities"] == {"person": 30, "department": 8, "office": 12, "city": 8, "country": 5, "skill": 10}
    assert st["stored"] == len(org30.facts) == st["sampled"] + st["stored_derived"]
    assert st["relations"]["manager"] == {"sampled": 29, "derived": 0, "stored": 29}


def test_every_sampled_fact_is_stored_and_every_stored_fact_is_true(org30):
    truth = naive_closure(sampled_facts(org30), ORG_RULES, org30.entities)
    assert set(org30.facts) <= truth | {f for f in org30.facts if f[1] in ("department", "skill")}
    assert len(sampled_facts(org30)) == org30.metadata["stats"]["sampled"]


@pytest.mark.parametrize("share", [None, "release", 0.0, 0.3, 1.0])
def test_stored_derived_share(share):
    kb = generate_domain("org", 40, seed=1, stored_derived=share)
    st = kb.metadata["stats"]
    assert kb.metadata["stored_derived"] == (0.3 if share is None else share)  # None: org's domain.toml says 0.3
    share = 0.3 if share is None else share
    used = st["sampled"] - st["passthrough"]
    assert st["closure"] == used + st["derived"]
    if share == "release":  # like the release: stored / closure = 400 / 562 over the relations the rules use
        assert st["stored_derived"] == round(RELEASE_SHARE * st["closure"]) - used
        assert abs((used + st["stored_derived"]) / st["closure"] - 400 / 562) < 1 / st["closure"]
    else:
        assert st["stored_derived"] == round(share * st["derived"])
    assert len(kb.facts) == st["sampled"] + st["stored_derived"]
    # the closure of the stored KB is the closure of the sampled facts: nothing is lost or invented
    c = closure(kb, "org")
    assert len(c) == st["closure"] and c.passthrough == st["passthrough"]


def test_the_default_share_never_stores_more_than_all_or_fewer_than_none(tmp_path):
    from deepunlearn.rules.generate import _stored_count

    assert _stored_count(100, 10, None) == 0  # the release's share would need a negative count
    assert _stored_count(0, 10, None) == 7 == round(RELEASE_SHARE * 10)
    assert _stored_count(10, 0, None) == 0
    assert [_stored_count(5, 9, s) for s in (0.0, 0.5, 1.0)] == [0, 4, 9]
    d = tmp_path / "flat"
    d.mkdir()
    (d / "domain.toml").write_text('name = "flat"\n[entities.p]\ncount = 5\nnames = "person"\n'
                                   '[relations.knows]\nsubject = "p"\nobject = "p"\ngroup = "g"\nshape = "some"\n'
                                   'branching = 4\nquestions = ["Who does {o1} know?"]\n'
                                   '[relations.friend]\nsubject = "p"\nobject = "p"\ngroup = "g"\n'
                                   'questions = ["Who is a friend of {o1}?"]\n')
    (d / "rules.dl").write_text("friend(X, Y) :- knows(X, Y), knows(Y, X).\n")
    kb = generate_domain(d, seed=0)  # everyone knows everyone: 20 sampled, 20 friends derived, 8 stored
    st = kb.metadata["stats"]
    assert (st["sampled"], st["derived"], st["stored_derived"], len(kb.facts)) == (20, 20, 8, 28)
    assert round(RELEASE_SHARE * 40) == 28


def test_targets_are_stored_facts_of_the_relations_the_rules_use(org30):
    rels = [org30.facts[t][1] for t in org30.targets]
    assert set(rels) == set(ORG_RULES.relations)
    assert all(rels.count(r) == min(5, org30.relation_counts()[r]) for r in set(rels))
    kb = generate_domain("org", 30, seed=4, targets_per_relation=0)
    assert kb.targets == []


def test_closure_of_a_generated_org_kb_against_pydatalog_and_a_naive_evaluator():
    kb = generate_domain("org", 16, seed=2, stored_derived=0.4)
    native = closure(kb, "org")
    assert set(native.facts) == set(closure(kb, "org", engine="pydatalog").facts)
    used = [f for f in kb.facts if f[1] in ORG_RULES.relations]
    assert set(native.facts) == naive_closure(used, ORG_RULES, kb.entities)
    assert any(r == "superior" for _, r, _ in native.derived)


def test_derivation_depths_are_naive_rounds_and_the_deepest_chain_reads_them():
    kb = generate_domain("org", 14, seed=5, stored_derived=0.0)
    g = derivation_graph(kb, "org")
    depths = derivation_depths(g)
    rounds = naive_rounds(kb.facts, ORG_RULES, kb.entities)
    assert {g.fact(i): int(d) for i, d in enumerate(depths) if d >= 0} == rounds
    top = int(depths.max())
    assert top >= 4  # a chain of managers four deep
    chain = deepest_chain(g)
    s, r, o = g.fact(int(np.argmax(depths)))
    assert chain[-1].startswith(f"{len(chain)}. {r}({s}, {o}) :- ")
    assert len(chain) >= top and all(line.split(". ", 1)[0] == str(k) for k, line in enumerate(chain, 1))
    assert "[K]" in chain[0] and "org.dl:" in chain[0]


def test_derivation_depths_break_cycles():
    """superior and subordinate derive each other: the cycle must not lower or loop a depth."""
    from deepunlearn.kg.kb import KnowledgeBase

    kb = KnowledgeBase.build({"A": {}, "B": {}, "C": {}}, [("A", "manager", "B"), ("B", "manager", "C")])
    g = derivation_graph(kb, "org")
    d = {g.fact(i): int(x) for i, x in enumerate(derivation_depths(g))}
    assert d[("A", "superior", "C")] == 2 and d[("C", "subordinate", "A")] == 3 and d[("B", "report", "A")] == 1


def test_symmetric_relations_are_read_from_the_rules():
    rs = parse_datalog("a(Y, X) :- a(X, Y).\nb(Y, X) :- b(X, Y), X != Y.\nc(X, Y) :- c(X, Y).\nd(Y, X) :- e(X, Y).\n")
    assert symmetric_relations(rs) == {"a"}
    assert symmetric_relations(ORG_RULES) == {"colleague", "mentor_buddy"}


def copy_org(tmp_path):
    d = tmp_path / "org-copy"
    shutil.copytree(builtin_folder() / "org", d)
    return d


def test_a_domain_folder_records_its_rules_by_absolute_path(tmp_path, monkeypatch):
    d = copy_org(tmp_path)
    monkeypatch.chdir(tmp_path)
    kb = generate_domain("org-copy", 12, seed=0)
    assert kb.metadata["rules"] == str((d / "rules.dl").resolve())
    assert kb.metadata["domain_folder"] == str(d.resolve())
    assert json.loads(dumps_kb(kb))["metadata"]["rules"] == str((d / "rules.dl").resolve())


def test_rules_dl_problems_name_the_file_and_line(tmp_path):
    d = copy_org(tmp_path)
    (d / "rules.dl").write_text("report(Y, X) :- manager(X, Y).\nboss(X, Y) :- manager(X, Y).\n")
    with pytest.raises(RulesError) as e:
        generate_domain(d, 10)
    assert str(e.value) == (f"{d / 'rules.dl'}:2: relation 'boss' is not declared in {d / 'domain.toml'} (declared: "
                            "manager, report, superior, subordinate, colleague, mentor_buddy, department, skill, office, "
                            "city, country, works_in_city, works_in_country)")
    (d / "rules.dl").write_text("report(Y, X) :- manager(X, Y).\nsuperior(X, Y) :- manager(X, Y), male(X).\n")
    with pytest.raises(RulesError, match=r"rules.dl:2: male\(...\) names no value of an attribute declared in .*"
                                         r"domain.toml \(junior, principal, senior\)$"):
        generate_domain(d, 10)
    (d / "rules.dl").write_text("report(Y, X) :- manager(X, Y).\nsuperior(X, Y) :- manager(X, Y)\n")
    with pytest.raises(RulesError, match=r"rules.dl:3:1: "):
        generate_domain(d, 10)
