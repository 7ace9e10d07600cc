"""``p_chance``: how likely a model answering by chance alone keeps a target derivable.

A target is deeply forgotten when the model has lost a whole minimal deep-unlearning set of it.
Read the other way: the rules still derive the target from a set ``S`` of known facts exactly
when ``S`` meets (*hits*) every minimal deep-unlearning set of the target (if ``S`` misses one,
``S`` lies inside K_A minus that set, from which nothing derives the target; if ``S`` derives
nothing, K_A minus ``S`` holds a minimal set). So, with the target's minimal sets ``M_1 .. M_k``
(fact ids over K_A, each containing the target) and a null model in which each fact ``f`` of
the *cone* (the union of the sets) is in ``S`` independently with probability ``p[f]``::

    p_chance = P(S meets every M_i)

:func:`p_chance` computes it **exactly** by enumerating the ``2^n`` subsets of the cone with
bitmasks (vectorised) when ``n <= EXACT_LIMIT`` (20) facts remain to enumerate, else by **Monte
Carlo** with a seeded generator, returning the estimate's standard error. Before either, the
family is reduced without changing the probability: a fact with ``p = 1`` hits every set it is
in (those sets drop out), a fact with ``p = 0`` never hits (it leaves every set; a set left
empty can never be hit: ``p_chance = 0``), and the facts common to every set (the target at
least) are taken out in closed form::

    P = 1 - prod_{f in C} (1 - p_f) * (1 - P(S meets every M_i \\ C))    (C = the common facts)

so ``n`` counts the cone's facts left after these steps. Closed forms the tests check: one set
``M`` gives ``1 - prod_{f in M} (1 - p_f)``; sets sharing only the target ``t`` give
``p_t + (1 - p_t) * prod_i (1 - prod_{f in M_i \\ t} (1 - p_f))``.

>>> r = p_chance([{0, 1}, {0, 2}], {0: 0.5, 1: 0.5, 2: 0.5})
>>> r.value, r.method, r.cone      # 0.5 + 0.5 * 0.5 * 0.5
(0.625, 'exact', 3)

Numpy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np

from .errors import RulesError

#: the most facts enumerated exactly (2^20 subsets, about 1 s); beyond, Monte Carlo
EXACT_LIMIT = 20
#: Monte Carlo draws by default (standard error at most 0.5 / sqrt(20000) = 0.0035)
DEFAULT_SAMPLES = 20_000
_CHUNK = 1 << 14


@dataclass(frozen=True)
class ChanceResult:
    """``value`` = p_chance, ``se`` its standard error (0 when exact), ``method`` ``"exact"`` or
    ``"monte-carlo"``, ``cone`` the number of distinct facts in the sets, ``enumerated`` the
    facts left to enumerate or sample after the reductions, ``samples`` the Monte Carlo draws
    (0 when exact)."""

    value: float
    se: float
    method: str
    cone: int
    enumerated: int
    samples: int = 0

    def to_json(self) -> dict:
        return {"p_chance": self.value, "se": self.se, "method": self.method, "cone": self.cone,
                "enumerated": self.enumerated, "samples": self.samples}


def _prob(p: Mapping[int, float] | Sequence[float], f: int) -> float:
    try:
        v = p[f]
    except (KeyError, IndexError):
        raise RulesError(f"p_chance: no chance probability for fact {f}") from None
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not 0 <= float(v) <= 1:
        raise RulesError(f"p_chance: the chance probability of fact {f} must be a number in [0, 1], got {v!r}")
    return float(v)


def _masks(sets: list[list[int]], index: dict[int, int]) -> np.ndarray:
    """Each set as a row of 64-bit words over the enumerated facts."""
    words = max(1, -(-len(index) // 64))
    out = np.zeros((len(sets), words), dtype=np.uint64)
    for i, s in enumerate(sets):
        for f in s:
            j = index[f]
            out[i, j // 64] |= np.uint64(1) << np.uint64(j % 64)
    return out


def _hits_all(states: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Per state (rows of words): does it meet every set (rows of ``masks``)?"""
    ok = np.ones(len(states), dtype=bool)
    for m in masks:
        ok &= ((states & m) != 0).any(axis=1)
        if not ok.any():
            break
    return ok


def _exact(masks: np.ndarray, probs: np.ndarray, at_least: int = 0) -> float:
    """P(the draw meets every set and holds at least ``at_least`` facts), by enumeration."""
    n = len(probs)
    states = np.arange(1 << n, dtype=np.uint64)[:, None]
    weight = np.ones(1 << n)
    count = np.zeros(1 << n, dtype=np.int64)
    for j, pj in enumerate(probs):
        bit = (states[:, 0] >> np.uint64(j)) & np.uint64(1)
        weight *= np.where(bit == 1, pj, 1.0 - pj)
        count += bit.astype(np.int64)
    return float(weight[_hits_all(states, masks) & (count >= at_least)].sum())


def _monte_carlo(masks: np.ndarray, probs: np.ndarray, samples: int, seed: int,
                 at_least: int = 0) -> tuple[float, float]:
    """The same as :func:`_exact`, estimated from ``samples`` seeded draws, with its standard error."""
    rng = np.random.default_rng(seed)
    n, words = len(probs), masks.shape[1]
    hits = 0
    done = 0
    while done < samples:
        m = min(_CHUNK, samples - done)
        draw = rng.random((m, n)) < probs
        states = np.zeros((m, words), dtype=np.uint64)
        for j in range(n):
            states[:, j // 64] |= draw[:, j].astype(np.uint64) << np.uint64(j % 64)
        hits += int((_hits_all(states, masks) & (draw.sum(axis=1) >= at_least)).sum())
        done += m
    q = hits / samples
    return q, math.sqrt(q * (1 - q) / samples)


def p_chance(sets: Iterable[Iterable[int]], p: Mapping[int, float] | Sequence[float], *,
             exact_limit: int = EXACT_LIMIT, samples: int = DEFAULT_SAMPLES, seed: int = 0) -> ChanceResult:
    """P(a random set S meets every set of ``sets``), each fact ``f`` of their union in S
    independently with probability ``p[f]`` (module docstring). An empty family is met by any S
    (1.0); an empty set by none (0.0)."""
    fam = [sorted({int(f) for f in s}) for s in sets]
    cone = sorted({f for s in fam for f in s})
    probs = {f: _prob(p, f) for f in cone}
    if isinstance(exact_limit, bool) or not isinstance(exact_limit, int) or not 0 <= exact_limit <= 24:
        raise RulesError(f"p_chance: exact_limit must be an integer in [0, 24], got {exact_limit!r}")
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise RulesError(f"p_chance: samples must be a positive integer, got {samples!r}")

    def done(v: float, se: float = 0.0, method: str = "exact", n: int = 0, draws: int = 0) -> ChanceResult:
        return ChanceResult(min(1.0, max(0.0, v)), se, method, len(cone), n, draws)

    # p = 1 hits every set it is in; p = 0 never hits
    fam = [[f for f in s if probs[f] > 0] for s in fam if not any(probs[f] >= 1 for f in s)]
    if not fam:
        return done(1.0)
    if any(not s for s in fam):
        return done(0.0)
    common = set(fam[0]).intersection(*fam[1:])
    miss_common = math.prod(1.0 - probs[f] for f in common)
    rest = [[f for f in s if f not in common] for s in dict.fromkeys(tuple(s) for s in fam)]
    if any(not s for s in rest):  # some set is all common facts: only they can hit it
        return done(1.0 - miss_common)
    free = sorted({f for s in rest for f in s})
    index = {f: j for j, f in enumerate(free)}
    masks = _masks(rest, index)
    pv = np.array([probs[f] for f in free])
    if len(free) <= exact_limit:
        q = _exact(masks, pv)
        return done(1.0 - miss_common * (1.0 - q), n=len(free))
    q, se = _monte_carlo(masks, pv, samples, seed)
    return done(1.0 - miss_common * (1.0 - q), miss_common * se, "monte-carlo", len(free), samples)


def p_chance_of(sets: Iterable[Iterable[int]], p: Mapping[int, float] | Sequence[float], chosen: Iterable[int],
                known: Iterable[int], *, exact_limit: int = EXACT_LIMIT, samples: int = DEFAULT_SAMPLES,
                seed: int = 0) -> ChanceResult:
    """The p-value of one unlearned model B's answers on a minimal set ``chosen`` (the verdict's
    set, which holds the target) under the null model that B learned none of its facts.

    Outside ``chosen`` B's answers are taken as they are (``known``: the cone facts B answers);
    each fact ``f`` of ``chosen`` is answered by chance, independently, with probability
    ``p[f]``. The statistic is the number of ``chosen``'s facts answered; the value is the
    probability that a chance-only model answers at least as many of them as B does
    (``len(chosen & known)``) **and** keeps the target derivable (the answered facts meet every
    set of ``sets``). A model that lost ``chosen`` by exact unlearning and guesses one fact of
    it back gets a large value; one that still answers every fact of ``chosen`` but the target
    (forgetting stopped at the target) a small one, as small as the product of their rates.

    >>> r = p_chance_of([{0, 1, 2}], {0: 0.3, 1: 0.3, 2: 0.3}, {0, 1, 2}, {1})     # one guessed fact
    >>> round(r.value, 3)                                                          # 1 - 0.7 ** 3
    0.657
    >>> round(p_chance_of([{0, 1, 2}], {0: 0.3, 1: 0.3, 2: 0.3}, {0, 1, 2}, {1, 2}).value, 3)
    0.216
    """
    fam = [sorted({int(f) for f in s}) for s in sets]
    chosen = sorted({int(f) for f in chosen})
    known = {int(f) for f in known}
    cone = sorted({f for s in fam for f in s} | set(chosen))
    probs = {f: _prob(p, f) for f in chosen}
    k = len(known.intersection(chosen))
    if isinstance(exact_limit, bool) or not isinstance(exact_limit, int) or not 0 <= exact_limit <= 24:
        raise RulesError(f"p_chance: exact_limit must be an integer in [0, 24], got {exact_limit!r}")
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise RulesError(f"p_chance: samples must be a positive integer, got {samples!r}")
    inside = set(chosen)
    # a set holding a fact outside ``chosen`` that B answers is met whatever the chance draws;
    # the facts outside ``chosen`` that B does not answer never meet one
    rest = [[f for f in s if f in inside] for s in fam if not any(f not in inside and f in known for f in s)]
    n = len(chosen)
    if any(not s for s in rest):  # a set only facts B lost outside ``chosen`` could meet: never derivable
        return ChanceResult(0.0, 0.0, "exact", len(cone), n)
    index = {f: j for j, f in enumerate(chosen)}
    masks = _masks(rest, index) if rest else np.zeros((0, max(1, -(-n // 64))), dtype=np.uint64)
    pv = np.array([probs[f] for f in chosen])
    if n <= exact_limit:
        return ChanceResult(min(1.0, _exact(masks, pv, k)), 0.0, "exact", len(cone), n)
    q, se = _monte_carlo(masks, pv, samples, seed, k)
    return ChanceResult(q, se, "monte-carlo", len(cone), n, samples)
