"""Domain folders: the domain.toml schema, the loader, the family domain
folder, entry-point domains and ``data domains``."""

from __future__ import annotations

import importlib.metadata
import json
import textwrap
from pathlib import Path

import pytest

from deepunlearn.cli import main
from deepunlearn.kg.domain import DomainError, list_domains, load_domain
from deepunlearn.kg.forms import BIOGRAPHY_TEMPLATES, FAMILY_TEMPLATES
from deepunlearn.kg.kb import (BIOGRAPHY_ATTRIBUTES, DEFAULT_BIOGRAPHY_TEMPLATE, DEFAULT_FAMILY_TEMPLATE,
                               FAMILY_RELATIONS)

ACADEMIA = '''\
name = "academia"
description = "doctoral advisors, affiliations and where they are"

[entities.person]              # the first type is the one --people counts
count = 60
names = "person"
[entities.city]
values = ["Lyon", "Oslo", "Quito"]

[attributes.gender]
of = "person"
values = ["female", "male"]

[relations.advisor]
subject = "person"
object = "person"
group = "academic"
shape = "tree"
branching = 3
questions = ["Who was {o1}'s doctoral advisor?", "Who advised {o1}'s doctorate?"]
statements = ["{o1}'s doctoral advisor was {o2}.", "The doctorate of {o1} was advised by {o2}."]
answer = "{o2}"

[relations.city]
subject = "person"
object = "city"
group = "place"
shape = "one"
questions = ["In which city does {o1} work?"]
statements = ["{o1} works in {o2}."]
answer = "{o2}"

[relations.grand_advisor]
subject = "person"
object = "person"
group = "academic"
questions = ["Who advised the advisor of {o1}?"]
answer = "{o2}"
'''
# The example also has the statement "{o2} advised the doctorate of {o1}.": a statement
# whose answer only opens it leaves nothing to ask with (kg/forms.py), so the loader refuses it.
RULES = "% academic lineage\ngrand_advisor(X, Z) :- advisor(X, Y), advisor(Y, Z).\n"


def write_domain(root: Path, toml: str = ACADEMIA, rules: str | None = RULES) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "domain.toml").write_text(toml, encoding="utf-8")
    if rules is not None:
        (root / "rules.dl").write_text(rules, encoding="utf-8")
    return root


def _texts(templates, kind):
    return [t.text for t in templates if t.kind == kind]


def test_family_domain_matches_the_kb_templates():
    d = load_domain("family")
    assert d.name == "family" and d.people_type == "person" and list(d.attributes) == ["gender"]
    assert list(d.relations) == list(FAMILY_RELATIONS) + list(BIOGRAPHY_ATTRIBUTES)
    assert d.groups() == ["family", "biography"]
    for r in FAMILY_RELATIONS:
        rel = d.relations[r]
        assert (rel.subject, rel.object, rel.group, rel.shape, rel.answer) == ("person", "person", "family", None, "{r}")
        assert rel.questions == [DEFAULT_FAMILY_TEMPLATE[0]] + _texts(FAMILY_TEMPLATES, "qa")
        assert rel.statements == _texts(FAMILY_TEMPLATES, "statement")
    for r in BIOGRAPHY_ATTRIBUTES:
        rel = d.relations[r]
        assert (rel.object, rel.group, rel.answer) == ("value", "biography", DEFAULT_BIOGRAPHY_TEMPLATE[1])
        assert rel.questions == [DEFAULT_BIOGRAPHY_TEMPLATE[0]] + _texts(BIOGRAPHY_TEMPLATES[r], "qa")
        assert rel.statements == _texts(BIOGRAPHY_TEMPLATES[r], "statement")
    assert d.rule_count() == 48


def test_family_rules_come_from_the_domain_folder():
    from deepunlearn.rules import BUILTIN, load_rules

    rs = load_rules("family")
    assert BUILTIN == ("edu-relat", "family", "geo", "org", "regions")
    assert (rs.name, len(rs), rs.source) == ("family", 48, "family.dl")
    assert rs.description.startswith("The corrected EDU-RELAT rules")
    assert load_domain("family").rules_text() == (Path(load_domain("family").folder) / "rules.dl").read_text()
    assert len(load_rules("edu-relat")) == 48


def test_a_domain_folder_loads_by_path(tmp_path):
    folder = write_domain(tmp_path / "academia")
    for ref in (str(folder), folder, str(folder / "domain.toml")):
        d = load_domain(ref)
        assert d.folder == folder and d.name == "academia"
    assert list(d.entities) == ["person", "city"] and d.entities["city"].values == ["Lyon", "Oslo", "Quito"]
    assert d.relations["advisor"].shape == "tree" and d.relations["advisor"].branching == 3
    assert d.relations["grand_advisor"].shape is None and d.relations["grand_advisor"].statements == []
    assert d.groups() == ["academic", "place"] and d.rule_count() == 1 and d.rules_path == folder / "rules.dl"


def _edit(old: str, new: str) -> str:
    assert old in ACADEMIA
    return ACADEMIA.replace(old, new, 1)


@pytest.mark.parametrize("toml, key, problem", [
    (_edit('shape = "tree"', 'shape = "web"'), "relations.advisor.shape",
     "expected one of one, tree, pairs, some, got 'web'"),
    (_edit('object = "city"', 'object = "town"'), "relations.city.object",
     "'town' is not a declared entity type (person, city) or 'value'"),
    (_edit('subject = "person"\nobject = "city"', 'subject = "people"\nobject = "city"'), "relations.city.subject",
     "'people' is not a declared entity type (person, city)"),
    (_edit('of = "person"', 'of = "human"'), "attributes.gender.of",
     "'human' is not a declared entity type (person, city)"),
    (_edit('shape = "one"', 'shape = "one"\nbranching = 2'), "relations.city.branching",
     "only with shape tree or some, got shape 'one'"),
    (_edit('questions = ["In which city does {o1} work?"]', 'questions = []'), "relations.city.questions",
     "list should have at least 1 item after validation, not 0, got []"),
    (_edit('names = "person"', 'names = "robot"'), "entities.person.names",
     "expected a built-in name generator (person, city, country, word) or a non-empty list of names, got 'robot'"),
    (_edit('group = "place"', 'group = "place"\ncolour = "red"'), "relations.city.colour", "unknown key"),
    (_edit('statements = ["{o1} works in {o2}."]', 'statements = ["{o2} is where {o1} works."]'),
     "relations.city.statements.0",
     "'{o2} is where {o1} works.': needs the answer {o2} after the start (the text before it is the probe)"
     "; reword it so that it opens with something else, e.g. 'The ... of {o1} is {o2}.'"),
    (_edit('"{o1}\'s doctoral advisor was {o2}."', '"{o2} advised the doctorate of {o1}."'),
     "relations.advisor.statements.0",
     "'{o2} advised the doctorate of {o1}.': needs the answer {o2} after the start (the text before it is the probe)"
     "; reword it so that it opens with something else, e.g. 'The ... of {o1} is {o2}.'"),
    (_edit('"{o1}\'s doctoral advisor was {o2}."', '"{o1} had a doctoral advisor."'),
     "relations.advisor.statements.0",
     "'{o1} had a doctoral advisor.': needs the answer {o2} after the start (the text before it is the probe); "
     "it has no {o2}"),
    (_edit('"In which city does {o1} work?"', '"In which city does {o1:>99} work?"'), "relations.city.questions.0",
     "'In which city does {o1:>99} work?': placeholder {o1:>99} has a format spec ('>99')"),
    (_edit('answer = "{o2}"\n\n[relations.grand', 'answer = "{o1}"\n\n[relations.grand'), "relations.city.answer",
     "expected one of {o2}, {r}, got '{o1}'"),
    (_edit('values = ["Lyon", "Oslo", "Quito"]', 'count = 3\nvalues = ["Lyon", "Oslo", "Quito"]'), "entities.city",
     "give either count (with names) or values"),
])
def test_schema_errors_name_the_file_and_key(tmp_path, toml, key, problem):
    folder = write_domain(tmp_path / "d", toml)
    with pytest.raises(DomainError) as e:
        load_domain(folder)
    assert str(e.value) == f"{folder / 'domain.toml'}: {key}: {problem}"
    assert e.value.field == key


def test_toml_syntax_error_names_the_line(tmp_path):
    folder = write_domain(tmp_path / "d", ACADEMIA.replace('count = 60', 'count = = 60'))
    with pytest.raises(DomainError) as e:
        load_domain(folder)
    assert str(e.value) == f"{folder / 'domain.toml'}: TOML syntax error: Invalid value (at line 5, column 9)"


def test_deep_nesting_is_a_domain_error_not_a_crash(tmp_path, capsys):
    folder = write_domain(tmp_path / "d", ACADEMIA + "x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    assert main(["data", "domains"]) == 0  # unaffected
    capsys.readouterr()
    with pytest.raises(DomainError) as e:
        load_domain(folder)
    assert str(e.value) == f"{folder / 'domain.toml'}: nested too deeply to read"


def test_missing_files_and_unknown_names(tmp_path):
    folder = write_domain(tmp_path / "d", rules=None)
    with pytest.raises(DomainError, match=r"^.*/d/rules\.dl: no such file \(a domain folder holds its rules in "
                                          r"rules\.dl\)$"):
        load_domain(folder)
    with pytest.raises(DomainError, match=r"/nowhere: domain folder not found"):
        load_domain(str(tmp_path / "nowhere"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DomainError, match=r"/empty/domain\.toml: no such file$"):
        load_domain(tmp_path / "empty")
    with pytest.raises(DomainError, match=r"^unknown domain 'acadmia': expected one of family, geo, org, regions or a path "
                                          r"to a domain folder$"):
        load_domain("acadmia")


def _fake_entry_points(monkeypatch, *eps):
    real = importlib.metadata.entry_points

    def entry_points(**kw):
        if kw.get("group") == "deepunlearn.domains":
            return list(eps)
        return real(**kw)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)


def test_entry_point_domains_are_found(tmp_path, monkeypatch):
    pkg = tmp_path / "site" / "acme_domains"
    write_domain(pkg / "academia")
    (pkg / "__init__.py").write_text(f"DOMAIN_DIR = {str(pkg / 'academia')!r}\n")
    (pkg / "academia" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    EP = importlib.metadata.EntryPoint
    _fake_entry_points(monkeypatch,
                       EP("academia", "acme_domains.academia", "deepunlearn.domains"),  # a package folder
                       EP("acme", "acme_domains", "deepunlearn.domains"),  # a module's DOMAIN_DIR
                       EP("family", "acme_domains", "deepunlearn.domains"),  # the built-in name wins
                       EP("broken", "acme_domains.nope", "deepunlearn.domains"))
    assert list_domains() == ["family", "geo", "org", "regions", "academia", "acme", "broken"]
    assert load_domain("academia").folder == pkg / "academia"
    assert load_domain("acme").folder == pkg / "academia"
    assert load_domain("family").name == "family"
    with pytest.raises(DomainError, match=r"^domain 'broken' \(entry point 'acme_domains.nope' in group "
                                          r"deepunlearn.domains\): cannot load it \(ModuleNotFoundError: "):
        load_domain("broken")


def test_data_domains_json(capsys):
    assert main(["data", "domains", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    fam, geo, org, regions = out["domains"]
    assert (regions["name"], regions["groups"], regions["rules"]) == ("regions", ["countries", "hierarchy"], 4)
    assert (org["name"], org["groups"], org["rules"]) == ("org", ["reporting", "work", "location"], 11)
    assert (geo["name"], geo["groups"], geo["rules"]) == ("geo", ["capitals", "cities", "countries"], 8)
    assert set(fam) == {"name", "description", "folder", "relations", "groups", "rules"}
    assert fam["name"] == "family" and fam["groups"] == ["family", "biography"] and fam["rules"] == 48
    assert fam["relations"] == list(FAMILY_RELATIONS) + list(BIOGRAPHY_ATTRIBUTES)
    assert Path(fam["folder"], "rules.dl").is_file()
    assert main(["data", "domains"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("family   14 relations (family, biography), 48 rules  families over generations")
    assert lines[3].startswith("regions  3 relations (countries, hierarchy), 4 rules  real countries and their")


def test_data_domains_names_a_broken_plugin(tmp_path, monkeypatch, capsys):
    write_domain(tmp_path / "bad", ACADEMIA.replace('shape = "tree"', 'shape = "web"'))
    _fake_entry_points(monkeypatch, importlib.metadata.EntryPoint("bad", "x:y", "deepunlearn.domains"))
    monkeypatch.setattr(importlib.metadata.EntryPoint, "load", lambda self: str(tmp_path / "bad"))
    assert main(["data", "domains", "--json"]) == 1
    captured = capsys.readouterr()
    err = json.loads(captured.out)
    assert err == {"error": f"{tmp_path / 'bad' / 'domain.toml'}: relations.advisor.shape: expected one of one, "
                            "tree, pairs, some, got 'web'",
                   "file": str(tmp_path / "bad" / "domain.toml"), "field": "relations.advisor.shape"}
