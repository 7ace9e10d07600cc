"""Forms files and ``deepunlearn data forms``: every error names the file and
the line, nothing is written on an error, duplicates are skipped, ``--json`` is one object."""

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kg_helpers import cli

from deepunlearn.kg import KnowledgeBase, load_kb, save_kb
from deepunlearn.kg.forms import Form, FormError, forms_of, select_forms
from deepunlearn.kg.forms_file import add_forms, read_forms_file

F0 = ["A", "father", "B"]
OK_ST = {"fact": F0, "text": "B is the father of A.", "answer": "father"}
OK_QA = {"fact": F0, "question": "Who is B to A?", "answer": "father"}


def _kb():
    return KnowledgeBase.build({"A": {"gender": "female"}, "B": {"gender": "male"}, "C": {"gender": "male"}},
                               [("A", "father", "B"), ("A", "brother", "C")], name="tiny")


def _write(path, *lines):
    path.write_text("".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines), encoding="utf-8")
    return path


def test_read_statements_questions_yesno_names_and_splits(tmp_path):
    f = _write(tmp_path / "para.jsonl", OK_ST, "", OK_QA,
               {"fact": [ "A", "brother", "C"], "question": "Is C A's brother?", "answer": "Yes", "kind": "yesno",
                "split": None, "name": "yn"},
               {"fact": 1, "question": "Is that so?", "answer": "yes", "split": "train"})
    forms = read_forms_file(_kb(), f, split="test")
    assert [(x.fact_id, x.kind, x.answer, x.name, x.split) for x in forms] == [
        (0, "statement", "father", "para", "test"), (0, "qa", "father", "para", "test"),
        (1, "yesno", "yes", "yn", None), (1, "qa", "yes", "para", "train")]
    assert forms[0].prompt == "B is the " and forms[0].rest == " of A."


def test_exported_probes_and_form_json_read_back(tmp_path, capsys):
    kb = _kb()
    save_kb(kb, tmp_path / "kb.json")
    assert cli(capsys, "data", "export", str(tmp_path / "kb.json"), "-o", str(tmp_path / "probes.jsonl"))[0] == 0
    forms = read_forms_file(kb, tmp_path / "probes.jsonl")
    assert [(x.fact_id, x.text, x.answer, x.name) for x in forms] == [
        (p.fact_id, p.question, p.answer, "probes") for p in kb.probes()]
    one = forms_of(kb, 0)[4].to_json() | {"name": "mine"}  # st1, as Form.to_json writes it
    again = read_forms_file(kb, _write(tmp_path / "x.jsonl", one))
    assert (again[0].kind, again[0].text, again[0].name) == ("statement", "B is A's father.", "mine")


@pytest.mark.parametrize("line, message", [
    ('{"fact": ["A", "father", "B"], "question": "Q?", "answer": "father"', "not valid JSON (Expecting ',' delimiter at column 68)"),
    ('[1, 2]', "expected a JSON object, found list"),
    ('{"fact": ["A", "father", "B"], "answer": NaN, "question": "Q?"}', "not valid JSON (NaN is not JSON)"),
    ('{"fact": ["A", "father", "B"], "question": "Q?", "answer": "x", "answer": "y"}', "key 'answer' given twice"),
    ('{"fact": ["A", "father", "B"], "question": "Q?"}', 'missing key "answer"'),
    ('{"question": "Q?", "answer": "father"}', 'missing key "fact"'),
    ('{"fact": ["A", "father", "B"], "question": "Q?", "answer": "father", "sprit": "test"}', "unknown key 'sprit'"),
    ('{"fact": ["A", "mother", "B"], "question": "Q?", "answer": "x"}',
     "'fact': fact ['A', 'mother', 'B'] is not in knowledge base 'tiny'"),
    ('{"fact": 7, "question": "Q?", "answer": "x"}', "'fact': fact index 7 out of range (KB has 2 facts)"),
    ('{"fact": ["A", "father", "B"], "fact_id": 1, "question": "Q?", "answer": "x"}',
     '"fact" is fact 0 but "fact_id" is 1'),
    ('{"fact": ["A", "father", "B"], "text": "B is his dad.", "answer": "father"}',
     "answer 'father' is not in its text 'B is his dad.'"),
    ('{"fact": ["A", "father", "B"], "text": "father of A is B.", "answer": "father"}',
     "answer 'father' is only at the start of its text"),
    ('{"fact": ["A", "father", "B"], "text": "B is A\'s father.", "question": "Q?", "answer": "father"}',
     'give exactly one of "text" (a statement) and "question" (a question), not both'),
    ('{"fact": ["A", "father", "B"], "answer": "father"}', 'give exactly one of "text" (a statement) and "question"'),
    ('{"fact": ["A", "father", "B"], "question": "Q?", "answer": "father", "split": "dev"}',
     'split must be one of train, test, unlearn or null, found "dev"'),
    ('{"fact": ["A", "father", "B"], "question": "Q?", "answer": "father", "kind": "cloze"}',
     'kind must be one of qa, statement, yesno, found "cloze"'),
    ('{"fact": ["A", "father", "B"], "question": "Q?", "answer": "father", "kind": "statement"}',
     'a statement form gives its text as "text", not "question"'),
    ('{"fact": ["A", "father", "B"], "question": "Q?", "answer": "maybe", "kind": "yesno"}',
     "a yes/no form's answer is 'yes' or 'no', found 'maybe'"),
    ('{"fact": ["A", "father", "B"], "question": "Q?", "answer": "father", "name": "qa1"}',
     "form name 'qa1' is a built-in template's name"),
    ('{"fact": ["A", "father", "B"], "question": "Q?", "answer": "father", "name": "all"}',
     "form name 'all' is a --forms selection word"),
    ('{"fact": ["A", "father", "B"], "question": "Q?", "answer": " father"}', "starts or ends with whitespace"),
    ('{"fact": ["A", "father", "B"], "question": "", "answer": "father"}', "'question' is empty"),
    ('{"fact": ["A", "father", "B"], "question": 3, "answer": "father"}', "'question' must be a JSON string, found 3"),
    ('{"fact": true, "question": "Q?", "answer": "father"}', "'fact': expected a fact index"),
    ("[" * 70 + "]" * 70, "JSON nested deeper than 64 levels"),
])
def test_each_bad_line_is_one_error_with_its_line_number(tmp_path, line, message):
    f = _write(tmp_path / "f.jsonl", OK_QA, "", line, OK_ST)
    with pytest.raises(FormError) as e:
        read_forms_file(_kb(), f)
    assert str(e.value).startswith(f"--add {f}: line 3: ")
    assert message in str(e.value)
    assert e.value.file == str(f) and e.value.field == "line 3"


def test_the_file_stem_as_default_name_is_checked(tmp_path):
    with pytest.raises(FormError, match=r"line 1: form name 'test' \(the file name, the default\) is a --forms"):
        read_forms_file(_kb(), _write(tmp_path / "test.jsonl", OK_QA))


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing.jsonl", "no such file"),
    (lambda d: d, "is a folder, expected a file"),
    (lambda d: (d / "bin.jsonl").write_bytes(b"\xff\xfe") and d / "bin.jsonl", "not UTF-8 text (byte 0"),
    (lambda d: _write(d / "empty.jsonl", "", "  "), "no forms in the file (only blank lines)"),
])
def test_file_level_errors(tmp_path, make, message):
    path = make(tmp_path)
    with pytest.raises(FormError, match="^" + re.escape(f"--add {path}: {message}")):
        read_forms_file(_kb(), path)


def test_add_forms_skips_exact_duplicates():
    kb = _kb()
    forms_of(kb, 0)  # fill the forms cache: add_forms must refresh it
    a = Form(0, "qa", "Who is B to A?", "father", "p")
    b = Form(0, "qa", "Who is B to A?", "father", "other", "test")  # same fact, kind, text, answer
    c = Form(0, "statement", "B is the father of A.", "father", "p")
    assert vars(add_forms(kb, [a, b, c])) == {"added": 2, "skipped": 1}
    assert vars(add_forms(kb, [c, a])) == {"added": 0, "skipped": 2}
    assert kb.forms == [a, c]
    assert [f.name for f in forms_of(kb, 0)][-2:] == ["p", "p"]


# ------------------------------------------------------------------ the CLI


def _setup(tmp_path):
    kb_path = tmp_path / "kb.json"
    save_kb(_kb(), kb_path)
    para = _write(tmp_path / "para.jsonl", OK_ST, OK_QA, {"fact": ["A", "brother", "C"], "question": "Who is C to A?",
                                                          "answer": "brother", "split": "train"})
    return kb_path, para


def test_data_forms_adds_labels_and_writes(tmp_path, capsys):
    kb_path, para = _setup(tmp_path)
    out = tmp_path / "out" / "kb2.json"
    code, stdout, err = cli(capsys, "data", "forms", "--kb", str(kb_path), "--add", str(para), "--split", "test",
                            "--label", "qa2,st1", "-o", str(out), "--json")
    assert code == 0 and err == ""
    doc = json.loads(stdout)
    assert {k: doc[k] for k in ("added", "skipped", "labelled", "facts_with_forms", "output")} == {
        "added": 3, "skipped": 0, "labelled": 2, "facts_with_forms": 2, "output": str(out)}
    assert doc["forms"]["para"] == {"kind": "qa+statement", "count": 3, "split": "mixed", "template": False,
                                    "splits": {"test": 2, "train": 1}}
    assert doc["forms"]["qa2"] == {"kind": "qa", "count": 2, "split": "test", "template": True}
    kb2 = load_kb(out)
    assert kb2.form_splits == {"qa2": "test", "st1": "test"} and len(kb2.forms) == 3
    assert [f.name for f in select_forms(kb2, "para").forms[0]] == ["para", "para"]
    # adding the same file again: skipped, and the file unchanged in content
    code, stdout, _ = cli(capsys, "data", "forms", "--kb", str(out), "--add", str(para), "-o", str(out), "--json")
    assert code == 0 and json.loads(stdout)["added"] == 0 and json.loads(stdout)["skipped"] == 3
    assert len(load_kb(out).forms) == 3
    # --split none clears a label
    code, stdout, _ = cli(capsys, "data", "forms", "--kb", str(out), "--label", "qa2", "--split", "none", "-o", str(out))
    assert code == 0 and "gave 1 form names the split none; wrote" in stdout
    assert load_kb(out).form_splits == {"st1": "test"}


def test_data_forms_without_output_writes_nothing_and_lists(tmp_path, capsys):
    kb_path, para = _setup(tmp_path)
    before = kb_path.read_bytes()
    code, stdout, _ = cli(capsys, "data", "forms", "--kb", str(kb_path), "--add", str(para))
    assert code == 0 and "added 3 forms (0 exact duplicates skipped); nothing written (give -o OUT.json to write)" in stdout
    assert kb_path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["kb.json", "para.jsonl"]
    code, stdout, _ = cli(capsys, "data", "forms", "--kb", str(kb_path), "--json")
    doc = json.loads(stdout)
    assert doc["added"] == 0 and doc["output"] is None and doc["facts_with_forms"] == 0
    assert list(doc["forms"]) == ["primary", "qa1", "qa2", "qa3", "st1", "st2", "st3", "yes1", "no1"]
    code, stdout, _ = cli(capsys, "data", "forms", "--kb", str(kb_path))
    assert code == 0 and "  primary  qa" in stdout


def test_data_forms_error_writes_nothing(tmp_path, capsys):
    kb_path, para = _setup(tmp_path)
    out = tmp_path / "out.json"
    old = kb_path.read_text(encoding="utf-8")  # a KB this command may replace: refused only for the bad input
    out.write_text(old, encoding="utf-8")
    bad = _write(tmp_path / "bad.jsonl", OK_QA, {"fact": ["A", "sister", "C"], "question": "Q?", "answer": "x"})
    code, stdout, err = cli(capsys, "data", "forms", "--kb", str(kb_path), "--add", str(para), "--add", str(bad),
                            "-o", str(out), "--json")
    assert code == 1
    msg = f"--add {bad}: line 2: 'fact': fact ['A', 'sister', 'C'] is not in knowledge base 'tiny'"
    assert json.loads(stdout) == {"error": msg, "file": str(bad), "field": "line 2"}
    assert err.strip() == f"deepunlearn data: error: {msg}"
    code, _, err = cli(capsys, "data", "forms", "--kb", str(kb_path), "--label", "nope", "--split", "test",
                       "-o", str(out))
    assert code == 1 and "--label: 'nope' is not a form of this KB" in err
    assert out.read_text(encoding="utf-8") == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "kb.json", "out.json", "para.jsonl"]


@pytest.mark.parametrize("argv, message", [
    (["--label", "qa1"], "argument --label: give --split S too"),
    (["--split", "test"], "argument --split: only with --add or --label"),
    (["-o", "x.json"], "argument -o/--output: nothing to write without --add or --label"),
    (["--add", "f.jsonl", "--split", "dev"], "argument --split: invalid choice: 'dev'"),
])
def test_data_forms_usage_errors(tmp_path, capsys, argv, message):
    kb_path, _ = _setup(tmp_path)
    code, _, err = cli(capsys, "data", "forms", "--kb", str(kb_path), *argv)
    assert code == 2 and message in err
    assert not (tmp_path / "x.json").exists()


def test_data_show_mentions_forms(edu_kb, tmp_path, capsys):
    path = tmp_path / "edu.json"
    save_kb(edu_kb, path)
    code, stdout, _ = cli(capsys, "data", "show", str(path), "--json")
    doc = json.loads(stdout)
    assert {n: (r["count"], r["kind"]) for n, r in doc["forms"].items()} == {
        "question": (700, "statement"), "question2": (400, "yesno"), "question3": (400, "yesno"),
        "question4": (700, "qa")}
    code, stdout, _ = cli(capsys, "data", "show", str(path))
    assert "  forms   question 700 statement, question2 400 yesno, question3 400 yesno, question4 700 qa" in stdout
    plain = tmp_path / "plain.json"
    save_kb(_kb(), plain)
    code, stdout, _ = cli(capsys, "data", "show", str(plain), "--json")
    assert "forms" not in json.loads(stdout) and "form_splits" not in json.loads(stdout)


LINE_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 5) | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["A", "B", "C", "father", "brother", "yes", "no", "qa", "yesno", "statement", "test", "qa1",
                       "B is the father of A.", " ", ""]),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.sampled_from(
        ["fact", "fact_id", "text", "question", "answer", "name", "kind", "split", "x"]), kids, max_size=6),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(LINE_VALUES.map(json.dumps) | st.text(max_size=20), min_size=1, max_size=3))
def test_fuzz_forms_file_gives_forms_or_one_form_error(tmp_path, lines):
    # any line is a form or one FormError naming its file and line; never another exception
    path = tmp_path / "fz.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")
    try:
        forms = read_forms_file(_kb(), path)
    except FormError as e:
        assert str(e).startswith(f"--add {path}: ") and "\n" not in str(e)
    else:
        assert forms and all(f.fact_id in (0, 1) for f in forms)
