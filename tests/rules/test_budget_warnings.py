"""Parse-time warnings: cartesian-product rules are named (file:line)
when a rule file is read, never for the shipped rule sets; a rule whose head relation the KB
lacks is named when the rules meet a KB."""

from __future__ import annotations

import pytest

from deepunlearn.cli import main
from deepunlearn.rules import BUILTIN, load_rules, parse_datalog, parse_raw

from test_budget import EXPLOSIVE, rule_file


@pytest.mark.parametrize("name", sorted(EXPLOSIVE))
def test_cartesian_rules_are_warned_at_parse_time(tmp_path, name):
    path = rule_file(tmp_path, name, EXPLOSIVE[name])
    rs = load_rules(path)
    groups = {"product3": 3, "star12": 2, "child3": 3}[name]
    assert len(rs.warnings) == 1
    assert rs.warnings[0].startswith(f"{path}:2: rule 1 is a cartesian product: its body atoms fall into "
                                     f"{groups} groups that share no variable (")


def test_cartesian_warning_lists_the_groups():
    rs = parse_datalog("ok(X, Y) :- child(X, A), father(A, Y).\n"
                       "r(X, Y) :- child(X, A), niece(Y, B), father(A, C), uncle(Z, C), male(X), X != Y.",
                       source="two.dl")
    assert rs.warnings == (
        "two.dl:2: rule 2 is a cartesian product: its body atoms fall into 2 groups that share no variable "
        "(child(X, A), father(A, C), uncle(Z, C) | niece(Y, B)), so its groundings are the product of theirs; "
        "join them through a variable if that was not meant",)


@pytest.mark.parametrize("text", [
    "r(X, A1) :- " + ", ".join(f"child(X, A{i})" for i in range(1, 13)) + ".",  # a star: one group
    'r(X, Y) :- child(X, Y), father("Ann", "Bob").',  # a ground atom multiplies nothing
    "r(X, Y) :- child(X, Y).",
])
def test_connected_rules_get_no_warning(text):
    assert parse_datalog(text).warnings == ()


@pytest.mark.parametrize("name", BUILTIN)
def test_shipped_rule_sets_have_no_cartesian_rule(name):
    assert load_rules(name).warnings == ()


def test_raw_format_rules_are_checked_too():
    rs = parse_raw("(A, is child of, B) + (C, is child of, D) > (A, is wife of, C)", source="raw.txt")
    assert len(rs.warnings) == 1 and rs.warnings[0].startswith("raw.txt:1: rule 1 is a cartesian product")


def test_head_relation_unknown_to_kb_is_warned(edu_kb):
    rs = parse_datalog("% misspelt head\nnephw(X, Y) :- nephew(X, Y).\nnephw(X, Y) :- uncle(Y, X).", source="typo.dl")
    assert rs.check(edu_kb) == [
        "rule set 'rules': relation 'nephw', derived by rule 1 (typo.dl:2), rule 2 (typo.dl:3), is not a relation of "
        "KB 'edu-relat' (misspelt?): its facts can only be steps towards other facts, never probed, unlearned or counted"]
    assert load_rules("family").check(edu_kb) == []
    assert not any("is not a relation of KB" in w for w in load_rules("edu-relat").check(edu_kb))


def test_cli_prints_the_warnings_before_the_budget_error(tmp_path, edu_json, capsys):
    path = rule_file(tmp_path, "child3", EXPLOSIVE["child3"])
    rc = main(["rules", "closure", "--kb", str(edu_json), "--rules", str(path), "--grounding-budget", "1000"])
    err = capsys.readouterr().err.splitlines()
    assert rc == 1 and len(err) == 3
    assert err[0].startswith(f"warning: {path}:2: rule 1 is a cartesian product")
    assert err[1].startswith("warning: rule set 'child3': relation 'r', derived by rule 1")
    assert err[2].startswith(f"deepunlearn rules: error: {path}:2: rule 1 would bring evaluation to 20,000 ")


def test_cli_show_prints_parse_warnings_without_kb(tmp_path, capsys):
    path = rule_file(tmp_path, "product3", EXPLOSIVE["product3"])
    assert main(["rules", "show", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith(f"% warning: {path}:2: rule 1 is a cartesian product")
