"""The content fingerprint of a knowledge base: a hash of its facts and their probes.

It lives in the KB layer so that KB files derived from another KB (a holdout set) can
record which KB they belong to; :mod:`deepunlearn.probe.fingerprint` re-exports it as the probe
cache's key.
"""

from __future__ import annotations

import hashlib
import json

from .kb import KnowledgeBase


def kb_fingerprint(kb: KnowledgeBase) -> str:
    """Hash of what probing a KB depends on: its facts and their question/answer pairs.

    >>> from deepunlearn.kg.kb import KnowledgeBase
    >>> a = KnowledgeBase.build({"A": {}, "B": {}}, [("A", "child", "B")])
    >>> b = KnowledgeBase.build({"A": {}, "B": {}}, [("B", "child", "A")])
    >>> kb_fingerprint(a) == kb_fingerprint(a), kb_fingerprint(a) == kb_fingerprint(b)
    (True, False)
    """
    h = hashlib.sha256()
    for i, (fact, p) in enumerate(zip(kb.facts, kb.probes())):
        h.update(json.dumps([i, list(fact), p.question, p.answer], ensure_ascii=False).encode())
        h.update(b"\n")
    if kb.forms or kb.form_splits:  # a KB without forms keeps the fingerprint it always had
        h.update(json.dumps([[f.fact_id, f.kind, f.text, f.answer, f.name, f.split] for f in kb.forms],
                            ensure_ascii=False).encode())
        h.update(json.dumps(sorted(kb.form_splits.items())).encode())
    from .other_answers import other_answers_rule

    rule = other_answers_rule(kb)
    if rule != "wrong":  # how a question with several right answers is judged changes what is known
        h.update(f"other_answers={rule}".encode())
    return h.hexdigest()[:32]
