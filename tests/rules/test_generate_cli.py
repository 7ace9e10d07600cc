"""``deepunlearn data generate --domain family|org|PATH``: family's bytes are
unchanged, the family-only flags are usage errors elsewhere, org and a domain folder written by
someone else generate, and the rules commands find a generated KB's rules from the KB alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepunlearn.kg.domain import builtin_folder
from deepunlearn.kg.domains.family.generate import FamilyParams, generate_family
from deepunlearn.kg.io import dumps_kb, load_kb
from tests.kg.kg_helpers import cli


@pytest.mark.parametrize("domain", [None, "family", "FOLDER"])
def test_family_gives_the_family_generator_s_bytes(tmp_path, capsys, domain):
    out = tmp_path / "kb.json"
    extra = [] if domain is None else ["--domain", str(builtin_folder() / "family") if domain == "FOLDER" else domain]
    code, stdout, err = cli(capsys, "data", "generate", "--people", "30", "--seed", "2", *extra, "-o", str(out),
                            "--json")
    assert (code, err) == (0, "")
    assert out.read_text() == dumps_kb(generate_family(30, seed=2, params=FamilyParams()))
    obj = json.loads(stdout)
    assert (obj["domain"], obj["people"], obj["targets"]) == ("family", 30, len(load_kb(out).targets))


def test_family_default_people_is_100(tmp_path, capsys):
    out = tmp_path / "kb.json"
    assert cli(capsys, "data", "generate", "-o", str(out))[0] == 0
    assert out.read_text() == dumps_kb(generate_family(100, seed=0))


@pytest.mark.parametrize("argv, msg", [
    (["--domain", "org", "--stored-share", "0.5"], "argument --stored-share: only with --domain family"),
    (["--domain", "org", "--canaries", "2"], "argument --canaries: only with --domain family"),
    (["--domain", "org", "--repeat", "2"], "argument --repeat: only with --domain family"),
    (["--stored-derived", "0.5"], "argument --stored-derived: not with --domain family (its generator stores by "
                                  "--stored-share)"),
    (["--domain", "org", "--stored-derived", "1.5"], "argument --stored-derived: expected a number in [0, 1], got '1.5'"),
    (["--domain", "org", "--people", "1"], "argument --people"),
])
def test_flags_of_the_other_generator_are_usage_errors(tmp_path, capsys, argv, msg):
    out = tmp_path / "kb.json"
    code, stdout, err = cli(capsys, "data", "generate", *argv, "-o", str(out), "--json")
    assert code == 2 and msg in err.strip().splitlines()[-1] and msg in json.loads(stdout)["error"]
    assert not out.exists()


def test_org_generates_and_reports_closure_and_deepest_chain(tmp_path, capsys):
    out = tmp_path / "org.json"
    code, stdout, err = cli(capsys, "data", "generate", "--domain", "org", "--people", "40", "--seed", "1",
                            "--stored-derived", "0.2", "-o", str(out), "--json")
    assert (code, err) == (0, "")
    obj = json.loads(stdout)
    kb = load_kb(out)
    st = kb.metadata["stats"]
    assert (obj["domain"], obj["rules"], obj["people"], obj["facts"], obj["targets"]) == (
        "org", "org", 40, len(kb.facts), len(kb.targets))
    assert (obj["sampled"], obj["derived"], obj["stored_derived"], obj["closure"]) == (
        st["sampled"], st["derived"], round(0.2 * st["derived"]), st["closure"])
    assert obj["deepest"] == len(obj["deepest_chain"]) >= 3  # a linear chain: one line per step
    # the rules commands find the org rules from the KB alone
    code, stdout, err = cli(capsys, "rules", "closure", "--kb", str(out), "--json")
    assert code == 0 and json.loads(stdout)["closure"] == st["closure"]
    code, text, _ = cli(capsys, "data", "generate", "--domain", "org", "--people", "40", "--seed", "1",
                        "--stored-derived", "0.2", "-o", str(tmp_path / "again.json"))
    assert code == 0 and (tmp_path / "again.json").read_bytes() == out.read_bytes()
    assert f"deepest deduction from the stored facts: {obj['deepest']} steps" in text
    assert obj["deepest_chain"][0] in text


ACADEMIA = '''\
name = "academia"
description = "doctoral advisors, their academic ancestors, and where they work"

[entities.person]
count = 30
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

[relations.ancestor]
subject = "person"
object = "person"
group = "academic"
questions = ["Who is an academic ancestor of {o1}?"]
statements = ["An academic ancestor of {o1} is {o2}."]

[relations.city]
subject = "person"
object = "city"
group = "place"
shape = "one"
questions = ["In which city does {o1} work?"]
statements = ["{o1} works in {o2}."]
'''

ACADEMIA_RULES = """\
% academic ancestors: advisors, their advisors, and so on
ancestor(X, Y) :- advisor(X, Y).
ancestor(X, Z) :- advisor(X, Y), ancestor(Y, Z).
"""


def write_academia(tmp_path, toml=ACADEMIA, rules=ACADEMIA_RULES):
    d = tmp_path / "academia"
    d.mkdir(exist_ok=True)
    (d / "domain.toml").write_text(toml)
    (d / "rules.dl").write_text(rules)
    return d


def test_a_domain_folder_written_by_someone_else_generates_with_no_code_change(tmp_path, capsys):
    d = write_academia(tmp_path)
    out = tmp_path / "acad.json"
    code, stdout, err = cli(capsys, "data", "generate", "--domain", str(d), "--people", "25", "--seed", "3",
                            "-o", str(out), "--json")
    assert (code, err) == (0, "")
    obj = json.loads(stdout)
    kb = load_kb(out)
    assert kb.metadata["rules"] == str((d / "rules.dl").resolve()) == obj["rules"]
    assert kb.metadata["domain_folder"] == str(d.resolve())
    assert kb.relation_counts()["advisor"] == 24 and obj["people"] == 25
    assert {kb.facts[t][1] for t in kb.targets} == {"advisor", "ancestor"}
    assert kb.relations["ancestor"].group == "academic" and kb.relations["city"].group == "place"
    code, stdout, _ = cli(capsys, "rules", "closure", "--kb", str(out), "--json")
    assert code == 0 and json.loads(stdout)["closure"] == kb.metadata["stats"]["closure"]
    t = next(t for t in kb.targets if kb.facts[t][1] == "ancestor")
    code, stdout, _ = cli(capsys, "rules", "sets", "--kb", str(out), "--target", str(t), "--json")
    assert code == 0 and json.loads(stdout)


@pytest.mark.parametrize("case, expect", [
    ("name", "unknown domain 'no-such-domain': expected one of family, geo, org, regions or a path to a domain folder"),
    ("missing", "DIR/nowhere: domain folder not found (a domain is a folder with domain.toml and rules.dl)"),
    ("toml", "DIR/academia/domain.toml: relations.advisor.shape: expected one of one, tree, pairs, some, got 'web'"),
    ("rules", "DIR/academia/rules.dl:4:1: expected ',' or '.' at the end of the rule, found end of file"),
    ("relation", "DIR/academia/rules.dl:2: relation 'mentor' is not declared in DIR/academia/domain.toml "
                 "(declared: advisor, ancestor, city)"),
])
def test_a_bad_domain_is_one_line(tmp_path, capsys, case, expect):
    domain = {"name": "no-such-domain", "missing": str(tmp_path / "nowhere")}.get(case, str(tmp_path / "academia"))
    if case == "toml":
        write_academia(tmp_path, toml=ACADEMIA.replace('shape = "tree"', 'shape = "web"'))
    elif case == "rules":
        write_academia(tmp_path, rules=ACADEMIA_RULES.replace("ancestor(Y, Z).", "ancestor(Y, Z)"))
    elif case == "relation":
        write_academia(tmp_path, rules="ancestor(X, Y) :- advisor(X, Y).\nancestor(X, Y) :- mentor(X, Y).\n")
    out = tmp_path / "kb.json"
    code, stdout, err = cli(capsys, "data", "generate", "--domain", domain, "-o", str(out))
    lines = err.strip().splitlines()
    assert code == 1 and stdout == "" and len(lines) == 1
    assert lines[0].startswith("deepunlearn data: error: " + expect.replace("DIR", str(tmp_path)))
    assert not out.exists()
    code, stdout, err = cli(capsys, "data", "generate", "--domain", domain, "-o", str(out), "--json")
    assert code == 1 and json.loads(stdout)["error"].startswith(expect.replace("DIR", str(tmp_path)))


def test_data_help_lists_generate_first(capsys):
    code, out, _ = cli(capsys, "data", "-h")
    assert code == 0
    listed = [ln.split()[0] for ln in out.split("positional arguments:")[1].splitlines()[2:] if ln.startswith("    ")
              and not ln.startswith("     ")]
    assert listed[:2] == ["generate", "domains"]


def test_stored_derived_release_stores_the_release_share_and_org_defaults_to_its_own(tmp_path, capsys):
    out = tmp_path / "org.json"
    code, stdout, err = cli(capsys, "data", "generate", "--domain", "org", "--people", "40", "--seed", "1",
                            "--stored-derived", "release", "-o", str(out), "--json")
    assert (code, err) == (0, "")
    st = load_kb(out).metadata["stats"]
    used = st["sampled"] - st["passthrough"]
    assert abs((used + st["stored_derived"]) / st["closure"] - 400 / 562) < 1 / st["closure"]
    code, stdout, err = cli(capsys, "data", "generate", "--domain", "org", "--people", "40", "--seed", "1",
                            "-o", str(out), "--json")
    kb = load_kb(out)
    assert kb.metadata["stored_derived"] == 0.3 and json.loads(stdout)["stored_derived"] == round(
        0.3 * kb.metadata["stats"]["derived"])


def test_the_shipped_third_party_example_folder_generates(tmp_path, capsys):
    """examples/domains/academia follows the issue's format (one statement reworded: it opened with
    its answer) and is used through --domain PATH, no code change."""
    folder = Path(__file__).resolve().parents[2] / "examples" / "domains" / "academia"
    out = tmp_path / "acad.json"
    code, stdout, err = cli(capsys, "data", "generate", "--domain", str(folder), "--people", "60", "--seed", "1",
                            "-o", str(out), "--json")
    assert (code, err) == (0, "")
    obj, kb = json.loads(stdout), load_kb(out)
    assert kb.groups == ["academic", "place"] and kb.relation_counts()["advisor"] == 59
    assert obj["deepest"] >= 3 and kb.metadata["rules"] == str((folder / "rules.dl").resolve())
