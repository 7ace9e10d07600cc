"""Probing: which facts of a KB does a causal LM know?

Each fact is asked in the model's answer format (:mod:`deepunlearn.probe.prompts`): the
question part, whose continuation should be the answer tag and the answer. Two ways to decide
that the model knows it:

``generate``
    The reference's rule (``vllm_eval.py``, ``evaluate_util.eval_qa_vllm``): the question part
    alone is the prompt (no answer tag), greedy decoding of 10 new tokens, known iff the gold
    answer appears in the decoded output, case-insensitively.
``exact``
    One teacher-forced forward pass over question part + continuation: known iff greedy
    decoding would emit the continuation's tokens (answer tag and answer, as tokenised for
    finetuning by :func:`~deepunlearn.probe.prompts.encode_pairs`), i.e. the argmax at every
    continuation position is the gold token. One pass per batch instead of ten decoding steps.
    A model that would spell the answer with other tokens, skip the tag, or embed the answer in
    other words is known only to ``generate``, so on a model whose greedy output is the
    continuation, exact-known is a subset of generate-known. On the finetuned tiny EDU-RELAT
    model the two modes agree on every fact.

Probing also works over a fact's *forms* (paraphrases, statements, yes/no questions:
:mod:`deepunlearn.kg.forms`, ``probe(..., forms=SEL)``) and the modes ``yesno``, ``rank`` and
``any`` (the adversarial aggregate); :mod:`deepunlearn.probe.forms_probe` documents them and
their cost per fact. Without a selection, ``exact`` and ``generate`` are exactly the above.

Both also give each fact's continuation log-probability (summed over the answer tag's and the
answer's tokens, teacher-forced: the quantity the answer-only loss of finetuning and unlearning
covers, EOS aside). Batches are padded on the left (behind each row's first token, see
:func:`~deepunlearn.probe.prompts.left_pad`) with position ids that count real tokens, so a
fact's result does not depend on the facts batched with it; a ``model_fn`` standing in for the
model gets right-padded batches instead (plain positions, no position ids needed).
"""

from __future__ import annotations

import sys
from typing import Callable, Iterable, Sequence

import numpy as np

from ..kg.kb import KnowledgeBase
from .models import ModelBundle
from .modes import probe_mode
from .passes import (  # noqa: F401  (re-exported: the forward passes lived here)
    accepts, encoded, generate_answers, model_device, primary_blocks, right_pad, teacher_forced, checked_ids, logits_fn,
)
from .result import MODES, MAX_NEW_TOKENS, Mode, ProbeResult, ProbeResultError  # noqa: F401  (re-exported)


def probe(
    bundle: ModelBundle,
    kb: KnowledgeBase,
    fact_ids: Iterable[int] | None = None,
    *,
    mode: Mode = "exact",
    forms: str | None = None,
    any_modes: Sequence[str] | None = None,
    batch_size: int | str | None = None,
    model_fn: Callable | None = None,
    progress: bool = True,
    compose: Sequence | None = None,
) -> ProbeResult:
    """Probe the model on the facts ``fact_ids`` of ``kb`` (all facts by default).

    Parameters
    ----------
    bundle : ModelBundle
        The model, its tokenizer and answer format (:func:`~deepunlearn.probe.models.load_model`).
        Runs in inference mode and eval mode and restores train mode.
    kb : KnowledgeBase
        The facts and their question forms.
    fact_ids : iterable of int, optional
        The facts to probe (default: all); the result keeps their order.
    mode : str, default "exact"
        One of :data:`MODES` (what "known" means under each: :mod:`deepunlearn.probe.modes`).
    forms : str, optional
        A form selection (``--forms``, :func:`deepunlearn.kg.forms.select_forms`). With ``None``
        or ``"default"`` and mode ``exact`` or ``generate`` the primary question is asked; any
        other selection or mode probes over forms (:mod:`deepunlearn.probe.forms_probe`: the
        modes ``yesno``, ``rank`` and ``any``, what a fact known over several forms means, the
        cost per fact).
    any_modes : sequence of str, optional
        The modes ``any`` combines (default all four).
    batch_size : int or "auto", optional
        Facts per forward pass; ``None`` or ``"auto"`` sizes batches to the free memory on CUDA
        (:func:`~deepunlearn.probe.batching.resolve_batch_size`) and takes 64 on CPU.
    model_fn : callable, optional
        ``model_fn(input_ids, attention_mask) -> logits [B, T, V]`` replaces ``bundle.model``
        (the unlearning layer passes one that mixes two models' next-token distributions); in
        ``generate`` mode it is then decoded greedily by a plain loop without KV cache. It
        receives RIGHT-padded batches, so every row has the plain positions 0..n-1 and
        ``lambda ids, m: model(input_ids=ids, attention_mask=m).logits`` is exact for any model
        (models used only inside the callable must be put in eval mode by the caller). Its
        output only needs to be logits up to a constant per position: log-softmax gives the
        answer's log-probability, argmax the greedy token. Without it, batches are left-padded
        (behind each row's first token) with explicit position ids and decoded with Hugging
        Face ``generate`` and its KV cache.
    progress : bool, default True
        Show a progress bar.
    compose : sequence, optional
        The compose questions of mode ``compose`` (required there, refused elsewhere;
        :mod:`deepunlearn.probe.compose_probe`): ``fact_ids`` are then the derived facts reported.

    Returns
    -------
    ProbeResult
        One result per fact, in the order of ``fact_ids``; ``known_ids()`` the facts known.

    Raises
    ------
    ValueError
        An unknown ``mode``, or ``compose`` given without mode ``compose`` (or missing with it).
    FormError
        A bad token in ``forms``, naming ``--forms``.

    Examples
    --------
    >>> import tempfile
    >>> from deepunlearn.kg.domains.family.generate import generate_family
    >>> from deepunlearn.probe.models import load_model
    >>> from deepunlearn.probe.tiny import build_tiny_model
    >>> kb = generate_family(5, seed=0)
    >>> bundle = load_model(build_tiny_model(kb, tempfile.mkdtemp(), hidden=32, layers=1, heads=2), device="cpu")
    >>> res = probe(bundle, kb, progress=False)      # an untrained model: it knows none of the facts
    >>> len(res) == len(kb.facts), res.known_ids(), res.mode
    (True, set(), 'exact')
    """
    spec = probe_mode(mode)
    if spec.derived != (compose is not None):
        raise ValueError("probe: mode 'compose' takes the compose questions (compose=...), and only it does")
    if spec.derived:
        from .compose_probe import probe_compose

        ids = None if fact_ids is None else checked_ids(kb, fact_ids, batch_size)
        return probe_compose(bundle, kb, list(compose), ids, batch_size=batch_size, model_fn=model_fn,
                             progress=progress)
    ids = checked_ids(kb, fact_ids, batch_size)
    if any_modes is not None and not spec.aggregate:
        raise ValueError(f"any_modes is for mode 'any', not {mode!r}")
    if not spec.plain or (forms is not None and str(forms).strip() != "default"):
        from .forms_probe import probe_forms

        return probe_forms(bundle, kb, ids, mode=mode, forms=forms, any_modes=any_modes, batch_size=batch_size,
                           model_fn=model_fn, progress=progress)

    return _probe_primary(bundle, kb, ids, spec, mode, batch_size, model_fn, progress)


def _probe_primary(bundle: ModelBundle, kb: KnowledgeBase, ids: list[int], spec, mode: Mode,
                   batch_size: int | str | None, model_fn: Callable | None, progress: bool) -> ProbeResult:
    """Mode ``exact`` or ``generate`` on each fact's primary question, longest rows first."""
    import torch

    enc, q_alone = encoded(bundle, kb)
    rows = [enc[i] for i in ids]
    blocks = primary_blocks(bundle, kb, ids)
    gen_prompts = [q_alone[i] for i in ids]
    # Longest first: batches hold rows of similar length (little padding), and running out of
    # memory shows at the first batch.
    order = sorted(range(len(rows)), key=lambda j: (-(len(rows[j][0]) + len(rows[j][1])), -len(rows[j][0]), j))
    known = np.zeros(len(rows), dtype=bool)
    logprob = np.zeros(len(rows), dtype=np.float64)
    outputs: list[str] | None = [""] * len(rows) if spec.decodes else None
    answers = [kb.probe(int(i)).answer for i in ids]
    subjects = [kb.facts[int(i)][0] for i in ids]

    model = bundle.model
    was_training = model.training
    model.eval()
    device = model_device(bundle)
    from .batching import resolve_batch_size

    from .answer_rule import rule_of_bundle

    rule = rule_of_bundle(bundle)
    longest = max((len(p) + len(a) for p, a in rows), default=1) + (rule.max_new_tokens if spec.decodes else 0)
    batch_size = resolve_batch_size(batch_size, model, device, positions=max((len(a) for _, a in rows), default=0) + 1,
                                    seq=longest, mode=mode, model_fn=model_fn is not None)
    default_fn = logits_fn(model)
    pad = bundle.pad_id
    from tqdm.auto import tqdm

    bar = tqdm(total=len(rows), desc=f"probe ({mode})", unit="fact", file=sys.stderr,
               disable=not progress, leave=False)
    try:
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                batch = order[start:start + batch_size]
                b_rows = [rows[j] for j in batch]
                lp, exact = teacher_forced(b_rows, model_fn, default_fn, pad, device,
                                           None if blocks is None else [blocks[j] for j in batch])
                logprob[batch] = lp
                if not spec.decodes:
                    known[batch] = exact
                else:
                    texts = generate_answers(bundle, [gen_prompts[j] for j in batch], model_fn, device)
                    for j, text in zip(batch, texts):
                        outputs[j] = text
                        known[j] = rule.matches(answers[j], text, subjects[j])
                bar.update(len(batch))
    finally:
        bar.close()
        if was_training:
            model.train()
    return ProbeResult(fact_ids=ids, known=known, logprob=logprob, outputs=outputs, mode=mode)
