"""Never-true facts: a KB's facts with the object swapped for a wrong entity of the same type.

Calibration (``probe --calibrate NEG.json``) needs facts the model cannot know. For a domain of
made-up people, ``data holdout`` draws new people; for a real-world domain (``geo``) new
countries would be made-up names, and the question is rather how often a pretrained model says
a wrong answer that happens to be the one asked for. ``data never-true --kb KB -o NEG.json``
writes, for every fact (s, r, o) of the KB, one fact (s, r, o') whose object o' is another
object of relation r (so of the same type: a city for a capital, a continent for a continent)
and (s, r, o') is not in the closure of the KB under its rules, so it is false in the domain.
Against these negatives a probe mode's false-positive rate is the rate at which the model's
answer contains the wrong object asked for: the floor under "known" for that mode. A fact whose
relation offers no wrong object (every candidate is true of s) gets none. "False" is the KB's:
where the KB keeps one value of something the world has several of (one continent for a
country spanning two), a swapped fact can be true in the world, which the measured FPR includes.

This lives in the rules layer because "not true" needs the closure (``shares_currency`` and the
symmetric ``neighbour`` are derived).

>>> from deepunlearn.kg.kb import KnowledgeBase
>>> kb = KnowledgeBase.build({"Ann": {"gender": "female"}, "Bob": {"gender": "male"},
...                           "Cy": {"gender": "male"}, "Di": {"gender": "female"}},
...                          [("Ann", "husband", "Bob"), ("Di", "husband", "Cy")])
>>> neg = make_never_true(kb, seed=0, rules="family")
>>> sorted(neg.facts)
[('Ann', 'husband', 'Cy'), ('Di', 'husband', 'Bob')]
"""

from __future__ import annotations

import numpy as np

from ..kg.kb import KBError, KnowledgeBase

#: mixed into the seed, so that seed S here never repeats another generator's stream
_STREAM = 0x6E657665


def make_never_true(kb: KnowledgeBase, seed: int = 0, rules=None) -> KnowledgeBase:
    """One never-true fact per fact of ``kb`` (module docstring); ``rules``: the KB's own when
    None (``metadata["rules"]``, else ``family``). The same KB and seed give the same file."""
    from .closure import closure

    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise KBError(f"never-true seed must be a non-negative integer (got {seed!r})")
    rules = rules or kb.metadata.get("rules") or "family"
    true = set(closure(kb, rules).facts) | set(kb.facts)
    objects: dict[str, list[str]] = {}
    for _, r, o in kb.facts:
        objects.setdefault(r, [])
        if o not in objects[r]:
            objects[r].append(o)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), _STREAM]))
    facts = []
    for s, r, o in kb.facts:
        wrong = [c for c in objects[r] if c != s and (s, r, c) not in true]
        if wrong:
            facts.append((s, r, wrong[int(rng.integers(len(wrong)))]))
    facts = list(dict.fromkeys(facts))
    if not facts:
        raise KBError(f"KB {kb.name!r}: no relation has a wrong object to swap in; no never-true facts")
    used = {e for s, _, o in facts for e in (s, o)}
    return KnowledgeBase(
        entities={e: dict(kb.entities.get(e, {})) for e in sorted(used)},
        relations={r: kb.relations[r] for r in kb.relations if any(f[1] == r for f in facts)},
        facts=facts, targets=[], name=f"{kb.name}-never-true-seed{seed}", background=kb.background,
        metadata={"generator": "deepunlearn.rules.never_true.make_never_true",
                  "never_true": {"of": kb.name, "seed": int(seed), "rules": str(rules)},
                  **{k: kb.metadata[k] for k in ("domain", "domain_folder", "rules") if k in kb.metadata}},
    )
