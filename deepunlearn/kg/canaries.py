"""Canaries: out-of-distribution facts whose answers are random strings.

Baluta et al. (in- vs out-of-distribution unlearning) and Carlini et al. (the secret sharer) plant
random strings in the training data and measure how far the model prefers the true string over
random references: the *exposure* ``log2 n - log2 rank`` of the true string among ``n`` candidates.
:func:`add_canaries` adds ``n`` such facts to a KB: ``(person, "code", <random string>)``, a
biography relation that no rule mentions (so the deductive closure derives nothing from it and a
canary target's only minimal deep-unlearning set is itself), plus 999 reference strings drawn the
same way, the other candidates of exposure. Finetuning (:mod:`deepunlearn.unlearn.finetune`)
repeats every canary ``repeat`` times per epoch (``--repeat 1|10``).
"""

from __future__ import annotations

import numpy as np

from .kb import KBError, KnowledgeBase, Relation

#: The canaries' relation and its probe: "What is the code of Ann Lee?" -> "k3j9dk2lq0".
CODE_RELATION = Relation("code", "biography", "What is the code of {o1}?", "{o2}")
ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
#: Reference strings drawn besides the canaries: a canary's rank is then taken among 1000 strings
#: (exposure at most log2 1000 ~ 9.97 bits).
N_REFERENCES = 999
_CANARY_STREAM = 0x43616E61  # "Cana": keeps canary draws apart from the generator's for one seed


def _check_int(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise KBError(f"canaries: {name} must be an integer >= {low} (got {value!r})", field=name)
    return int(value)


def _codes(rng: np.random.Generator, count: int, length: int, taken: set[str]) -> list[str]:
    """``count`` distinct random strings over :data:`ALPHABET`, none in ``taken`` (which grows)."""
    out: list[str] = []
    for _ in range(1000 * count + 1000):
        if len(out) == count:
            break
        code = "".join(ALPHABET[int(i)] for i in rng.integers(0, len(ALPHABET), size=length))
        if code not in taken:
            taken.add(code)
            out.append(code)
    if len(out) < count:
        raise KBError(f"canaries: cannot draw {count} distinct codes of length {length} over {len(ALPHABET)} "
                      "characters; use longer codes", field="length")
    return out


def add_canaries(kb: KnowledgeBase, n: int, *, repeat: int = 1, seed: int = 0, length: int = 10) -> KnowledgeBase:
    """A copy of ``kb`` with ``n`` canary facts ``(person, "code", code)`` for ``n`` distinct
    people drawn with ``seed``, each code ``length`` random characters of :data:`ALPHABET`.

    The canary facts come after the KB's facts (its fact ids are unchanged) and are appended to
    its targets. ``metadata["canaries"]`` = ``{"relation": "code", "length", "alphabet",
    "repeat", "facts": [ids], "references": [999 codes]}``: ``repeat`` is how often finetuning
    shows each canary per epoch (the issue compares 1 and 10); ``references`` are the other
    candidates of the exposure test, distinct from the canaries' codes and from every value and
    name of the KB. The same KB and arguments give the same canaries.

    >>> kb = KnowledgeBase.build({"Ann Lee": {}, "Bob Lee": {}}, [("Ann Lee", "husband", "Bob Lee")], targets=[0])
    >>> c = add_canaries(kb, 1, seed=0)
    >>> c.facts[1][1], len(c.facts[1][2]), c.targets, len(c.metadata["canaries"]["references"])
    ('code', 10, [0, 1], 999)
    >>> c.probe(1).question
    'What is the code of Bob Lee?'
    """
    n = _check_int("n", n, 1)
    repeat = _check_int("repeat", repeat, 1)
    seed = _check_int("seed", seed, 0)
    length = _check_int("length", length, 1)
    if CODE_RELATION.name in kb.relations or "canaries" in kb.metadata:
        raise KBError(f"KB {kb.name!r} already has a {CODE_RELATION.name!r} relation or canaries; "
                      "add canaries once, to a KB without them", field="relations.code")
    people = list(kb.entities)
    if n > len(people):
        raise KBError(f"canaries: {n} asked but KB {kb.name!r} has only {len(people)} people "
                      "(one canary per person)", field="n")
    rng = np.random.default_rng(np.random.SeedSequence([seed, _CANARY_STREAM]))
    chosen = sorted(int(i) for i in rng.choice(len(people), size=n, replace=False))
    taken = {o for _, _, o in kb.facts} | set(people)
    codes = _codes(rng, n, length, taken)
    references = _codes(rng, N_REFERENCES, length, taken)
    start = len(kb.facts)
    facts = list(kb.facts) + [(people[p], CODE_RELATION.name, c) for p, c in zip(chosen, codes)]
    ids = list(range(start, start + n))
    metadata = dict(kb.metadata)
    metadata["canaries"] = {"relation": CODE_RELATION.name, "length": length, "alphabet": ALPHABET,
                            "repeat": repeat, "seed": seed, "facts": ids, "references": references}
    out = KnowledgeBase(
        entities=kb.entities, relations={**kb.relations, CODE_RELATION.name: CODE_RELATION}, facts=facts,
        targets=list(kb.targets) + ids, name=f"{kb.name}-canaries{n}", background=kb.background,
        probe_overrides=dict(kb.probe_overrides), metadata=metadata,
    )
    out.validate()
    return out


def canary_info(kb: KnowledgeBase) -> dict | None:
    """``metadata["canaries"]`` of a KB, or ``None`` for a KB without canaries; a malformed entry
    (fact ids out of range, ``repeat`` not a positive integer, references not strings) is a
    :class:`KBError`. Finetuning and the tiny tokenizer read canaries through it."""
    info = kb.metadata.get("canaries") if isinstance(kb.metadata, dict) else None
    if not isinstance(info, dict):
        return None
    facts, repeat, refs = info.get("facts"), info.get("repeat", 1), info.get("references", [])
    if (not isinstance(facts, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                              and 0 <= i < len(kb.facts) for i in facts)
            or isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1
            or not isinstance(refs, list) or not all(isinstance(r, str) for r in refs)):
        raise KBError(f"KB {kb.name!r}: metadata.canaries is malformed (expected facts: a list of fact ids, "
                      "repeat: a positive integer, references: a list of strings)", field="metadata.canaries")
    return info
