"""The family generator's parameters (:class:`FamilyParams`, each with the EDU-RELAT figure it
reproduces) and its reference data (US population by state, jobs by decade, first names and
surnames, in ``deepunlearn/kg/resources/``). See :mod:`deepunlearn.kg.domains.family.generate`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

#: Relations that are always stored: every other true relation is derivable from them.
BACKBONE_RELATIONS = ("father", "mother", "husband", "wife")
#: Relations the generator may leave to the rules.
OPTIONAL_RELATIONS = ("child", "brother", "sister", "uncle", "aunt", "nephew", "niece")

MALE, FEMALE = "male", "female"
#: How surnames are given (``FamilyParams.names``): ``inherited`` (the paper's: a child takes the
#: father's surname, a wife sometimes her husband's) or ``independent`` (each person draws a surname
#: from the list on their own, so a name says nothing of kinship).
NAME_MODES = ("inherited", "independent")


# ---------------------------------------------------------------------------------- parameters
class FamilyParams(BaseModel):
    """Parameters of the synthetic family generator (defaults give EDU-RELAT-like data).

    Probabilities of growth follow the reference notebook (parents 0.8, geometric children
    with p = 0.4 truncated to 1-4, 4 generations). The notebook marries everyone; here 80 %
    marry and the youngest generation stays single (their children would fall outside the
    four generations), which gives 100 people about as many couples (34) and parent links
    (65) as the release. ``stored_share`` and ``relation_keep_weights`` reproduce the
    release's share and mix of stored relations.

    >>> FamilyParams().stored_share
    0.71
    >>> FamilyParams(p_spouse=1.5)
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for FamilyParams
    p_spouse
      Input should be less than or equal to 1 ...
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # --- growth of the network
    generations: int = Field(4, ge=1, le=12, description="generations in a family tree")
    p_parents: float = Field(0.8, ge=0, le=1, description="chance a person without parents gets them")
    p_spouse: float = Field(0.8, ge=0, le=1, description="chance an unmarried person gets a spouse")
    p_spouse_last_generation: float = Field(
        0.0, ge=0, le=1, description="the same in the youngest generation (who get no children)")
    p_child: float = Field(0.4, gt=0, le=1, description="parameter of the geometric number of children")
    min_children: int = Field(1, ge=1, le=20)
    max_children: int = Field(4, ge=1, le=20)
    parents_have_more_children: bool = Field(
        True, description="parents added above a person also get that person's brothers and sisters")
    # --- birth years
    min_year: int = Field(1890, description="earliest birth year")
    max_year: int = Field(2000, description="latest birth year")
    founder_years: tuple[int, int] = Field((1892, 1912), description="birth years of a tree's first person")
    mother_age_mean: float = Field(28.0, description="mother's age at a birth: mean of the Gaussian")
    mother_age_sd: float = Field(5.0, gt=0)
    mother_age_min: int = Field(18, ge=10)
    mother_age_max: int = Field(45)
    father_min_age: int = Field(18, ge=15, description="a father is at least this much older than his child")
    spouse_gap_mean: float = Field(2.5, description="years a husband is older than his wife: mean of the Gaussian")
    spouse_gap_sd: float = Field(3.5, gt=0)
    spouse_gap_min: int = Field(-5, description="the wife may be up to 5 years older")
    spouse_gap_max: int = Field(12)
    # --- birthplaces and names
    p_birthplace_from_parent: float = Field(0.85, ge=0, le=1,
                                            description="a child is born where a parent was")
    p_birthplace_from_spouse: float = Field(0.5, ge=0, le=1,
                                            description="a spouse married in was born where their partner was")
    p_wife_takes_surname: float = Field(0.2, ge=0, le=1,
                                        description="small chance a wife goes by her husband's surname")
    names: Literal["inherited", "independent"] = Field(
        "inherited", description="inherited: a child takes the father's surname (the paper's, EDU-RELAT's); "
        "independent: every surname is drawn on its own, so names carry no kinship (p_wife_takes_surname unused)")
    # --- what the KB stores
    stored_share: float = Field(0.71, gt=0, le=1, description=(
        "share of true family relations stored (never less than the father/mother/husband/wife backbone)"))
    relation_keep_weights: dict[str, float] = Field(
        default_factory=lambda: {"child": 0.77, "brother": 0.69, "sister": 0.69,
                                 "uncle": 0.24, "aunt": 0.24, "nephew": 0.24, "niece": 0.24},
        description="relative chance of keeping a relation of each optional kind (the release's rates)")
    targets_per_relation: int = Field(5, ge=0, description="targets per family relation")

    @model_serializer(mode="wrap")
    def _dump(self, handler):
        # ``names`` is written only when it is not the paper's: a KB generated with the default
        # names keeps the exact bytes it always had
        out = handler(self)
        if isinstance(out, dict) and out.get("names") == "inherited":
            out.pop("names")
        return out

    @model_validator(mode="after")
    def _consistent(self) -> "FamilyParams":
        if self.min_children > self.max_children:
            raise ValueError("min_children must not exceed max_children")
        if not self.min_year <= self.founder_years[0] <= self.founder_years[1] <= self.max_year:
            raise ValueError("founder_years must lie within [min_year, max_year]")
        if not self.mother_age_min <= self.mother_age_max:
            raise ValueError("mother_age_min must not exceed mother_age_max")
        if not self.spouse_gap_min <= self.spouse_gap_max:
            raise ValueError("spouse_gap_min must not exceed spouse_gap_max")
        missing = set(OPTIONAL_RELATIONS) - set(self.relation_keep_weights)
        unknown = set(self.relation_keep_weights) - set(OPTIONAL_RELATIONS)
        if missing or unknown:
            raise ValueError(f"relation_keep_weights needs exactly {list(OPTIONAL_RELATIONS)} "
                             f"(missing {sorted(missing)}, unknown {sorted(unknown)})")
        if any(not (w > 0) for w in self.relation_keep_weights.values()):
            raise ValueError("relation_keep_weights must be positive")
        return self


# ---------------------------------------------------------------------------------- resources
@dataclass(frozen=True)
class NameResources:
    male: tuple[str, ...]
    female: tuple[str, ...]
    surnames: tuple[str, ...]
    states: tuple[str, ...]
    state_cum: tuple[float, ...]
    jobs_by_decade: dict[int, tuple[str, ...]]


@lru_cache(maxsize=1)
def name_resources() -> NameResources:
    base = resources.files("deepunlearn.kg") / "resources"

    def read(name: str) -> dict:
        return json.loads((base / name).read_text(encoding="utf-8"))

    names, pop, jobs = read("names.json"), read("us_population.json"), read("jobs.json")
    states = tuple(pop["population"])
    weights = np.array([pop["population"][s] for s in states], dtype=float)
    cum = tuple(float(x) for x in np.cumsum(weights / weights.sum()))
    by_decade = {int(k[:4]): tuple(v) for k, v in jobs["jobs_by_decade"].items()}
    return NameResources(tuple(names["male"]), tuple(names["female"]), tuple(names["surnames"]),
                      states, cum, by_decade)
