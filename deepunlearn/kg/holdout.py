"""Holdout facts: facts of a KB's domain that a model finetuned on the KB never saw.

A membership-inference test (Min-K% Prob, PPL, zlib; MUSE's PrivLeak) separates the facts a model
was trained on from facts of the same kind it never saw. :func:`make_holdout` makes the second
kind: people and facts from the same generator (:func:`~deepunlearn.kg.domains.family.generate.generate_family`,
with the KB's own generator parameters when it was generated, the defaults otherwise: the imported
release records none) and the same relation templates as the KB, sharing no person and no fact
with it (:func:`check_disjoint`). A KB of another domain (the declarative generator's, e.g.
``org``) gets new people sampled by its domain's own shapes, with facts of the sampled relations
whose subject is a person, pointing at the KB's own offices, departments, ... (:func:`_domain_holdout`).

Two choices keep the test about *facts*, not about unknown words (a word-level tiny tokenizer
built on the KB would map a new word to ``<unk>``, and any model finds an unseen name less
likely than a seen one):

- every holdout person gets a **new full name** ("First Last" not in the KB) built from first
  names the KB uses for people of the same gender and surnames the KB uses (a generated family
  keeps one surname, mapped to one of the KB's); only when every such pair is taken does a name
  fall back to other surnames, and then to the generator's own name;
- attribute values (birthyear, birthplace, job) are **redrawn from the values the KB holds for
  that attribute**, seeded, with the KB's frequencies (a birth year is then not tied to the
  parents' years, which no membership score looks at).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .kb import KBError, KnowledgeBase

#: ``metadata["generator"]`` of a KB the declarative generator made (any domain but family).
DOMAIN_GENERATOR = "deepunlearn.rules.generate.generate_domain"
#: Mixed into the holdout's seed so that a holdout drawn with seed S never repeats the family
#: network of a KB generated with the same seed S.
_HOLDOUT_STREAM = 0x486F6C64  # "Hold"


def _params(kb: KnowledgeBase):
    from pydantic import ValidationError

    from .domains.family.params import FamilyParams

    raw = kb.metadata.get("params") if isinstance(kb.metadata, dict) else None
    if not isinstance(raw, dict):
        return FamilyParams(targets_per_relation=0)
    try:
        return FamilyParams(**{**raw, "targets_per_relation": 0})
    except (ValidationError, TypeError) as e:
        raise KBError(f"KB {kb.name!r}: metadata.params are not generator parameters "
                      f"({' '.join(str(e).split())})", field="metadata.params") from None


def _name_pools(kb: KnowledgeBase, people: set[str] | None = None) -> tuple[dict[str, list[str]], list[str], list[str]]:
    """First names by gender, all first names, and surnames the KB's people use (sorted);
    ``people``: which entities are people (default: all of them, as in a family KB)."""
    by_gender: dict[str, set[str]] = {}
    firsts: set[str] = set()
    lasts: set[str] = set()
    for name, attrs in kb.entities.items():
        words = name.split()
        if len(words) < 2 or (people is not None and name not in people):
            continue
        firsts.add(words[0])
        lasts.add(words[-1])
        g = attrs.get("gender") if isinstance(attrs, dict) else None
        if g:
            by_gender.setdefault(g, set()).add(words[0])
    return {g: sorted(v) for g, v in by_gender.items()}, sorted(firsts), sorted(lasts)


def _rename(gen: KnowledgeBase, kb: KnowledgeBase, rng: np.random.Generator,
            people: set[str] | None = None) -> dict[str, str]:
    """Generated name -> new name made of the words of the KB's ``people`` (default: every entity),
    unique and not a KB name."""
    by_gender, firsts, lasts = _name_pools(kb, people)
    used = set(kb.entities)
    out: dict[str, str] = {}
    if not firsts:  # the KB's names are not "First Last": keep the generator's where they are new
        for name in gen.entities:
            if name in used:
                raise KBError(f"holdout entity {name!r} is also an entity of KB {kb.name!r}, whose names cannot be "
                              "recombined into new ones; use 'deepunlearn data never-true --kb KB' for calibration "
                              "negatives instead of a holdout")
            out[name] = name
        return out
    surname_order = [lasts[int(i)] for i in rng.permutation(len(lasts))]
    surname_of: dict[str, str] = {}
    for name in gen.entities:  # one KB surname per generated surname, in order of first use
        last = name.split()[-1]
        if last not in surname_of:
            surname_of[last] = surname_order[len(surname_of) % len(surname_order)]
    for name, attrs in gen.entities.items():
        pool = by_gender.get(attrs.get("gender", ""), firsts) or firsts
        main = surname_of[name.split()[-1]]
        chosen = None
        for last in [main] + [s for s in surname_order if s != main]:
            for i in rng.permutation(len(pool)):
                full = f"{pool[int(i)]} {last}"
                if full not in used:
                    chosen = full
                    break
            if chosen:
                break
        if chosen is None:  # every pair of the KB's words is taken: the generator's own name
            if name in used:
                raise KBError(f"cannot name {len(gen.entities)} holdout entities apart from KB {kb.name!r}'s; ask "
                              "for fewer --people, or use 'deepunlearn data never-true --kb KB' for calibration "
                              "negatives instead of a holdout")
            chosen = name
        used.add(chosen)
        out[name] = chosen
    return out


def make_holdout(kb: KnowledgeBase, seed: int, people: int | None = None) -> KnowledgeBase:
    """A KB of ``people`` new people (default: as many as ``kb`` has) and their facts, disjoint
    from ``kb``: same generator, same relations and templates, names and attribute values made of
    the KB's words (see the module's docstring). Only the KB's relations that the family
    generator makes are kept (a ``code`` canary relation has no holdout). The result has no
    targets; ``metadata["holdout"]`` = ``{"of", "kb_fingerprint", "seed", "people"}``. The same
    KB and seed give the same holdout.

    >>> from deepunlearn.kg.domains.family.generate import generate_family
    >>> kb = generate_family(12, seed=3)
    >>> hold = make_holdout(kb, seed=0)
    >>> len(hold.entities), set(hold.entities) & set(kb.entities), set(hold.facts) & set(kb.facts)
    (12, set(), set())
    """
    from .fingerprint import kb_fingerprint
    from .domains.family.generate import generate_family

    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise KBError(f"holdout seed must be a non-negative integer (got {seed!r})")
    if kb.metadata.get("generator") == DOMAIN_GENERATOR:
        return _domain_holdout(kb, int(seed), people)
    n = len(kb.entities) if people is None else people
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise KBError(f"holdout people must be a positive integer (got {n!r})")
    relations = {r: rel for r, rel in kb.relations.items()}
    gen_seed = int(np.random.SeedSequence([int(seed), _HOLDOUT_STREAM]).generate_state(1)[0])
    gen = generate_family(int(n), seed=gen_seed, params=_params(kb))
    shared = [r for r in gen.relations if r in relations and any(f[1] == r for f in kb.facts)]
    if not shared:
        raise KBError(f"KB {kb.name!r} has no relation the family generator makes "
                      f"({', '.join(gen.relations)}): no holdout facts of its domain can be drawn; 'deepunlearn "
                      "data never-true --kb KB' makes calibration negatives of any KB")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), _HOLDOUT_STREAM, 1]))
    names = _rename(gen, kb, rng)
    values: dict[str, list[str]] = {}
    for _, r, o in kb.facts:
        if r in shared and relations[r].kind == "value":
            values.setdefault(r, []).append(o)
    facts = []
    for s, r, o in gen.facts:
        if r not in shared:
            continue
        if relations[r].kind == "value":
            facts.append((names[s], r, values[r][int(rng.integers(len(values[r])))]))
        else:
            facts.append((names[s], r, names[o]))
    metadata: dict[str, Any] = {
        "generator": "deepunlearn.kg.holdout.make_holdout",
        "holdout": {"of": kb.name, "kb_fingerprint": kb_fingerprint(kb), "seed": int(seed), "people": int(n)},
        "params": gen.metadata["params"],
    }
    for key in ("rules", "other_answers"):  # what the KB's facts are derived and probed by
        if key in kb.metadata:
            metadata[key] = kb.metadata[key]
    hold = KnowledgeBase(
        entities={names[p]: dict(a) for p, a in gen.entities.items()},
        relations={r: relations[r] for r in relations if r in shared},
        facts=facts, targets=[], name=f"{kb.name}-holdout-seed{seed}", background=kb.background,
        metadata=metadata,
    )
    hold.validate()
    check_disjoint(kb, hold)
    return hold


def _reads_real_data(dom) -> bool:
    """Whether a built-in domain draws its facts with a sampler of its own (geo reads GeoNames)."""
    import importlib

    from .domain import builtin_folder

    if dom.folder.resolve() != (builtin_folder() / dom.name).resolve():
        return False
    try:
        return hasattr(importlib.import_module(f"deepunlearn.kg.domains.{dom.name}"), "sample")
    except ModuleNotFoundError:
        return False


def _domain_holdout(kb: KnowledgeBase, seed: int, people: int | None) -> KnowledgeBase:
    """The holdout of a KB the declarative generator made: ``people`` new entities of the
    domain's first type (default: as many as the KB has), sampled by the domain's own shapes
    (:func:`~deepunlearn.kg.sample.sample_domain`), renamed with the KB's words, and their facts
    of the sampled relations whose subject is of that type (manager, department, office, ... for
    org); objects of other types are the KB's own entities (its offices, departments), so only
    the people are new. Relations the rules derive are left out: they would need the rules."""
    from .domain import DomainError, load_domain
    from .fingerprint import kb_fingerprint
    from .sample import sample_domain

    where = kb.metadata.get("domain_folder") or kb.metadata.get("domain")
    try:
        dom = load_domain(where)
    except DomainError as e:
        raise KBError(f"KB {kb.name!r}: its domain ({where}) cannot be read for a holdout: {e}",
                      field="metadata.domain") from None
    from .domain_check import plural

    ptype = dom.people_type
    if _reads_real_data(dom):
        raise KBError(f"KB {kb.name!r}: the {dom.name} domain reads its {plural(ptype)} from real data, so there are "
                      f"no new {plural(ptype)} to draw for a holdout; use 'deepunlearn data never-true --kb KB' (each "
                      "fact with a wrong object) for calibration negatives", field="--kb")
    kinds = {r for r, spec in dom.relations.items() if spec.shape and spec.subject == ptype and r in kb.relations}
    kb_people = {s for s, r, _ in kb.facts if r in dom.relations and dom.relations[r].subject == ptype}
    n = people if people is not None else len(kb_people)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise KBError(f"holdout {plural(ptype)} (--people) must be a positive integer (got {n!r})")
    stored = set(kb.facts)
    symmetric = {r for r in kinds if dom.relations[r].shape == "pairs"
                 and any((o, r, s) in stored for s, rr, o in kb.facts if rr == r)}
    rng = np.random.default_rng(np.random.SeedSequence([seed, _HOLDOUT_STREAM]))
    # names that are not "First Last" cannot be recombined from the KB's words: draw fresh ones
    avoid = frozenset() if _name_pools(kb, kb_people)[1] else frozenset(kb.entities)
    try:
        sampled = sample_domain(dom, int(n), rng, symmetric, avoid)
    except DomainError as e:
        raise KBError(f"KB {kb.name!r}: domain {dom.name!r} cannot name {n} new {plural(ptype, int(n))} apart from "
                      f"the KB's {len(kb_people)} ({e}); ask for fewer with --people, give the domain more names, or "
                      "use 'deepunlearn data never-true --kb KB' (each fact with a wrong object) for calibration "
                      "negatives instead of a holdout", field="--people") from None
    persons = sampled.of_type(ptype)
    names = _rename(KnowledgeBase(entities={p: sampled.entities[p] for p in persons}, relations={}, facts=[]),
                    kb, rng, kb_people)
    # objects of another type: the KB's entity of that type in the same position of a seeded shuffle
    theirs: dict[str, list[str]] = {}
    for _, r, o in kb.facts:
        spec = dom.relations.get(r)
        if spec is not None and spec.object != ptype and o in kb.entities:
            theirs.setdefault(spec.object, [])
            if o not in theirs[spec.object]:
                theirs[spec.object].append(o)
    facts, objects = [], {}
    for s, r, o in sampled.facts:
        if r not in kinds:
            continue
        t = dom.relations[r].object
        if t == ptype:
            facts.append((names[s], r, names[o]))
        elif theirs.get(t):
            if o not in objects:
                objects[o] = theirs[t][int(rng.integers(len(theirs[t])))]
            facts.append((names[s], r, objects[o]))
    facts = list(dict.fromkeys(facts))  # two sampled objects mapped to one KB entity
    entities = {names[p]: dict(sampled.entities[p]) for p in persons}
    entities.update({o: dict(kb.entities[o]) for _, _, o in facts if o not in entities})
    hold = KnowledgeBase(
        entities=entities, relations={r: kb.relations[r] for r in kb.relations if r in kinds}, facts=facts,
        targets=[], name=f"{kb.name}-holdout-seed{seed}", background=kb.background,
        metadata={"generator": "deepunlearn.kg.holdout.make_holdout",
                  "holdout": {"of": kb.name, "kb_fingerprint": kb_fingerprint(kb), "seed": seed, "people": int(n)},
                  **{k: kb.metadata[k] for k in ("domain", "domain_folder", "rules", "other_answers")
                     if k in kb.metadata}},
    )
    hold.validate()
    check_disjoint(kb, hold)
    return hold


def check_disjoint(kb: KnowledgeBase, holdout: KnowledgeBase, holdout_file: str | os.PathLike | None = None,
                   *, flag: str = "--holdout") -> None:
    """:class:`KBError` unless ``holdout`` shares no fact and no person with ``kb``; the error
    names the holdout's file (with ``flag``) and the first shared fact or person.

    >>> kb = KnowledgeBase.build({"Ann": {}, "Bob": {}}, [("Ann", "husband", "Bob")])
    >>> hold = KnowledgeBase.build({"Ann": {}, "Cy": {}}, [("Ann", "husband", "Cy")])
    >>> check_disjoint(kb, hold, "h.json")
    Traceback (most recent call last):
    ...
    deepunlearn.kg.kb.KBError: --holdout h.json: person 'Ann' is also in KB 'kb' (entities of the holdout); \
a holdout must share no person and no fact with the KB
    """
    where = f"{flag} {holdout_file}" if holdout_file is not None else f"holdout KB {holdout.name!r}"
    tail = "a holdout must share no person and no fact with the KB"
    kb_facts = set(kb.facts)
    for i, f in enumerate(holdout.facts):
        if f in kb_facts:
            raise KBError(f"{where}: fact {list(f)} (facts[{i}]) is also in KB {kb.name!r}; {tail}",
                          file=holdout_file, field=f"facts[{i}]")
    # an entity the holdout only points at (an org's office or department) may be the KB's own;
    # one it says anything about (a person) may not
    only_objects = {o for _, _, o in holdout.facts} - {s for s, _, _ in holdout.facts}
    for name in holdout.entities:
        if name in kb.entities and name not in only_objects:
            raise KBError(f"{where}: person {name!r} is also in KB {kb.name!r} (entities of the holdout); {tail}",
                          file=holdout_file, field="entities")
