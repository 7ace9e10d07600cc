"""The generated family's people look real: unique, gendered names from the name lists (middle
initials where the lists run short), birth years over four generations, birthplaces weighted by
population and mostly shared with a parent, jobs of the birth decade."""

from __future__ import annotations

from collections import Counter

from deepunlearn.kg.domains.family.generate import generate_family
from deepunlearn.kg.domains.family.network import _job_decade
from deepunlearn.kg.domains.family.params import name_resources

from kg_helpers import bio_of as _bio, generated, surname as _surname  # noqa: F401  (generated: a fixture)

M = "male"


def test_names_are_unique_realistic_and_gendered():
    kb = generate_family(3000, 2)
    res = name_resources()
    assert len(kb.entities) == 3000              # dict keys: a clash would have merged people
    for name, attrs in kb.entities.items():
        first = name.split(" ")[0]
        assert first in (res.male if attrs["gender"] == M else res.female), name
        assert _surname(name) in res.surnames


def test_middle_initials_keep_names_unique_when_lists_run_short(monkeypatch):
    """With five first names per gender and one surname, only middle initials tell people apart."""
    import deepunlearn.kg.domains.family.network as net
    from deepunlearn.kg.domains.family.params import NameResources

    real = name_resources()
    small = NameResources(real.male[:5], real.female[:5], real.surnames[:1], real.states, real.state_cum,
                          real.jobs_by_decade)
    monkeypatch.setattr(net, "name_resources", lambda: small)  # where the growing and naming steps look it up
    kb = generate_family(60, 0)
    assert len(kb.entities) == 60
    initials = [n for n in kb.entities if ". " in n]
    assert len(initials) >= 40
    assert all(n.split(" ")[1][0].isupper() and n.split(" ")[1].endswith(".") for n in initials)


def test_biography_values(generated):
    res = name_resources()
    states = {f"{s} state" for s in res.states}
    for _, _, kb, truth in generated:
        bio = _bio(kb)
        for p, v in bio.items():
            assert v["birthyear"].isdigit()
            assert v["birthplace"] in states
            assert v["job"] in res.jobs_by_decade[_job_decade(int(v["birthyear"]), res.jobs_by_decade)]
        same = total = 0
        for s, r, o in truth:
            if r == "father":
                mother = next(m for x, rr, m in truth if x == s and rr == "mother")
                total += 1
                same += bio[s]["birthplace"] in (bio[o]["birthplace"], bio[mother]["birthplace"])
        assert same / total >= 0.7          # children are mostly born where a parent was


def test_birthplaces_follow_the_population():
    """Over many founders, the populous states dominate (California ~12 % of the US)."""
    kb = generate_family(4000, 9)
    places = Counter(v["birthplace"] for v in _bio(kb).values())
    assert places.most_common(1)[0][1] < 0.5 * 4000
    big = sum(places[f"{s} state"] for s in ("California", "Texas", "Florida", "New York"))
    small = sum(places[f"{s} state"] for s in ("Wyoming", "Vermont", "Alaska", "North Dakota"))
    assert big > 5 * max(small, 1)


def test_birth_years_spread_over_four_generations(generated):
    for n, _, kb, _ in generated:
        years = sorted(int(v["birthyear"]) for v in _bio(kb).values())
        if n >= 100:
            assert years[-1] - years[0] >= 60
            decades = Counter(y // 10 for y in years)
            assert len(decades) >= 6
