"""``data draw`` on a KB of another domain draws the entity graph around one entity (a family KB
keeps its family tree)."""

from __future__ import annotations

import json

from kg_helpers import cli

from deepunlearn.kg.io import save_kb
from deepunlearn.kg.kb import KnowledgeBase, Relation

MANAGER = Relation("manager", "entity", "Who is {o1}'s manager?", "{o2}", "reporting")
OFFICE = Relation("office", "entity", "Where does {o1} work?", "{o2}", "location")


def org_kb() -> KnowledgeBase:
    people = ["Ann", "Bob", "Cy", "Dee"]
    facts = [("Bob", "manager", "Ann"), ("Cy", "manager", "Ann"), ("Dee", "manager", "Bob")]
    facts += [(p, "office", "North Tower") for p in people]
    return KnowledgeBase.build({**{p: {} for p in people}, "North Tower": {}}, facts, targets=[2],
                               relations={"manager": MANAGER, "office": OFFICE})


def test_another_domain_is_drawn_as_the_graph_around_an_entity(tmp_path, capsys):
    kb_path = tmp_path / "org.json"
    save_kb(org_kb(), kb_path)
    out = tmp_path / "org.png"
    code, stdout, err = cli(capsys, "data", "draw", str(kb_path), "-o", str(out), "--json")
    assert (code, err) == (0, "") and json.loads(stdout)["output"] == str(out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    code, _, err = cli(capsys, "data", "draw", str(kb_path), "-o", str(tmp_path / "x.png"), "--person", "Zed")
    assert code == 1 and err.strip() == "deepunlearn data: error: entity 'Zed' is not in knowledge base 'kb'"
    assert not (tmp_path / "x.png").exists()


def test_draw_graph_keeps_the_neighbourhood_it_is_asked_for(tmp_path, monkeypatch):
    """radius 0 draws the entity alone; radius 1 its direct links (the figure's title says which)."""
    import deepunlearn.kg.graph_draw as gd

    titles = []
    real = gd.save_figure
    monkeypatch.setattr(gd, "save_figure", lambda fig, path: titles.append(fig.axes[0].get_title()) or real(fig, path))
    gd.draw_graph(org_kb(), tmp_path / "a.png", person="Dee", radius=0)
    gd.draw_graph(org_kb(), tmp_path / "b.png")  # default: the first target's subject (Dee), radius 1
    assert titles[0].startswith("kb: Dee and the entities within 0 link(s)")
    assert titles[1].startswith("kb: Dee and the entities within 1 link(s)")
