"""Warnings on a domain folder that loads but makes a KB a model cannot be fairly probed on
(``data check-domain DIR``; ``data generate --domain DIR`` prints them too).

Each is one line naming ``domain.toml``, the key of the relation or entity type, the problem and
the fix (:class:`DomainWarning`):

* **a relation answered by its own name, asked with a template no other relation shares**
  (``answer = "{r}"``, "What is {o2} to {o1} in the graph?" -> ``depends_on``): the answer is the
  same for every pair, true or false, so a model answers it without knowing any fact. The family
  domain asks eleven relations "Who is {o2} to {o1}?" and org three "What is {o2} to {o1} in the
  reporting line?": there the relation's name is what the model must tell apart.
* **an entity-answer question on a relation with several objects per subject** ("Who is {o1}'s
  colleague?" when a person has five): the probe counts only the stored object, so a model that
  names another true one is marked wrong. A question that asks for one of them ("Name a skill of
  {o1}", "Who is one of {o1}'s reports?": an article ``a``/``an``, ``one of``, ``any``, ``some``)
  says so and is not flagged. How many objects a subject has comes from the closure of a sampled
  KB (the rules layer computes it) or, without one, from the shape (``some`` with ``branching`` > 1).
* **name pools too small**: more entities than a name list or a built-in list (``word``: 80
  names, ``city``: 60, ``country``: 40, shared by every type that draws from it) holds; or too few
  names left for a holdout (``data holdout`` names as many new entities of the first type as the KB
  has, apart from the KB's own).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .domain import VALUE, Domain

#: words of a question that ask for one of several objects ("Name a skill of {o1}.")
_ONE_OF = re.compile(r"\b(one of|an?|any|some|someone|something)\b", re.IGNORECASE)


def plural(noun: str, n: int = 2) -> str:
    """``noun`` for ``n`` things: an entity type's name as messages say it.

    >>> plural("package", 70), plural("person", 3), plural("country"), plural("city", 1), plural("class")
    ('packages', 'people', 'countries', 'city', 'classes')
    """
    if n == 1:
        return noun
    if noun == "person":
        return "people"
    if re.search(r"[^aeiou]y$", noun):
        return noun[:-1] + "ies"
    if re.search(r"(s|x|z|ch|sh)$", noun):
        return noun + "es"
    return noun + "s"


@dataclass(frozen=True)
class DomainWarning:
    """One warning: the file, the key (``relations.NAME`` or ``entities.TYPE...``), what is wrong
    and the fix."""

    file: Path
    key: str
    problem: str
    fix: str

    def line(self) -> str:
        return f"{self.file}: {self.key}: {self.problem}; fix: {self.fix}"

    def to_json(self) -> dict:
        return {"file": str(self.file), "key": self.key, "problem": self.problem, "fix": self.fix}


def _toml(dom: Domain) -> Path:
    return dom.folder / "domain.toml"


def template_warnings(dom: Domain) -> list[DomainWarning]:
    """Relations answered ``{r}`` with a question or statement template no other ``{r}`` relation has."""
    by_name = {r: s for r, s in dom.relations.items() if s.answer == "{r}"}
    out = []
    for r, spec in by_name.items():
        others = [s for o, s in by_name.items() if o != r]
        for key, templates in (("questions", spec.questions), ("statements", spec.statements)):
            alone = [t for t in templates if not any(t in getattr(s, key) for s in others)]
            if alone:
                out.append(DomainWarning(
                    _toml(dom), f"relations.{r}.{key}",
                    f"relation {r!r} is answered by its own name (answer = \"{{r}}\") and asked {alone[0]!r}, which "
                    "no other relation shares: every pair gets the same answer, true or false, so a model answers "
                    "it knowing no fact",
                    f"ask the object instead (answer = \"{{o2}}\", e.g. \"Which ... is {{o1}}'s {r}?\"), or give it "
                    "the same templates as the relations it must be told apart from (as family's 'Who is {o2} to "
                    "{o1}?')"))
                break
    return out


def several_warnings(dom: Domain, objects: dict[str, int] | None = None) -> list[DomainWarning]:
    """Entity-answer relations with several objects per subject (``objects``: the most a subject
    has, from a sampled KB's closure; without it, from the shapes) asked as if there were one."""
    out = []
    for r, spec in dom.relations.items():
        if spec.answer != "{o2}" or spec.object == VALUE:
            continue
        if objects is not None and r in objects:
            most = objects[r]
        else:
            most = (spec.branching or 2) if spec.shape == "some" else 1
        q = spec.questions[0]
        if most > 1 and not _ONE_OF.search(q.replace("{o1}", "").replace("{o2}", "")):
            out.append(DomainWarning(
                _toml(dom), f"relations.{r}.questions",
                f"relation {r!r} asks {q!r} for one {spec.object}, but one {spec.subject} has up to {most} of "
                "them: a model naming another true one is marked wrong",
                f"ask for the relation (answer = \"{{r}}\", a question naming {{o1}} and {{o2}}, shared with "
                f"related relations), or for one of them (\"Name one of {{o1}}'s ...\"), or make it one {spec.object} "
                "per subject (shape = \"one\"), or probe each with the others set aside (data generate "
                "--other-answers aside)"))
    return out


#: the built-in name lists (``kg/resources/domain_names.json``); ``person`` names are unbounded
def _pool(spec) -> tuple[str, int] | None:
    from .sample import name_lists

    if spec.values is not None:
        return None
    if isinstance(spec.names, list):
        return "list", len(spec.names)
    name = spec.names or "word"
    return (name, len(name_lists()[name])) if name in name_lists() else None


def pool_warnings(dom: Domain, people: int | None = None, *, holdout: bool = True) -> list[DomainWarning]:
    """Entity types asking for more names than their pool holds; and, with ``holdout``, a first
    type whose pool leaves too few names for ``data holdout``. ``people`` replaces the first
    type's ``count`` (``--people``)."""
    counts = {}
    for k, (t, spec) in enumerate(dom.entities.items()):
        counts[t] = (people if k == 0 and people is not None and spec.values is None
                     else spec.count if spec.values is None else len(spec.values))
    shared: dict[str, int] = {}
    for t, spec in dom.entities.items():
        pool = _pool(spec)
        if pool is not None and pool[0] != "list":
            shared[pool[0]] = shared.get(pool[0], 0) + counts[t]
    out = []
    for t, spec in dom.entities.items():
        pool = _pool(spec)
        if pool is None:
            continue
        kind, size = pool
        want = counts[t] if kind == "list" else shared[kind]
        if want > size:
            src = (f"entities.{t}.names lists {size}" if kind == "list"
                   else f"the built-in {kind!r} list has {size} names for {want} entities of "
                        + ", ".join(x for x, s in dom.entities.items() if _pool(s) and _pool(s)[0] == kind))
            out.append(DomainWarning(_toml(dom), f"entities.{t}.count",
                                     f"{counts[t]} {plural(t, counts[t])} asked for, but {src}",
                                     f"give entities.{t}.names a list of at least {counts[t]} names, or a smaller "
                                     "count (--people for the first type)"))
    first, spec = next(iter(dom.entities.items()))
    pool = _pool(spec)
    if holdout and not any(w.key.startswith(f"entities.{first}.") for w in out):
        n = counts[first]
        if spec.values is not None:
            problem = f"the {plural(first)} are the fixed values, so 'data holdout' cannot draw new ones"
        elif pool is not None and pool[1] - (n if pool[0] == "list" else shared[pool[0]]) < n:
            free = pool[1] - (n if pool[0] == "list" else shared[pool[0]])
            problem = (f"a holdout needs {n} new {plural(first, n)} named apart from the KB's, and "
                       f"{'the list' if pool[0] == 'list' else f'the built-in {pool[0]!r} list'} has {max(free, 0)} "
                       "names the KB does not use")
        else:
            problem = ""
        if problem:
            out.append(DomainWarning(_toml(dom), f"entities.{first}",
                                     problem, f"give entities.{first}.names a list of at least {2 * n} names (or "
                                              "names = \"person\"), or calibrate with 'deepunlearn data never-true' "
                                              "(wrong objects of the KB's own facts) instead of a holdout"))
    return out


def check_domain(dom: Domain, *, objects: dict[str, int] | None = None, people: int | None = None,
                 pools: bool = True) -> list[DomainWarning]:
    """Every warning on ``dom`` (module docstring), relations in file order, then entity types;
    ``pools=False`` for a domain whose own sampler names its entities (geo reads them from GeoNames)."""
    return template_warnings(dom) + several_warnings(dom, objects) + (pool_warnings(dom, people) if pools else [])
