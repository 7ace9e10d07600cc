"""Fixtures of the rules tests: the release's derivation graph and KB file, and the release's
own data that the tests compare against."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def edu_graph(edu_kb):
    from deepunlearn.rules import derivation_graph

    return derivation_graph(edu_kb, "edu-relat")


@pytest.fixture(scope="session")
def edu_exact(edu_kb, edu_graph):
    """All minimal sets of the 55 release targets: {target: set of frozensets}."""
    from deepunlearn.rules import minimal_sets

    out = {}
    for t in edu_kb.targets:
        ms = minimal_sets(edu_graph, t)
        assert ms.exact
        out[t] = set(ms.sets)
    return out


@pytest.fixture(scope="session")
def edu_cached(edu_dir):
    from deepunlearn.kg.edu_relat import load_release_minimal_sets

    return load_release_minimal_sets(edu_dir)


@pytest.fixture(scope="session")
def edu_json(edu_kb, tmp_path_factory):
    from deepunlearn.kg.io import save_kb

    path = tmp_path_factory.mktemp("rules") / "edu.json"
    save_kb(edu_kb, path)
    return path
