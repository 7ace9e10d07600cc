"""Stored minimal deep-unlearning sets: the release's ``unlearn_minimal_set/`` or any folder of
that layout, resolved against a KB for the :class:`~.metrics.Evaluator` (``sets=``).

The reference never recomputes the minimal sets of the 55 release targets: it loads
``unlearn_minimal_set/<row>.pt`` (a ``set`` of ``frozenset``s of row ids, found by MDUS over 100
seeds) and iterates it in the set's own order. :func:`stored_sets` gives the same sets in the
same order; the Evaluator computes sets only for targets the folder does not cover.
"""

from __future__ import annotations

from pathlib import Path

from .errors import RulesError

#: the value of a sets spec that means "the release folder recorded in the KB's metadata"
RELEASE = "release"


def stored_sets(kb, spec: str | Path) -> dict[int, list[frozenset[int]]]:
    """``{target fact id: [minimal set, ...]}`` read from ``spec``, in the reference's order.

    ``spec == "release"``: the folder ``import_edu_relat`` recorded as ``kb.metadata["release_dir"]``;
    otherwise a folder: the release root (its ``unlearn_minimal_set/`` is read) or a folder of
    ``<row>.pt`` files. Row ids are fact ids (true of an imported release: row i is fact i). Every
    row id must name a fact of the KB and every set must hold its target; when the release's
    ``family-200-graph.pt`` lies beside the files, each row's fact is also checked to be the KB's
    fact of that id (a subset of the release renumbers facts and is refused).

    >>> from deepunlearn.kg.kb import KnowledgeBase
    >>> stored_sets(KnowledgeBase.build({"Ann": {}}, [("Ann", "job", "Pilot")], name="kb"), "release")
    Traceback (most recent call last):
    ...
    deepunlearn.rules.errors.RulesError: --sets release: KB 'kb' records no release folder (metadata 'release_dir', written by 'deepunlearn data import-edu-relat'); pass the folder of the sets instead (--sets DIR)
    """
    from ..kg.edu_relat import (ReleaseError, load_release_minimal_sets, minimal_set_folder, release_dir,
                                release_relationship_facts)
    from ..kg.safe_pickle import UnsafePickleError

    if str(spec) == RELEASE:
        where = kb.metadata.get("release_dir")
        if not where:
            raise RulesError(f"--sets release: KB {kb.name!r} records no release folder (metadata 'release_dir', "
                             "written by 'deepunlearn data import-edu-relat'); pass the folder of the sets instead (--sets DIR)")
        label = "--sets release (the KB's metadata 'release_dir')"
        where = release_dir(where)
    else:
        where, label = spec, "--sets"
    try:
        folder = minimal_set_folder(where)
        sets = load_release_minimal_sets(folder, order="reference")
        rows = release_relationship_facts(folder)
    except (ReleaseError, UnsafePickleError) as e:
        raise RulesError(f"{label}: {e}") from None
    n = len(kb.facts)
    for t, ss in sets.items():
        f = folder / f"{t}.pt"
        for k, s in enumerate(ss):
            bad = sorted(i for i in s if not 0 <= i < n)
            if bad or not 0 <= t < n:
                raise RulesError(f"{f}: target {t}, set {k} names row {bad[0] if bad else t}, which is no fact of "
                                 f"KB {kb.name!r} ({n} facts)")
            if t not in s:
                raise RulesError(f"{f}: set {k} {sorted(s)} does not hold its target {t}: not a deep-unlearning set of it")
            if rows is not None:
                for i in sorted(s):
                    if i < len(rows) and tuple(kb.facts[i]) != rows[i]:
                        raise RulesError(f"{f}: row {i} of the release is {list(rows[i])} but fact {i} of KB {kb.name!r} "
                                         f"is {list(kb.facts[i])}: the sets' row ids are not this KB's fact ids "
                                         "(a subset of the release renumbers its facts)")
    return sets
