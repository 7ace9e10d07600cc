"""Per-fact evidence of each probe mode: the continuous scores calibration thresholds.

:func:`mode_evidence` runs the modes of :mod:`deepunlearn.probe.forms_probe` on the same forms
and the same batched passes (its ``Runner``, sharing the encoded-form cache), but keeps a score
instead of a yes/no: ``-inf`` where the mode's raw rule does not call the fact known, else the
score :mod:`deepunlearn.probe.calibration` defines (answer log-probability per token for exact
and generate, the gold-over-best-wrong margin for rank, the oriented yes-minus-no log-odds for
yesno). So ``evidence > -inf`` reproduces the raw verdicts and thresholds act on the rest.
Each mode's score per form is its spec's ``evidence`` (:class:`~deepunlearn.probe.modes.ProbeModeSpec`);
a fact's is the best score among the forms that hit (``known_when="any"``) or, when every form
hits, the lowest (``"all"``, as yesno).

Unlike the raw ``any``, every mode runs on every fact (a calibrated verdict needs each mode's
score), so the cost is the sum of the four modes' costs over all facts.
"""

from __future__ import annotations

from contextlib import contextmanager

import math
from typing import Callable, Sequence

import numpy as np

from ..kg.kb import KnowledgeBase

NEG = -math.inf


def fact_groups(kb: KnowledgeBase, ids: Sequence[int]) -> list[str]:
    """The relation group of each fact id."""
    return [kb.group_of(int(i)) for i in ids]


def mode_evidence(bundle, kb: KnowledgeBase, ids: Sequence[int] | None = None, modes: Sequence[str] | None = None, *,
                  forms: str = "all", batch_size=None, model_fn: Callable | None = None,
                  progress: bool = False) -> dict[str, np.ndarray]:
    """``{mode: evidence per fact of ids}`` (module docstring); ``ids`` default: every fact;
    ``modes`` default: the modes of ``any`` that have an evidence (``ProbeModeSpec.evidence``)."""
    from .forms_probe import check_any_modes
    from .modes import any_modes, probe_mode

    if modes is None:
        modes = [m for m in any_modes() if probe_mode(m).evidence is not None]
    modes = check_any_modes(list(modes))
    specs = [probe_mode(m) for m in modes]
    lacking = [s.name for s in specs if s.evidence is None]
    if lacking:
        raise ValueError(f"probe mode(s) {', '.join(lacking)}: no evidence to calibrate (ProbeModeSpec.evidence)")
    ids = [int(i) for i in (range(len(kb.facts)) if ids is None else ids)]
    uniq = list(dict.fromkeys(ids))
    pos = {i: j for j, i in enumerate(uniq)}
    ev = {m: np.full(len(uniq), NEG) for m in modes}

    with evidence_passes(bundle, kb, uniq, modes, forms=forms, batch_size=batch_size, model_fn=model_fn) as (
            text, yn, run):
        for s in specs:
            asks = s.asker()
            fs = [f for f in text + yn if f.kind in s.kinds and asks(kb, f)]
            if not fs:
                continue
            scores, hits = s.evidence_fn()(run, fs)
            e = ev[s.name]
            if s.known_when == "all":  # the lowest score when every form hits, else not known
                low, missed = np.full(len(uniq), math.inf), np.zeros(len(uniq), dtype=bool)
                for f, v, h in zip(fs, scores, hits):
                    j = pos[f.fact_id]
                    low[j], missed[j] = min(low[j], float(v)), missed[j] or not h
                e[:] = np.where(np.isfinite(low) & ~missed, low, NEG)
            else:  # the best score among the forms that hit
                for f, v, h in zip(fs, scores, hits):
                    if h and v > e[pos[f.fact_id]]:
                        e[pos[f.fact_id]] = float(v)
    return {m: v[[pos[i] for i in ids]] for m, v in ev.items()}


# The evidence of the built-in modes (``ProbeModeSpec.evidence``): ``(scores, hits)`` per form.
def logprob_evidence(run, forms) -> tuple[np.ndarray, np.ndarray]:
    """``exact``: the answer's log-probability per answer token, and the raw rule's hit."""
    lp, hit = run.teacher_forced(forms)
    return lp / _answer_tokens(run, forms), hit


def generate_evidence(run, forms) -> tuple[np.ndarray, np.ndarray]:
    """``generate``: the answer's log-probability per answer token, and whether it is generated."""
    lp, _ = run.teacher_forced(forms)
    return lp / _answer_tokens(run, forms), run.generate(forms)[1]


def rank_evidence(run, forms) -> tuple[np.ndarray, np.ndarray]:
    """``rank``: gold's margin over the best wrong candidate (:func:`rank_margins`)."""
    return rank_margins(run, forms)


def yesno_evidence(run, forms) -> tuple[np.ndarray, np.ndarray]:
    """``yesno``: the oriented yes-minus-no log-odds (:func:`yesno_margins`); right iff positive."""
    margins = yesno_margins(run, forms)
    return margins, margins > 0


def _answer_tokens(run, forms) -> np.ndarray:
    return np.array([max(1, len(a)) for _, a in run.encoded("tf", forms, None)], dtype=float)


@contextmanager
def evidence_passes(bundle, kb: KnowledgeBase, uniq: Sequence[int], modes: Sequence[str], *, forms: str,
                    batch_size=None, model_fn: Callable | None = None):
    """``(text forms, yes/no forms, runner)`` of the facts ``uniq`` under ``forms``, the model in eval
    mode and torch in inference mode for the block (its training mode is put back after)."""
    import torch

    from ..kg.forms import FORM_KINDS, select_forms
    from .modes import TEXT_KINDS
    from .batching import resolve_batch_size
    from .forms_probe import Runner
    from .modes import probe_mode
    from .passes import model_device
    from .result import MAX_NEW_TOKENS

    sel = select_forms(kb, forms, uniq, kinds=FORM_KINDS)
    text = [f for i in uniq for f in sel.forms[i] if f.kind in TEXT_KINDS]
    yn = [f for i in uniq for f in sel.forms[i] if f.kind not in TEXT_KINDS]
    model = bundle.model
    was_training = model.training
    model.eval()
    try:
        device = model_device(bundle)
        longest = max((len(bundle.prompt.text(f.text, f.answer)) for f in text + yn), default=1) + MAX_NEW_TOKENS
        batch_size = resolve_batch_size(batch_size, model, device, positions=longest, seq=longest,
                                        mode="generate" if any(probe_mode(m).decodes for m in modes) else "exact",
                                        model_fn=model_fn is not None)
        with torch.inference_mode():
            yield text, yn, Runner(bundle, kb, model_fn, device, batch_size, None)
    finally:
        if was_training:
            model.train()


def rank_margins(run, forms) -> tuple[np.ndarray, np.ndarray]:
    """Per rankable form: gold's length-normalised log-probability minus the best wrong
    candidate's, and whether it is positive (the raw rule: rank 1)."""
    from .forms_probe import rank_rows

    # the same rows as forms_probe's rank mode (one cache entry per form)
    built = run.encoded("rank", forms, lambda fs: rank_rows(run.bundle, run.kb, fs))
    out = np.zeros(len(forms))
    for j, ((sums, lens), (_, gold)) in enumerate(zip(run.candidate_logprobs([r for r, _ in built]), built)):
        norm = sums / lens
        others = np.delete(norm, gold)
        out[j] = norm[gold] - (others.max() if len(others) else NEG)
    return out, out > 0


def yesno_margins(run, forms) -> np.ndarray:
    """Per yes/no form: ``log P(yes) - log P(no)``, negated on a distractor (answer no)."""
    from scipy.special import logsumexp

    from .forms_probe import NO, YES
    from .scoring import candidate_rows

    b = run.bundle
    rows = run.encoded("yn", forms, lambda fs: candidate_rows(
        b.tokenizer, [([b.prompt.text(f.text, s) for s in YES + NO], b.prompt.text(f.text, "")) for f in fs],
        what=[f"form {f.name!r} of fact {f.fact_id}" for f in fs]))
    out = np.zeros(len(forms))
    for j, (f, (sums, _)) in enumerate(zip(forms, run.candidate_logprobs(rows))):
        d = float(logsumexp(sums[:len(YES)]) - logsumexp(sums[len(YES):]))
        out[j] = d if f.answer == "yes" else -d
    return out
