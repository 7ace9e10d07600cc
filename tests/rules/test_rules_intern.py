"""Interning a KB for the rules engine in bulk gives the ids the plain per-fact loop gives."""

from __future__ import annotations

import numpy as np

from deepunlearn.kg.domains.family.generate import generate_family
from deepunlearn.kg.kb import KnowledgeBase
from deepunlearn.rules import engine
from deepunlearn.rules.load import load_rules


def _loop_intern(kb, rules, relations):
    """The reference: one fact at a time."""
    rel_id = {r: i for i, r in enumerate(relations)}
    term_id, _, _, _ = engine._intern(KnowledgeBase.build(kb.entities, []), rules, relations)
    n = len(kb.facts)
    node_s, node_r, node_o = (np.full(n, -1, dtype=np.int64) for _ in range(3))
    for i, (s, r, o) in enumerate(kb.facts):
        if r in rel_id:
            node_s[i] = term_id.setdefault(s, len(term_id))
            node_r[i] = rel_id[r]
            node_o[i] = term_id.setdefault(o, len(term_id))
    return term_id, node_s, node_r, node_o


def test_bulk_interning_matches_the_loop():
    kb = generate_family(60, 3)  # family facts, value facts and relations no family rule uses
    rules = load_rules("family")
    relations = sorted(rules.relations)
    fast, slow = engine._intern(kb, rules, relations), _loop_intern(kb, rules, relations)
    assert list(fast[0].items()) == list(slow[0].items())
    for a, b in zip(fast[1:], slow[1:]):
        assert np.array_equal(a, b)
    assert (fast[2] == -1).any() and (fast[2] >= 0).any()
