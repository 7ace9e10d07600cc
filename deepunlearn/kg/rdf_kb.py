"""The KB of an RDF graph: names, relations, facts, targets (the rules are in :mod:`.rdf`)."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .kb import Fact, KBError, KnowledgeBase, Relation
from .names import name_problem, shown
from .rdf import DU, RDF, Mapping, RdfImport, short, local_name, parse_rdf, rdf_format, relation_name

#: Templates of a relation the graph does not describe; {label} is the predicate's words.
QUESTION = "What is the {label} of {{o1}}?"
STATEMENT = "The {label} of {{o1}} is {{o2}}."
GROUPS = {"entity": "relations", "value": "values"}


#: Prefixes a mapping's keys may use without declaring them.
STANDARD_PREFIXES = {"rdf": RDF, "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
                     "xsd": "http://www.w3.org/2001/XMLSchema#", "owl": "http://www.w3.org/2002/07/owl#"}


def _expand(key: str, mapping: Mapping, prefixes: dict[str, str]) -> str:
    head, sep, tail = key.partition(":")
    if sep and not tail.startswith("//"):
        ns = mapping.prefixes.get(head, prefixes.get(head, STANDARD_PREFIXES.get(head)))
        if ns is not None:
            return ns + tail
    return key


def _label(values: list[Any]) -> list[str]:
    """The names a node's labels give: those without a language tag, else English, else all."""
    for keep in (lambda v: not getattr(v, "language", None),
                 lambda v: str(getattr(v, "language", "") or "").lower().split("-")[0] == "en", lambda v: True):
        got = sorted({str(v).strip() for v in values if keep(v)})
        if got:
            return got
    return []


def _int(v: Any) -> int:
    try:
        return int(str(v))
    except ValueError:
        return 0


def _words(text: str) -> str:
    """A label as template text: braces (template syntax) and surrounding space dropped."""
    return " ".join(text.replace("{", " ").replace("}", " ").replace("_", " ").split()) or "value"


@dataclass
class _Graph:
    """A parsed graph with what the mapping and the graph's own ``du:`` description say of it."""

    g: Any
    where: str
    line_of: dict
    names_by: list
    rel_map: dict
    ent_map: dict
    attributes: set
    target_nodes: set
    kb_nodes: set
    internal: set
    predicates: set
    facts_t: list
    dropped: int
    labels: dict
    problems: list[str]

    def at(self, t: tuple) -> str:
        """Where a triple is: its line, else the triple itself."""
        ln = self.line_of.get(t)
        return f"{self.where}:{ln}" if ln is not None else f"{self.where}: triple {' '.join(map(short, t))}"

    @staticmethod
    def du(x: str) -> Any:
        from rdflib import URIRef
        return URIRef(DU + x)


def _read_graph(triples: list, problems: list[str], prefixes: dict[str, str], mapping: Mapping,
                where: str) -> _Graph:
    """The graph of parsed triples, its description set apart from the triples that become facts."""
    from rdflib import BNode, Graph, Literal, URIRef

    g = Graph(bind_namespaces="none")
    for s, p, o, _ in triples:
        g.add((s, p, o))
    du = _Graph.du
    rdf_type = URIRef(RDF + "type")
    names_by = [URIRef(_expand(n, mapping, prefixes)) for n in mapping.names]
    rel_map = {URIRef(_expand(k, mapping, prefixes)): v for k, v in mapping.relations.items()}
    ent_map = {URIRef(_expand(k, mapping, prefixes)): v for k, v in mapping.entities.items()}
    # the graph's own description: attributes, targets, the KB node, list cells of the templates
    attributes = set(g.subjects(rdf_type, du("Attribute")))
    target_nodes = set(g.subjects(rdf_type, du("Target")))
    kb_nodes = set(g.subjects(rdf_type, du("KnowledgeBase")))
    internal = set(target_nodes) | set(kb_nodes)
    for _, p, o in g:
        if str(p).startswith(DU) and isinstance(o, BNode):  # an rdf:List of templates
            node = o
            while isinstance(node, BNode) and node not in internal:
                internal.add(node)
                node = g.value(node, URIRef(RDF + "rest"))
    predicates = set(g.predicates()) | {p for p in g.subjects(du("kind"), None)}  # described relations too

    def kept(t: tuple) -> bool:
        s, p, o = t
        return not (p in names_by or str(p).startswith(DU) or s in internal
                    or (p == rdf_type and str(o).startswith(DU)) or rel_map.get(p) == "")

    facts_t = [t for t in g if kept(t)]
    dropped = sum(1 for t in g if rel_map.get(t[1]) == "" and t[1] not in names_by)
    labels: dict[Any, list[Any]] = {}
    for p in names_by:
        for s, o in g.subject_objects(p):
            if isinstance(o, Literal):
                labels.setdefault(s, []).append(o)
    return _Graph(g, where, {(s, p, o): ln for s, p, o, ln in triples}, names_by, rel_map, ent_map, attributes,
                  target_nodes, kb_nodes, internal, predicates, facts_t, dropped, labels, problems)


def _node_name(gr: _Graph, n: Any, first_use: dict) -> str | None:
    """The entity name of one node (the mapping, its one label, its local name), or None with its problem listed."""
    from rdflib import URIRef

    lab = _label(gr.labels.get(n, []))
    where_n = (gr.at(first_use[n]) if n in first_use else f"{gr.where}: node {short(n)}")
    if n in gr.ent_map:
        name = gr.ent_map[n]
    elif len(lab) == 1:
        name = lab[0]
    elif len(lab) > 1:
        gr.problems.append(f"{where_n}: node {short(n)} has {len(lab)} labels ({', '.join(map(shown, lab[:3]))}); "
                           "name it in the mapping's [entities]")
        return None
    elif isinstance(n, URIRef) and local_name(str(n)).strip():
        name = local_name(str(n)).strip()
    else:
        gr.problems.append(f"{where_n}: node {short(n)} has no label and no local name to name it by")
        return None
    bad = name_problem(name)
    if bad:
        gr.problems.append(f"{where_n}: node {short(n)}: name {shown(name)} {bad}")
        return None
    return name


def _name_nodes(gr: _Graph) -> dict[Any, str]:
    """Entity names: every node a kept triple uses and every labelled node that is not a predicate."""
    from rdflib import Literal

    facts_t = gr.facts_t
    nodes = {s for s, _, _ in facts_t} | {o for _, _, o in facts_t if not isinstance(o, Literal)}
    nodes |= {s for s in gr.labels if s not in gr.predicates and s not in gr.internal and s not in gr.attributes}
    node_name: dict[Any, str] = {}
    first_use = {}
    for t in sorted(facts_t, key=lambda t: (gr.line_of.get(t) or 0)):
        for n in (t[0], t[2]):
            first_use.setdefault(n, t)
    for n in sorted(nodes, key=str):
        name = _node_name(gr, n, first_use)
        if name is not None:
            node_name[n] = name
    by_name: dict[str, list] = {}
    for n, name in node_name.items():
        by_name.setdefault(name, []).append(n)
    for name, ns in by_name.items():
        if len(ns) > 1:
            gr.problems.append(f"{gr.where}: nodes {', '.join(short(n) for n in ns[:3])} all have the name "
                               f"{shown(name)}; name them apart in the mapping's [entities]")
    return node_name


def _name_relations(gr: _Graph) -> tuple[dict[Any, str], dict[str, str]]:
    """Relation names (the mapping, else the predicate's label, else its local name) and their template words."""
    from rdflib import URIRef

    g, rel_map = gr.g, gr.rel_map
    rel_of: dict[Any, str] = {}
    words: dict[str, str] = {}
    described = {p for p in gr.predicates if g.value(p, gr.du("kind")) is not None}  # relations without facts too
    for p in sorted({t[1] for t in gr.facts_t} | gr.attributes | described, key=str):
        lab = (_label(gr.labels.get(p, []))
               or _label(list(g.objects(p, URIRef("http://www.w3.org/2000/01/rdf-schema#label")))))
        text = rel_map.get(p) or (lab[0] if lab else local_name(str(p)))
        rel_of[p] = rel_map.get(p) or relation_name(text)
        words.setdefault(rel_of[p], _words(text))
    owners: dict[str, list] = {}
    for p, r in rel_of.items():
        owners.setdefault(r, []).append(p)
    for r, ps in owners.items():
        if len(ps) > 1 and not all(p in rel_map for p in ps):
            gr.problems.append(f"{gr.where}: predicates {', '.join(short(p) for p in ps[:3])} all give the relation "
                               f"{r!r}; name them in the mapping's [relations] (the same name there merges them)")
    return rel_of, words


def _collect_facts(gr: _Graph, node_name: dict, rel_of: dict, attr_names: set[str],
                   kinds: dict[str, Counter]) -> tuple[list[Fact], dict[str, dict[str, str]]]:
    """The facts of the kept triples, in file order, and the entities with their attribute values."""
    from rdflib import Literal

    facts: list[Fact] = []
    entities: dict[str, dict[str, str]] = {n: {} for n in sorted(node_name.values())}
    for t in sorted(gr.facts_t, key=lambda t: (gr.line_of.get(t) or 0, str(t))):
        s, p, o = t
        r = rel_of[p]
        if s not in node_name or (not isinstance(o, Literal) and o not in node_name):
            continue  # its node's problem is listed
        if isinstance(s, Literal):
            continue
        if isinstance(o, Literal):
            value = str(o)
            bad = name_problem(value)
            if bad:
                gr.problems.append(f"{gr.at(t)}: the literal {bad} (a value fact's object is one printable line)")
                continue
            if kinds[r]["entity"]:
                gr.problems.append(f"{gr.at(t)}: {r} has literal and node objects; a relation holds one or the "
                                   f"other (map one of its predicates to another relation)")
                continue
            if r in attr_names:
                prev = entities[node_name[s]].setdefault(r, value)
                if prev != value:
                    gr.problems.append(f"{gr.at(t)}: {shown(node_name[s])} already has {r} {shown(prev)}")
                continue
            facts.append((node_name[s], r, value))
        else:
            facts.append((node_name[s], r, node_name[o]))
    return facts, entities


def _relations(gr: _Graph, facts: list[Fact], rel_of: dict, words: dict[str, str], attr_names: set[str],
               kinds: dict[str, Counter]) -> dict[str, Relation]:
    """The relations with their templates: the graph's description, else ones made of the predicate's words."""
    from rdflib.collection import Collection

    g, du = gr.g, gr.du
    relations = {}
    for r in sorted({f[1] for f in facts} | set(rel_of.values())):
        if r in attr_names:
            continue
        p = next(q for q, x in rel_of.items() if x == r)
        kind = str(g.value(p, du("kind")) or ("value" if kinds.get(r, Counter())["value"] else "entity"))
        lists = {k: [str(x) for x in Collection(g, g.value(p, du(k)))] if g.value(p, du(k)) is not None else None
                 for k in ("questions", "statements")}
        try:
            relations[r] = Relation(
                r, kind, (lists["questions"] or [QUESTION.format(label=words[r])])[0],
                str(g.value(p, du("answer")) or "{o2}"), str(g.value(p, du("group")) or GROUPS.get(kind, "relations")),
                tuple((lists["questions"] or [])[1:]),
                tuple(lists["statements"] if lists["statements"] is not None else [STATEMENT.format(label=words[r])]))
        except KBError as e:
            gr.problems.append(f"{gr.where}: predicate {short(p)}: {e}")
    return relations


def _targets(gr: _Graph, facts: list[Fact], node_name: dict, rel_of: dict) -> list[int]:
    """The indices into ``facts`` of the graph's ``du:Target`` triples, in their ``du:order``."""
    from rdflib import Literal, URIRef

    g, du = gr.g, gr.du
    index = {f: i for i, f in enumerate(facts)}
    targets = []
    for n in sorted(gr.target_nodes, key=lambda n: (_int(g.value(n, du("order"))), str(n))):
        s, p, o = (g.value(n, URIRef(RDF + x)) for x in ("subject", "predicate", "object"))
        f = (node_name.get(s), rel_of.get(p), str(o) if isinstance(o, Literal) else node_name.get(o))
        if f not in index:
            gr.problems.append(f"{gr.where}: a du:Target names the triple {' '.join(map(short, (s, p, o)))}, "
                               "which is not a fact of the graph")
            continue
        targets.append(index[f])
    return targets


def import_rdf(path: str | os.PathLike, fmt: str | None = None, mapping: Mapping | None = None, *,
               flag: str | None = None) -> RdfImport:
    """Read an RDF file into a KB (see :mod:`.rdf`); every problem is listed, none raised."""
    from rdflib import Literal, URIRef

    mapping = mapping or Mapping()
    fmt = rdf_format(path, fmt)
    where = str(path)
    triples, problems, prefixes = parse_rdf(path, fmt, flag=flag)
    if problems:
        return RdfImport(None, problems, len(triples))
    gr = _read_graph(triples, problems, prefixes, mapping, where)
    node_name = _name_nodes(gr)
    rel_of, words = _name_relations(gr)
    attr_names = {rel_of[a] for a in gr.attributes}
    kinds: dict[str, Counter] = {}
    for t in gr.facts_t:
        kinds.setdefault(rel_of[t[1]], Counter())["value" if isinstance(t[2], Literal) else "entity"] += 1
    facts, entities = _collect_facts(gr, node_name, rel_of, attr_names, kinds)
    relations = _relations(gr, facts, rel_of, words, attr_names, kinds)
    facts = sorted(dict.fromkeys(facts), key=lambda f: (f[1], f[0], f[2]))
    targets = _targets(gr, facts, node_name, rel_of)
    dropped = gr.dropped
    if problems:
        return RdfImport(None, problems, len(triples), dropped)
    g = gr.g
    name = next((str(g.value(k, URIRef("http://www.w3.org/2000/01/rdf-schema#label")) or "") for k in gr.kb_nodes), "")
    rdf_meta = {"entities": {v: str(n) for n, v in sorted(node_name.items(), key=lambda x: x[1]) if isinstance(n, URIRef)},
                "relations": {r: str(p) for p, r in sorted(rel_of.items(), key=lambda x: x[1])}}
    metadata = {"generator": "deepunlearn.kg.rdf", "source": str(path), "format": fmt, "rdf": rdf_meta}
    try:
        kb = KnowledgeBase(entities=entities, relations=relations, facts=facts, targets=targets,
                           name=name or Path(path).stem, background=tuple(sorted(attr_names)), metadata=metadata)
        kb.validate()
    except KBError as e:
        return RdfImport(None, [f"{where}: {e}"], len(triples), dropped)
    return RdfImport(kb, [], len(triples), dropped)
