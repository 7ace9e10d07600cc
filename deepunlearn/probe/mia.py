"""Membership inference on facts: can Min-K% Prob, PPL or zlib tell the facts a model
was trained on (members: the KB's) from facts of the same domain it never saw (non-members: a
holdout KB, ``deepunlearn data holdout``)? Shi et al.'s Min-K% Prob paper reports ROC-AUC and
the true-positive rate at 5 % false positives; both come from scikit-learn here.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

#: The membership scores and their direction: +1 when a higher value means member.
SCORES = {"min_k": 1, "ppl": -1, "zlib": -1}
#: The false-positive rate at which the true-positive rate is reported.
FPR_LEVEL = 0.05


def roc(member_values: Sequence[float], nonmember_values: Sequence[float]) -> dict:
    """ROC-AUC (``sklearn.metrics.roc_auc_score``) and TPR at 5 % FPR (``roc_curve``: the largest
    TPR among the curve's points whose FPR is <= 0.05) of separating members from non-members by
    a score where HIGHER means member. Non-finite values are dropped; with either side empty both
    are ``None``. Returns ``{"auc", "tpr_at_5_fpr", "members", "nonmembers"}``."""
    from sklearn.metrics import roc_auc_score, roc_curve

    m = np.asarray(member_values, dtype=np.float64).ravel()
    n = np.asarray(nonmember_values, dtype=np.float64).ravel()
    m, n = m[np.isfinite(m)], n[np.isfinite(n)]
    out = {"auc": None, "tpr_at_5_fpr": None, "members": int(len(m)), "nonmembers": int(len(n))}
    if not len(m) or not len(n):
        return out
    y = np.concatenate([np.ones(len(m)), np.zeros(len(n))])
    s = np.concatenate([m, n])
    fpr, tpr, _ = roc_curve(y, s)
    out["auc"] = float(roc_auc_score(y, s))
    out["tpr_at_5_fpr"] = float(tpr[fpr <= FPR_LEVEL].max())
    return out


def mia_report(member, nonmember) -> dict:
    """Per score of :data:`SCORES` (``min_k``: higher = member; ``ppl`` and ``zlib``: lower =
    member, so they are negated) the :func:`roc` of ``member`` vs ``nonmember``
    (:class:`~deepunlearn.probe.scores.FactScores`), plus the counts and Min-K%'s ``k``."""
    out: dict = {"members": len(member), "nonmembers": len(nonmember), "k": float(member.k)}
    for name, sign in SCORES.items():
        r = roc(sign * getattr(member, name), sign * getattr(nonmember, name))
        out[name] = {"auc": r["auc"], "tpr_at_5_fpr": r["tpr_at_5_fpr"]}
    return out
