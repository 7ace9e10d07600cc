"""Write tests/data/regions-fr.ttl: France's ISO 3166-2 subdivisions from pycountry's tables as RDF.

    python tests/data/make_regions_rdf.py tests/data/regions-fr.ttl

Each subdivision is a schema:AdministrativeArea with its name (rdfs:label, tagged French), its
code (skos:notation), its type (schema:additionalType, English) and the area it lies in
(schema:containedInPlace: its parent subdivision, else France). The IRIs are under an
``.invalid`` namespace of the test's own. :func:`regions_graph` is what the tests compare the
shipped file against.
"""

from __future__ import annotations

import sys

NS = "http://iso3166.deepunlearn.invalid/"


def regions_graph(country: str = "FR"):
    import pycountry
    from rdflib import RDF, RDFS, Graph, Literal, Namespace, URIRef

    schema = Namespace("https://schema.org/")
    skos = Namespace("http://www.w3.org/2004/02/skos/core#")
    g = Graph(bind_namespaces="core")
    g.bind("schema", schema)
    g.bind("skos", skos)
    g.bind("iso", Namespace(NS))
    c = pycountry.countries.get(alpha_2=country)
    node = URIRef(NS + country)
    g.add((node, RDF.type, schema.Country))
    g.add((node, RDFS.label, Literal(c.name, lang="en")))
    g.add((node, skos.notation, Literal(country)))
    for s in pycountry.subdivisions.get(country_code=country):
        n = URIRef(NS + s.code)
        g.add((n, RDF.type, schema.AdministrativeArea))
        g.add((n, RDFS.label, Literal(s.name, lang=country.lower())))
        g.add((n, skos.notation, Literal(s.code)))
        g.add((n, schema.additionalType, Literal(s.type, lang="en")))
        parent = s.parent_code if s.parent_code is None or "-" in s.parent_code else f"{country}-{s.parent_code}"
        g.add((n, schema.containedInPlace, URIRef(NS + (parent or country))))
    return g


if __name__ == "__main__":
    text = "# France's ISO 3166-2 subdivisions, written from pycountry's tables by tests/data/make_regions_rdf.py\n"
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        f.write(text + regions_graph().serialize(format="turtle"))
