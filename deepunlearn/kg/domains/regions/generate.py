"""Read the regions domain's facts from pycountry's ISO 3166-2 tables: deterministic, no randomness.

:func:`sample` takes the first ``count`` countries of :data:`COUNTRIES` and every subdivision
pycountry lists for them. A subdivision with a parent subdivision stores its ``parent`` fact
(Bas-Rhin's parent is Alsace, whose parent is Grand-Est); a subdivision without one stores its
``country`` fact. The rules derive the rest: every subdivision's country, through its parents, and
each parent's ``part`` facts. Names are pycountry's, stripped; where two chosen subdivisions share
a name, the one with a parent becomes ``"Name (type)"`` (``"Cantabria (province)"``), and a
subdivision named like a chosen country becomes ``"Name (Country)"``. :func:`regions_tables`
gives the same tables for anyone to check a KB against. The ``rng`` of the declarative sampler's
signature draws nothing here: the KB's targets and stored derived facts are still drawn by
``--seed`` (default 0).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from ...domain import Domain, DomainError, table_name
from ...kb import Fact
from ...sample import Sampled

#: ISO 3166-1 alpha-2 codes in the order ``--countries N`` takes them: the countries whose
#: subdivisions pycountry nests (regions and their departments or provinces) first, then countries
#: with one level of well-known subdivisions.
COUNTRIES = ("FR", "ES", "IT", "BE", "US", "DE", "JP", "CA", "AU", "IN", "CN", "BR", "MX", "GB")


def _pycountry() -> Any:
    try:
        import pycountry
    except ImportError:
        raise DomainError("the regions domain reads its facts from the pycountry package, which is not installed "
                          "(pip install pycountry)") from None
    return pycountry


@dataclass(frozen=True)
class RegionsTables:
    """pycountry's tables for :data:`COUNTRIES`: ``countries`` (alpha-2 code -> name) and
    ``subdivisions`` (ISO 3166-2 code -> ``{"name", "type", "country", "parent"}``, ``parent`` a
    full subdivision code or ``None``), in pycountry's order."""

    countries: dict[str, str]
    subdivisions: dict[str, dict]

    def of(self, country: str) -> list[str]:
        """The subdivision codes of one country, in pycountry's order."""
        return [c for c, s in self.subdivisions.items() if s["country"] == country]


def regions_tables() -> RegionsTables:
    """The tables :func:`sample` reads (see :class:`RegionsTables`)."""
    pc = _pycountry()
    countries = {c: str(pc.countries.get(alpha_2=c).name).strip() for c in COUNTRIES}
    subs: dict[str, dict] = {}
    for s in pc.subdivisions:
        if s.country_code not in countries:
            continue
        parent = s.parent_code
        if parent is not None and "-" not in parent:  # older tables give the parent without the country
            parent = f"{s.country_code}-{parent}"
        subs[s.code] = {"name": str(s.name).strip(), "type": str(s.type).strip(), "country": s.country_code,
                        "parent": parent}
    return RegionsTables(countries, subs)


def _check(where: str, name: str) -> str:
    return table_name("pycountry", where, name)


def sample(domain: Domain, count: int | None, rng: Any = None, symmetric: Any = frozenset()) -> Sampled:
    """The regions KB's stored facts for the first ``count`` countries of :data:`COUNTRIES`
    (``None``: the domain's ``entities.country.count``). ``rng`` and ``symmetric`` are the
    declarative sampler's arguments: nothing is drawn."""
    t = regions_tables()
    n = domain.entities["country"].count if count is None else count
    if n < 1 or n > len(COUNTRIES):
        key = "entities.country.count"
        raise DomainError(f"{domain.folder / 'domain.toml'}: {key}: {n} countries asked for, the regions domain "
                          f"has {len(COUNTRIES)} ({', '.join(COUNTRIES)})", field=key)
    chosen = COUNTRIES[:n]
    country_name = {c: _check(f"country {c}", t.countries[c]) for c in chosen}
    codes = [s for c in chosen for s in t.of(c)]
    for s in codes:
        p = t.subdivisions[s]["parent"]
        if p is not None and p not in t.subdivisions:
            raise DomainError(f"pycountry: subdivision {s}: its parent {p} is not in the table")
    taken = Counter(t.subdivisions[s]["name"] for s in codes)
    countries = set(country_name.values())

    def name(s: str) -> str:
        v = t.subdivisions[s]
        if v["name"] in countries:
            return f"{v['name']} ({country_name[v['country']]})"
        if taken[v["name"]] > 1 and v["parent"] is not None:
            return f"{v['name']} ({v['type'].lower()})"
        return v["name"]

    sub_name = {s: _check(f"subdivision {s}", name(s)) for s in codes}
    types = {**{v: "country" for v in country_name.values()}, **{v: "subdivision" for v in sub_name.values()}}
    if len(types) != len(country_name) + len(sub_name):
        dup = sorted(k for k, m in Counter([*country_name.values(), *sub_name.values()]).items() if m > 1)
        raise DomainError(f"pycountry: two entities of the regions domain have the same name: {', '.join(dup)}")
    facts: list[Fact] = []
    for s in codes:  # relation order of domain.toml: country, parent (part is derived)
        if t.subdivisions[s]["parent"] is None:
            facts.append((sub_name[s], "country", country_name[t.subdivisions[s]["country"]]))
    for s in codes:
        p = t.subdivisions[s]["parent"]
        if p is not None:
            facts.append((sub_name[s], "parent", sub_name[p]))
    order = {r: i for i, r in enumerate(domain.relations)}
    facts.sort(key=lambda f: order[f[1]])
    return Sampled({e: {} for e in types}, types, facts)
