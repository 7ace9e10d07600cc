"""Per-fact scores of each probe mode, kept where the raw rule fails: what ``deep_oracle`` compares.

:func:`deepunlearn.probe.evidence.mode_evidence` scores a fact ``-inf`` wherever the mode's raw
rule does not call it known, which is what a calibrated verdict of ONE model needs. Comparing two
models needs more: where the oracle does not answer a fact, how far it is from answering it.
:func:`fact_scores` runs the same passes on the same forms (the probe's ``Runner``) and keeps the
score everywhere: the answer's teacher-forced log-probability per token (``exact``, ``generate``),
the gold-over-best-wrong margin (``rank``, rankable forms only), the oriented yes-minus-no log-odds
(``yesno``, the smallest over the fact's yes/no forms); the best form for the others. A fact with
no form of a mode scores ``-inf`` there. Alongside, whether the mode's raw rule holds on some form
(on every yes/no form for ``yesno``).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np


def fact_scores(bundle, kb, ids: Sequence[int], modes: Sequence[str], *, forms: str, batch_size=None,
                model_fn: Callable | None = None) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(score per mode, raw rule holds per mode) over ``ids`` (module docstring)."""
    from ..probe.evidence import rank_margins, yesno_margins, evidence_passes
    from ..probe.forms_probe import rankable

    ids = [int(i) for i in ids]
    uniq = list(dict.fromkeys(ids))
    pos = {i: j for j, i in enumerate(uniq)}
    sc = {m: np.full(len(uniq), -math.inf) for m in modes}
    hit = {m: np.zeros(len(uniq), dtype=bool) for m in modes}
    if not uniq:
        return sc, hit

    def best(m: str, fs, scores, hits) -> None:
        for f, s, h in zip(fs, scores, hits):
            j = pos[f.fact_id]
            sc[m][j] = max(sc[m][j], float(s))
            hit[m][j] |= bool(h)

    with evidence_passes(bundle, kb, uniq, modes, forms=forms, batch_size=batch_size, model_fn=model_fn) as (
            text, yn, run):
        if text and ("exact" in modes or "generate" in modes):
            lp, tf_hit = run.teacher_forced(text)
            n_tok = np.array([max(1, len(a)) for _, a in run.encoded("tf", text, None)], dtype=float)
            if "exact" in modes:
                best("exact", text, lp / n_tok, tf_hit)
            if "generate" in modes:
                best("generate", text, lp / n_tok, run.generate(text)[1])
        if "rank" in modes:
            fs = [f for f in text if rankable(kb, f)]
            if fs:
                best("rank", fs, *rank_margins(run, fs))
        if "yesno" in modes and yn:
            low = np.full(len(uniq), math.inf)
            for f, v in zip(yn, yesno_margins(run, yn)):
                low[pos[f.fact_id]] = min(low[pos[f.fact_id]], v)
            sc["yesno"] = np.where(np.isfinite(low), low, -math.inf)
            hit["yesno"] = np.isfinite(low) & (low > 0)
    idx = [pos[i] for i in ids]
    return {m: v[idx] for m, v in sc.items()}, {m: v[idx] for m, v in hit.items()}
