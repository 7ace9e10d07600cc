"""The grounding budget: explosive rules stop with one clear error naming the
rule (file:line), the count reached and the budget, before the memory is taken; the budget is
honoured exactly; the CLI's ``--grounding-budget``; every evaluating API gets the default."""

from __future__ import annotations

import json
import time

import pytest

from deepunlearn.cli import main
from deepunlearn.kg.domains.family.generate import generate_family
from deepunlearn.kg.io import save_kb
from deepunlearn.rules import Evaluator, closure, derivation_graph, load_rules, parse_datalog
from deepunlearn.rules.budget import DEFAULT_MAX_GROUNDINGS, RuleBudgetError

#: The issue's explosive rules (line 2 of their files: line 1 is a comment).
EXPLOSIVE = {
    "product3": "r(X, Y) :- child(X, A), niece(Y, B), uncle(Z, C).",
    "star12": "r(X, Y) :- " + ", ".join(f"child(X, A{i})" for i in range(1, 12)) + ", child(Y, A12).",
    "child3": "r(X, Y) :- child(X, A), child(Y, B), child(Z, C).",
}


def rule_file(tmp_path, name: str, text: str):
    path = tmp_path / f"{name}.dl"
    path.write_text(f"% {name}\n{text}\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def kb300():
    """A generated 300-person family KB (355 child facts): 0.2 s to build."""
    return generate_family(300, 0)


@pytest.mark.parametrize("name", sorted(EXPLOSIVE))
def test_explosive_rule_stops_naming_rule_and_count(tmp_path, edu_kb, name):
    path = rule_file(tmp_path, name, EXPLOSIVE[name])
    with pytest.raises(RuleBudgetError) as e:
        closure(edu_kb, load_rules(path), max_groundings=2_000)
    err = e.value
    assert (err.source, err.line, err.label, err.budget) == (str(path), 2, "rule 1", 2_000)
    assert err.count > 2_000
    assert str(err) == (f"{path}:2: rule 1 would bring evaluation to {err.count:,} groundings and derived facts "
                        f"({err.before:,} held before), over the budget of 2,000: {EXPLOSIVE[name]} "
                        "Raise the budget with --grounding-budget N (max_groundings=N in Python), or rewrite the rule")


def test_default_budget_stops_a_product_before_allocating(tmp_path, kb300):
    """355**3 * 2 = 89 million weighted rows: past the default, refused before any is built
    (built, the join would take about 6 GB)."""
    path = rule_file(tmp_path, "child3", EXPLOSIVE["child3"])
    t0 = time.perf_counter()
    with pytest.raises(RuleBudgetError) as e:
        derivation_graph(kb300, load_rules(path))
    assert time.perf_counter() - t0 < 5
    assert e.value.budget == DEFAULT_MAX_GROUNDINGS and e.value.count == 2 * 355 ** 3


def test_budget_is_honoured_exactly(edu_kb):
    """``r(X, Y) :- child(X, A), child(Y, B).`` holds n*n groundings, then derives p*p facts
    (n child facts, p parents): a budget of n*n + p*p closes, one less fails, naming that count."""
    rules = parse_datalog("r(X, Y) :- child(X, A), child(Y, B).", name="prod", source="prod.dl")
    child = [(s, o) for s, r, o in edu_kb.facts if r == "child"]
    n, p = len(child), len({s for s, _ in child})
    need = n * n + p * p
    g = derivation_graph(edu_kb, rules, max_groundings=need)
    assert g.n_edges == n * n and g.peak_groundings == need
    assert len(closure(edu_kb, rules, max_groundings=need).derived) == p * p
    with pytest.raises(RuleBudgetError) as e:
        derivation_graph(edu_kb, rules, max_groundings=need - 1)
    assert (e.value.count, e.value.before, e.value.line) == (need, n * n, 1)
    assert str(e.value).startswith(f"prod.dl:1: rule 1 would bring evaluation to {need:,} groundings")


def test_release_closes_at_its_peak_and_not_below(edu_kb):
    peak = derivation_graph(edu_kb, "edu-relat").peak_groundings
    assert len(closure(edu_kb, "edu-relat", max_groundings=peak)) == 562
    with pytest.raises(RuleBudgetError, match=r"^edu-relat\.dl:\d+: rule \d+ would bring evaluation to "):
        closure(edu_kb, "edu-relat", max_groundings=peak - 1)


def test_pydatalog_engine_and_evaluator_get_the_budget(tmp_path, edu_kb):
    path = rule_file(tmp_path, "child3", EXPLOSIVE["child3"])
    with pytest.raises(RuleBudgetError, match=r"child3\.dl:2: rule 1 "):
        closure(edu_kb, load_rules(path), engine="pydatalog", max_groundings=1000)
    with pytest.raises(RuleBudgetError, match=r"child3\.dl:2: rule 1 "):
        Evaluator(edu_kb, rules=load_rules(path), max_groundings=1000)
    with pytest.raises(RuleBudgetError, match="over the budget of 10,000,000"):  # the default, automatically
        Evaluator(generate_family(300, 0), rules=load_rules(path))


@pytest.mark.parametrize("bad", [0, -5, 2.5, True, "100"])
def test_budget_must_be_a_positive_integer(edu_kb, bad):
    with pytest.raises(Exception) as e:
        closure(edu_kb, "family", max_groundings=bad)
    assert type(e.value).__name__ == "RulesError" and "max_groundings must be an integer >= 1" in str(e.value)


# ------------------------------------------------------------------------------------------- CLI
def test_cli_closure_stops_with_one_line_and_exit_1(tmp_path, edu_json, capsys):
    path = rule_file(tmp_path, "product3", EXPLOSIVE["product3"])
    rc = main(["rules", "closure", "--kb", str(edu_json), "--rules", str(path), "--grounding-budget", "5000"])
    err = capsys.readouterr().err.splitlines()
    assert rc == 1
    assert err[-1].startswith(f"deepunlearn rules: error: {path}:2: rule 1 would bring evaluation to ")
    assert err[-1].endswith("Raise the budget with --grounding-budget N (max_groundings=N in Python), or rewrite the rule")
    assert "Traceback" not in "\n".join(err)

    rc = main(["rules", "closure", "--kb", str(edu_json), "--rules", str(path), "--grounding-budget", "5000", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out["file"] == str(path) and out["field"] == "--grounding-budget"
    assert out["error"].startswith(f"{path}:2: rule 1 would bring evaluation to ")


def test_cli_budget_passes_through_to_sets(edu_json, edu_kb, capsys):
    peak = derivation_graph(edu_kb, "edu-relat").peak_groundings
    t = str(edu_kb.targets[0])
    base = ["rules", "sets", "--kb", str(edu_json), "--rules", "edu-relat", "--target", t, "--json"]
    assert main(base + ["--grounding-budget", str(peak)]) == 0
    assert json.loads(capsys.readouterr().out)["exact"] is True
    assert main(base + ["--grounding-budget", str(peak - 1)]) == 1
    assert "over the budget of" in json.loads(capsys.readouterr().out)["error"]


def test_cli_budget_zero_is_a_usage_error(edu_json, capsys):
    with pytest.raises(SystemExit) as e:
        main(["rules", "closure", "--kb", str(edu_json), "--grounding-budget", "0"])
    assert e.value.code == 2
    assert "--grounding-budget: expected an integer >= 1, got '0'" in capsys.readouterr().err


def test_closure_of_generated_kb_under_default_budget(tmp_path, kb300, capsys):
    """The normal path is untouched: the shipped rules close a generated KB as before."""
    kb_path = tmp_path / "kb.json"
    save_kb(kb300, kb_path)
    assert main(["rules", "closure", "--kb", str(kb_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["closure"] == len(closure(kb300, "family", max_groundings=None))
