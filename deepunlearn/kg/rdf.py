"""Import a knowledge graph given as RDF (Turtle, N-Triples, JSON-LD) through rdflib.

Every node (IRI or blank node) a kept triple uses becomes an entity, named by its ``rdfs:label``
(or the mapping's ``names`` predicates; a label without a language tag first, then English) or,
for an IRI without one, its local name (after the last ``#``, ``/`` or ``:``, percent-decoded).
Every predicate becomes a relation, named by the mapping, else its ``rdfs:label``, else its
local name, made into a relation name (``birth place`` -> ``birth_place``). A triple whose object
is a literal is a value fact (kind ``value``, like the release's biography facts) holding the
literal's lexical form; a triple whose object is a node is an entity fact. Facts are in a
canonical order (by relation, subject, object) so the same graph always gives the same KB.

A mapping file (``--mapping MAP.toml``) renames and drops::

    names = ["http://www.w3.org/2004/02/skos/core#prefLabel"]   # predicates whose literals name nodes
    [prefixes]                                                   # prefixes for the keys below
    schema = "https://schema.org/"
    [relations]                                                  # predicate -> relation ("" drops it)
    "schema:containedInPlace" = "parent"
    "http://www.w3.org/2000/01/rdf-schema#comment" = ""
    [entities]                                                   # node -> entity name
    "http://www.wikidata.org/entity/Q90" = "Paris"

Keys are full IRIs or ``prefix:local`` with a prefix of ``[prefixes]``, of the document, or one of
``rdf``, ``rdfs``, ``xsd``, ``owl``.

The graphs ``data export --format ttl`` writes (:mod:`.rdf_export`) describe the KB in a small
vocabulary (:data:`DU`): each relation's kind, group and templates, background attributes, the
targets (reified statements) and the KB's name; the import reads them back, so a KB exported and
imported again has the same entities, relations, facts and targets. Every problem is one line:
``FILE:LINE: ...`` for N-Triples (each line is parsed on its own, so every bad line is listed),
``FILE: triple <s> <p> <o>: ...`` for the other formats.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ..errors import read_text, text_lines
from .kb import KBError, KnowledgeBase
from .names import MAX_NAME_LENGTH, RELATION_NAME, name_problem, shown

FORMATS = ("turtle", "nt", "json-ld")
_SUFFIXES = {".ttl": "turtle", ".turtle": "turtle", ".nt": "nt", ".jsonld": "json-ld", ".json-ld": "json-ld",
             ".json": "json-ld"}
_ALIASES = {"ttl": "turtle", "ntriples": "nt", "n-triples": "nt", "jsonld": "json-ld"}
#: The vocabulary of the graphs deepunlearn writes (kind, group, templates, attributes, targets).
DU = "urn:deepunlearn:vocab:"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
_MAPPING_KEYS = ("names", "prefixes", "relations", "entities")


class RdfError(KBError):
    """An RDF file or a mapping file cannot be read or imported: the message names the file."""


@dataclass
class Mapping:
    """A mapping file's content, its keys expanded to IRIs (see the module docstring)."""

    names: list[str] = field(default_factory=lambda: [RDFS_LABEL])
    prefixes: dict[str, str] = field(default_factory=dict)
    relations: dict[str, str] = field(default_factory=dict)
    entities: dict[str, str] = field(default_factory=dict)


@dataclass
class RdfImport:
    """What :func:`import_rdf` made: the KB (None when there are problems), the problems (one
    line each, in file order where lines are known) and counts."""

    kb: KnowledgeBase | None
    problems: list[str]
    triples: int = 0
    dropped: int = 0


def rdf_format(path: str | os.PathLike, fmt: str | None = None) -> str:
    """``fmt`` (``turtle``/``ttl``, ``nt``, ``json-ld``) if given, else from the suffix (else turtle)."""
    if fmt is not None:
        fmt = _ALIASES.get(fmt, fmt)
        if fmt not in FORMATS:
            raise RdfError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}", field="--format")
        return fmt
    return _SUFFIXES.get(Path(path).suffix.lower(), "turtle")


def read_mapping(path: str | os.PathLike, *, flag: str = "--mapping") -> Mapping:
    """Read and check a mapping file; every problem is one :class:`RdfError` naming the key."""
    text = read_text(path, flag=flag, error=RdfError)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise RdfError(f"{flag} {path}: not valid TOML ({e})", file=path, field=flag) from None
    bad = sorted(set(raw) - set(_MAPPING_KEYS))
    if bad:
        raise RdfError(f"{flag} {path}: unknown key {bad[0]!r} (a mapping has {', '.join(_MAPPING_KEYS)})",
                       file=path, field=bad[0])
    m = Mapping()
    names = raw.get("names", [RDFS_LABEL])
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise RdfError(f"{flag} {path}: names: expected a non-empty list of predicate IRIs", file=path, field="names")
    for key in ("prefixes", "relations", "entities"):
        table = raw.get(key, {})
        if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
            raise RdfError(f"{flag} {path}: [{key}]: expected a table of strings", file=path, field=key)
    m.prefixes = dict(raw.get("prefixes", {}))
    m.names = names
    for k, v in raw.get("relations", {}).items():
        if v and (not RELATION_NAME.match(v) or len(v) > MAX_NAME_LENGTH):
            raise RdfError(f"{flag} {path}: relations.{k}: {shown(v)} is not a relation name (a lower-case letter, "
                           "then letters, digits and '_'; \"\" drops the predicate)", file=path, field=f"relations.{k}")
        m.relations[k] = v
    for k, v in raw.get("entities", {}).items():
        problem = name_problem(v)
        if problem:
            raise RdfError(f"{flag} {path}: entities.{k}: name {shown(v)} {problem}", file=path, field=f"entities.{k}")
        m.entities[k] = v
    return m


def relation_name(text: str) -> str:
    """A relation name made of a label or local name: runs of other characters become ``_``, the
    first letter is lower-cased, a name not opening with a letter gets ``r_`` in front.

    >>> relation_name("birth place"), relation_name("Population"), relation_name("22-rdf#type"), relation_name("x")
    ('birth_place', 'population', 'r_22_rdf_type', 'x')
    """
    s = re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_")
    s = s[:1].lower() + s[1:]
    if not s or not ("a" <= s[0] <= "z"):
        s = "r_" + s
    return s[:MAX_NAME_LENGTH]


def local_name(iri: str) -> str:
    """The part of an IRI after its last ``#``, ``/`` or ``:``, percent-decoded."""
    return unquote(re.split(r"[#/:]", iri.rstrip("/#"))[-1])


def short(term: Any) -> str:
    """A term in N3, cut to 120 characters for a message."""
    s = term.n3()
    return s if len(s) <= 120 else s[:116] + '..."'


def _parse_nt(text: str, where: str) -> tuple[list, list[str]]:
    from rdflib.exceptions import ParserError
    from rdflib.plugins.parsers.ntriples import W3CNTriplesParser

    class Sink:
        def __init__(self) -> None:
            self.got: list = []

        def triple(self, s: Any, p: Any, o: Any) -> None:
            self.got.append((s, p, o))

    sink = Sink()
    parser = W3CNTriplesParser(sink=sink)
    context: dict = {}
    out, problems = [], []
    for line, raw in enumerate(text_lines(text), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        parser.line = raw
        try:
            parser.parseline(bnode_context=context)
        except ParserError as e:
            problems.append(f"{where}:{line}: not a valid N-Triples line ({str(e).splitlines()[0][:120]})")
            continue
        out += [(*t, line) for t in sink.got]
        sink.got.clear()
    return out, problems


def _remote_contexts(doc: Any) -> list[str]:
    """The ``@context`` / ``@import`` values of a JSON-LD document that name other documents."""
    found: list[str] = []
    stack = [doc]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            for k, x in v.items():
                if k in ("@context", "@import"):
                    found += [c for c in (x if isinstance(x, list) else [x]) if isinstance(c, str)]
                stack.append(x)
        elif isinstance(v, list):
            stack.extend(v)
    return found


def parse_rdf(path: str | os.PathLike, fmt: str, *, flag: str | None = None) -> tuple[list, list[str], dict]:
    """The triples of an RDF file as ``(s, p, o, line)`` (``line`` None outside N-Triples), the
    problems of the lines or the document that cannot be read, and the document's prefixes."""
    from rdflib import Graph

    where = str(path)
    text = read_text(path, flag=flag, error=RdfError)
    if fmt == "nt":
        triples, problems = _parse_nt(text, where)
        return triples, problems, {}
    g = Graph(bind_namespaces="none")
    base = Path(path).resolve().as_uri()
    if fmt == "json-ld":
        from ..errors import parse_json

        doc = parse_json(text, error=RdfError, source=where)
        remote = _remote_contexts(doc)
        if remote:
            return [], [f"{where}: @context {shown(remote[0])} names another document, which is never fetched: put "
                         "the context in the file itself"], {}
        text = json.dumps(doc)
    try:
        with warnings.catch_warnings():  # rdflib's JSON-LD parser warns of its own use of ConjunctiveGraph
            warnings.simplefilter("ignore", DeprecationWarning)
            g.parse(data=text, format=fmt, publicID=base)
    except Exception as e:  # rdflib raises many kinds (BadSyntax, ValueError, JSON-LD's errors)
        line = getattr(e, "lines", None)
        why = getattr(e, "_why", None) or str(e).splitlines()[0] if str(e) else type(e).__name__
        at = f":{line + 1}" if isinstance(line, int) else ""
        return [], [f"{where}{at}: not valid {'Turtle' if fmt == 'turtle' else 'JSON-LD'} ({str(why)[:160]})"], {}
    return [(s, p, o, None) for s, p, o in g], [], {k: str(v) for k, v in g.namespaces()}
