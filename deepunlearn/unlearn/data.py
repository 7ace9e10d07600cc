"""Question/answer training data: probes -> token batches with an answer-only loss.

The paper finetunes (and unlearns) "under the question-answering format, where the question is
given in the prompt and the loss is computed from the answer" (appendix D). As the reference's
``convert_raw_data_to_model_format``: an example is the full text's tokens (question part, then
answer tag and answer; :func:`deepunlearn.probe.prompts.encode_pairs`) followed by EOS; its
labels are -100 (ignored) on the question part's tokens, so the answer tag, the answer and EOS
are learnt or unlearnt. The continuation tokens are those the probe layer checks.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from ..probe.prompts import PromptFormat, encode_pairs

IGNORE = -100


def encode_qa(tokenizer, prompt: PromptFormat, pairs: Iterable[Any]) -> list[dict[str, list[int]]]:
    """One training example per ``(question, answer)`` pair (or Probe):
    ``{"input_ids": question + continuation + [EOS], "labels": [-100] * len(question) +
    continuation + [EOS]}``, the continuation being answer tag + answer.

    The reference appends ``tokenizer.eos_token_id`` to every example; we do when
    ``prompt.eos`` is set and the tokenizer has an EOS token. (The reference also gives the
    appended EOS attention mask 0, as padding; it is the last token, so no position attends to
    it and the loss is the same.)"""
    eos = tokenizer.eos_token_id if prompt.eos else None
    tail = [int(eos)] if eos is not None else []
    out = []
    for q, c in encode_pairs(tokenizer, prompt, pairs):
        cont = c + tail
        out.append({"input_ids": q + cont, "labels": [IGNORE] * len(q) + cont})
    return out


def encode_forms_qa(tokenizer, prompt: PromptFormat, forms: Sequence[Any]) -> list[dict[str, list[int]]]:
    """One training example per probe form (:class:`~deepunlearn.kg.forms.Form`), as
    :func:`encode_qa`: a qa or yes/no form is its question and answer in ``prompt``'s format; a
    statement is its whole sentence in no format, the loss covering the answer span, the rest of
    the sentence and EOS (:func:`deepunlearn.probe.form_encoding.encode_forms` with ``with_rest``)."""
    from ..probe.form_encoding import encode_forms

    eos = tokenizer.eos_token_id if prompt.eos else None
    tail = [int(eos)] if eos is not None else []
    return [{"input_ids": q + c + tail, "labels": [IGNORE] * len(q) + c + tail}
            for q, c in encode_forms(tokenizer, prompt, list(forms), with_rest=True)]


def collate(examples: Sequence[dict[str, list[int]]], pad_id: int) -> dict[str, Any]:
    """Right-pad examples into tensors ``input_ids``, ``attention_mask``, ``labels`` (labels
    -100 on padding). Right padding keeps positions 0..n-1 for every row, as in training.

    >>> b = collate([{"input_ids": [1, 2, 3], "labels": [-100, 2, 3]},
    ...              {"input_ids": [1, 4], "labels": [-100, 4]}], pad_id=0)
    >>> b["input_ids"].tolist(), b["attention_mask"].tolist(), b["labels"].tolist()
    ([[1, 2, 3], [1, 4, 0]], [[1, 1, 1], [1, 1, 0]], [[-100, 2, 3], [-100, 4, -100]])
    """
    import torch

    if not examples:
        raise ValueError("collate: no examples")
    width = max(len(e["input_ids"]) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    labels = torch.full((len(examples), width), IGNORE, dtype=torch.long)
    for i, e in enumerate(examples):
        n = len(e["input_ids"])
        if len(e["labels"]) != n:
            raise ValueError(f"examples[{i}]: {n} input ids but {len(e['labels'])} labels")
        ids[i, :n] = torch.as_tensor(e["input_ids"], dtype=torch.long)
        mask[i, :n] = 1
        labels[i, :n] = torch.as_tensor(e["labels"], dtype=torch.long)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def to_device(batch: dict[str, Any], device) -> dict[str, Any]:
    return {k: v.to(device) for k, v in batch.items()}


def on_device(bundle, examples: Sequence[dict[str, list[int]]]) -> dict[str, Any]:
    batch = collate(examples, bundle.pad_id)
    device = next(bundle.model.parameters()).device
    return {k: v.to(device) for k, v in batch.items()}


def encode_pair_batch(bundle, pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """(question, answer) pairs encoded by :func:`encode_qa`, collated on the model's device."""
    return on_device(bundle, encode_qa(bundle.tokenizer, bundle.prompt, list(pairs)))


def encode_facts(bundle, kb, ids: Sequence[int], forms: str | None = None) -> dict[str, Any]:
    """Facts ``ids`` of ``kb`` as a training batch on the model's device: one row per fact (its
    primary question) or, with a :mod:`deepunlearn.kg.forms` selection ``forms``, one row per
    selected form of each fact (:func:`encode_forms_qa`)."""
    if forms in (None, "default"):
        return encode_pair_batch(bundle, [(p.question, p.answer) for p in (kb.probe(int(i)) for i in ids)])
    from ..kg.forms import select_forms

    sel = select_forms(kb, forms, [int(i) for i in ids])
    return on_device(bundle, encode_forms_qa(bundle.tokenizer, bundle.prompt, sel.all()))


def row_keys(kb, ids: Sequence[int], forms: str | None = None) -> list[tuple[int, str | None]]:
    """One key per row :func:`encode_facts` gives: ``(fact id, None)`` per fact, or with ``forms``
    ``(fact id, form name)`` per selected form."""
    if forms in (None, "default"):
        return [(int(i), None) for i in ids]
    from ..kg.forms import select_forms

    return [(f.fact_id, f.name) for f in select_forms(kb, forms, [int(i) for i in ids]).all()]
