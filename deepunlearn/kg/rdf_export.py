"""A KB as an RDF graph (Turtle or N-Triples) that :mod:`.rdf` reads back.

Entities and relations keep the IRIs they were imported with (``metadata["rdf"]``); the others
get IRIs under ``base`` (default ``http://deepunlearn.invalid/KB-NAME/``: the ``.invalid`` domain
never resolves): ``entity/NAME``, ``relation/NAME``, ``attribute/NAME``, the name percent-encoded.
Every entity and relation has its name as ``rdfs:label``; an entity fact is a triple between two
IRIs, a value fact has a plain string literal as object, a background attribute (gender) is a
literal of a predicate typed ``du:Attribute``. A relation's kind, group, answer and templates are
``du:kind``, ``du:group``, ``du:answer``, ``du:questions`` and ``du:statements`` (RDF lists, in
order), each target a reified statement ``[ a du:Target; du:order i; rdf:subject ...; rdf:predicate
...; rdf:object ... ]``, the KB's name the ``rdfs:label`` of the ``du:KnowledgeBase`` node ``base``.
Explicit probe forms, probe overrides and metadata are not written. Blank nodes are named by
position (``t0``, ``r0q_0``), so the same KB always gives the same bytes.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from .kb import KnowledgeBase
from .rdf import DU, RDFS_LABEL

#: The first line of every file :func:`rdf_text` writes (``data export`` overwrites only these).
HEADER = "# a deepunlearn KB as RDF (data export)"


def default_base(kb: KnowledgeBase) -> str:
    return f"http://deepunlearn.invalid/{quote(kb.name, safe='')}/"


def rdf_graph(kb: KnowledgeBase, base: str | None = None) -> Any:
    """The rdflib ``Graph`` of ``kb`` (see the module docstring)."""
    from rdflib import RDF, RDFS, BNode, Graph, Literal, Namespace, URIRef

    base = base or default_base(kb)
    meta = kb.metadata.get("rdf") if isinstance(kb.metadata.get("rdf"), dict) else {}
    known_e = meta.get("entities") if isinstance(meta.get("entities"), dict) else {}
    known_r = meta.get("relations") if isinstance(meta.get("relations"), dict) else {}
    du = Namespace(DU)
    g = Graph(bind_namespaces="core")
    g.bind("du", du)
    g.bind("kb", Namespace(base))

    def iri(kind: str, name: str, known: dict) -> Any:
        return URIRef(str(known[name])) if isinstance(known.get(name), str) else URIRef(base + kind + "/" + quote(name, safe=""))

    ent = {e: iri("entity", e, known_e) for e in kb.entities}
    rel = {r: iri("relation", r, known_r) for r in kb.relations}
    attr = {a: iri("attribute", a, known_r) for a in kb.background}
    kb_node = URIRef(base)
    g.add((kb_node, RDF.type, du.KnowledgeBase))
    g.add((kb_node, RDFS.label, Literal(kb.name)))
    for e, node in ent.items():
        g.add((node, URIRef(RDFS_LABEL), Literal(e)))
        for a, v in kb.entities[e].items():
            if a in attr:
                g.add((node, attr[a], Literal(v)))
    for a, node in attr.items():
        g.add((node, RDF.type, du.Attribute))
        g.add((node, RDFS.label, Literal(a)))
    def rdf_list(items: tuple[str, ...], key: str) -> Any:
        """An RDF list with blank nodes named by ``key`` and position, so that a KB always gives the same file."""
        if not items:
            return RDF.nil
        cells = [BNode(f"{key}_{k}") for k in range(len(items))]
        for k, (cell, text) in enumerate(zip(cells, items)):
            g.add((cell, RDF.first, Literal(text)))
            g.add((cell, RDF.rest, cells[k + 1] if k + 1 < len(cells) else RDF.nil))
        return cells[0]

    for j, (r, spec) in enumerate(kb.relations.items()):
        p = rel[r]
        g.add((p, RDFS.label, Literal(r)))
        g.add((p, du.kind, Literal(spec.kind)))
        g.add((p, du.group, Literal(spec.group)))
        g.add((p, du.answer, Literal(spec.answer)))
        for key, items in (("questions", spec.questions), ("statements", spec.statements)):
            g.add((p, du[key], rdf_list(items, f"r{j}{key[0]}")))

    def triple(f: tuple[str, str, str]) -> tuple:
        s, r, o = f
        return ent[s], rel[r], (ent[o] if kb.relations[r].kind == "entity" else Literal(o))

    for f in kb.facts:
        g.add(triple(f))
    for k, t in enumerate(kb.targets):
        s, p, o = triple(kb.facts[t])
        n = BNode(f"t{k}")
        g.add((n, RDF.type, du.Target))
        g.add((n, du.order, Literal(k)))
        g.add((n, RDF.subject, s))
        g.add((n, RDF.predicate, p))
        g.add((n, RDF.object, o))
    return g


def rdf_text(kb: KnowledgeBase, fmt: str = "turtle", base: str | None = None) -> str:
    """``kb`` as Turtle (``fmt`` ``turtle``) or N-Triples (``nt``, sorted lines), after :data:`HEADER`."""
    g = rdf_graph(kb, base)
    if fmt == "nt":
        body = "".join(sorted(g.serialize(format="nt").splitlines(keepends=True)))
    else:
        body = g.serialize(format="turtle")
    return f"{HEADER}\n{body}"
