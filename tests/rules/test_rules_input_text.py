"""Text a user hands in that reads as something it is not: a byte-order mark at the start of a
triples file or a domain.toml, invisible or line-splitting characters in names, rule constants
no name could be, a fact relating an entity to itself, an unclosed CSV quote. Each is read as
meant or refused in one line naming the file and the line."""

from __future__ import annotations

import json
import shutil
from importlib import resources

import pytest

from deepunlearn.cli import main

BOM = "\ufeff"


def _import(tmp_path, name: str, text: str, capsys) -> tuple[int, dict, str]:
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    rc = main(["data", "import-triples", "--domain", "family", str(f), "-o", str(tmp_path / "kb.json"), "--json"])
    out = capsys.readouterr()
    return rc, (json.loads(out.out) if out.out.strip() else {}), out.err


def test_a_bom_before_a_headerless_tsv_is_no_part_of_the_first_name(tmp_path, capsys):
    rc, _, err = _import(tmp_path, "t.tsv", BOM + "Ann\twife\tBob\nBob\thusband\tAnn\n", capsys)
    assert rc == 0, err
    kb = json.loads((tmp_path / "kb.json").read_text())
    assert set(kb["entities"]) == {"Ann", "Bob"}


def test_a_bom_before_a_csv_header_is_read_as_the_header(tmp_path, capsys):
    rc, _, err = _import(tmp_path, "t.csv", BOM + "subject,relation,object\nAnn,wife,Bob\nBob,husband,Ann\n", capsys)
    assert rc == 0, err
    assert set(json.loads((tmp_path / "kb.json").read_text())["entities"]) == {"Ann", "Bob"}


def test_a_bom_before_a_domain_toml_is_read(tmp_path):
    from deepunlearn.kg.domain import read_domain

    d = tmp_path / "dom"
    shutil.copytree(str(resources.files("deepunlearn.kg") / "domains" / "org"), d)
    toml = d / "domain.toml"
    toml.write_text(BOM + toml.read_text(encoding="utf-8"), encoding="utf-8")
    assert read_domain(d).name == "org"


@pytest.mark.parametrize("ch,says", [
    ("\u200e", "bidi control (U+200E)"), ("\u200f", "bidi control (U+200F)"), ("\u061c", "bidi control (U+061C)"),
    ("\ufeff", "invisible character (U+FEFF)"), ("\u200b", "invisible character (U+200B)"),
    ("\u2028", "line or paragraph separator (U+2028)"),
])
def test_invisible_and_line_splitting_characters_are_refused_in_names(tmp_path, capsys, ch, says):
    rc, obj, err = _import(tmp_path, "t.jsonl", json.dumps({"subject": f"An{ch}n", "relation": "wife",
                                                            "object": "Bob"}) + "\n", capsys)
    assert rc == 1 and says in err and "t.jsonl:1" in err
    assert not (tmp_path / "kb.json").exists()


def test_a_zero_width_joiner_of_a_script_stays_allowed():
    from deepunlearn.kg.names import name_problem

    assert name_problem("\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645") is None  # Persian, with ZWNJ


def test_a_fact_relating_an_entity_to_itself_is_refused(tmp_path, capsys):
    rc, _, err = _import(tmp_path, "t.tsv", "Ann\twife\tAnn\nAnn\twife\tBob\nBob\thusband\tAnn\n", capsys)
    assert rc == 1 and "t.tsv:1:" in err and '"Ann" wife itself' in err


def test_an_unclosed_csv_quote_is_named_as_such(tmp_path, capsys):
    rc, _, err = _import(tmp_path, "t.csv", 'subject,relation,object\nAnn,wife,Bob\n"Bob,husband,Ann\nCy,wife,Di\n',
                         capsys)
    assert rc == 1 and "t.csv:3:" in err and "never closed" in err and "column" not in err


@pytest.mark.parametrize("const,says", [
    ('"a\x00b"', "control character (U+0000)"), ('"A|B"', "holds '|'"),
    ('"' + "a" * 5000 + '"', "5000 characters long"),
], ids=["nul", "pipe", "long"])
def test_a_rule_constant_no_name_could_be_is_refused(const, says):
    from deepunlearn.rules import parse_datalog
    from deepunlearn.rules.errors import RuleSyntaxError

    with pytest.raises(RuleSyntaxError) as e:
        parse_datalog(f"wife(X, {const}) :- husband(X, Y).", source="r.dl")
    assert "r.dl:1:9:" in str(e.value) and says in str(e.value) and len(str(e.value)) < 300


def test_a_rule_head_naming_an_unknown_entity_does_not_reach_closure_output(tmp_path, capsys):
    from deepunlearn import generate_family
    from deepunlearn.kg.io import save_kb

    kb = save_kb(generate_family(6, seed=1), tmp_path / "kb.json")
    (tmp_path / "r.dl").write_text('wife(X, "Nobody") :- husband(X, Y).\n')
    rc = main(["rules", "closure", "--kb", str(kb), "--rules", str(tmp_path / "r.dl"), "-o", str(tmp_path / "c.json")])
    err = capsys.readouterr().err
    assert rc == 1 and "r.dl:1:" in err and "'Nobody', which is no entity of the KB" in err
    assert not (tmp_path / "c.json").exists()


def test_a_head_constant_of_a_new_value_relation_stays_allowed():
    from deepunlearn.kg.kb import KnowledgeBase
    from deepunlearn.rules import closure, parse_datalog

    kb = KnowledgeBase.build({"a": {"kind": "x"}}, [("a", "born", "Ohio")])
    c = closure(kb, parse_datalog('ohioan(X, "yes") :- born(X, "Ohio").'))
    assert set(c.derived) == {("a", "ohioan", "yes")}


def test_a_kb_file_with_a_line_separator_in_a_name_is_refused(tmp_path):
    from deepunlearn import generate_family
    from deepunlearn.kg.kb import KBError
    from deepunlearn.kg.io import load_kb, save_kb

    f = save_kb(generate_family(4, seed=1), tmp_path / "kb.json")
    doc = json.loads(f.read_text())
    name = next(iter(doc["entities"]))
    f.write_text(f.read_text().replace(json.dumps(name), json.dumps(name[:2] + "\u2028" + name[2:])))
    with pytest.raises(KBError, match="line or paragraph separator"):
        load_kb(f)


def test_a_bom_before_a_manifest_header_is_read_as_the_header(tmp_path):
    from deepunlearn.unlearn.evaluate_manifest import read_manifest

    m = tmp_path / "m.csv"
    m.write_text(BOM + "checkpoint,target\nck,4\n", encoding="utf-8")
    assert [(r["checkpoint"], r["target"]) for r in read_manifest(m)] == [("ck", "4")]
