"""Which fact ids a sweep unlearns: its ``[targets]`` table resolved against the KB."""

from __future__ import annotations

import random
from collections import defaultdict

from ..kg.kb import KBError, KnowledgeBase
from ..kg.refs import resolve_item
from .config import ConfigError, SweepConfig
from .targets import TargetSpec


def select_targets(kb: KnowledgeBase, spec: TargetSpec, cfg: SweepConfig | None = None,
                   known: set[int] | frozenset[int] | None = None) -> list[int]:
    """The fact ids to unlearn, in a stable order.

    ``stratified = N`` draws N facts per relation with ``spec.seed`` from the KB's target list
    (or, when the KB lists none, from all its family facts), relations in order of first
    appearance and facts by id within a relation. With ``known`` (the facts a model knows before
    unlearning) the draw is among known facts only, taking known family facts of a relation
    when none of its listed targets is known, so no relation is lost to a skipped target.

    >>> kb = KnowledgeBase.build({"A": {}, "B": {}, "C": {}},
    ...     [("A", "child", "B"), ("A", "child", "C"), ("B", "father", "A"), ("C", "father", "A")], targets=[0, 1, 2])
    >>> select_targets(kb, TargetSpec(refs=["B|father|A", 0]))
    [2, 0]
    >>> got = select_targets(kb, TargetSpec(stratified=1)); [kb.facts[t][1] for t in got]
    ['child', 'father']
    >>> select_targets(kb, TargetSpec(stratified=1)) == got     # deterministic
    True
    >>> select_targets(kb, TargetSpec(stratified=1), known={1, 3})   # fact 3 is no listed target
    [1, 3]
    """
    def error(field: str, msg: str) -> ConfigError:
        return cfg.error(field, msg) if cfg is not None else ConfigError(f"field {field}: {msg}")

    if spec.refs is not None:
        out: list[int] = []
        for i, ref in enumerate(spec.refs):
            try:
                t = resolve_item(kb, ref)
            except KBError as e:
                raise error(f"targets.refs.{i}", str(e)) from None
            if t in out and (spec.batch or spec.sequential):
                raise error(f"targets.refs.{i}", f"fact {t} {list(kb.facts[t])} is named twice: a batch or a "
                            "sequence of requests names each target once")
            if t not in out:
                out.append(t)
        return out
    if spec.all:
        if not kb.targets:
            raise error("targets", f"KB {kb.name!r} lists no targets: set targets.stratified = N or "
                        "targets.refs = [...]")
        return list(dict.fromkeys(kb.targets))
    listed = list(dict.fromkeys(kb.targets)) or kb.entity_facts()
    by_rel: dict[str, list[int]] = defaultdict(list)
    for t in listed:
        by_rel[kb.facts[t][1]].append(t)
    out = []
    for rel, ids in by_rel.items():
        if known is not None:
            ids = [t for t in ids if t in known] or [
                t for t in kb.entity_facts() if kb.facts[t][1] == rel and t in known]
        rng = random.Random(f"{spec.seed}:{rel}")
        out.extend(sorted(rng.sample(sorted(ids), min(spec.stratified or 0, len(ids)))))
    return out
