"""How much remains at a grid point: the likelihood, membership and reference-model
measures stored with every point beside recall and accuracy.

At each point the model's facts of K are scored (:func:`deepunlearn.probe.scores.score_facts`:
length-normalised answer probability, truth ratio, exposure among the answer's candidates,
ROUGE-L of the greedy output, Min-K% / PPL / zlib) and summarised on three groups:

* ``target``: the target fact itself;
* ``forget``: the point's ``U*_A`` (the minimal deep-unlearning set of maximal recall there);
* ``retain``: the rest of K, ``K \\ U*_A``.

The reference-based measures compare against a *retain model*: the same base trained with the
same recipe on K without the target's **reference set** ``F`` = the smallest minimal
deep-unlearning set of the target (the first of the smallest, in the rules layer's order; it
holds the target). ``F`` is fixed per target, so every point, the original model and the retain
model are measured on the same facts:

* ``forget_quality``: TOFU's KS-test p-value between the truth ratios of ``F`` under the point's
  model and under the retain model;
* ``model_utility``: TOFU's harmonic mean of the retain facts' mean probability, mean ROUGE-L
  and mean ``max(0, 1 - truth ratio)`` (needs no reference);
* ``min_k_auc``: the Min-K% ROC-AUC of ``F`` (members) against the holdout facts of ``F``'s
  relations (non-members; all holdout facts when none shares a relation);
* ``privleak``: MUSE's ``(AUC - AUC_retain) / AUC_retain`` of that AUC;
* ``genex``: Baluta et al.'s generalised exposure of the target against its candidates.

Fields that need a retain model (or a holdout) are ``None`` without one, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..kg.canaries import canary_info

#: per-fact fields averaged over each group
GROUP_FIELDS = ("prob", "truth_ratio", "exposure", "rouge_l", "mc_prob")
#: the methods a sweep stores as per-target baseline rows
ORIGINAL, RETRAIN = "original", "retrain"


@dataclass
class Reference:
    """What a retain model contributes to one target's measures: its scores on K (it never saw
    ``removed`` = the reference set ``F``), its scores on the holdout facts, and which of the
    removed facts it still answers (knowledge it *infers* from what it kept)."""

    target: int
    removed: list[int]
    scores: Any  # FactScores over K
    holdout: Any | None  # FactScores over the holdout facts
    path: str | None = None


def reference_set(evaluator, target: int) -> list[int]:
    """``F``: the smallest minimal deep-unlearning set of ``target`` (first among the smallest)."""
    sets = evaluator.minimal_sets(target).sets
    best = min(sets, key=len)  # min keeps the first of equal length
    return sorted(int(i) for i in best)


class Measurer:
    """Scores a model on K (and the holdout facts) and turns the scores into a point's measures.

    ``holdout``: a KB of facts the model never saw (``deepunlearn data holdout``), for the
    membership measures; ``k``: Min-K%'s k in percent; ``n_perturbed``: wrong answers per truth
    ratio; ``seed``: which wrong answers."""

    def __init__(self, bundle, kb, known: Sequence[int], *, holdout=None, k: float = 20.0, n_perturbed: int = 5,
                 seed: int = 0, batch_size=None):
        from ..probe.scores import check_k

        self.bundle, self.kb, self.known = bundle, kb, sorted(int(i) for i in known)
        self.holdout = holdout
        self.k = check_k(k)
        self.n_perturbed, self.seed, self.batch_size = n_perturbed, seed, batch_size

    def score(self, model_fn=None, bundle=None):
        """Scores of K and of the holdout facts under ``bundle`` (default: the runner's model),
        its forward replaced by ``model_fn`` where given."""
        from ..probe.scores import score_facts

        b = bundle or self.bundle
        kw = dict(model_fn=model_fn, k=self.k, batch_size=self.batch_size, progress=False)
        scores = score_facts(b, self.kb, self.known, n_perturbed=self.n_perturbed, seed=self.seed, **kw)
        hold = None
        if self.holdout is not None:
            hold = score_facts(b, self.holdout, None, generate=False, candidates=False, **kw)
        return scores, hold

    def measures(self, target: int, set_ids: Sequence[int], ref_set: Sequence[int], scores, hold,
                 reference: Reference | None) -> dict[str, Any]:
        """The measures dict of one point (see the module docstring)."""
        from ..probe import measures as m
        from ..probe.mia import roc

        pos = {int(f): i for i, f in enumerate(scores.fact_ids)}
        forget = [int(i) for i in set_ids if int(i) in pos]
        fset = set(forget)
        retain = [f for f in self.known if f not in fset and f != target]
        F = [int(i) for i in ref_set if int(i) in pos]

        def group(ids: Sequence[int]) -> dict[str, float | None]:
            rows = [pos[i] for i in ids]
            return {f: _mean(getattr(scores, f)[rows]) if rows else None for f in GROUP_FIELDS}

        r_rows = [pos[i] for i in retain]
        utility = m.model_utility(scores.prob[r_rows], scores.rouge_l[r_rows], scores.truth_ratio[r_rows]) \
            if r_rows else None
        tr_F = scores.truth_ratio[[pos[i] for i in F]]
        auc = None
        if hold is not None and F:
            auc = roc(scores.min_k[[pos[i] for i in F]], hold.min_k[self._matched(F)])["auc"]
        out: dict[str, Any] = {
            "target": group([target]), "forget": group(forget), "retain": group(retain),
            "model_utility": utility, "min_k_auc": auc,
            "forget_quality": None, "privleak": None, "genex": None,
            "canary": self.kb.facts[target][1] == (canary_info(self.kb) or {}).get("relation"),
            "forget_truth_ratios": [float(x) for x in tr_F],
            "reference_set": F,
        }
        if reference is not None:
            rpos = {int(f): i for i, f in enumerate(reference.scores.fact_ids)}
            rF = [rpos[i] for i in F if i in rpos]
            out["forget_quality"] = m.forget_quality(tr_F, reference.scores.truth_ratio[rF])
            if auc is not None and reference.holdout is not None:
                r_auc = roc(reference.scores.min_k[rF], reference.holdout.min_k[self._matched(F)])["auc"]
                out["privleak"] = m.privleak(auc, r_auc)
            if target in rpos:
                out["genex"] = _genex(reference.scores, rpos[target], scores, pos[target], m)
        return out


    def _matched(self, F: Sequence[int]) -> list[int]:
        """Rows of the holdout scores whose relation is one of ``F``'s (all rows if none is): a
        membership AUC compares like with like, not family questions with biography ones."""
        rels = {self.kb.facts[i][1] for i in F}
        rows = [j for j, f in enumerate(self.holdout.facts) if f[1] in rels]
        return rows or list(range(len(self.holdout.facts)))


def _genex(ref_scores, ri: int, scores, si: int, m) -> float | None:
    nr, nu = ref_scores.nll_candidates[ri], scores.nll_candidates[si]
    if nr is None or nu is None or len(nr) < 2 or len(nu) < 2:
        return None
    # nll_candidates[i] = [gold's per-token NLL, then each reference candidate's]
    return _finite(m.genex(nr[0], np.asarray(nr[1:]), nu[0], np.asarray(nu[1:])))


def _mean(x) -> float | None:
    x = np.asarray(x, dtype=np.float64)
    x = x[np.isfinite(x)]
    return float(x.mean()) if len(x) else None


def _finite(x) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)
