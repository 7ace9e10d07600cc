"""``kg.sample.sample_domain``: names, attributes and the four shapes'
invariants, checked with networkx where a graph property is at stake; the same seed gives the
same sample."""

from __future__ import annotations

import textwrap
from collections import Counter

import networkx as nx
import numpy as np
import pytest

from deepunlearn.kg.domain import DomainError, load_domain, read_domain
from deepunlearn.kg.sample import name_lists, sample_domain

SHAPES = '''\
name = "shapes"

[entities.person]
count = 40
names = "person"
[entities.team]
count = 5
names = "word"
[entities.city]
count = 6
names = "city"
[entities.country]
count = 3
names = "country"
[entities.tool]
values = ["hammer", "saw", "drill", "plane"]

[attributes.gender]
of = "person"
values = ["female", "male"]

[relations.boss]
subject = "person"
object = "person"
group = "g"
shape = "tree"
branching = BRANCHING
questions = ["Who is {o1}'s boss?"]

[relations.buddy]
subject = "person"
object = "person"
group = "g"
shape = "pairs"
questions = ["Who is {o1}'s buddy?"]

[relations.rival]
subject = "person"
object = "person"
group = "g"
shape = "pairs"
questions = ["Who is {o1}'s rival?"]

[relations.team]
subject = "person"
object = "team"
group = "g"
shape = "one"
questions = ["Which team is {o1} in?"]

[relations.friend]
subject = "person"
object = "person"
group = "g"
shape = "one"
questions = ["Who is {o1}'s friend?"]

[relations.tool]
subject = "person"
object = "tool"
group = "g"
shape = "some"
branching = TOOLS
questions = ["Which tool does {o1} use?"]

[relations.country]
subject = "city"
object = "country"
group = "g"
shape = "one"
questions = ["Where is {o1}?"]

[relations.grand_boss]
subject = "person"
object = "person"
group = "g"
questions = ["Who is {o1}'s boss's boss?"]
'''


def make_domain(tmp_path, branching=3, tools=2, text=SHAPES, rules="buddy(Y, X) :- buddy(X, Y).\n", tag=""):
    d = tmp_path / f"shapes-{branching}-{tools}{tag}"
    d.mkdir(exist_ok=True)
    (d / "domain.toml").write_text(text.replace("BRANCHING", str(branching)).replace("TOOLS", str(tools)))
    (d / "rules.dl").write_text(rules)
    return read_domain(d)


def by_rel(s, r):
    return [(a, b) for a, rr, b in s.facts if rr == r]


def test_same_seed_same_sample_and_another_seed_differs(tmp_path):
    dom = make_domain(tmp_path)
    a = sample_domain(dom, None, np.random.default_rng(7), {"buddy"})
    b = sample_domain(dom, None, np.random.default_rng(7), {"buddy"})
    c = sample_domain(dom, None, np.random.default_rng(8), {"buddy"})
    assert a == b
    assert a.facts != c.facts and a.entities != c.entities


@pytest.mark.parametrize("branching", [1, 2, 3])
@pytest.mark.parametrize("people", [2, 17, 120])
def test_tree_is_one_tree_with_one_parent_each_and_at_most_branching_children(tmp_path, branching, people):
    dom = make_domain(tmp_path, branching)
    for seed in range(3):
        s = sample_domain(dom, people, np.random.default_rng(seed), {"buddy"})
        edges = by_rel(s, "boss")  # (child, parent)
        g = nx.DiGraph(edges)
        g.add_nodes_from(s.of_type("person"))
        assert nx.is_directed_acyclic_graph(g)
        assert nx.number_weakly_connected_components(g) == 1  # a forest with one tree
        roots = [p for p in g if g.out_degree(p) == 0]
        assert len(roots) == 1
        assert all(g.out_degree(p) == 1 for p in g if p not in roots)  # one parent per non-root
        assert max(d for _, d in g.in_degree()) <= branching
        assert len(edges) == people - 1
        if branching == 1:
            assert nx.is_directed_acyclic_graph(g) and nx.dag_longest_path_length(g) == people - 1  # a path


def test_one_gives_exactly_one_object_and_never_the_subject(tmp_path):
    s = sample_domain(make_domain(tmp_path), 60, np.random.default_rng(1), set())
    people, teams = s.of_type("person"), set(s.of_type("team"))
    for r, objects in (("team", teams), ("friend", set(people))):
        pairs = by_rel(s, r)
        assert Counter(a for a, _ in pairs) == Counter({p: 1 for p in people})
        assert all(b in objects and b != a for a, b in pairs)
    cities = s.of_type("city")
    assert sorted(a for a, _ in by_rel(s, "country")) == sorted(cities)
    assert len({b for _, b in by_rel(s, "team")}) > 1  # drawn, not constant


def test_pairs_are_a_matching_stored_both_ways_only_when_symmetric(tmp_path):
    for people in (9, 10):
        s = sample_domain(make_domain(tmp_path), people, np.random.default_rng(3), {"buddy"})
        buddy, rival = by_rel(s, "buddy"), by_rel(s, "rival")
        assert all(a != b for a, b in buddy + rival)
        assert set(buddy) == {(b, a) for a, b in buddy}  # symmetric: both ways
        assert len(buddy) == 2 * (people // 2)
        assert not set(rival) & {(b, a) for a, b in rival} and len(rival) == people // 2  # one way only
        for pairs in (buddy, rival):  # a matching: no one in two pairs
            g = nx.Graph(pairs)
            assert all(d == 1 for _, d in g.degree())


@pytest.mark.parametrize("k", [1, 2, 4])
def test_some_gives_k_distinct_objects(tmp_path, k):
    s = sample_domain(make_domain(tmp_path, tools=k), 30, np.random.default_rng(0), set())
    got: dict[str, list[str]] = {}
    for a, b in by_rel(s, "tool"):
        got.setdefault(a, []).append(b)
    assert set(got) == set(s.of_type("person"))
    assert all(len(v) == len(set(v)) == k and set(v) <= {"hammer", "saw", "drill", "plane"} for v in got.values())


def test_some_with_more_objects_than_the_type_has_names_the_key(tmp_path):
    dom = make_domain(tmp_path, tools=5)
    with pytest.raises(DomainError) as e:
        sample_domain(dom, 10, np.random.default_rng(0), set())
    assert str(e.value) == (f"{dom.folder / 'domain.toml'}: relations.tool.branching: 5 distinct objects per subject, "
                            "but type 'tool' has 4 to offer")
    assert e.value.field == "relations.tool.branching"


def test_names_are_unique_real_and_attributes_drawn(tmp_path):
    s = sample_domain(make_domain(tmp_path), 150, np.random.default_rng(2), set())
    assert len(s.entities) == 150 + 5 + 6 + 3 + 4 == len(s.types)
    lists = name_lists()
    assert set(s.of_type("city")) <= set(lists["city"]) and set(s.of_type("country")) <= set(lists["country"])
    assert set(s.of_type("team")) <= set(lists["word"])
    assert s.of_type("tool") == ["hammer", "saw", "drill", "plane"]
    people = s.of_type("person")
    assert all(len(p.split()) >= 2 for p in people)  # first (middle initial) last
    assert {s.entities[p]["gender"] for p in people} == {"female", "male"}
    assert all(s.entities[e] == {} for e in s.entities if s.types[e] != "person")


def test_a_name_list_too_short_and_a_name_shared_by_two_types_are_domain_errors(tmp_path):
    text = SHAPES.replace('count = 5\nnames = "word"', 'count = 5\nnames = ["Red", "Blue"]')
    dom = make_domain(tmp_path, text=text)
    with pytest.raises(DomainError, match=r"domain.toml: entities.team.count: 5 team entities asked for, "
                                          r"entities.team.names lists 2$"):
        sample_domain(dom, 10, np.random.default_rng(0), set())
    text = SHAPES.replace('count = 5\nnames = "word"', 'count = 1\nnames = ["saw"]')
    dom = make_domain(tmp_path, text=text, tag="x")
    with pytest.raises(DomainError, match=r"entities.tool.values: 'saw' also names an entity of another type"):
        sample_domain(dom, 10, np.random.default_rng(0), set())
    text = SHAPES.replace('count = 6\nnames = "city"', 'count = 61\nnames = "city"')
    dom = make_domain(tmp_path, text=text, tag="y")
    with pytest.raises(DomainError, match=r"entities.city.count: 61 city entities asked for, the built-in 'city' "
                                          r"list has 60 free names"):
        sample_domain(dom, 10, np.random.default_rng(0), set())


def test_org_samples_its_shapes():
    s = sample_domain(load_domain("org"), 50, np.random.default_rng(0), {"mentor_buddy"})
    c = Counter(r for _, r, _ in s.facts)
    assert c == {"manager": 49, "mentor_buddy": 50, "department": 50, "skill": 100, "office": 50, "city": 12,
                 "country": 8}
