"""The ``rules`` commands on bad input, in-process: strict numeric flags (usage errors), ``-o``
written atomically into missing folders, figures by suffix, fact references and fact lists whose
errors name the flag and the KB file, and the release's ``newphe`` warning said once."""

from __future__ import annotations

import json

import pytest

from deepunlearn.cli import main


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(["rules", *argv])
    except SystemExit as e:  # argparse usage errors
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv, message", [
    (["explain", "--target", "272", "--depth", "-1"], "argument --depth: expected an integer >= 0, got '-1'"),
    (["explain", "--target", "272", "--max-groundings", "0"], "argument --max-groundings: expected an integer >= 1"),
    (["explain", "--target", "272", "--max-sets", "-3"], "argument --max-sets: expected an integer >= 1"),
    (["sets", "--target", "272", "--seeds", "0"], "argument --seeds: expected an integer >= 1, got '0'"),
    (["recall", "--target", "272", "--forgotten", "F", "--seeds", "-5"], "argument --seeds: expected an integer >= 1"),
    (["sets", "--target", "272", "--time-budget", "-1"], "argument --time-budget: expected a finite number of seconds > 0, got '-1'"),
    (["sets", "--target", "272", "--time-budget", "nan"], "argument --time-budget: expected a finite number of seconds > 0, got 'nan'"),
    (["sets", "--target", "272", "--time-budget", "inf"], "argument --time-budget: expected a finite number of seconds > 0, got 'inf'"),
    (["sets", "--target", "272", "--time-budget", "0"], "(for the approximate sets only, use --sets mdus)"),
])
def test_bad_numbers_are_usage_errors(edu_json, capsys, argv, message):
    code, out, err = cli(capsys, *argv, "--kb", str(edu_json), "--json")
    assert code == 2 and message in err and "Traceback" not in err
    assert message in json.loads(out)["error"]


def test_closure_output_into_a_missing_folder(edu_json, tmp_path, capsys):
    out = tmp_path / "new" / "deeper" / "closure.json"
    code, stdout, _ = cli(capsys, "closure", "--kb", str(edu_json), "-o", str(out), "--json")
    d = json.loads(stdout)
    assert code == 0 and d["output"] == str(out)
    assert len(json.loads(out.read_text())) == d["closure"] == 562
    assert [p.name for p in out.parent.iterdir()] == ["closure.json"]


def test_explain_refuses_a_figure_suffix_before_any_work(edu_json, tmp_path, capsys):
    fig = tmp_path / "fig.txt"
    code, out, err = cli(capsys, "explain", "--kb", str(edu_json), "--target", "272", "-o", str(fig), "--json")
    assert code == 1 and not fig.exists() and err.count("\n") == 1
    assert err.startswith(f"deepunlearn rules: error: -o {fig}: cannot draw a figure as '.txt'; use one of ")
    assert ".png" in err and ".pdf" in err and json.loads(out)["field"] == "-o"


def test_explain_reports_the_figure_it_wrote(edu_json, tmp_path, capsys):
    fig = tmp_path / "figs" / "explained"
    code, out, _ = cli(capsys, "explain", "--kb", str(edu_json), "--target", "272", "--depth", "0",
                       "--max-sets", "1", "-o", str(fig), "--json")
    assert code == 0 and json.loads(out)["figure"] == f"{fig}.png"
    assert (tmp_path / "figs" / "explained.png").read_bytes()[:4] == b"\x89PNG"


def test_target_errors_name_the_flag_and_the_kb_file(edu_json, capsys):
    code, out, err = cli(capsys, "sets", "--kb", str(edu_json), "--target", "9999", "--json")
    assert code == 1
    assert err == (f"deepunlearn rules: error: --target '9999' (KB {edu_json}): fact index 9999 out of range "
                   "(KB has 700 facts)\n")
    assert json.loads(out) == {"error": err.split("error: ", 1)[1].strip(), "file": str(edu_json), "field": "--target"}


@pytest.mark.parametrize("flag", ["--known", "--forgotten"])
@pytest.mark.parametrize("content, message", [
    (b"[" * 3000 + b"]" * 3000, "JSON nested deeper than 64 levels"),
    (b"[272, \"\xff\"]", "not UTF-8 text (byte 7: b'\\xff')"),
    (b"[272, true]", "item 1: expected a fact index, 'S|r|O' or [s, r, o], found True"),
    (b"[272, \"4\"]", "item 1: fact index given as a string '4'; write it as a JSON number"),
], ids=["nested", "non-utf8", "true", "string-index"])
def test_fact_lists_are_read_safely(edu_json, tmp_path, capsys, flag, content, message):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    good = tmp_path / "good.json"
    good.write_text("[272]")
    files = {"--known": bad, "--forgotten": good} if flag == "--known" else {"--known": None, "--forgotten": bad}
    argv = ["recall", "--kb", str(edu_json), "--target", "272", "--seeds", "1", "--sets", "mdus",
            "--forgotten", str(files["--forgotten"])]
    if files["--known"]:
        argv += ["--known", str(files["--known"])]
    code, out, err = cli(capsys, *argv, "--json")
    assert code == 1 and "Traceback" not in err
    lines = [ln for ln in err.splitlines() if not ln.startswith("warning:")]
    assert lines == [f"deepunlearn rules: error: {flag} {bad}: {message}"]
    assert json.loads(out)["file"] == str(bad)


# ------------------------------------------------------------------------------ newphe, said once
def _without_acknowledgement(edu_json, tmp_path):
    doc = json.loads(edu_json.read_text())
    doc["metadata"].pop("acknowledged_relations")
    p = tmp_path / "old-import.json"
    p.write_text(json.dumps(doc))
    return p


def test_newphe_is_not_repeated_on_an_imported_kb(edu_json, tmp_path, capsys):
    code, out, err = cli(capsys, "closure", "--kb", str(edu_json), "--json")
    assert code == 0 and err == ""
    assert any("'newphe'" in w for w in json.loads(out)["warnings"])  # still in the result
    old = _without_acknowledgement(edu_json, tmp_path)  # a KB imported before: warned as before ...
    code, _, err = cli(capsys, "closure", "--kb", str(old), "--json")
    assert code == 0 and err.count("warning: rule set 'edu-relat': relation 'newphe'") == 1
    code, _, err = cli(capsys, "closure", "--kb", str(old), "--json", "-q")  # ... unless --quiet
    assert code == 0 and err == ""


def test_rules_flags_have_help():
    from deepunlearn.cli import build_parser

    def sub(p, name):
        return next(a for a in p._actions if a.__class__.__name__ == "_SubParsersAction").choices[name]

    rules = sub(build_parser(), "rules")
    for action in ("closure", "sets", "recall", "explain", "show"):
        p = sub(rules, action)
        missing = [a.option_strings or a.dest for a in p._actions if not a.help]
        assert missing == [], f"rules {action}: flags without help {missing}"


def test_explain_a_target_no_rule_derives(edu_json, capsys):
    """A biography fact has no derivations: its explanation used to be a KeyError (exit 70)."""
    code, out, err = cli(capsys, "explain", "--kb", str(edu_json), "--target", "400", "--json")
    d = json.loads(out)
    assert code == 0 and d["derivations"] == [] and d["sets"] == [[["Sloane Lee", "birthyear", "1908"]]]
