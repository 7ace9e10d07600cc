"""``evaluate-report`` validates every verdict line before it stores it: a line holding a wrong
type, a fact the KB lacks, NaN or a negative fact id is one line naming the file, the line and
the field (exit code 1), never an internal error later in the store or the report."""

from __future__ import annotations

import json
import math

import pytest


def _verdict(**changes) -> dict:
    """A verdict line as ``evaluate --manifest -o`` writes it (fact 4 of the 6-person KB)."""
    v = {"row": {"checkpoint": "ul1", "target": "4", "method": None, "param": None}, "original": "ck",
         "unlearned": "ul1", "kb": None, "rules": "family", "mode": "rank", "target": ["A", "child", "B"],
         "target_id": 4, "known_original": 8, "known_unlearned": 7, "forgotten": [2, 4], "gained": [3],
         "recall": 1.0, "accuracy": 0.857, "accuracy_groups": {"family": 0.0, "biography": 1.0},
         "accuracy_rule": 0.0, "accuracy_other": 1.0, "exact": True, "minimal_sets": 1, "best_set": [4],
         "target_forgotten": True, "deep": True, "superficial": False, "method": None, "param": None,
         "adversarial": None, "attacks": None, "scores": None}
    v.update(changes)
    return v


@pytest.fixture()
def kb_file(tmp_path):
    from deepunlearn import generate_family
    from deepunlearn.kg.io import save_kb

    return save_kb(generate_family(6, seed=1), tmp_path / "kb.json")


def _report(tmp_path, kb_file, lines: list[dict], capsys) -> tuple[int, str, dict | None]:
    from deepunlearn.cli import main

    f = tmp_path / "v.jsonl"
    f.write_text("".join(json.dumps({**x, "kb": str(kb_file)}) + "\n" for x in lines), encoding="utf-8")
    rc = main(["evaluate-report", str(f), "-o", str(tmp_path / "rep"), "--json"])
    out = capsys.readouterr()
    return rc, out.err, (json.loads(out.out) if out.out.strip() else None)


BAD = [
    ("target_id", {"target_id": 999}, "not in the KB"),
    ("target_id", {"target_id": "abc"}, "integer"),
    ("target_id", {"target_id": 1e30}, "integer"),
    ("target_id", {"target_id": -1}, "greater than or equal to 0"),
    ("recall", {"recall": "x"}, "number"),
    ("recall", {"recall": math.nan}, "finite"),
    ("recall", {"recall": 2.5}, "less than or equal to 1"),
    ("accuracy", {"accuracy": True}, "true/false"),
    ("forgotten", {"forgotten": 5}, "list"),
    ("forgotten", {"forgotten": [999]}, "not in the KB"),
    ("original", {"original": ["a"]}, "string"),
    ("accuracy_groups", {"accuracy_groups": "abc"}, "dictionary"),
    ("adversarial", {"adversarial": {"recall_adv": "x"}}, "number"),
    ("deep", {"deep": "yes"}, "boolean"),
]


@pytest.mark.parametrize("field,change,says", BAD, ids=[f"{f}-{i}" for i, (f, _, _) in enumerate(BAD)])
def test_a_bad_verdict_line_is_one_line_naming_file_line_and_field(tmp_path, kb_file, capsys, field, change, says):
    rc, err, obj = _report(tmp_path, kb_file, [_verdict(), _verdict(**change)], capsys)
    assert rc == 1, err
    line = err.strip()
    assert "\n" not in line and "internal error" not in line
    assert f"v.jsonl:2: field {field}:" in line and says in line, line
    assert obj["field"] == field and obj["file"].endswith("v.jsonl")
    assert not (tmp_path / "rep" / "results.sqlite").exists()  # nothing stored from a bad file


def test_good_verdicts_are_stored(tmp_path, kb_file, capsys):
    rc, err, obj = _report(tmp_path, kb_file, [_verdict(), _verdict(target_id=5, forgotten=[5], param=2)], capsys)
    assert rc == 0, err
    assert obj["points"] == 2 and obj["added"] == 2


def test_a_verdict_holding_a_line_separator_is_one_line(tmp_path, kb_file, capsys):
    from deepunlearn.cli import main

    f = tmp_path / "v.jsonl"
    lines = [_verdict(kb=str(kb_file)), _verdict(kb=str(kb_file), param=2, unlearned="ul\u2028two")]
    f.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
    assert main(["evaluate-report", str(f), "-o", str(tmp_path / "rep"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["points"] == 2


def test_soft_verdicts_keep_deep_p_and_the_report_shows_it(tmp_path, kb_file, capsys):
    lines = [_verdict(deep_p=0.0), _verdict(target_id=5, forgotten=[5], deep=False, superficial=True, deep_p=0.36)]
    rc, err, obj = _report(tmp_path, kb_file, lines, capsys)
    assert rc == 0, err
    md = next((tmp_path / "rep").rglob("report.md")).read_text()
    soft = md[md.index("### Under soft rules"):]
    row = next(ln for ln in soft.splitlines() if ln.startswith("| ck | evaluate |"))
    assert row == "| ck | evaluate | 2 | 1 | 1.64 | 0.18 | 0 |"  # 2 targets, 1 deep, expected deep 1 + 0.64
    import csv

    rows = list(csv.DictReader(next((tmp_path / "rep").rglob("points.csv")).open()))
    assert sorted(r["deep_p"] for r in rows) == ["0.0", "0.36"]
    (tmp_path / "bad").mkdir()
    rc, err, obj = _report(tmp_path / "bad", kb_file, [_verdict(deep_p=1.5)], capsys)
    assert rc == 1 and "v.jsonl:1: field deep_p:" in err
