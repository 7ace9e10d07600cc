"""Import any knowledge graph given as triples: TSV, CSV or JSON lines, checked against a domain.

A row is ``subject, relation, object`` ("object is subject's relation"), optionally followed by
``split`` (``train``, ``test`` or ``unlearn``; ``unlearn`` facts become the KB's targets) and
``aliases`` (other names of the subject, separated by ``|``, which no name may hold). TSV and
CSV may open with a header naming the columns (``subject relation object [split] [aliases]``,
in any order; ``alias`` is read as ``aliases``); without one the columns are in that order.
Blank lines and lines starting with ``#`` are skipped. A JSON-lines row is ``{"subject", "relation", "object", "split"?,
"aliases"?}`` (aliases a list or a ``|``-separated string) or ``[subject, relation, object]``.
A row whose relation is one of the domain's attributes (``gender``) gives the subject that
background attribute.

The domain (:class:`~.domain.Domain`) gives the relations, their templates and entity types;
every entity gets the type most of its rows imply. :func:`check_triples` lists every problem
with its line: a row that cannot be read (an unclosed quote included), an unknown relation, a
bad name or split, a fact relating an entity to itself, an entity used as the wrong type, a duplicate fact, a fact of a symmetric relation (the rules say
``r(Y, X) :- r(X, Y).``: the caller passes them, kg does not read rules) stored one way only, an
alias that names another entity. Duplicates and one-way facts are *repairable*: with
``repair`` the duplicate is dropped and the reverse fact added after its line, and the repairs
are listed. Aliases are kept in ``metadata["aliases"]`` (entity -> names) and give every fact
whose subject has one an explicit ``qa`` form named ``alias``: the relation's question with the
alias in the subject's place.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import read_text, text_lines
from .domain import VALUE, Domain
from .kb import Fact, KBError, KnowledgeBase
from .names import name_problem, shown

FORMATS = ("tsv", "csv", "jsonl")
COLUMNS = ("subject", "relation", "object", "split", "aliases")
SPLITS = ("train", "test", "unlearn")
ALIAS_SEPARATOR = "|"
ALIAS_FORM = "alias"
_HEADER_NAMES = {"alias": "aliases"}
_SUFFIXES = {".tsv": "tsv", ".tab": "tsv", ".txt": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


class TriplesError(KBError):
    """A triples file cannot be read or imported: the message names the file (and line)."""


@dataclass(frozen=True)
class Row:
    """One triple of the file and the line it starts on."""

    line: int
    subject: str
    relation: str
    object: str
    split: str | None = None
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Problem:
    """What is wrong on ``line``; ``repair`` says what ``--repair`` does about it (None: nothing)."""

    line: int
    message: str
    repair: str | None = None


@dataclass
class Checked:
    """The outcome of :func:`check_triples`: the facts (repaired where asked), their lines, the
    entities with their types and attributes, targets, splits, aliases, the problems left and the
    repairs made."""

    facts: list[Fact] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)
    attributes: dict[str, dict[str, str]] = field(default_factory=dict)
    splits: dict[int, str] = field(default_factory=dict)
    aliases: dict[str, list[str]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    repairs: list[Problem] = field(default_factory=list)


def triples_format(path: str | os.PathLike, fmt: str | None = None) -> str:
    """``fmt`` if given, else from the suffix (``.csv`` csv, ``.jsonl``/``.ndjson`` jsonl, else tsv)."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise TriplesError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}", field="--format")
        return fmt
    return _SUFFIXES.get(Path(path).suffix.lower(), "tsv")


def _aliases(value: Any) -> tuple[str, ...] | str:
    """Alias names from a cell or a JSON value, or a problem."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        return tuple(a.strip() for a in value.split(ALIAS_SEPARATOR) if a.strip())
    if isinstance(value, list) and all(isinstance(a, str) for a in value):
        return tuple(a.strip() for a in value if a.strip())
    return f"aliases: expected a string or a list of strings, found {json.dumps(value)[:60]}"


def _cells_rows(records: list[tuple[int, list[str]]]) -> tuple[list[Row], list[Problem]]:
    rows: list[Row] = []
    problems: list[Problem] = []
    cols = {c: k for k, c in enumerate(COLUMNS)}
    first = [_HEADER_NAMES.get(c.strip().lower(), c.strip().lower()) for c in records[0][1]] if records else []
    if set(COLUMNS[:3]) <= set(first):  # a header: the columns in its order
        header = first
        unknown = [c for c in header if c not in COLUMNS]
        if unknown or len(set(header)) != len(header):
            problems.append(Problem(records[0][0], f"header: expected the columns {', '.join(COLUMNS)} (each once), "
                                                   f"found {', '.join(header)}"))
            return rows, problems
        cols = {c: k for k, c in enumerate(header)}
        records = records[1:]
    for line, cells in records:
        cells = [c.strip() for c in cells]
        if len(cells) < 3:
            problems.append(Problem(line, f"expected at least 3 columns (subject, relation, object), "
                                          f"found {len(cells)}"))
            continue
        if len(cells) > len(cols):
            problems.append(Problem(line, f"expected at most {len(cols)} columns ({', '.join(cols)}), "
                                          f"found {len(cells)}"))
            continue
        get = lambda c: cells[cols[c]] if c in cols and cols[c] < len(cells) else ""  # noqa: E731
        al = _aliases(get("aliases"))
        if isinstance(al, str):
            problems.append(Problem(line, al))
            continue
        rows.append(Row(line, get("subject"), get("relation"), get("object"), get("split") or None, al))
    return rows, problems


def _jsonl_rows(text: str) -> tuple[list[Row], list[Problem]]:
    from ..errors import parse_json

    rows: list[Row] = []
    problems: list[Problem] = []
    for line, raw in enumerate(text_lines(text), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        try:
            v = parse_json(raw, error=TriplesError)
        except TriplesError as e:
            problems.append(Problem(line, str(e).removeprefix("<input>").lstrip(":0123456789 ")))
            continue
        if isinstance(v, list) and len(v) == 3 and all(isinstance(x, str) for x in v):
            rows.append(Row(line, v[0].strip(), v[1].strip(), v[2].strip()))
            continue
        if not isinstance(v, dict) or not all(isinstance(v.get(k), str) for k in COLUMNS[:3]):
            problems.append(Problem(line, 'expected {"subject": ..., "relation": ..., "object": ...} (strings) or '
                                          "[subject, relation, object]"))
            continue
        extra = sorted(set(v) - set(COLUMNS))
        split = v.get("split")
        al = _aliases(v.get("aliases"))
        if extra or not (split is None or isinstance(split, str)) or isinstance(al, str):
            problems.append(Problem(line, f"unknown keys {', '.join(map(repr, extra))}" if extra else
                                    al if isinstance(al, str) else "split: expected a string"))
            continue
        rows.append(Row(line, v["subject"].strip(), v["relation"].strip(), v["object"].strip(),
                        (split or "").strip() or None, al))
    return rows, problems


def read_triples(path: str | os.PathLike, fmt: str | None = None, *,
                 flag: str | None = None) -> tuple[list[Row], list[Problem]]:
    """The rows of a triples file and the problems of the rows that cannot be read (with lines)."""
    fmt = triples_format(path, fmt)
    text = read_text(path, flag=flag, error=TriplesError)
    if fmt == "jsonl":
        return _jsonl_rows(text)
    records: list[tuple[int, list[str]]] = []
    if fmt == "tsv":
        for line, raw in enumerate(text_lines(text), 1):
            if raw.strip() and not raw.lstrip().startswith("#"):
                records.append((line, raw.split("\t")))
    else:
        reader = csv.reader(io.StringIO(text, newline=""))
        start = last = 1
        try:
            for cells in reader:
                if cells and any(c.strip() for c in cells) and not cells[0].lstrip().startswith("#"):
                    records.append((start, cells))
                last, start = start, reader.line_num + 1
        except csv.Error as e:
            return [], [Problem(start, f"not valid CSV ({e})")]
        # csv reads an unclosed quote to the end of the file as one value ("found 1 column")
        if records and "".join(text.splitlines(keepends=True)[last - 1:]).count('"') % 2:
            return [], [Problem(last, 'not valid CSV (a quote " opened on this line is never closed: the rest '
                                      "of the file would read as one value)")]
    return _cells_rows(records)


def _row_problem(row: Row, domain: Domain) -> str | None:
    """What is wrong with one row on its own (a name, the relation, a self-loop, the split, an
    attribute value), or None."""
    for what, name in (("subject", row.subject), ("object", row.object), *(("alias", a) for a in row.aliases)):
        p = name_problem(name)
        if p:
            return f"{what} {shown(name)} {p}"
    if row.relation not in domain.relations and row.relation not in domain.attributes:
        known = ", ".join([*domain.relations, *domain.attributes])
        return f"unknown relation {shown(row.relation)} (the {domain.name} domain declares {known})"
    spec = domain.relations.get(row.relation)
    if spec is not None and spec.object != VALUE and row.subject == row.object:
        return (f"{shown(row.subject)} {row.relation} itself: a {row.relation} fact relates two entities "
                "(a fact relating an entity to itself is never true in a domain)")
    if row.split is not None and row.split not in SPLITS:
        return f"split {shown(row.split)}: expected one of {', '.join(SPLITS)}"
    if row.relation in domain.attributes:
        spec = domain.attributes[row.relation]
        if row.object not in spec.values:
            return f"attribute {row.relation}: value {shown(row.object)} is not one of {', '.join(spec.values)}"
    return None


def _roles(row: Row, domain: Domain) -> list[tuple[str, str, str]]:
    """``(role, entity, type)`` of a row's subject and, for an entity relation, its object."""
    spec = domain.relations.get(row.relation)
    roles = [("subject", row.subject, spec.subject if spec else domain.attributes[row.relation].of)]
    if spec is not None and spec.object != VALUE:
        roles.append(("object", row.object, spec.object))
    return roles


def _type_checked(good: list[Row], domain: Domain, out: Checked,
                  problems: list[Problem]) -> tuple[list[Row], dict[Fact, int], dict[str, str]]:
    """Every entity gets the type most of its uses imply (ties: the first); other uses are
    problems. Attributes go to ``out``; returns the fact rows kept (duplicates dropped), the line
    of each fact and the types."""
    uses: dict[str, Counter] = {}
    for row in good:
        for _, e, t in _roles(row, domain):
            uses.setdefault(e, Counter())[t] += 1
    types = {e: c.most_common(1)[0][0] for e, c in uses.items()}
    seen: dict[Fact, int] = {}
    kept: list[Row] = []
    for row in good:
        spec = domain.relations.get(row.relation)
        roles = _roles(row, domain)
        wrong = [f"{role} {shown(e)} is a {types[e]} elsewhere in the file, but {row.relation} needs a {t}"
                 for role, e, t in roles if types[e] != t]
        wrong += [f"{role} {shown(e)} is not a {t} of the {domain.name} domain ({', '.join(domain.entities[t].values)})"
                  for role, e, t in roles if types[e] == t and domain.entities[t].values is not None
                  and e not in domain.entities[t].values]
        if wrong:
            problems.append(Problem(row.line, "; ".join(wrong)))
            continue
        if spec is None:  # a background attribute
            prev = out.attributes.setdefault(row.subject, {}).get(row.relation)
            if prev is not None and prev != row.object:
                problems.append(Problem(row.line, f"{shown(row.subject)} already has {row.relation} {shown(prev)}"))
            out.attributes[row.subject][row.relation] = row.object
            continue
        f = (row.subject, row.relation, row.object)
        if f in seen:
            problems.append(Problem(row.line, f"duplicate of line {seen[f]}: ({', '.join(f)})",
                                    "dropped"))
            continue
        seen[f] = row.line
        kept.append(row)
    return kept, seen, types


def _record_facts(out: Checked, kept: list[Row], facts_set: set[Fact], symmetric: set[str] | frozenset[str],
                  repair: bool, problems: list[Problem]) -> None:
    """The kept rows into ``out``: facts, lines, splits, aliases, and (``repair``) the missing
    reverse of a symmetric fact."""
    for row in kept:
        f = (row.subject, row.relation, row.object)
        out.facts.append(f)
        out.lines.append(row.line)
        if row.split is not None:
            out.splits[len(out.facts) - 1] = row.split
        back = (row.object, row.relation, row.subject)
        if row.relation in symmetric and back not in facts_set:
            problems.append(Problem(row.line, f"{row.relation} is symmetric ({row.relation}(Y, X) :- "
                                              f"{row.relation}(X, Y).) but the reverse fact "
                                              f"({', '.join(back)}) is missing", "added the reverse fact"))
            if repair:
                facts_set.add(back)
                out.facts.append(back)
                out.lines.append(row.line)
        for a in row.aliases:
            if a in out.types and a != row.subject:
                problems.append(Problem(row.line, f"alias {shown(a)} of {shown(row.subject)} names another entity"))
            elif a != row.subject and a not in out.aliases.setdefault(row.subject, []):
                out.aliases[row.subject].append(a)


def check_triples(rows: list[Row], domain: Domain, symmetric: set[str] | frozenset[str] = frozenset(), *,
                  repair: bool = False) -> Checked:
    """Check ``rows`` against ``domain`` (see the module docstring); ``symmetric`` names the
    relations the domain's rules make symmetric. Problems are in line order."""
    out = Checked()
    problems: list[Problem] = []
    good: list[Row] = []
    for row in rows:
        bad = _row_problem(row, domain)
        if bad:
            problems.append(Problem(row.line, bad))
        else:
            good.append(row)
    kept, seen, types = _type_checked(good, domain, out, problems)
    out.types = {e: types[e] for row in kept for e in (row.subject, row.object) if e in types}
    for e in out.attributes:
        out.types.setdefault(e, types[e])
    _record_facts(out, kept, set(seen), symmetric, repair, problems)
    problems.sort(key=lambda p: p.line)
    out.repairs = [p for p in problems if p.repair is not None and repair]
    out.problems = [p for p in problems if p.repair is None or not repair]
    return out


def triples_kb(checked: Checked, domain: Domain, *, name: str, metadata: dict[str, Any]) -> KnowledgeBase:
    """The KB of checked triples: entities in the domain's type order (then first use), the
    domain's relations and templates, ``unlearn`` facts as targets, aliases and splits in
    ``metadata`` and the alias forms (see the module docstring)."""
    from .forms import Form

    order = {t: k for k, t in enumerate(domain.entities)}
    names = sorted(checked.types, key=lambda e: order.get(checked.types[e], len(order)))
    entities = {e: dict(checked.attributes.get(e, {})) for e in names}
    relations = domain.kb_relations()
    targets = sorted(i for i, s in checked.splits.items() if s == "unlearn")
    meta = dict(metadata)
    if checked.splits:
        meta["splits"] = {s: sorted(i for i, x in checked.splits.items() if x == s) for s in SPLITS
                          if s in checked.splits.values()}
    if checked.aliases:
        meta["aliases"] = {e: list(a) for e, a in checked.aliases.items() if a}
    forms = []
    for i, (s, r, o) in enumerate(checked.facts):
        rel = relations[r]
        for a in checked.aliases.get(s, ()):
            forms.append(Form(i, "qa", rel.question.format(o1=a, r=r, o2=o), rel.answer.format(o1=a, r=r, o2=o),
                              ALIAS_FORM))
    kb = KnowledgeBase(entities=entities, relations=relations, facts=list(checked.facts), targets=targets, name=name,
                       background=tuple(domain.attributes), metadata=meta, forms=forms)
    kb.validate()
    return kb


def tsv_text(kb: KnowledgeBase) -> str:
    """A KB's stored facts as the TSV :func:`read_triples` reads: a header, one fact a line with
    ``unlearn`` in the split column for a target, the subject's aliases on its first row, then a
    row per entity attribute (``Ann  gender  female``)."""
    targets = set(kb.targets)
    aliases = kb.metadata.get("aliases") if isinstance(kb.metadata.get("aliases"), dict) else {}
    lines = ["subject\trelation\tobject\tsplit\taliases"]
    given: set[str] = set()
    for i, (s, r, o) in enumerate(kb.facts):
        al = ""
        if s not in given and isinstance(aliases.get(s), list):
            al = ALIAS_SEPARATOR.join(a for a in aliases[s] if isinstance(a, str))
            given.add(s)
        lines.append("\t".join((s, r, o, "unlearn" if i in targets else "", al)).rstrip("\t"))
    for e, attrs in kb.entities.items():
        lines += [f"{e}\t{k}\t{v}" for k, v in attrs.items()]
    return "\n".join(lines) + "\n"
