"""Bounded rule files and rule evaluation: a rule file is a regular file under 16 MiB, holds at
most ``MAX_RULES`` rules of at most ``MAX_BODY`` body literals (environment variables change
both), and ``rules closure --time-budget S`` stops evaluation with one line naming the rule file."""

from __future__ import annotations

import os

import pytest

from deepunlearn.rules import closure, load_rules
from deepunlearn.rules.budget import RuleTimeError
from deepunlearn.rules.errors import RulesError, RuleSyntaxError
from tests.kg.kg_helpers import cli as kg_cli, one_line_error
from deepunlearn.rules.parser import BODY_ENV, MAX_BODY, MAX_RULES, RULES_ENV, parse_datalog, parse_raw


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    return kg_cli(capsys, "rules", *argv)


def chain(n: int) -> str:
    """``n`` rules, each deriving from the one before: ``n`` rounds of evaluation."""
    return "r0(X, Y) :- child(X, Y).\n" + "".join(f"r{i + 1}(X, Y) :- r{i}(X, Y).\n" for i in range(n - 1))


def long_body(n: int) -> str:
    return "r(X, Y) :- " + ", ".join(f"child(X, A{i})" for i in range(n - 1)) + ", child(Y, A0).\n"


# ------------------------------------------------------------------------------ parse-time caps
def test_ten_thousand_chained_rules_are_refused_as_read(edu_json, tmp_path, capsys):
    f = tmp_path / "chain.dl"
    f.write_text(chain(10_000))
    code, _, err = cli(capsys, "closure", "--kb", str(edu_json), "--rules", str(f), "-q")
    one_line_error(code, err, f"{f}:{MAX_RULES + 1}:1", f"more than {MAX_RULES:,} rules", RULES_ENV)


def test_a_two_thousand_atom_body_is_refused_as_read(edu_json, tmp_path, capsys):
    f = tmp_path / "long.dl"
    f.write_text(long_body(2000))
    code, _, err = cli(capsys, "closure", "--kb", str(edu_json), "--rules", str(f), "-q")
    one_line_error(code, err, f"{f}:1:", f"more than {MAX_BODY} atoms", BODY_ENV)


def test_the_caps_are_exact_and_set_by_the_environment(monkeypatch):
    assert len(parse_datalog(chain(MAX_RULES))) == MAX_RULES
    assert len(parse_datalog(long_body(MAX_BODY))[0].body) == MAX_BODY
    monkeypatch.setenv(RULES_ENV, "3")
    with pytest.raises(RuleSyntaxError, match="x.dl:4:1: more than 3 rules"):
        parse_datalog(chain(4), source="x.dl")
    monkeypatch.setenv(BODY_ENV, "2")
    with pytest.raises(RuleSyntaxError, match="more than 2 atoms"):
        parse_datalog(long_body(3))
    assert len(parse_datalog(long_body(2))[0].body) == 2
    monkeypatch.setenv(RULES_ENV, "0")
    with pytest.raises(RulesError, match=f"environment variable {RULES_ENV}: expected a positive integer"):
        parse_datalog(chain(1))


def test_the_raw_format_has_the_same_caps(monkeypatch):
    line = "(A, is wife of, B) > (B, is husband of, A)\n"
    monkeypatch.setenv(RULES_ENV, "2")
    with pytest.raises(RuleSyntaxError, match="raw.txt:3:1: more than 2 rules"):
        parse_raw(line * 3, source="raw.txt")
    monkeypatch.setenv(BODY_ENV, "2")
    with pytest.raises(RuleSyntaxError, match="more than 2 atoms"):
        parse_raw("(A, is wife of, B) + (A, is wife of, C) + (C, is wife of, B) > (B, is husband of, A)\n")


# ------------------------------------------------------------------------------ rule files
@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_rule_file_that_is_not_a_regular_file(edu_json, tmp_path, capsys, kind):
    f = tmp_path / "rules.fifo"
    if kind == "fifo":
        os.mkfifo(f)
    else:
        f = "/dev/zero"
    code, _, err = cli(capsys, "closure", "--kb", str(edu_json), "--rules", str(f))
    one_line_error(code, err, str(f), "not a regular file")


def test_a_rule_file_over_the_size_cap(tmp_path, monkeypatch):
    import deepunlearn.rules.load as load

    f = tmp_path / "big.dl"
    f.write_text(chain(10))
    monkeypatch.setattr(load, "MAX_SMALL_FILE_BYTES", 100)
    with pytest.raises(RulesError, match="big.dl: file is over the size limit of 100 bytes"):
        load_rules(f)


# ------------------------------------------------------------------------------ time budget
def test_closure_stops_at_the_time_budget(edu_json, tmp_path, capsys):
    f = tmp_path / "chain.dl"
    f.write_text(chain(MAX_RULES))  # under the caps, but 1,000 rounds of 1,000 rules
    code, _, err = cli(capsys, "closure", "--kb", str(edu_json), "--rules", str(f), "--time-budget", "0.2", "-q")
    one_line_error(code, err, f"{f}: evaluating the rules passed the time budget of 0.2 s", "--time-budget S")


def test_time_budget_in_python(edu_kb, tmp_path):
    f = tmp_path / "chain.dl"
    f.write_text(chain(300))
    with pytest.raises(RuleTimeError, match="chain.dl: .* time budget of 0.01 s .*round [0-9]+, at rule [0-9]+, line"):
        closure(edu_kb, load_rules(f), time_budget=0.01)
    with pytest.raises(RuleTimeError):
        closure(edu_kb, load_rules(f), engine="pydatalog", time_budget=0.01)
    for bad in (0, -1.0, float("nan"), float("inf"), True, "5"):
        with pytest.raises(RulesError, match="time_budget must be"):
            closure(edu_kb, "edu-relat", time_budget=bad)


def test_a_generous_time_budget_changes_nothing(edu_kb):
    assert len(closure(edu_kb, "edu-relat", time_budget=60)) == len(closure(edu_kb, "edu-relat")) == 562


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_closure_time_budget_flag_is_strict(edu_json, capsys, value):
    code, _, err = cli(capsys, "closure", "--kb", str(edu_json), "--time-budget", value)
    assert code == 2 and f"argument --time-budget: expected a finite number of seconds > 0, got '{value}'" in err
    assert "--sets" not in err  # the hint of the sets commands' flag does not apply here
