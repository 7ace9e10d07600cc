"""``rules mine``: every mined rule's measures equal a brute-force count over all groundings
(written here, apart from the miner), the measures survive a write and a parse, planted rules
are found, the bounds stop the miner in one line, and the command refuses bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from itertools import product
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepunlearn.kg.io import save_kb
from deepunlearn.kg.kb import KnowledgeBase
from deepunlearn.rules import RuleSyntaxError, parse_datalog
from deepunlearn.rules.mine import MineTimeError, mine_rules

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
PEOPLE = ("a", "b", "c", "d", "e")


@st.composite
def small_kbs(draw):
    facts = draw(st.sets(st.tuples(st.sampled_from(PEOPLE), st.sampled_from(("p", "q", "s")),
                                   st.sampled_from(PEOPLE)), min_size=1, max_size=14))
    genders = draw(st.lists(st.sampled_from(("male", "female")), min_size=len(PEOPLE), max_size=len(PEOPLE)))
    return KnowledgeBase.build({p: {"gender": g} for p, g in zip(PEOPLE, genders)},
                               sorted(facts), relations=None)


def brute_measures(kb: KnowledgeBase, rule) -> dict:
    """Support, body size and PCA body size of ``rule`` by trying every assignment of its
    variables to the KB's entities: no index, no join order, no projection."""
    facts = set(kb.facts)
    gender = {e: a.get("gender") for e, a in kb.entities.items()}
    x, y = rule.head.args
    variables = sorted({v.name for a in rule.body for v in a.args} | {x.name, y.name})
    pairs = set()
    for values in product(sorted(kb.entities), repeat=len(variables)):
        env = dict(zip(variables, values))
        ok = all((env[a.args[0].name], a.relation, env[a.args[1].name]) in facts if len(a.args) == 2
                 else gender[env[a.args[0].name]] == a.relation for a in rule.body)
        ok = ok and all(env[c.left.name] != env[c.right.name] for c in rule.neq)
        if ok:
            pairs.add((env[x.name], env[y.name]))
    r = rule.head.relation
    head = {(s, o) for s, rr, o in facts if rr == r}
    subjects, objects = {s for s, _ in head}, {o for _, o in head}
    on_subject = len(subjects) >= len(objects)  # AMIE: the more functional side
    support = sum(1 for p in pairs if p in head)
    pca = sum(1 for s, o in pairs if (s in subjects if on_subject else o in objects))
    return {"support": support, "body_size": len(pairs), "pca_body_size": pca, "head_size": len(head)}


@settings(max_examples=40, **SETTINGS)
@given(small_kbs(), st.integers(1, 2), st.integers(0, 2))
def test_measures_equal_brute_force(kb, max_body, max_guards):
    res = mine_rules(kb, max_body=max_body, max_guards=max_guards, min_head_coverage=0.0,
                     min_pca_confidence=0.0, skyline=False, time_budget=None)
    for rule in res.rules:
        b, m = brute_measures(kb, rule), rule.measures
        assert (m["support"], m["body_size"], m["pca_body_size"]) == (b["support"], b["body_size"],
                                                                        b["pca_body_size"]), str(rule)
        assert m["head_coverage"] == pytest.approx(b["support"] / b["head_size"])
        assert m["std_confidence"] == pytest.approx(b["support"] / b["body_size"])
        assert m["pca_confidence"] == pytest.approx(b["support"] / b["pca_body_size"] if b["pca_body_size"] else 0)
        assert m["support"] >= 1


@settings(max_examples=25, **SETTINGS)
@given(small_kbs(), st.integers(1, 2))
def test_per_entity_counts_equal_brute_force(kb, max_body):
    """The per-entity tables that large bodies use give the same measures."""
    from deepunlearn.rules import mine_measures

    old, mine_measures.PER_ENTITY_FACTOR = mine_measures.PER_ENTITY_FACTOR, 0.0
    try:
        res = mine_rules(kb, max_body=max_body, min_head_coverage=0.0, min_pca_confidence=0.0, skyline=False,
                         time_budget=None)
    finally:
        mine_measures.PER_ENTITY_FACTOR = old
    for rule in res.rules:
        b, m = brute_measures(kb, rule), rule.measures
        assert (m["support"], m["body_size"], m["pca_body_size"]) == (b["support"], b["body_size"],
                                                                        b["pca_body_size"]), str(rule)


@settings(max_examples=15, **SETTINGS)
@given(small_kbs())
def test_three_atom_bodies_equal_brute_force(kb):
    res = mine_rules(kb, max_body=3, max_guards=0, min_head_coverage=0.0, min_pca_confidence=0.0,
                     skyline=False, time_budget=None)
    for rule in res.rules:
        b, m = brute_measures(kb, rule), rule.measures
        assert (m["support"], m["body_size"], m["pca_body_size"]) == (b["support"], b["body_size"],
                                                                        b["pca_body_size"]), str(rule)


@settings(max_examples=25, **SETTINGS)
@given(small_kbs())
def test_every_supported_one_atom_rule_is_found(kb):
    """Without thresholds, each rule r(X, Y) :- s(X, Y) / s(Y, X) with support >= 1 is mined."""
    res = mine_rules(kb, max_body=1, max_guards=0, min_head_coverage=0.0, min_pca_confidence=0.0,
                     skyline=False, time_budget=None)
    found = {str(r) for r in res.rules}
    rels = sorted({r for _, r, _ in kb.facts})
    for h, s, args in product(rels, rels, ("X, Y", "Y, X")):
        if h == s and args == "X, Y":
            continue
        rule = parse_datalog(f"{h}(X, Y) :- {s}({args}).")[0]
        assert (brute_measures(kb, rule)["support"] >= 1) == (str(rule) in found), str(rule)


def _planted(n: int = 30) -> KnowledgeBase:
    """parent is a chain of families; child is its inverse with a few facts missing; grandparent
    is parent twice; some noise relation knows."""
    people = [f"p{i}" for i in range(n)]
    facts = []
    for i in range(n - 2):
        facts.append((people[i], "parent", people[i + 1]))
        if i % 7:
            facts.append((people[i + 1], "child", people[i]))
    for i in range(n - 3):
        facts.append((people[i], "grandparent", people[i + 2]))
    facts += [(people[i], "knows", people[(i * 5 + 3) % n]) for i in range(n)]
    return KnowledgeBase.build({p: {"gender": "male" if i % 2 else "female"} for i, p in enumerate(people)}, facts)


def test_planted_rules_are_rediscovered():
    res = mine_rules(_planted(), min_std_confidence=0.99)
    rules = {str(r): r.measures for r in res.rules}
    assert "parent(X, Y) :- child(Y, X)." in rules
    assert "grandparent(X, Y) :- parent(X, Z), parent(Z, Y)." in rules
    m = rules["grandparent(X, Y) :- parent(X, Z), parent(Z, Y)."]
    assert (m["support"], m["body_size"], m["std_confidence"]) == (27, 27, 1.0)
    assert not any(str(r).startswith("knows(") for r in res.rules)
    # child(X, Y) :- parent(Y, X) holds for 24 of 28 pairs: std confidence below 1, PCA confidence 1
    loose = {str(r): r.measures for r in mine_rules(_planted()).rules}
    c = loose["child(X, Y) :- parent(Y, X)."]
    assert c["std_confidence"] == pytest.approx(24 / 28) and c["support"] == 24


def test_output_is_deterministic_and_sorted():
    kb = _planted()
    a, b = mine_rules(kb).to_datalog(), mine_rules(kb).to_datalog()
    assert a == b
    conf = [r.measures["pca_confidence"] for r in mine_rules(kb).rules]
    assert conf == sorted(conf, reverse=True)


def test_measures_round_trip_through_the_parser(tmp_path):
    res = mine_rules(_planted())
    text = res.to_datalog()
    back = parse_datalog(text, name="m", source="m.dl")
    assert [str(r) for r in back] == [str(r) for r in res.rules]
    for a, b in zip(back, res.rules):
        assert {k: a.measures[k] for k in ("support", "body_size", "pca_body_size")} == \
               {k: b.measures[k] for k in ("support", "body_size", "pca_body_size")}
        for k in ("head_coverage", "std_confidence", "pca_confidence"):
            assert a.measures[k] == pytest.approx(b.measures[k], abs=5e-5)
    assert back.to_datalog().splitlines()[1:] == res.rules.to_datalog().splitlines()[1:]
    # a rule set without measures comments reads as before
    plain = parse_datalog("child(A, B) :- father(B, A).\n% a comment\nfather(B, A) :- child(A, B).")
    assert [r.measures for r in plain] == [None, None]
    # the measures comment on the line after the rule's end, even if the rule spans lines
    two = parse_datalog("child(A, B) :-\n  father(B, A).\n% support=3 pca_confidence=0.5\n")
    assert two[0].measures == {"support": 3.0, "pca_confidence": 0.5}


def test_malformed_measures_comment_names_the_line():
    with pytest.raises(RuleSyntaxError, match=r"m.dl:2:1: measures comment: measure 'support' has value 'many'"):
        parse_datalog("child(A, B) :- father(B, A).\n% support=many std_confidence=1\n", source="m.dl")


def test_time_and_grounding_budgets():
    kb = _planted()
    with pytest.raises(MineTimeError) as e:
        mine_rules(kb, time_budget=1e-9)
    assert "\n" not in str(e.value) and "--time-budget" in str(e.value)
    res = mine_rules(kb, grounding_budget=5)
    assert res.skipped and len(res.rules) < len(mine_rules(kb).rules)


def run(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "deepunlearn", "rules", "mine", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env)


def test_cli_mines_and_the_rules_load(tmp_path):
    kb = tmp_path / "kb.json"
    save_kb(_planted(), kb)
    out = tmp_path / "mined.dl"
    r = run("--kb", str(kb), "-o", str(out), "--min-std-confidence", "0.99", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["rules"] >= 2 and d["options"]["min_std_confidence"] == 0.99
    from deepunlearn.rules import closure, load_rules

    rs = load_rules(out)
    assert all(x.measures and x.measures["std_confidence"] >= 0.99 for x in rs)
    assert [str(x) for x in rs] == [str(x) for x in mine_rules(_planted(), min_std_confidence=0.99).rules]
    # rules of standard confidence 1 derive nothing the KB lacks; PCA-confident ones do
    assert list(closure(_planted(), rs).derived) == []
    loose = tmp_path / "loose.dl"
    assert run("--kb", str(kb), "-o", str(loose), "--min-pca-confidence", "1").returncode == 0
    assert len(closure(_planted(), load_rules(loose)).derived) == 4  # the missing child facts
    assert run("--kb", str(kb), "-o", str(out)).returncode == 0  # its own output is replaced


@pytest.mark.parametrize("args, needle", [
    (("--kb", "missing.json"), "--kb missing.json"),
    (("--kb", "{kb}", "-o", "{other}"), "-o"),
    (("--kb", "{bad}"), "--kb"),
    (("--kb", "{kb}", "--time-budget", "1e-9"), "--time-budget"),
])
def test_cli_bad_input_is_one_line_exit_1(tmp_path, args, needle):
    kb, other, bad = tmp_path / "kb.json", tmp_path / "notes.txt", tmp_path / "bad.json"
    save_kb(_planted(), kb)
    other.write_text("my notes\n")
    bad.write_text("{not json")
    args = [a.format(kb=kb, other=other, bad=bad) for a in args]
    if "-o" not in args:
        args += ["-o", str(tmp_path / "m.dl")]
    r = run(*args)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and needle in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert other.read_text() == "my notes\n"


@pytest.mark.parametrize("option, value", [("max_body", 0), ("max_body", 5), ("min_head_coverage", 1.5),
                                           ("min_pca_confidence", -0.1), ("grounding_budget", 0),
                                           ("time_budget", float("nan")), ("max_guards", True)])
def test_bad_options_are_refused(option, value):
    from deepunlearn.rules import RulesError

    with pytest.raises(RulesError):
        mine_rules(_planted(), **{option: value})


def test_head_and_excluded_relations():
    from deepunlearn.rules import RulesError

    kb = _planted()
    only = mine_rules(kb, head_relations=("grandparent",))
    assert only.rules and {r.head.relation for r in only.rules} == {"grandparent"}
    without = mine_rules(kb, exclude_relations=("child",))
    assert all("child" not in {a.relation for a in (r.head, *r.body)} for r in without.rules)
    assert any("child(" in str(r) for r in mine_rules(kb).rules)
    with pytest.raises(RulesError, match="--head-relations: no fact of KB .* has relation 'nope'"):
        mine_rules(kb, head_relations=("nope",))


@settings(max_examples=30, **SETTINGS)
@given(small_kbs(), st.booleans())
def test_star_bodies_counted_without_their_pairs_equal_the_pairs_counts(kb, functional):
    """a(X, Z), b(Y, Z) with one Z per X: counting over Z gives the counts of the built pairs."""
    import numpy as np

    from deepunlearn.rules.mine_index import MineIndex, bindings, uniq
    from deepunlearn.rules.mine_measures import BodyCounts

    if functional:  # keep one p fact per subject, so that p(X, Z) has one Z per X
        firsts = {}
        for f in kb.facts:
            if f[1] == "p":
                firsts.setdefault(f[0], f)
        kb = KnowledgeBase.build(kb.entities, [f for f in kb.facts if f[1] != "p" or firsts[f[0]] == f])
    ix = MineIndex(kb)
    used = 0
    for a in [(r, 0, 2) for r in ix.relations] + [(r, 2, 0) for r in ix.relations]:
        for b in [(r, 1, 2) for r in ix.relations] + [(r, 2, 1) for r in ix.relations]:
            star = BodyCounts.star(ix, (a, b))
            if star is None:
                continue
            used += 1
            t = bindings(ix, (a, b), None, {0, 1}, None)
            ref = BodyCounts(ix, uniq(t[0] * ix.n + t[1]))
            for r in ix.relations:
                x, y = star.head(r), ref.head(r)
                assert np.array_equal(x.body, y.body) and np.array_equal(x.support, y.support)
                assert np.array_equal(x.pca, y.pca), (a, b, r)
    assert used or not functional or "p" not in ix.relations
