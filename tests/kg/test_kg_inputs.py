"""The KB layer and the ``data`` commands on bad input: plain templates, strict KB files, safe
reading, real output paths, atomic writes, strict numeric flags (in-process CLI runs)."""

from __future__ import annotations

import json

import pytest

from deepunlearn.kg import KBError, KBFileError, KnowledgeBase, Relation, load_kb, save_kb, to_dict
from kg_helpers import cli, small_kb

BIG = "Who is {o2:>300000000} to {o1}?"


@pytest.fixture
def kb_file(tmp_path):
    return save_kb(small_kb(), tmp_path / "kb.json")


def write_doc(tmp_path, mutate) -> str:
    doc = to_dict(small_kb())
    mutate(doc)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    return str(p)


# ----------------------------------------------------------------------------------- templates
@pytest.mark.parametrize("template, problem", [
    (BIG, "placeholder {o2:>300000000} has a format spec ('>300000000')"),
    ("Who is {o2!r} to {o1}?", "placeholder {o2!r} has a conversion ('!r')"),
    ("{o1.__class__}", "placeholder {o1.__class__} is not a template field"),
    ("{o1[0]}", "placeholder {o1[0]} is not a template field"),
    ("Who is {} to {o1}?", "placeholder {} is not a template field"),
    ("Who is {o3}?", "placeholder {o3} is not a template field"),
    ("Who is {o2 to {o1}?", "not a valid template"),
])
@pytest.mark.parametrize("version, key", [(2, "questions"), (2, "statements"), (1, "question")])
def test_templates_are_plain_fields_only(tmp_path, capsys, template, problem, version, key):
    def mutate(d):
        rel = d["relations"]["husband"]
        if version == 1:  # a version-1 file: one question, kind family|biography
            d["version"] = 1
            for r in d["relations"].values():
                r["kind"] = {"entity": "family", "value": "biography"}[r["kind"]]
                r["question"] = r.pop("questions")[0]
                del r["group"], r["statements"]
            rel = d["relations"]["husband"]
        rel[key] = template if key == "question" else [template]

    path = write_doc(tmp_path, mutate)
    with pytest.raises(KBFileError) as e:
        load_kb(path)
    assert str(e.value).startswith(f"{path}: not a valid deepunlearn KB: field relations.husband.{key}: "
                                   f"template {template!r}: {problem}")
    assert e.value.file == path and e.value.field == f"relations.husband.{key}"
    # the Python API refuses it too, naming the relation
    with pytest.raises(KBError, match=r"relation 'husband': answer template .*" + problem[:20].replace("(", r"\(")
                       .replace("{", r"\{").replace("[", r"\[").replace("$", "")):
        Relation("husband", "family", "Who is {o2} to {o1}?", template)
    # and `data export` (which wrote 2.1 GB) fails cleanly without writing anything
    out = tmp_path / "probes.jsonl"
    code, stdout, err = cli(capsys, "data", "export", path, "-o", str(out), "--json")
    assert code == 1 and not out.exists() and "Traceback" not in err
    assert json.loads(stdout)["field"] == f"relations.husband.{key}"
    assert err.count("\n") == 1 and f"relations.husband.{key}" in err and path in err


def test_plain_templates_and_escaped_braces_still_work():
    rel = Relation("husband", "family", "Who is {o2} to {o1}? {{sic}}", "{r}")
    kb = KnowledgeBase.build({"A": {}, "B": {}}, [("A", "husband", "B")], relations={"husband": rel})
    assert kb.probe(0).question == "Who is B to A? {sic}"


def test_build_refuses_a_relation_with_a_format_spec():
    with pytest.raises(KBError, match=r"relation 'child': question template 'Who is \{o2:>300000000\} to \{o1\}\?'"):
        KnowledgeBase.build({"A": {}, "B": {}}, [("A", "child", "B")],
                            relations={"child": Relation("child", "family", BIG, "{r}")})


# ----------------------------------------------------------------------------------- strict KB files
@pytest.mark.parametrize("targets, index, shown", [([0, 2, True], 2, "true"), (["4"], 0, '"4"'), ([4.0], 0, "4.0")])
def test_targets_must_be_json_integers(tmp_path, targets, index, shown):
    path = write_doc(tmp_path, lambda d: d.update(targets=targets))
    with pytest.raises(KBFileError) as e:
        load_kb(path)
    assert str(e.value) == (f"{path}: not a valid deepunlearn KB: field targets.{index}: expected a JSON integer "
                            f"(no quotes, no decimal point, not true/false), found {shown}")
    assert e.value.field == f"targets.{index}"


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d.update(version=True), "version"),
    (lambda d: d.update(probes={"1.0": ["q", "a"]}), "probes.1.0.[key]"),
])
def test_other_integer_fields_are_strict(tmp_path, mutate, field):
    path = write_doc(tmp_path, mutate)
    with pytest.raises(KBFileError) as e:
        load_kb(path)
    assert f"field {field}: " in str(e.value) and e.value.field == field


def test_build_refuses_a_bool_target():
    with pytest.raises(KBError, match=r"targets\[0\]: expected a fact index \(an integer\), found True"):
        KnowledgeBase.build({"A": {}, "B": {}}, [("A", "child", "B")], targets=[True])


@pytest.mark.parametrize("content, message", [
    (b"[" * 5000 + b"]" * 5000, "JSON nested deeper than 64 levels"),
    (b'{"name": "\xff\xfe"}', "not UTF-8 text (byte 10: b'\\xff')"),
    (b'{"name": NaN}', "not valid JSON (NaN is not JSON)"),
], ids=["nested", "non-utf8", "nan"])
def test_unreadable_kb_files_are_one_clean_error(tmp_path, capsys, content, message):
    p = tmp_path / "kb.json"
    p.write_bytes(content)
    with pytest.raises(KBFileError, match=message.replace("(", r"\(").replace(")", r"\)").replace("\\x", "\\\\x")):
        load_kb(p)
    code, out, err = cli(capsys, "data", "show", str(p), "--json")
    assert code == 1 and err == f"deepunlearn data: error: {p}: {message}\n"
    assert json.loads(out) == {"error": f"{p}: {message}", "file": str(p), "field": None}


# ----------------------------------------------------------------------------------- data show
def test_show_json_lists_target_ids(kb_file, capsys):
    code, out, _ = cli(capsys, "data", "show", str(kb_file), "--json")
    d = json.loads(out)
    assert code == 0 and d["target_ids"] == [0, 2]
    assert d["targets"] == [["Ann", "husband", "Bob"], ["Ann", "child", "Cy"]]


# ----------------------------------------------------------------------------------- draw / export
def test_draw_reports_the_path_it_wrote(kb_file, tmp_path, capsys):
    target = tmp_path / "new" / "fig"
    code, out, _ = cli(capsys, "data", "draw", str(kb_file), "-o", str(target), "--json")
    assert code == 0 and json.loads(out)["output"] == f"{target}.png"
    assert (tmp_path / "new" / "fig.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and not target.exists()
    code, out, _ = cli(capsys, "data", "draw", str(kb_file), "-o", str(tmp_path / "fig.svg"), "--json")
    assert code == 0 and b"<svg" in (tmp_path / "fig.svg").read_bytes()[:500]


def test_draw_refuses_an_unknown_suffix_or_a_folder(kb_file, tmp_path, capsys):
    code, out, err = cli(capsys, "data", "draw", str(kb_file), "-o", str(tmp_path / "fig.txt"), "--json")
    assert code == 1 and not (tmp_path / "fig.txt").exists()
    assert err.startswith(f"deepunlearn data: error: -o {tmp_path / 'fig.txt'}: cannot draw a figure as '.txt'; "
                          "use one of ") and ".png" in err and ".svg" in err and err.count("\n") == 1
    assert json.loads(out)["field"] == "-o"
    code, _, err = cli(capsys, "data", "draw", str(kb_file), "-o", str(tmp_path))
    assert code == 1 and f"-o {tmp_path}: is a folder" in err
    assert not tmp_path.with_name(tmp_path.name + ".png").exists()


@pytest.mark.parametrize("name", ["sub/dir/kb.graphml", "sub/dir/probes.jsonl"])
def test_export_creates_folders_and_replaces_atomically(kb_file, tmp_path, capsys, name):
    out = tmp_path / name
    code, stdout, _ = cli(capsys, "data", "export", str(kb_file), "-o", str(out), "--json")
    assert code == 0 and out.exists() and json.loads(stdout)["output"] == str(out)
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # no temporary sibling left


def test_generate_writes_into_a_missing_folder(tmp_path, capsys):
    out = tmp_path / "a" / "b" / "fam.json"
    code, _, _ = cli(capsys, "data", "generate", "--people", "6", "-o", str(out), "--json")
    assert code == 0 and load_kb(out).entities


# ----------------------------------------------------------------------------------- flags
@pytest.mark.parametrize("argv, message", [
    (["generate", "--people", "0"], "argument --people: expected an integer >= 2, got '0'"),
    (["generate", "--people", "1"], "argument --people: expected an integer >= 2, got '1'"),
    (["generate", "--seed", "-1"], "argument --seed: expected an integer seed from 0 to 9223372036854775807, got '-1'"),
    (["generate", "--targets-per-relation", "-2"], "argument --targets-per-relation: expected an integer >= 0"),
    (["generate", "--stored-share", "nan"], "argument --stored-share: expected a number in (0, 1], got 'nan'"),
    (["draw", "KB", "--radius", "-1"], "argument --radius: expected an integer >= 0, got '-1'"),
])
def test_bad_numbers_are_usage_errors(kb_file, tmp_path, capsys, argv, message):
    argv = [str(kb_file) if a == "KB" else a for a in argv]
    code, _, err = cli(capsys, "data", *argv, "-o", str(tmp_path / "x.json"))
    assert code == 2 and message in err and not (tmp_path / "x.json").exists()


def _subparser(*path: str):
    from deepunlearn.cli import build_parser

    p = build_parser()
    for name in path:
        p = next(a for a in p._actions if a.__class__.__name__ == "_SubParsersAction").choices[name]
    return p


def test_every_data_flag_has_help():
    for action in ("generate", "import-edu-relat", "show", "export", "draw"):
        sub = _subparser("data", action)
        missing = [a.option_strings or a.dest for a in sub._actions if not a.help]
        assert missing == [], f"data {action}: flags without help {missing}"
    helps = {a.dest: a.help for a in _subparser("data", "generate")._actions}
    assert "random seed" in helps["seed"] and "targets drawn per family relation" in helps["targets_per_relation"]


# ----------------------------------------------------------------------------------- newphe, once
def test_import_says_the_newphe_quirk_once_and_records_it(edu_dir, tmp_path, capsys):
    out = tmp_path / "edu.json"
    code, stdout, err = cli(capsys, "data", "import-edu-relat", str(edu_dir), "-o", str(out), "--json")
    notes = json.loads(stdout)["notes"]
    assert code == 0 and len(notes) == 1 and "'newphe'" in notes[0] and "rules 16 and 19" in notes[0]
    assert err == f"note: {notes[0]}\n"
    assert set(load_kb(out).metadata["acknowledged_relations"]) == {"newphe"}


def test_gitignore_covers_what_the_demo_and_readme_write():
    from pathlib import Path

    lines = set((Path(__file__).resolve().parents[2] / ".gitignore").read_text().splitlines())
    for entry in ("/deepunlearn-demo/", "/tiny-edu/", "/results/", "/family.json", "/fig.png", "/known.json",
                  "/edu.json", "/family.png", "/family.graphml"):
        assert entry in lines, entry
