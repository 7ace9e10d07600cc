"""Domains as plug-ins: a domain is a folder holding ``domain.toml`` and ``rules.dl``.

``domain.toml`` declares the entity types, the background attributes and the relations of a
domain with their probe templates; ``rules.dl`` is the Datalog the rules layer reads. Where a
domain comes from (:func:`load_domain`):

* a built-in name: a folder under ``deepunlearn/kg/domains/`` (``family``);
* a folder path (or the path of its ``domain.toml``): a domain written by anyone, no code change;
* a name another package registers under the entry-point group ``deepunlearn.domains``. The entry
  point's value is either a *package* whose folder holds ``domain.toml`` and ``rules.dl``
  (``acme = "acme_kb.domains.acme"``) or an attribute holding the folder's path
  (``acme = "acme_kb:DOMAIN_DIR"``); a loaded module with a ``DOMAIN_DIR`` attribute uses it.
  A built-in name wins over an entry point of the same name.

Every problem is one :class:`DomainError` line naming the file and the key path, e.g.
``.../domain.toml: relations.advisor.shape: expected one of one, tree, pairs, some, got 'web'``.
This module reads and checks domains only; generating a KB from one is another module's job.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import MAX_SMALL_FILE_BYTES, read_text
from ..limits import MAX_DOMAIN_COUNT, bound_text, too_large
from .kb import KBError, Relation, template_problem
from .names import MAX_NAME_LENGTH, RELATION_NAME, name_problem, shown

ENTRY_POINT_GROUP = "deepunlearn.domains"
#: The built-in name generators an entity type's ``names`` may pick.
NAME_GENERATORS = ("person", "city", "country", "word")
SHAPES = ("one", "tree", "pairs", "some")
ANSWERS = ("{o2}", "{r}")
#: The object type of a relation whose objects are free values (birthyear), not entities.
VALUE = "value"
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class DomainError(KBError):
    """A domain folder, its ``domain.toml`` or a domain name is wrong: the message names it."""


def table_name(source: str, where: str, name: str) -> str:
    """``name`` as read from a package's table (``source``: the package, ``where``: the row), or a
    DomainError naming both when it cannot be an entity name (:func:`.names.name_problem`)."""
    problem = name_problem(name)
    if problem:
        raise DomainError(f"{source}: {where}: name {shown(name)} {problem}")
    return name


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EntityType(_Strict):
    """``[entities.TYPE]``: ``count`` entities named by ``names`` (a built-in generator or a
    list), or the fixed ``values``."""

    count: int | None = Field(default=None, ge=1, strict=True)  # strict: ``count = true`` is not 1
    values: list[str] | None = Field(default=None, min_length=1)
    names: Any = None

    @field_validator("names")
    @classmethod
    def _names(cls, v: Any) -> Any:
        if v is None or (isinstance(v, str) and v in NAME_GENERATORS):
            return v
        if isinstance(v, list) and v and all(isinstance(x, str) and x.strip() for x in v):
            if len(set(v)) != len(v):  # a repeated name would make two entities one
                raise ValueError(f"names must be distinct, {sorted({x for x in v if v.count(x) > 1})} repeat")
            return v
        raise ValueError(f"expected a built-in name generator ({', '.join(NAME_GENERATORS)}) or a non-empty list "
                         f"of names, got {v!r}")

    @field_validator("values")
    @classmethod
    def _distinct(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and len(set(v)) != len(v):
            raise ValueError(f"values must be distinct, {sorted({x for x in v if v.count(x) > 1})} repeat")
        return v


class Attribute(_Strict):
    """``[attributes.NAME]``: a background attribute of entity type ``of`` (rules use it; it is
    never unlearned or scored)."""

    of: str
    values: list[str] = Field(min_length=1)


class RelationSpec(_Strict):
    """``[relations.NAME]``: ``o2`` is ``o1``'s NAME. ``shape`` says how the generator samples it
    (absent: the relation is derived by the rules, or by a domain's own generator)."""

    subject: str
    object: str
    group: str = Field(min_length=1)
    shape: Literal["one", "tree", "pairs", "some"] | None = None
    branching: int | None = Field(default=None, ge=1, strict=True)
    questions: list[str] = Field(min_length=1)
    statements: list[str] = Field(default_factory=list)
    answer: Literal["{o2}", "{r}"] = "{o2}"


class DomainFile(_Strict):
    """The whole ``domain.toml``."""

    name: str = Field(min_length=1)
    description: str = ""
    #: share of the facts the rules derive that a generated KB stores (absent: like the release,
    #: 400 stored of a 562-fact closure)
    stored_derived: float | None = Field(default=None, ge=0, le=1)
    entities: dict[str, EntityType] = Field(min_length=1)
    attributes: dict[str, Attribute] = Field(default_factory=dict)
    relations: dict[str, RelationSpec] = Field(min_length=1)


@dataclass(frozen=True)
class Domain:
    """A checked domain folder. ``entities`` keeps the file's order: the first type is the one
    ``--people`` counts (:attr:`people_type`)."""

    name: str
    description: str
    folder: Path
    entities: dict[str, EntityType]
    attributes: dict[str, Attribute]
    relations: dict[str, RelationSpec]
    stored_derived: float | None = None

    @property
    def rules_path(self) -> Path:
        return self.folder / "rules.dl"

    @property
    def people_type(self) -> str:
        return next(iter(self.entities))

    def groups(self) -> list[str]:
        """The relation groups, in order of first use (accuracy is reported per group)."""
        return list(dict.fromkeys(r.group for r in self.relations.values()))

    def kb_relations(self) -> dict[str, Relation]:
        """The KB relations of this domain (KB version 2): kind ``value`` where the object is
        ``value``, else ``entity``; the group; the first question as the probe, the others and the
        statements as template forms."""
        return {n: Relation(n, "value" if r.object == VALUE else "entity", r.questions[0], r.answer, r.group,
                            tuple(r.questions[1:]), tuple(r.statements)) for n, r in self.relations.items()}

    def rules_text(self) -> str:
        return read_text(self.rules_path, error=DomainError, limit=MAX_SMALL_FILE_BYTES)

    def rule_count(self) -> int:
        """Statements in ``rules.dl`` (text ending in ``.`` outside ``%``/``#`` comments), counted
        without the rules layer, which kg may not import."""
        return count_statements(self.rules_text())


def count_statements(text: str) -> int:
    """Datalog statements: non-comment text closed by a ``.`` at the end of a word.

    >>> count_statements("% two rules\\na(X, Y) :- b(Y, X).\\nc(X) :-\\n  a(X, Y).\\n")
    2
    """
    body = "\n".join(re.split(r"[%#]", line, maxsplit=1)[0] for line in text.splitlines())
    return sum(1 for chunk in re.split(r"\.(?=\s|$)", body)[:-1] if chunk.strip())


# --------------------------------------------------------------------------- checking
def _message(err: dict) -> str:
    kind, msg, got = err["type"], err["msg"], err.get("input")
    if kind == "missing":
        return "missing (required)"
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "literal_error":
        choices = SHAPES if err["loc"][-1] == "shape" else ANSWERS
        return f"expected one of {', '.join(choices)}, got {got!r}"
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    return f"{msg[0].lower()}{msg[1:]}, got {got!r}"


def _check(d: DomainFile) -> tuple[str, str] | None:
    """The first cross-check that fails, as (key path, problem)."""
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", d.name):
        return "name", f"expected letters, digits, '_', '-' or '.', got {d.name!r}"
    for t, e in d.entities.items():
        if not _IDENT.match(t):
            return f"entities.{t}", "an entity type is a name of letters, digits and '_'"
        for key in ("values", "names"):
            listed = getattr(e, key)
            for k, n in enumerate(listed if isinstance(listed, list) else ()):
                problem = name_problem(n)
                if problem:
                    return f"entities.{t}.{key}[{k}]", f"entity name {shown(n)} {problem}"
        if (e.count is None) == (e.values is None):
            return f"entities.{t}", "give either count (with names) or values"
        if e.count is not None and too_large(e.count, MAX_DOMAIN_COUNT):  # the bound --people has
            return f"entities.{t}.count", bound_text(e.count, MAX_DOMAIN_COUNT, "entities")
        if e.values is not None and e.names is not None:
            return f"entities.{t}.names", "names goes with count; values already names the entities"
    for a, spec in d.attributes.items():
        if spec.of not in d.entities:
            return f"attributes.{a}.of", f"{spec.of!r} is not a declared entity type ({', '.join(d.entities)})"
        for k, v in enumerate(spec.values):
            problem = name_problem(v)
            if problem:
                return f"attributes.{a}.values[{k}]", f"value {shown(v)} {problem}"
    for r, spec in d.relations.items():
        where = f"relations.{r}"
        if not RELATION_NAME.match(r) or len(r) > MAX_NAME_LENGTH:
            return where, ("a relation is a name of a lower-case letter, then letters, digits and '_' "
                           f"(rules.dl names it), at most {MAX_NAME_LENGTH} characters")
        if r in d.attributes:
            return where, f"{r!r} is also an attribute"
        if spec.subject not in d.entities:
            return f"{where}.subject", f"{spec.subject!r} is not a declared entity type ({', '.join(d.entities)})"
        if spec.object not in d.entities and spec.object != VALUE:
            return f"{where}.object", (f"{spec.object!r} is not a declared entity type ({', '.join(d.entities)}) "
                                       f"or {VALUE!r}")
        if spec.shape is not None and spec.object == VALUE:
            return f"{where}.shape", (f"a sampled relation draws its objects from an entity type; declare the "
                                      f"values as [entities.TYPE] values = [...] instead of object = {VALUE!r}")
        if spec.shape in ("tree", "pairs") and spec.subject != spec.object:
            return f"{where}.shape", f"{spec.shape!r} relates one type to itself, got {spec.subject} -> {spec.object}"
        if spec.branching is not None and spec.shape not in ("tree", "some"):
            return f"{where}.branching", f"only with shape tree or some, got shape {spec.shape!r}"
        slot = spec.answer
        for k, q in enumerate(spec.questions):
            bad = template_problem(q)
            if bad is None and "{o1}" not in q:
                bad = "does not name the subject {o1}"
            if bad is None and slot in q:
                bad = f"gives its answer {slot} away"
            if bad is None and slot == "{r}" and "{o2}" not in q:
                bad = "does not name {o2} (the answer is the relation)"
            if bad:
                return f"{where}.questions.{k}", f"{q!r}: {bad}"
        for k, s in enumerate(spec.statements):
            bad = template_problem(s)
            if bad is None and s.find(slot, 1) < 0:
                bad = (f"needs the answer {slot} after the start (the text before it is the probe); "
                       + ("reword it so that it opens with something else, e.g. 'The ... of {o1} is "
                          f"{slot}.'" if s.startswith(slot) else f"it has no {slot}"))
            if bad:
                return f"{where}.statements.{k}", f"{s!r}: {bad}"
    return None


def read_domain(folder: str | os.PathLike) -> Domain:
    """Read and check the domain folder ``folder`` (its ``domain.toml`` and ``rules.dl``)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DomainError(f"{folder}: domain folder not found (a domain is a folder with domain.toml and rules.dl)",
                          file=folder)
    toml_path = folder / "domain.toml"
    text = read_text(toml_path, error=DomainError, limit=MAX_SMALL_FILE_BYTES)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise DomainError(f"{toml_path}: TOML syntax error: {e}", file=toml_path) from None
    except RecursionError:  # tomllib recurses into nested arrays and inline tables
        raise DomainError(f"{toml_path}: nested too deeply to read", file=toml_path) from None
    try:
        d = DomainFile.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        raise DomainError(f"{toml_path}: {key}: {_message(err)}", file=toml_path, field=key) from None
    bad = _check(d)
    if bad is not None:
        raise DomainError(f"{toml_path}: {bad[0]}: {bad[1]}", file=toml_path, field=bad[0])
    dom = Domain(d.name, d.description.strip(), folder, dict(d.entities), dict(d.attributes), dict(d.relations),
                 d.stored_derived)
    if not dom.rules_path.is_file():
        what = "is a folder, expected a file" if dom.rules_path.is_dir() else "no such file"
        raise DomainError(f"{dom.rules_path}: {what} (a domain folder holds its rules in rules.dl)",
                          file=dom.rules_path)
    return dom


# --------------------------------------------------------------------------- finding
def builtin_folder() -> Path:
    """The folder of the built-in domains (package data)."""
    return Path(str(resources.files("deepunlearn.kg") / "domains"))


def builtin_domains() -> list[str]:
    """Names of the built-in domains: the folders under ``kg/domains/`` with a ``domain.toml``."""
    root = builtin_folder()
    return sorted(p.name for p in root.iterdir() if (p / "domain.toml").is_file()) if root.is_dir() else []


def _entry_points() -> dict[str, Any]:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def list_domains() -> list[str]:
    """Every domain name :func:`load_domain` knows: built-in ones, then entry-point ones."""
    names = builtin_domains()
    return names + sorted(n for n in _entry_points() if n not in names)


def _entry_point_folder(name: str, ep: Any) -> Path:
    where = f"domain {name!r} (entry point {ep.value!r} in group {ENTRY_POINT_GROUP})"
    try:
        obj = ep.load()
    except Exception as e:  # an installed plug-in that does not import is the user's setup, not our bug
        raise DomainError(f"{where}: cannot load it ({type(e).__name__}: {e})") from None
    if isinstance(obj, (str, os.PathLike)):
        return Path(obj)
    if getattr(obj, "DOMAIN_DIR", None) is not None:
        return Path(obj.DOMAIN_DIR)
    paths = list(getattr(obj, "__path__", []))
    if paths:
        return Path(paths[0])
    raise DomainError(f"{where}: expected a package folder, a module with DOMAIN_DIR or a folder path, "
                      f"got {type(obj).__name__}")


def domain_folder(name_or_path: str | os.PathLike) -> Path:
    """The folder a domain name or path refers to (see the module docstring for the order)."""
    if isinstance(name_or_path, os.PathLike):
        p = Path(name_or_path)
    else:
        s = str(name_or_path)
        if s in builtin_domains():
            return builtin_folder() / s
        eps = _entry_points() if os.sep not in s and "/" not in s else {}
        if s in eps:
            return _entry_point_folder(s, eps[s])
        p = Path(s)
        if not p.exists() and os.sep not in s and "/" not in s and not s.startswith("."):
            raise DomainError(f"unknown domain {s!r}: expected one of {', '.join(list_domains()) or '(none)'} "
                              "or a path to a domain folder")
    return p.parent if p.is_file() and p.name == "domain.toml" else p


def load_domain(name_or_path: str | os.PathLike) -> Domain:
    """A :class:`Domain` from a built-in name, a folder path or an entry-point name.

    >>> d = load_domain("family")
    >>> d.name, d.people_type, d.groups()
    ('family', 'person', ['family', 'biography'])
    >>> load_domain("no-such-domain")
    Traceback (most recent call last):
    ...
    deepunlearn.kg.domain.DomainError: unknown domain 'no-such-domain': expected one of family, geo, org, regions or a path to a domain folder
    """
    return read_domain(domain_folder(name_or_path))
