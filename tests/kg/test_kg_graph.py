"""Graph views: networkx, GraphML round trips and family-tree pictures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import networkx as nx
import pytest

import deepunlearn.kg.domains.family.layout as layout
from deepunlearn.kg import KBError
from deepunlearn.kg.domains.family.generate import generate_family
from deepunlearn.kg.domains.family.layout import COUPLE_GAP, SLOT
from deepunlearn.kg.graph import draw_family, to_networkx, write_graphml
from deepunlearn.kg.io import save_kb

ROOT = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == PNG_MAGIC, f"{path} is not a PNG"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


# ------------------------------------------------------------------------------ networkx
def test_to_networkx_holds_every_person_and_family_fact(edu_kb):
    g = to_networkx(edu_kb)
    assert isinstance(g, nx.MultiDiGraph)
    assert g.number_of_nodes() == 100 and g.number_of_edges() == 400
    for s, o, key, data in g.edges(keys=True, data=True):
        assert edu_kb.facts[data["fact_id"]] == (s, data["relation"], o) and key == data["fact_id"]
    assert all(g.nodes[n]["gender"] == edu_kb.entities[n]["gender"] for n in edu_kb.entities)


def test_to_networkx_with_biography_values_as_nodes(edu_kb):
    g = to_networkx(edu_kb, include_biography=True)
    values = {o for s, r, o in edu_kb.facts if edu_kb.relations[r].kind == "value"}
    assert g.number_of_edges() == 700
    assert g.number_of_nodes() == 100 + len(values)
    assert {d["label"] for _, d in g.nodes(data=True) if d["kind"] == "value"} == values
    assert g.nodes["Washington state"]["kind"] == "value"
    assert any(d["relation"] == "birthplace" for _, _, d in g.in_edges("Washington state", data=True))


def test_a_value_named_like_a_person_gets_its_own_node():
    from deepunlearn.kg import KnowledgeBase, Relation

    kb = KnowledgeBase.build({"Ann": {"gender": "female"}, "Bob": {"gender": "male"}},
                             [("Ann", "husband", "Bob"), ("Ann", "job", "Bob")],
                             relations={"job": Relation.default("job", "biography")})
    g = to_networkx(kb, include_biography=True)
    assert g.number_of_nodes() == 3 and g.nodes["job=Bob"]["kind"] == "value"


@pytest.mark.parametrize("biography", [False, True])
def test_graphml_round_trip(tmp_path, edu_kb, biography):
    path = write_graphml(edu_kb, tmp_path / "kb.graphml", include_biography=biography)
    g = to_networkx(edu_kb, include_biography=biography)
    h = nx.read_graphml(path, force_multigraph=True)
    assert (h.number_of_nodes(), h.number_of_edges()) == (g.number_of_nodes(), g.number_of_edges())
    assert set(h.edges(keys=True)) == set(g.edges(keys=True))
    assert all(isinstance(d["fact_id"], int) and d["relation"] == g.edges[u, v, k]["relation"]
               for u, v, k, d in h.edges(keys=True, data=True))
    assert dict(h.nodes(data="gender")) == dict(g.nodes(data="gender"))
    assert h.graph["name"] == "edu-relat"


def _cli(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "deepunlearn", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_export_and_draw(tmp_path):
    kb = generate_family(60, 3)
    kb_path = save_kb(kb, tmp_path / "kb.json")
    r = _cli("data", "export", str(kb_path), "-o", str(tmp_path / "kb.graphml"), "--biography", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["format"] == "graphml"
    h = nx.read_graphml(tmp_path / "kb.graphml", force_multigraph=True)
    assert h.number_of_edges() == len(kb.facts)
    person = next(iter(kb.entities))
    r = _cli("data", "draw", str(kb_path), "-o", str(tmp_path / "p.png"), "--person", person, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert _png_size(Path(json.loads(r.stdout)["output"]))[0] > 300
    r = _cli("data", "draw", str(kb_path), "-o", str(tmp_path / "x.png"), "--person", "Nobody Atall", cwd=tmp_path)
    assert r.returncode == 1 and "Nobody Atall" in r.stderr and not (tmp_path / "x.png").exists()


# ------------------------------------------------------------------------------ pictures
def test_draw_the_release_family_tree(tmp_path, edu_kb):
    out = draw_family(edu_kb, tmp_path / "edu.png")
    w, h = _png_size(out)
    assert out.stat().st_size > 50_000 and w > 2000 and h > 400


def test_draw_one_persons_neighbourhood(tmp_path, edu_kb):
    out = draw_family(edu_kb, tmp_path / "zoey.png", person="Zoey Jenkins")
    w, h = _png_size(out)
    assert out.stat().st_size > 10_000 and 400 < w < 3000


def test_unknown_person_is_an_error_naming_them(tmp_path, edu_kb):
    with pytest.raises(KBError, match="Nobody Atall"):
        draw_family(edu_kb, tmp_path / "x.png", person="Nobody Atall")


def test_neighbourhood_selection(edu_kb):
    fam = layout.family_structure(edu_kb)
    comps, scope, note, direct = layout.select_family(edu_kb, fam, "Zoey Jenkins", 1)
    drawn = {n for c in comps for n in c}
    # radius 1: parents, spouse and child, plus everyone the KB relates to her directly
    related = {o for s, r, o in edu_kb.facts if s == "Zoey Jenkins" and edu_kb.relations[r].kind == "entity"}
    related |= {s for s, r, o in edu_kb.facts if o == "Zoey Jenkins" and edu_kb.relations[r].kind == "entity"}
    assert drawn == {"Zoey Jenkins"} | related
    assert direct["Xander Jenkins"] == "father" and direct["Xavier Ross"] == "husband"
    assert "Zoey Jenkins" in comps[0] and note == ""
    comps2, *_ = layout.select_family(edu_kb, fam, "Zoey Jenkins", 2)
    assert drawn < {n for c in comps2 for n in c}


def test_large_families_are_cut_and_say_so(monkeypatch, edu_kb):
    monkeypatch.setattr(layout, "MAX_DRAWN_PEOPLE", 30)
    fam = layout.family_structure(edu_kb)
    comps, scope, note, _ = layout.select_family(edu_kb, fam, None, 2)
    assert sum(map(len, comps)) == 30 and "cut to the 30 nearest" in note and scope.startswith("part of")


def _check_layout(kb):
    fam = layout.family_structure(kb)
    for comp in layout._components(fam, set(kb.entities)):
        pos, units = layout.family_layout(fam, comp)
        assert set(pos) == set(comp)
        for c in comp:                                   # generations run top-down
            for p in fam.parents[c]:
                assert pos[p][1] < pos[c][1], (p, c)
        rows = defaultdict(list)
        for n, (x, lv) in pos.items():
            rows[lv].append(x)
        for xs in rows.values():                         # no two boxes overlap
            xs.sort()
            assert all(b - a >= SLOT - 1e-9 for a, b in zip(xs, xs[1:]))
        for u in units:                                  # couples stand side by side
            if len(u.members) == 2:
                (xa, la), (xb, lb) = pos[u.members[0]], pos[u.members[1]]
                assert la == lb and abs(abs(xb - xa) - (SLOT + COUPLE_GAP)) < 1e-9
        years = defaultdict(list)
        for n, (_, lv) in pos.items():
            years[lv].append(fam.year[n])
        means = [sum(v) / len(v) for _, v in sorted(years.items())]
        assert means == sorted(means)                    # rows follow birth years


def test_layout_invariants_on_the_release(edu_kb):
    _check_layout(edu_kb)


def test_layout_invariants_on_generated_families():
    for seed in (0, 5):
        _check_layout(generate_family(120, seed))


def test_layout_survives_inconsistent_data():
    """A parent cycle (bad data) must not hang or crash the drawing."""
    from deepunlearn.kg import KnowledgeBase

    kb = KnowledgeBase.build({"A": {"gender": "male"}, "B": {"gender": "male"}, "C": {"gender": "female"}},
                             [("A", "father", "B"), ("B", "father", "A"), ("C", "husband", "A")])
    fam = layout.family_structure(kb)
    pos, _ = layout.family_layout(fam, list(kb.entities))
    assert set(pos) == {"A", "B", "C"}
