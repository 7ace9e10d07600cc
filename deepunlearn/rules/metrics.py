"""Recall and accuracy of an unlearning result (docs/concepts.md), and the :class:`Evaluator`
that other layers call.

For a target k with minimal deep-unlearning sets ``M(k)`` and the facts ``U_A`` the model lost
(known before unlearning, not after):

* recall ``= max over U* in M(k) of |U_A ∩ U*| / |U*|``; the maximiser is ``U*_A``. When several
  sets reach the maximum, ``tie="accuracy"`` (our default) takes the one that gives the highest
  accuracy (then the smallest, then the first by sorted ids), so ties never make a method look
  worse than it is; ``tie="first"`` takes the first in the collection's order, as the reference
  does (``argmax = np.asarray(recall_list).argmax()`` over the stored set's iteration order).
* accuracy ``= |(K \\ U*_A) \\ U_A| / |K \\ U*_A|``: the share of what the model should have kept
  that it did keep. The per-group parts (a relation's ``group``: ``family`` / ``biography`` in
  the family domain, a domain's own groups elsewhere) and the rule-relation / other parts
  restrict both the numerator and the denominator to those facts. A part with no fact to keep
  scores 1.0. The parts per group are one mapping, ``accuracy_groups``, keyed by the groups of the
  KB's domain; ``accuracy_family`` / ``accuracy_biography`` read the groups ``family`` /
  ``biography`` from it (NaN when the KB has no such group).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Iterable, Literal, Mapping, NamedTuple, Sequence

import numpy as np

from .budget import DEFAULT_MAX_GROUNDINGS
from .errors import RulesError
from .graph import DerivationGraph, derivation_graph
from .language import RuleSet
from .load import load_rules
from .minimal import MinimalSets, minimal_sets


def _check_stored(kb, sets: Mapping[int, Sequence[frozenset[int]]]) -> dict[int, list[frozenset[int]]]:
    """Stored sets as ``{target: [frozenset, ...]}`` (order kept), each checked against the KB."""
    n = len(kb.facts)
    out: dict[int, list[frozenset[int]]] = {}
    for t, ss in sets.items():
        t = int(t)
        if not 0 <= t < n:
            raise RulesError(f"stored sets: target {t} is no fact of KB {kb.name!r} ({n} facts)")
        fs = [frozenset(int(i) for i in s) for s in ss]
        if not fs:
            raise RulesError(f"stored sets: target {t} has no minimal set")
        for k, s in enumerate(fs):
            bad = sorted(i for i in s if not 0 <= i < n)
            if bad:
                raise RulesError(f"stored sets: target {t}, set {k} names fact {bad[0]}, which is no fact of "
                                 f"KB {kb.name!r} ({n} facts)")
            if t not in s:
                raise RulesError(f"stored sets: target {t}, set {k} {sorted(s)} does not hold the target")
        out[t] = fs
    return out


def recall(sets: Iterable[frozenset[int]], forgotten: Iterable[int]) -> tuple[float, list[frozenset[int]]]:
    """The best recall over ``sets`` and every set that reaches it.

    >>> recall([frozenset({1, 2}), frozenset({1, 3, 4, 5})], forgotten=[1, 3, 4])
    (0.75, [frozenset({1, 3, 4, 5})])
    """
    lost = set(int(f) for f in forgotten)
    best_num, best_den, best = -1, 1, []
    for s in sets:
        num, den = len(lost & s), len(s)
        # compare num/den with best_num/best_den exactly (no float ties)
        if num * best_den > best_num * den:
            best_num, best_den, best = num, den, [s]
        elif num * best_den == best_num * den:
            best.append(s)
    if not best:
        raise RulesError("recall needs at least one minimal deep-unlearning set")
    return best_num / best_den, best


def accuracy(keep: np.ndarray, lost: np.ndarray, weights: np.ndarray | None = None) -> float:
    """``|keep \\ lost| / |keep|`` over boolean masks; 1.0 when there is nothing to keep. With
    ``weights`` (one per fact) each fact counts its weight: the ratio estimate of a sample.

    >>> accuracy(np.array([True, True, True, False]), np.array([True, False, False, True]))
    0.6666666666666666
    """
    if weights is not None:
        den = float(weights[keep].sum())
        return 1.0 if den == 0 else float(weights[keep & ~lost].sum()) / den
    n = int(keep.sum())
    return 1.0 if n == 0 else float((keep & ~lost).sum()) / n


class Accuracies(NamedTuple):
    """Accuracy over K minus some excluded facts, overall and per part: ``groups`` holds every
    relation group of the KB (its domain's) in the KB's order; ``family`` / ``biography`` read
    ``groups["family"]`` / ``groups["biography"]``, NaN when the KB has no such group. Index 0 is
    the overall accuracy."""

    overall: float
    rule: float
    other: float
    groups: dict[str, float]

    @property
    def family(self) -> float:
        return self.groups.get("family", math.nan)

    @property
    def biography(self) -> float:
        return self.groups.get("biography", math.nan)


@dataclass
class Evaluation:
    """Recall and accuracy of one unlearning result for one target.

    ``set`` is ``U*_A`` (sorted KB fact ids); ``exact``: recall was taken over all minimal sets.
    ``accuracy_groups``: the accuracy per relation group (every group of the KB's domain, in the
    KB's order); ``accuracy_family`` / ``accuracy_biography`` read two of them, NaN where the KB
    lacks the group. :meth:`to_dict` also has each group flat, ``accuracy_{group}``.
    """

    recall: float
    accuracy: float
    accuracy_rule: float
    accuracy_other: float
    exact: bool
    set: list[int]
    target_forgotten: bool
    target: int = -1
    n_sets: int = 0
    accuracy_groups: dict[str, float] = field(default_factory=dict)

    @property
    def accuracy_family(self) -> float:
        return self.accuracy_groups.get("family", math.nan)

    @property
    def accuracy_biography(self) -> float:
        return self.accuracy_groups.get("biography", math.nan)

    def group_fields(self) -> dict[str, float]:
        """Each group's accuracy as a flat key, ``accuracy_{group}``, in the KB's order (none for a
        group named like another field, ``rule`` or ``other``: its mapping entry only)."""
        taken = {f.name for f in fields(self)}
        return {f"accuracy_{g}": a for g, a in self.accuracy_groups.items() if f"accuracy_{g}" not in taken}

    def to_dict(self) -> dict:
        """The fields as a dict, with :meth:`group_fields` after ``accuracy``."""
        items = list(asdict(self).items())
        at = [k for k, _ in items].index("accuracy") + 1
        return dict([*items[:at], *self.group_fields().items(), *items[at:]])


class Evaluator:
    """Recall and accuracy of unlearning runs over one KB and rule set.

    Minimal sets are computed once per target and cached; :meth:`evaluate` scores one run's
    forgotten facts against them.

    Parameters
    ----------
    kb : KnowledgeBase
        The knowledge base.
    rules : str or RuleSet, optional
        Anything :func:`~.load.load_rules` takes; default: the KB's ``metadata["rules"]``, else
        ``family``.
    known : iterable of int, optional
        K, the fact ids the model knew before unlearning; ``None``: the whole KB (the reference's K).
    exact, seeds, time_budget
        Passed to :func:`~.minimal.minimal_sets` (MDUS is seeded per target, so results do not
        depend on the order targets are asked in).
    progress : bool, default False
        A progress bar on stderr while the derivation graph is built.
    sets : mapping of int to sequence of frozenset, optional
        Stored minimal sets per target fact id (e.g. :func:`~.stored.stored_sets`, the release's
        ``unlearn_minimal_set/``), used as given and in the order given, reported with
        ``exact=False`` and ``method="stored"``; a target the mapping lacks gets computed sets as
        configured. The reference uses the stored sets and computes MDUS over 100 seeds for a
        target without any. Stored sets were found with K = the whole KB (the reference's K);
        with a smaller ``known`` they are still used as given (their facts outside K never count
        as lost, which lowers such a set's recall).
    tie : {"accuracy", "first"}, default "accuracy"
        How ``U*_A`` is chosen among the sets of maximal recall: the one leaving the highest
        accuracy (see the module docstring), or the first (the reference's ``argmax``).
    max_groundings : int or None
        The grounding budget of the derivation graph (:mod:`.budget`).

    Raises
    ------
    RulesError
        An unknown ``tie`` or rule set, or stored sets for a target the KB does not hold or with
        no set.
    RuleBudgetError
        The derivation graph would pass ``max_groundings``.

    Examples
    --------
    >>> from deepunlearn.kg.kb import KnowledgeBase
    >>> kb = KnowledgeBase.build(
    ...     {"Ann": {"gender": "female"}, "Bob": {"gender": "male"}, "Cy": {"gender": "male"}},
    ...     [("Ann", "child", "Cy"), ("Cy", "father", "Bob"), ("Ann", "husband", "Bob"),
    ...      ("Cy", "mother", "Ann"), ("Cy", "birthyear", "1990")])
    >>> ev = Evaluator(kb, rules="family")
    >>> e = ev.evaluate(0, forgotten=[0, 1, 4])
    >>> e.recall, e.set, e.accuracy, e.accuracy_biography
    (0.6666666666666666, [0, 1, 3], 0.5, 0.0)
    >>> e.accuracy_groups
    {'family': 1.0, 'biography': 0.0}
    """

    def __init__(self, kb, rules: str | RuleSet | None = None, known: Iterable[int] | None = None,
                 exact: bool = True, seeds: int = 100, time_budget: float = 10.0, progress: bool = False,
                 sets: Mapping[int, Sequence[frozenset[int]]] | None = None,
                 tie: Literal["accuracy", "first"] = "accuracy", max_groundings: int | None = DEFAULT_MAX_GROUNDINGS):
        if tie not in ("accuracy", "first"):
            raise RulesError(f"tie must be 'accuracy' or 'first', got {tie!r}")
        self.kb = kb
        self.tie = tie
        self.stored = _check_stored(kb, sets) if sets is not None else {}
        self.rules = load_rules(rules if rules is not None else kb.metadata.get("rules", "family"))
        self.graph: DerivationGraph = derivation_graph(kb, self.rules, known=known, progress=progress,
                                                       max_groundings=max_groundings)
        self.exact, self.seeds, self.time_budget = exact, seeds, time_budget
        n = len(kb.facts)
        self.known = self.graph.base[:n].copy()
        self.groups: dict[str, np.ndarray] = {g: np.asarray(m, dtype=bool) for g, m in kb.group_masks.items()}
        self.rule_facts = self.graph.uses
        self._sets: dict[int, MinimalSets] = {}

    def _target(self, target: int) -> int:
        t = int(target)
        if not 0 <= t < len(self.kb.facts):
            raise RulesError(f"target {t} out of range (KB {self.kb.name!r} has {len(self.kb.facts)} facts)")
        if not self.known[t]:
            raise RulesError(f"target {t} {list(self.kb.facts[t])} is not in K (the facts known before unlearning): "
                             "a fact the model never knew cannot be unlearned")
        return t

    def minimal_sets(self, target: int) -> MinimalSets:
        t = self._target(target)
        ms = self._sets.get(t)
        if ms is None and t in self.stored:
            ms = self._sets[t] = MinimalSets(t, list(self.stored[t]), False, "stored", 0.0)
        if ms is None:
            ms = self._sets[t] = minimal_sets(self.graph, t, seeds=self.seeds, exact=self.exact,
                                              time_budget=self.time_budget, rng=np.random.default_rng(t))
        return ms

    def _parts(self, exclude: Iterable[int], lost: np.ndarray, w: np.ndarray | None = None) -> Accuracies:
        keep = self.known.copy()
        keep[list(exclude)] = False
        groups = {g: accuracy(keep & m, lost, w) for g, m in self.groups.items()}
        return Accuracies(accuracy(keep, lost, w), accuracy(keep & self.rule_facts, lost, w),
                          accuracy(keep & ~self.rule_facts, lost, w), groups)

    def accuracies(self, exclude: Iterable[int], forgotten: Iterable[int]) -> Accuracies:
        """Accuracy over K minus ``exclude`` (e.g. the union of several targets' sets, for a batch
        of targets forgotten together): overall, family, biography, rule facts, other facts and
        per group (:class:`Accuracies`)."""
        lost = np.zeros(len(self.kb.facts), dtype=bool)
        lost[[int(f) for f in forgotten]] = True
        return self._parts([int(e) for e in exclude], lost & self.known)

    def evaluate(self, target: int, forgotten: Iterable[int], weights: np.ndarray | None = None) -> Evaluation:
        """Recall and accuracies for a model that lost ``forgotten`` (KB fact ids; facts outside
        K are ignored) while unlearning ``target``. ``weights`` (one per KB fact): accuracies are
        weighted ratios (a probed sample of K, each fact weighted by how many it stands for; a
        weight 0 leaves a fact out); recall never uses them."""
        t = self._target(target)
        n = len(self.kb.facts)
        lost = np.zeros(n, dtype=bool)
        ids = [int(f) for f in forgotten]
        bad = [f for f in ids if not 0 <= f < n]
        if bad:
            raise RulesError(f"forgotten fact index {bad[0]} out of range (KB {self.kb.name!r} has {n} facts)")
        lost[ids] = True
        lost &= self.known
        ms = self.minimal_sets(t)
        rec, tied = recall(ms.sets, np.flatnonzero(lost).tolist())

        def parts(u: frozenset[int]) -> Accuracies:
            return self._parts(u, lost, weights)

        if self.tie == "first":  # recall() keeps the collection's order
            best = tied[0]
            best_acc = parts(best)
        else:
            scored = [(parts(u), u) for u in tied]
            best_acc, best = max(scored, key=lambda x: (x[0][0], -len(x[1]), [-i for i in sorted(x[1])]))
        return Evaluation(recall=rec, accuracy=best_acc.overall, accuracy_rule=best_acc.rule,
                          accuracy_other=best_acc.other, exact=ms.exact, set=sorted(best),
                          target_forgotten=bool(lost[t]), target=t, n_sets=len(ms.sets),
                          accuracy_groups=dict(best_acc.groups))
