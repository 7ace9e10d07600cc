"""The regions domain: its stored facts are pycountry's ISO 3166-2 tables, and the closure of its
rules is exactly what the tables say (every subdivision's country, parent and parts). Every
expectation here is computed from the package directly, not from the domain's generator module."""

from __future__ import annotations

import re
from functools import lru_cache

import pytest

pycountry = pytest.importorskip("pycountry")

from deepunlearn.rules import load_rules  # noqa: E402
from deepunlearn.rules.closure import closure  # noqa: E402
from deepunlearn.rules.generate import generate_domain  # noqa: E402
from tests.kg.kg_helpers import cli  # noqa: E402

ORDER = ("FR", "ES", "IT", "BE", "US", "DE", "JP", "CA", "AU", "IN", "CN", "BR", "MX", "GB")


@lru_cache(maxsize=None)
def table(n: int) -> tuple[dict[str, str], dict[str, tuple[str, str, str, str | None]]]:
    """Country code -> name, subdivision code -> (name, type, country code, parent code) of the first n."""
    countries = {c: pycountry.countries.get(alpha_2=c).name for c in ORDER[:n]}
    subs = {}
    for s in pycountry.subdivisions:
        if s.country_code in countries:
            p = s.parent_code
            subs[s.code] = (s.name, s.type, s.country_code, None if p is None else p if "-" in p else
                            f"{s.country_code}-{p}")
    return countries, subs


def resolve(name: str, n: int) -> str:
    """The one subdivision code a KB name stands for: pycountry's name, or "Name (type)" / "Name (Country)"."""
    countries, subs = table(n)
    m = re.fullmatch(r"(.*) \(([^()]*)\)", name)
    cands = [c for c, v in subs.items() if v[0] == name]
    if not cands and m:
        cands = [c for c, v in subs.items() if v[0] == m.group(1)
                 and (v[1].lower() == m.group(2) or countries[v[2]] == m.group(2))]
    if len(cands) > 1:  # a shared name without a suffix is the one without a parent
        cands = [c for c in cands if subs[c][3] is None]
    assert len(cands) == 1, (name, cands)
    return cands[0]


def table_closure(n: int) -> set[tuple[str, str, str]]:
    """country, parent and part facts of every subdivision, in codes, from the tables alone."""
    countries, subs = table(n)
    out = set()
    for c, (_, _, cc, p) in subs.items():
        out.add((c, "country", cc))
        if p is not None:
            out |= {(c, "parent", p), (p, "part", c)}
    return out


def in_codes(facts, n: int) -> set[tuple[str, str, str]]:
    countries = {v: k for k, v in table(n)[0].items()}
    return {(resolve(s, n), r, countries[o] if r == "country" else resolve(o, n)) for s, r, o in facts}


@pytest.fixture(scope="module")
def regions6():
    return generate_domain("regions")


@pytest.mark.parametrize("n", [6, 14])
def test_the_closure_is_exactly_the_tables(n, regions6):
    kb = regions6 if n == 6 else generate_domain("regions", n)
    _, subs = table(n)
    names = [e for e in kb.entities if e not in table(n)[0].values()]
    assert sorted(resolve(e, n) for e in names) == sorted(subs)  # one entity per subdivision, none twice
    # stored: parent of every nested subdivision, country of every top-level one, a share of the rest
    sampled = {(c, "parent", v[3]) for c, v in subs.items() if v[3]} | {(c, "country", v[2]) for c, v in subs.items()
                                                                         if v[3] is None}
    stored = in_codes(kb.facts, n)
    assert sampled <= stored <= table_closure(n)
    assert kb.metadata["stats"]["sampled"] == len(sampled)
    got = in_codes(closure(kb, load_rules("regions")).facts, n)
    assert got == table_closure(n)


def _without(rules, k):
    return type(rules)(rules.name, [r for j, r in enumerate(rules.rules) if j != k], rules.source)


def test_every_rule_is_needed(regions6):
    """Each rule derives facts of the tables the others do not: part and the country carried down
    from the stored parents; parent and the country carried up from parts, on the KB that stores
    each parent link as a part fact and only the countries of subdivisions without parts."""
    from deepunlearn.kg.kb import KnowledgeBase

    rules = load_rules("regions")
    want = table_closure(6)
    assert [str(r).split(" :- ")[0] for r in rules.rules] == ["part(P, X)", "parent(X, P)", "country(X, C)",
                                                               "country(P, C)"]
    full = closure(regions6, rules).facts
    parents = {o for _, r, o in full if r == "parent"}
    flipped = [(o, "part", s) for s, r, o in full if r == "parent"]  # parents as parts, the countries of leaves only
    flipped += [(s, r, o) for s, r, o in full if r == "country" and s not in parents]
    parts = KnowledgeBase(entities=regions6.entities, relations=regions6.relations, facts=flipped, name="parts",
                          background=regions6.background)
    for kb, needed in ((regions6, (0, 2)), (parts, (1, 3))):
        assert in_codes(closure(kb, rules).facts, 6) == want
        for k in needed:
            got = in_codes(closure(kb, _without(rules, k)).facts, 6)
            assert got < want, str(rules.rules[k])
    full = set(closure(regions6, rules).facts)
    assert {("Bas-Rhin", "parent", "Alsace"), ("Alsace", "parent", "Grand-Est"), ("Bas-Rhin", "country", "France"),
            ("Grand-Est", "part", "Alsace"), ("Cantabria (province)", "country", "Spain"),
            ("Bayern", "country", "Germany"), ("Texas", "country", "United States")} <= full


def test_generate_cli_and_bounds(tmp_path, capsys):
    out = tmp_path / "r.json"
    code, o, err = cli(capsys, "data", "generate", "--domain", "regions", "--countries", "4", "-o", str(out))
    assert code == 0, err
    assert "regions domain, 4 countries" in o
    code, o, err = cli(capsys, "data", "generate", "--domain", "regions", "--countries", "15", "-o",
                       str(tmp_path / "x.json"))
    assert code == 1 and "15 countries asked for, the regions domain has 14" in err and len(err.splitlines()) == 1
