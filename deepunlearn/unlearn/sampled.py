"""Sampled accuracy: at each grid point probe only what the point needs.

Probing all of K again at every grid point dominates a sweep's time, yet

* **recall** reads only the facts of the target's minimal deep-unlearning sets, and
* **deep** (t ∉ Ω(K_after, R)) reads only the target's *derivation cone*: the facts of K from
  which the target can be reached backwards in the derivation graph. Derivability of t is Horn
  propagation over that cone (:func:`deepunlearn.rules.derivable` looks at nothing else), so
  whether t is derivable from ``K \\ U`` depends on ``U ∩ cone`` only. Equivalently: a removal
  ``U`` deeply unlearns t iff it holds a minimal deep-unlearning set (derivability is monotone,
  the rules have no negation), and every fact of a minimal set lies in the cone (a fact of a
  minimal set M is needed: ``M \\ {f}`` leaves a derivation of t that uses f).
* **accuracy** is a mean over ``K \\ U*_A``, which a sample estimates with a known error.

So with ``accuracy="sampled"`` a point probes the *exact part* ``E`` = the target's cone in K ∪
the union of its minimal sets (stored sets may reach beyond the cone) ∪ the target, plus a
seeded sample ``S`` of the rest ``O = K \\ E``, stratified by relation group (proportional
allocation, at least one fact per non-empty group). Recall, ``U*_A`` (under ``tie="first"``) and
deep are those of the full probe, fact for fact. Accuracy is the stratified ratio estimate: every
fact of ``E`` counts once, a sampled fact of group h counts ``N_h / n_h`` (the rules layer's
weighted :meth:`~deepunlearn.rules.Evaluator.evaluate`); with ``tie="accuracy"`` ties between
sets of equal recall are broken on that estimate. The 95 % interval of the overall accuracy
is exact on ``E`` and a Wilson score interval (finite-population corrected) on the sampled share:
``acc = (kept_E + N_O p) / (|E \\ U*_A| + N_O)`` with p in the Wilson interval of the stratified
mean ``p̂ = Σ_h (N_h / N_O) p̂_h`` over ``n = Σ n_h`` draws (effective size ``n (N_O - 1) / (N_O - n)``).

``auto`` (the default) is ``sampled`` when K holds more than :data:`AUTO_LIMIT` facts, ``full``
otherwise, and always ``full`` under the ``reference`` protocol (the paper's code probes all of K).
Sampling applies to single-target runs; batches, sequential requests, scores and the adversarial
and attack checks read all of K and keep the full probe. A sampled point's ``forgotten`` lists the
probed facts it lost; its notes hold ``accuracy_low`` / ``accuracy_high`` and ``accuracy_probed``
(how many facts each of its points probes).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .methods import UnlearnError

ACCURACY_MODES = ("auto", "full", "sampled")
#: ``auto`` samples above this many facts in K
AUTO_LIMIT = 2000
#: default number of facts sampled outside the exact part
DEFAULT_SAMPLE = 300
#: the interval's coverage
LEVEL = 0.95


def resolve_accuracy(mode: str, sample: int, *, n_known: int, protocol: str = "default",
                     full_only: str | None = None) -> str:
    """``full`` or ``sampled`` for ``mode`` (``auto``, ``full``, ``sampled``); ``full_only`` names
    an option that needs all of K (sampled is refused with it, auto gives full).

    >>> resolve_accuracy("auto", 300, n_known=673), resolve_accuracy("auto", 300, n_known=9000)
    ('full', 'sampled')
    >>> resolve_accuracy("auto", 300, n_known=9000, protocol="reference")
    'full'
    """
    if mode not in ACCURACY_MODES:
        raise UnlearnError(f"accuracy must be one of {', '.join(ACCURACY_MODES)}, got {mode!r}", field="accuracy")
    if isinstance(sample, bool) or not isinstance(sample, (int, np.integer)) or sample < 1:
        raise UnlearnError(f"accuracy_sample must be a positive number of facts, got {sample!r}",
                           field="accuracy_sample")
    if mode == "sampled" and protocol == "reference":
        raise UnlearnError("accuracy 'sampled' departs from the reference protocol, which probes all of K: "
                           "use accuracy 'full' or the default protocol", field="accuracy")
    if mode == "sampled" and full_only:
        raise UnlearnError(f"accuracy 'sampled' probes part of K, but {full_only} reads all of K: use accuracy "
                           "'full'", field="accuracy")
    if mode == "auto":
        return "sampled" if n_known > AUTO_LIMIT and protocol != "reference" and not full_only else "full"
    return mode


def strata(kb, ids: Sequence[int]) -> dict[str, list[int]]:
    """``ids`` by relation group (the KB's group order; a fact of no group under ``""``), sorted."""
    out: dict[str, list[int]] = {}
    for i in sorted(int(x) for x in ids):
        out.setdefault(kb.group_of(i) or "", []).append(i)
    return out


def allocate(sizes: Sequence[int], n: int) -> list[int]:
    """Proportional allocation of ``n`` draws over strata of ``sizes`` (largest remainder), at
    least one per non-empty stratum when ``n`` allows, never more than a stratum holds.

    >>> allocate([600, 300, 100], 100), allocate([5, 995], 10), allocate([3, 4], 50), allocate([1000, 1, 1], 3)
    ([60, 30, 10], [1, 9], [3, 4], [1, 1, 1])
    """
    total = sum(sizes)
    if n >= total:
        return list(sizes)
    quota = [n * s / total for s in sizes]
    out = [min(s, max(1 if s and n >= sum(1 for x in sizes if x) else 0, int(q))) for s, q in zip(sizes, quota)]
    order = sorted(range(len(sizes)), key=lambda h: (-(quota[h] - int(quota[h])), h))
    while sum(out) < n:
        grew = False
        for h in order:
            if sum(out) < n and out[h] < sizes[h]:
                out[h] += 1
                grew = True
        if not grew:
            break
    while sum(out) > n:  # the minimum of one per stratum overshot: take from the most over-allocated above one
        h = max([k for k in range(len(out)) if out[k] > 1] or [k for k in range(len(out)) if out[k]],
                key=lambda k: (out[k] - quota[k], out[k]))
        out[h] -= 1
    return out


def wilson(p: float, n: float, z: float) -> tuple[float, float]:
    """Wilson score interval of a proportion ``p`` over ``n`` draws (``n`` may be infinite)."""
    if n <= 0:
        return 0.0, 1.0
    if math.isinf(n):
        return p, p
    d = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z / d * math.sqrt(max(p * (1 - p), 0.0) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


class AccuracySampler:
    """What a runner probes per target and how it turns that into accuracy (module docstring)."""

    def __init__(self, kb, known, evaluator, point_for, mode: str = "auto", sample: int = DEFAULT_SAMPLE,
                 seed: int = 0, protocol: str = "default", full_only: str | None = None):
        """``kb``, ``known`` (K) and ``evaluator`` (the rules layer's, on K) say what a target's
        points need; ``point_for`` makes a point (:meth:`TargetRunner.point_for
        <deepunlearn.unlearn.loop.TargetRunner.point_for>`); ``protocol``: the run's protocol name."""
        self.kb, self.known, self.evaluator, self.point_for = kb, known, evaluator, point_for
        self.sample, self.seed = sample, seed
        self.requested = mode
        self.mode = resolve_accuracy(mode, sample, n_known=len(known), protocol=protocol, full_only=full_only)
        self._plans: dict[int, dict] = {}

    @property
    def sampled(self) -> bool:
        return self.mode == "sampled"

    def describe(self) -> dict:
        return {"accuracy": self.mode, **({"accuracy_sample": self.sample} if self.sampled else {})}

    def exact_part(self, target: int) -> list[int]:
        """The facts of K every point of ``target`` probes: its derivation cone in K, its minimal
        sets and itself (recall and deep need no other)."""
        graph, t, known = self.evaluator.graph, int(target), self.known
        part = {int(f) for f in graph.cone(t).nodes.tolist() if f < graph.n_kb and f in known}
        for s in self.evaluator.minimal_sets(t).sets:
            part |= {int(f) for f in s if int(f) in known}
        return sorted(part | {t})

    def plan(self, target: int) -> dict:
        """Per target (cached): the ids to probe, the weights, and the strata of the sample."""
        t = int(target)
        got = self._plans.get(t)
        if got is not None:
            return got
        exact = self.exact_part(t)
        rest = strata(self.kb, sorted(self.known - set(exact)))
        sizes = [len(v) for v in rest.values()]
        rng = np.random.default_rng([int(self.seed), t])
        weights = np.zeros(len(self.kb), dtype=float)
        weights[exact] = 1.0
        drawn: dict[str, list[int]] = {}
        for (g, ids), k in zip(rest.items(), allocate(sizes, self.sample)):
            pick = sorted(int(i) for i in rng.choice(ids, size=k, replace=False)) if k else []
            drawn[g] = pick
            if pick:
                weights[pick] = len(ids) / k
        sample = sorted(i for v in drawn.values() for i in v)
        got = self._plans[t] = {"exact": exact, "sample": sample, "probe": sorted(set(exact) | set(sample)),
                                "weights": weights, "strata": {g: (len(rest[g]), drawn[g]) for g in rest}}
        return got

    def point(self, target: int, method: str, param, forgotten: list[int], lr: float | None):
        """The runner's point for ``forgotten`` (of the planned probe): weighted accuracies and
        the interval in its notes."""
        p = self.point_for(target, method, param, forgotten, lr, weights=self.plan(target)["weights"])
        p.notes.update(self.interval(target, p.set, forgotten))
        return p

    def interval(self, target: int, chosen: Sequence[int], forgotten: Sequence[int]) -> dict:
        """The point's notes: the 95 % interval of the overall accuracy over ``K \\ chosen`` and
        how many facts were probed."""
        from scipy.stats import norm

        pl = self.plan(target)
        lost, chosen = {int(f) for f in forgotten}, {int(f) for f in chosen}
        e = [f for f in pl["exact"] if f not in chosen]
        kept_e = sum(1 for f in e if f not in lost)
        n_out = sum(N for N, _ in pl["strata"].values())
        n = sum(len(d) for _, d in pl["strata"].values())
        p_hat = (sum(N * sum(1 for f in d if f not in lost) / len(d) for N, d in pl["strata"].values() if d) / n_out
                 if n_out and n else 1.0)
        n_eff = math.inf if n >= n_out else n * (n_out - 1) / (n_out - n)
        lo, hi = wilson(p_hat, n_eff, float(norm.ppf(0.5 + LEVEL / 2)))
        den = len(e) + n_out
        bound = (lambda p: (kept_e + n_out * p) / den) if den else (lambda p: 1.0)
        return {"accuracy_low": bound(lo), "accuracy_high": bound(hi), "accuracy_probed": len(pl["probe"])}
