"""``deepunlearn data import-rdf`` and ``data export --format ttl|nt``: a real RDF document (France's
ISO 3166-2 subdivisions, written from pycountry's tables) imports to the KB the tables say, in
Turtle, N-Triples and JSON-LD alike; import -> export -> import gives the same KB and export ->
import -> export the same graph (rdflib's isomorphism check); every problem is one line naming
the file and the line (N-Triples) or the triple."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

rdflib = pytest.importorskip("rdflib")
pycountry = pytest.importorskip("pycountry")

from rdflib.compare import isomorphic  # noqa: E402

from deepunlearn.kg.domains.family.generate import generate_family  # noqa: E402
from deepunlearn.kg.io import load_kb, save_kb, to_dict  # noqa: E402
from deepunlearn.kg.rdf import Mapping, RdfError, read_mapping, relation_name  # noqa: E402
from deepunlearn.kg.rdf_export import rdf_graph, rdf_text  # noqa: E402
from deepunlearn.kg.rdf_kb import import_rdf  # noqa: E402
from tests.data.make_regions_rdf import regions_graph  # noqa: E402
from tests.kg.kg_helpers import cli  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "data"
DOC = DATA / "regions-fr.ttl"
MAP = DATA / "regions-fr.map.toml"


def same(a, b) -> bool:
    """Two KBs equal in everything but where they were read from."""
    da, db = to_dict(a), to_dict(b)
    for d in (da, db):
        d["metadata"] = {k: v for k, v in d["metadata"].items() if k not in ("source", "format")}
    return da == db


@pytest.fixture(scope="module")
def fr():
    got = import_rdf(DOC, mapping=read_mapping(MAP))
    assert got.problems == []
    return got


def test_the_shipped_document_is_pycountrys_table():
    g = rdflib.Graph().parse(DOC)
    assert len(g) >= 600 and isomorphic(g, regions_graph("FR"))


def test_real_document_imports_to_the_tables(fr):
    kb = fr.kb
    subs = list(pycountry.subdivisions.get(country_code="FR"))
    name = {s.code: s.name for s in subs} | {"FR": "France"}
    parent = {s.code: (s.parent_code if s.parent_code is None or "-" in s.parent_code else f"FR-{s.parent_code}")
              for s in subs}
    assert fr.triples == 1 + 1 + 1 + 5 * len(subs) and fr.dropped == len(subs) + 1  # rdf:type dropped
    assert set(kb.entities) == set(name.values()) and len(kb.entities) == len(subs) + 1
    facts = set(kb.facts)
    assert {f for f in facts if f[1] == "parent"} == {(name[c], "parent", name[p or "FR"]) for c, p in parent.items()}
    assert {f for f in facts if f[1] == "code"} == {(n, "code", c) for c, n in name.items()}
    assert {f for f in facts if f[1] == "kind"} == {(s.name, "kind", s.type) for s in subs}
    assert len(facts) == len(kb.facts) == 3 * len(subs) + 1
    assert {r: kb.relations[r].kind for r in kb.relations} == {"code": "value", "kind": "value", "parent": "entity"}
    assert kb.relations["parent"].question == "What is the parent of {o1}?"
    assert kb.metadata["rdf"]["entities"]["Bas-Rhin"] == "http://iso3166.deepunlearn.invalid/FR-67"
    # without a mapping: the local names, and rdf:type kept as a relation to the two classes
    plain = import_rdf(DOC).kb
    assert set(plain.relations) == {"additionalType", "containedInPlace", "notation", "type"}
    assert ("Ain", "type", "AdministrativeArea") in plain.facts and ("France", "type", "Country") in plain.facts


def test_every_syntax_gives_the_same_kb(fr, tmp_path):
    g = rdflib.Graph().parse(DOC)
    for fmt, suffix in (("nt", ".nt"), ("json-ld", ".jsonld")):
        path = tmp_path / f"regions-fr{suffix}"
        path.write_text(g.serialize(format=fmt), encoding="utf-8")
        got = import_rdf(path, mapping=read_mapping(MAP))
        assert got.problems == [] and same(got.kb, fr.kb), fmt


@pytest.mark.parametrize("fmt", ["ttl", "nt"])
def test_round_trips(fr, tmp_path, capsys, fmt):
    kb_path = save_kb(fr.kb, tmp_path / "fr.json")
    for kb_file, out in ((kb_path, tmp_path / f"a.{fmt}"), (tmp_path / "a.json", tmp_path / f"b.{fmt}")):
        if out.name.startswith("a"):
            code, _, err = cli(capsys, "data", "export", str(kb_file), "-o", str(out))
            assert code == 0, err
            code, _, err = cli(capsys, "data", "import-rdf", str(out), "-o", str(tmp_path / "a.json"))
            assert code == 0, err
        else:
            code, _, err = cli(capsys, "data", "export", "--kb", str(kb_file), "--format", fmt, "-o", str(out))
            assert code == 0, err
    again = load_kb(tmp_path / "a.json")
    assert same(again, fr.kb)  # import -> export -> import: the same KB
    fmt_rdf = "turtle" if fmt == "ttl" else "nt"
    a = rdflib.Graph().parse(tmp_path / f"a.{fmt}", format=fmt_rdf)
    b = rdflib.Graph().parse(tmp_path / f"b.{fmt}", format=fmt_rdf)
    assert isomorphic(a, b)  # export -> import -> export: the same graph
    assert (tmp_path / f"a.{fmt}").read_bytes() == (tmp_path / f"b.{fmt}").read_bytes()  # and the same bytes


def test_a_generated_kb_keeps_templates_attributes_and_targets(tmp_path):
    kb = generate_family(8, seed=1)
    (tmp_path / "f.ttl").write_text(rdf_text(kb))
    back = import_rdf(tmp_path / "f.ttl").kb
    assert back.relations == kb.relations and back.entities == kb.entities and back.name == kb.name
    assert sorted(back.facts) == sorted(kb.facts) and back.background == ("gender",)
    assert [back.facts[t] for t in back.targets] == [kb.facts[t] for t in kb.targets] and len(kb.targets) >= 10
    assert isomorphic(rdf_graph(kb), rdf_graph(back))
    assert "brother" in back.relations and not any(f[1] == "brother" for f in back.facts)  # declared, no facts


def test_relation_names():
    assert [relation_name(x) for x in ("birth place", "Population", "22-rdf#type", "a b--c")] == [
        "birth_place", "population", "r_22_rdf_type", "a_b_c"]


def _import(capsys, tmp_path, path, *more):
    out = tmp_path / "kb.json"
    code, stdout, err = cli(capsys, "data", "import-rdf", str(path), *more, "-o", str(out))
    assert code == 1 and not out.exists() and "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("deepunlearn data: error: "), err
    return lines


def test_nt_problems_name_every_line(tmp_path, capsys):
    lines = rdflib.Graph().parse(DOC).serialize(format="nt").splitlines()
    lines = sorted(x for x in lines if x.strip())
    lines[3] = "this is not a triple"
    lines[10] = lines[10].rstrip(" .")  # no final dot
    lines.append('<http://x/a> <http://x/note> "two\\nlines" .')
    path = tmp_path / "bad.nt"
    path.write_text("\n".join(lines) + "\n")
    err = _import(capsys, tmp_path, path)
    assert err[0].startswith(f"{path}:4: not a valid N-Triples line") and err[1].startswith(f"{path}:11: ")
    assert "2 problems in the RDF, nothing written" in err[-1]
    del lines[10], lines[3]
    path.write_text("\n".join(lines) + "\n")
    err = _import(capsys, tmp_path, path)
    assert err[0] == f"{path}:{len(lines)}: the literal holds a control character (U+000A) (a value fact's object is one printable line)"


def test_graph_problems_name_the_triple(tmp_path, capsys):
    path = tmp_path / "g.ttl"
    path.write_text("@prefix x: <http://x/> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
                    "x:a rdfs:label \"Ann\" ; x:knows x:b , \"Cy\" .\nx:b rdfs:label \"Ann\" .\n"
                    "_:n x:knows x:a .\n")
    err = _import(capsys, tmp_path, path)
    assert any("nodes <http://x/a>, <http://x/b> all have the name \"Ann\"" in x for x in err), err
    assert any(x.startswith(f"{path}: triple _:") and "has no label and no local name" in x for x in err), err
    assert any(x.startswith(f"{path}: triple <http://x/a> <http://x/knows> \"Cy\": knows has literal and node "
                            "objects") for x in err), err
    path.write_text("@prefix x: <http://x/> .\nx:a x:b x:c .\nx:a x:b \"unclosed .\n")
    err = _import(capsys, tmp_path, path)
    assert err[0].startswith(f"{path}:3: not valid Turtle (") and len(err) == 2
    path = tmp_path / "g.jsonld"
    path.write_text(json.dumps({"@context": "https://schema.org/", "@id": "http://x/a", "name": "A"}))
    err = _import(capsys, tmp_path, path)
    assert err[0] == (f'{path}: @context "https://schema.org/" names another document, which is never fetched: put '
                      "the context in the file itself")


def test_mapping_file(tmp_path, capsys):
    m = tmp_path / "m.toml"
    m.write_text('[relations]\n"http://x/p" = "Bad Name"\n')
    with pytest.raises(RdfError, match=r"relations.http://x/p: \"Bad Name\" is not a relation name"):
        read_mapping(m)
    m.write_text('relation = {}\n')
    err = _import(capsys, tmp_path, DOC, "--mapping", str(m))
    assert err == [f"deepunlearn data: error: --mapping {m}: unknown key 'relation' (a mapping has names, "
                   "prefixes, relations, entities)"]
    m.write_text('names = ["skos:notation"]\n[entities]\n"iso:FR" = "République française"\n'
                 '[relations]\n"rdf:type" = ""\n"rdfs:label" = "name"\n')
    got = import_rdf(DOC, mapping=read_mapping(m))
    assert got.problems == [] and "FR-67" in got.kb.entities and "République française" in got.kb.entities
    assert ("FR-67", "name", "Bas-Rhin") in got.kb.facts
    assert isinstance(Mapping().names, list)


def test_cli_json_and_outputs(tmp_path, capsys):
    out = tmp_path / "kb.json"
    code, stdout, err = cli(capsys, "data", "import-rdf", str(DOC), "--mapping", str(MAP), "-o", str(out), "--json")
    assert code == 0, err
    obj = json.loads(stdout)
    assert (obj["entities"], obj["relations"], obj["dropped"]) == (125, {"code": 125, "kind": 124, "parent": 124}, 125)
    foreign = tmp_path / "notes.ttl"
    foreign.write_text("my own notes\n")
    code, stdout, err = cli(capsys, "data", "export", str(out), "-o", str(foreign), "--json")
    assert code == 1 and json.loads(stdout)["error"] and foreign.read_text() == "my own notes\n"
    code, _, err = cli(capsys, "data", "export", str(out), "-o", str(foreign), "--force", "--base", "http://ex.org/kb/")
    assert code == 0 and "http://iso3166.deepunlearn.invalid/FR-67" in foreign.read_text()  # imported IRIs kept
    code, _, err = cli(capsys, "data", "export", str(out), "-o", str(tmp_path / "x.graphml"), "--base", "http://e/")
    assert code == 2 and "argument --base: only with --format ttl or nt" in err
    code, _, err = cli(capsys, "data", "import-rdf", str(tmp_path / "missing.ttl"), "-o", str(tmp_path / "y.json"))
    assert code == 1 and err.strip().endswith("missing.ttl: no such file") and len(err.strip().splitlines()) == 1


def test_drawn_graphs_round_trip(tmp_path_factory):
    """Graphs drawn at random (IRIs with and without labels, language tags, literals of several
    datatypes, unicode names): whatever imports cleanly exports to a graph that imports to the same
    KB, and exporting that KB gives the same graph."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from rdflib import Literal, URIRef

    name = st.text(alphabet="aZé ß-1'", min_size=1, max_size=6).filter(lambda s: s.strip() == s)
    node = st.integers(0, 5)
    lit = st.one_of(name.map(Literal), st.integers(-5, 5).map(Literal), name.map(lambda s: Literal(s, lang="fr")))
    triple = st.tuples(node, st.sampled_from(["p", "q", "has value"]), st.one_of(node, lit))
    labels = st.dictionaries(node, name, max_size=6)

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(triple, min_size=1, max_size=12), labels)
    def check(triples, labs):
        d = tmp_path_factory.mktemp("g")
        g = rdflib.Graph()
        for s, p, o in triples:
            pred = URIRef("http://x/" + p.replace(" ", "%20"))
            g.add((URIRef(f"http://x/n{s}"), pred, URIRef(f"http://x/n{o}") if isinstance(o, int) else o))
        for n, lab in labs.items():
            g.add((URIRef(f"http://x/n{n}"), rdflib.RDFS.label, Literal(lab)))
        (d / "g.ttl").write_text(g.serialize(format="turtle"))
        first = import_rdf(d / "g.ttl")
        if first.kb is None:  # a problem: one line each, naming the file
            assert first.problems and all(p.startswith(str(d / "g.ttl")) and "\n" not in p for p in first.problems)
            return
        assert {f[1] for f in first.kb.facts} <= {"p", "q", "has_value"}
        (d / "a.ttl").write_text(rdf_text(first.kb))
        second = import_rdf(d / "a.ttl")
        assert second.problems == [] and same(second.kb, first.kb)
        assert isomorphic(rdf_graph(first.kb), rdf_graph(second.kb))

    check()


def test_max_problems_and_format_flag(tmp_path, capsys):
    path = tmp_path / "many.txt"  # the suffix says nothing: --format names the syntax
    path.write_text("".join(f"<http://x/a{k}> <http://x/p> <http://x/b{k}>\n" for k in range(5)))  # no final dots
    err = _import(capsys, tmp_path, path, "--format", "nt", "--max-problems", "2")
    assert [x.split(": ")[0] for x in err[:2]] == [f"{path}:1", f"{path}:2"]
    assert err[2] == f"{path}: ... and 3 more problems" and "5 problems in the RDF" in err[3]
    path.write_text("@prefix x: <http://x/> .\nx:a x:p x:b .\n")
    code, out, err = cli(capsys, "data", "import-rdf", str(path), "--format", "ttl", "-o", str(tmp_path / "k.json"),
                         "--json")
    assert code == 0 and json.loads(out)["relations"] == {"p": 1}
