"""``data check-domain`` (and ``data generate --domain``): a domain folder with one mistake gets
exactly its one warning, naming domain.toml, the relation or entity type and the fix; the
built-in domains get none. ``data holdout`` on a domain whose names are single words draws fresh
ones, and says what to do (``data never-true``) when the pool is spent. Messages name the
domain's own entity type."""

from __future__ import annotations

import json

import pytest

from deepunlearn.cli import main

RULES = """% rule set: pkgs
maintained(Y, X) :- maintainer(X, Y).
ancestor(X, Y) :- parent(X, Y).
ancestor(X, Z) :- parent(X, Y), ancestor(Y, Z).
descendant(Y, X) :- ancestor(X, Y).
"""

#: a domain with no mistake: packages named from the built-in 'word' list (80 names), as a user's
#: first domain might be
BASE = """name = "pkgs"
description = "packages, their maintainers and what they extend"

[entities.package]
count = 20
names = "word"

[entities.maintainer]
count = 8
names = "person"

[relations.maintainer]
subject = "package"
object = "maintainer"
group = "people"
shape = "one"
answer = "{o2}"
questions = ["Who maintains {o1}?"]
statements = ["The maintainer of {o1} is {o2}."]

[relations.maintained]
subject = "maintainer"
object = "package"
group = "people"
answer = "{o2}"
questions = ["Which is one of the packages {o1} maintains?"]
statements = ["One of the packages {o1} maintains is {o2}."]

[relations.parent]
subject = "package"
object = "package"
group = "deps"
shape = "tree"
answer = "{o2}"
questions = ["Which package does {o1} extend?"]
statements = ["The package {o1} extends {o2}."]

[relations.ancestor]
subject = "package"
object = "package"
group = "deps"
answer = "{r}"
questions = ["What is {o2} to {o1} in the package tree?"]
statements = ["In the package tree, {o2} is an {r} of {o1}."]

""" + (DESCENDANT := """[relations.descendant]
subject = "package"
object = "package"
group = "deps"
answer = "{r}"
questions = ["What is {o2} to {o1} in the package tree?"]
statements = ["In the package tree, {o2} is an {r} of {o1}."]
""")

#: each mistake: (what replaces what in BASE, extra CLI args, the key its one warning names, words it says)
MISTAKES = {
    "own-name answer, template of its own": (
        (DESCENDANT, DESCENDANT.split("answer")[0] + 'answer = "{o2}"\nquestions = ["Name a package that descends '
                     'from {o1}."]\nstatements = ["One package that descends from {o1} is {o2}."]\n'),
        [], "relations.ancestor.questions", ["'ancestor'", "same answer, true or false", 'answer = "{o2}"']),
    "entity question, several objects": (
        ('questions = ["Which is one of the packages {o1} maintains?"]',
         'questions = ["Which package does {o1} maintain?"]'),
        [], "relations.maintained.questions", ["'maintained'", "one maintainer has up to", "Name one of"]),
    "pool too small for the count": (
        ("count = 20", "count = 20"), ["--people", "90"], "entities.package.count",
        ["90 packages asked for", "'word' list has 80 names", "at least 90 names"]),
    "pool too small for a holdout": (
        ("count = 20", "count = 50"), [], "entities.package",
        ["holdout needs 50 new packages", "30 names the KB does not use", "data never-true"]),
}


def _domain(tmp_path, toml: str, name: str = "pkgs"):
    d = tmp_path / name
    d.mkdir()
    (d / "domain.toml").write_text(toml)
    (d / "rules.dl").write_text(RULES)
    return d


def _check(capsys, *args) -> list[dict]:
    assert main(["data", "check-domain", *map(str, args), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["warnings"]


@pytest.mark.parametrize("name", ["family", "org", "geo"])
def test_the_built_in_domains_get_no_warning(name, capsys):
    assert _check(capsys, name) == []


def test_the_domain_without_mistakes_gets_no_warning(tmp_path, capsys):
    assert _check(capsys, _domain(tmp_path, BASE)) == []


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_each_mistake_gets_exactly_its_one_warning(mistake, tmp_path, capsys):
    (old, new), extra, key, words = MISTAKES[mistake]
    assert old in BASE
    d = _domain(tmp_path, BASE.replace(old, new, 1))
    warnings = _check(capsys, d, *extra)
    assert [w["key"] for w in warnings] == [key]
    line = warnings[0]["line"]
    assert line.startswith(f"{d / 'domain.toml'}: {key}: ") and "; fix: " in line and "\n" not in line
    for w in words:
        assert w in line


def test_generate_prints_the_warnings_and_still_writes_the_kb(tmp_path, capsys):
    (old, new), _, key, _ = MISTAKES["own-name answer, template of its own"]
    d = _domain(tmp_path, BASE.replace(old, new, 1))
    assert main(["data", "generate", "--domain", str(d), "-o", str(tmp_path / "kb.json")]) == 0
    out = capsys.readouterr()
    assert out.err.count("warning: ") == 1 and f"domain.toml: {key}: " in out.err
    assert "20 packages (" in out.out and "people" not in out.out.splitlines()[0]
    assert main(["data", "generate", "--domain", "org", "--people", "12", "-o", str(tmp_path / "org.json")]) == 0
    out = capsys.readouterr()
    assert out.err == "" and "12 people (" in out.out


def test_holdout_draws_fresh_single_word_names_and_names_never_true_when_it_cannot(tmp_path, capsys):
    d = _domain(tmp_path, BASE.replace("count = 20", "count = 30", 1))
    kb = tmp_path / "kb.json"
    assert main(["data", "generate", "--domain", str(d), "-o", str(kb)]) == 0
    capsys.readouterr()
    assert main(["data", "holdout", "--kb", str(kb), "--seed", "1", "-o", str(tmp_path / "h.json")]) == 0
    assert "wrote" in (out := capsys.readouterr().out) and "30 packages and" in out
    held, theirs = (json.loads((tmp_path / f).read_text()) for f in ("h.json", "kb.json"))
    subjects = {s for s, r, _ in held["facts"] if r == "maintainer"}
    assert len(subjects) == 30 and not subjects & set(theirs["entities"])
    d2 = _domain(tmp_path, BASE.replace("count = 20", "count = 50", 1), "pkgs50")
    assert main(["data", "generate", "--domain", str(d2), "-o", str(tmp_path / "kb50.json")]) == 0
    capsys.readouterr()
    assert main(["data", "holdout", "--kb", str(tmp_path / "kb50.json"), "-o", str(tmp_path / "h50.json")]) == 1
    err = capsys.readouterr().err
    assert "cannot name 50 new packages" in err and "data never-true" in err and err.count("\n") == 1
    assert not (tmp_path / "h50.json").exists()


def test_holdout_on_a_real_world_domain_names_never_true(tmp_path, capsys):
    kb = tmp_path / "geo.json"
    assert main(["data", "generate", "--domain", "geo", "--countries", "6", "-o", str(kb)]) == 0
    capsys.readouterr()
    assert main(["data", "holdout", "--kb", str(kb), "-o", str(tmp_path / "h.json"), "--json"]) == 1
    err = json.loads(capsys.readouterr().out)["error"]
    assert "no new countries to draw" in err and "data never-true" in err


def test_a_huge_people_count_is_refused_before_any_sampling(capsys):
    assert main(["data", "check-domain", "org", "--people", "1000000000000"]) == 1
    err = capsys.readouterr().err
    assert "--people 1000000000000" in err and err.count("\n") == 1
