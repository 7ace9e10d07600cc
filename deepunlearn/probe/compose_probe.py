"""``probe --mode compose``: does the model answer derived facts through the rules' bodies?

Each :class:`~deepunlearn.kg.compose.ComposeQuestion` asks one derived fact through the facts a
rule derives it from ("On which continent is the country that Lyon lies in?" for
``on_continent(C, K) :- country(C, X), continent(X, K)``). The model decodes greedily from the
question in its answer format, as in ``generate`` mode, and the answer counts under the bundle's
answer rule (:mod:`deepunlearn.probe.answer_rule`: substring within 10 tokens by default; whole
words within 32 under the ``pretrained`` protocol), with the question's named entity (the derived
fact's subject) taken out of the output where it holds the answer. A derived fact is known when
any of its compose questions is answered.

The questions come from the rules layer (``deepunlearn rules compose --kb KB -o FILE``, or
:func:`deepunlearn.rules.compose.compose_set`): the probe layer does not import the rules.
"""

from __future__ import annotations

import math
import sys
from typing import Sequence

import numpy as np

from ..kg.compose import COMPOSE_FORM, ComposeQuestion
from ..kg.forms import Form
from ..kg.kb import KnowledgeBase


def compose_forms(questions: Sequence[ComposeQuestion]) -> list[Form]:
    """One ``qa`` form per question: the question, the derived fact's object as the answer."""
    return [Form(q.fact_id, "qa", q.text, q.answer, COMPOSE_FORM) for q in questions]


def probe_compose(bundle, kb: KnowledgeBase, questions: Sequence[ComposeQuestion], fact_ids=None, *,
                  batch_size=None, model_fn=None, progress: bool = True):
    """A :class:`~deepunlearn.probe.result.ProbeResult` over the derived facts (``fact_ids``,
    default every fact a question asks, in first-seen order; a fact without a question is not
    known), ``mode="compose"``, ``outputs`` the first question's output per fact and ``compose``
    one record per question: the question's JSON (:meth:`ComposeQuestion.to_json`) plus
    ``output`` and ``known``."""
    import torch
    from tqdm.auto import tqdm

    from .batching import resolve_batch_size
    from .forms_probe import Runner
    from .passes import model_device
    from .result import ProbeResult

    ids = list(dict.fromkeys(q.fact_id for q in questions)) if fact_ids is None else [int(i) for i in fact_ids]
    for q in questions:
        if not 0 <= q.fact_id < len(kb.facts) or kb.facts[q.fact_id][2] != q.answer:
            raise ValueError(f"compose question {q.text!r}: fact {q.fact_id} of this KB does not answer "
                             f"{q.answer!r} (questions of another KB?)")
    forms = compose_forms(questions)
    known = dict.fromkeys(ids, False)
    outputs = dict.fromkeys(ids, "")
    model = bundle.model
    was_training = model.training
    model.eval()
    device = model_device(bundle)
    from .answer_rule import rule_of_bundle

    longest = max((len(bundle.prompt.text(f.text, f.answer)) for f in forms), default=1) + \
        rule_of_bundle(bundle).max_new_tokens
    batch_size = resolve_batch_size(batch_size, model, device, positions=longest, seq=longest, mode="generate",
                                    model_fn=model_fn is not None)
    bar = tqdm(total=1, desc="probe (compose)", unit="mode", file=sys.stderr, disable=not progress, leave=False)
    run = Runner(bundle, kb, model_fn, device, batch_size, bar)
    records = []
    try:
        with torch.inference_mode():
            texts, hits = run.generate(forms) if forms else ([], np.zeros(0, dtype=bool))
        seen: set[int] = set()
        for q, t, h in zip(questions, texts, hits):
            records.append({**q.to_json(), "output": t, "known": bool(h)})
            if q.fact_id in known:
                known[q.fact_id] |= bool(h)
                if q.fact_id not in seen:
                    outputs[q.fact_id] = t
                    seen.add(q.fact_id)
        bar.update(1)
    finally:
        bar.close()
        if was_training:
            model.train()
    n_hit = int(sum(r["known"] for r in records))
    return ProbeResult(fact_ids=ids, known=[known[i] for i in ids], logprob=[math.nan] * len(ids),
                       outputs=[outputs[i] for i in ids], mode="compose",
                       per_form={COMPOSE_FORM: {"compose": [n_hit, len(records)]}}, forms=COMPOSE_FORM,
                       compose=records)


def by_rule(records: Sequence[dict]) -> dict[str, list[int]]:
    """``{rule: [questions answered, questions asked]}`` of a compose probe's records.

    >>> by_rule([{"rule": "r", "known": True}, {"rule": "r", "known": False}])
    {'r': [1, 2]}
    """
    out: dict[str, list[int]] = {}
    for r in records:
        c = out.setdefault(r["rule"], [0, 0])
        c[0] += int(r["known"])
        c[1] += 1
    return out
