"""The ``pretrained`` protocol: unlearning what a model learned in pretraining.

The other protocols evaluate a model finetuned on a synthetic KB, so K (the facts it knows) is,
by construction, nearly the whole KB. A pretrained model was never shown the KB: K is whatever
it answers as shipped, which on a real-world KB (``data generate --domain geo``) is a fraction
of the facts, uneven over relations. ``--protocol pretrained`` (probe, unlearn, bench
``protocol = "pretrained"``) therefore:

* never finetunes: the model given is the model evaluated (``deepunlearn finetune`` has no
  such protocol);
* takes K from the probe (``k_mode = "probed"``), the default protocol's choice; the sets, the
  unlearning, recall and accuracy then run on that K unchanged;
* asks each question in the model's chat template when its tokenizer has one
  (``answer_format = "chat"``; a model without one keeps its recorded or family format);
* decodes greedily (``probe_mode = "generate"``) and counts an answer when the gold answer
  appears in the output as whole words (``answer_match = "words"``) within 32 new tokens
  (``new_tokens``): an instruct model answers in sentences ("The capital of France is Paris."),
  and a plain substring test would count an echo of the question ("Nigeria" answers "Niger").

Choices that differ from the paper's code, each a field of the protocol (so a sweep or a
command can set it back): the answer format (the paper: the family's ``Question: ... Answer:``),
the match (the paper: substring), the decoding length (the paper: 10 tokens).

Two documented alternatives:

* completions: ``probe_mode = "exact"`` with ``forms = "st1"`` (a statement form: "The capital of
  France is" + " Paris"), teacher-forced in one pass, no generation; much cheaper per point on
  a CPU, and the natural probe for a base (non-instruct) model. ``unlearn_forms = "st1"``
  unlearns on the same statements.
* calibration: ``data holdout`` draws new entities, which a real-world domain does not have;
  ``data never-true`` swaps each fact's object for a wrong one of the same type instead
  (:mod:`deepunlearn.rules.never_true`), and ``probe --calibrate NEVER.json`` sets each mode's
  floor on those (how often the model's answer is the wrong object asked for).

:func:`known_by_relation` gives the per-relation counts the probe command reports.
"""

from __future__ import annotations

from collections import Counter


def known_by_relation(kb, result) -> dict[str, list[int]]:
    """``{relation: [known, probed]}`` of a probe result, relations in KB order.

    >>> from types import SimpleNamespace
    >>> kb = SimpleNamespace(facts=[("A", "capital", "X"), ("B", "capital", "Y"), ("A", "continent", "Z")])
    >>> known_by_relation(kb, SimpleNamespace(fact_ids=[0, 1, 2], known=[True, False, True]))
    {'capital': [1, 2], 'continent': [1, 1]}
    """
    probed = Counter(kb.facts[int(i)][1] for i in result.fact_ids)
    known = Counter(kb.facts[int(i)][1] for i, k in zip(result.fact_ids, result.known) if k)
    return {r: [known[r], probed[r]] for r in dict.fromkeys(f[1] for f in kb.facts) if probed[r]}
