"""QA training data: the answer-only loss masks every prompt token and the padding."""

from __future__ import annotations

import math

import pytest
import torch

from deepunlearn.unlearn.data import IGNORE, collate, encode_qa
from deepunlearn.unlearn.losses import sequence_logprob


def answer_logprob(model, batch) -> torch.Tensor:
    """log p(a|q) per row as NPO's loss takes it: :func:`sequence_logprob` of the model's logits."""
    return sequence_logprob(model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits,
                            batch["labels"])[0]


def test_labels_mask_every_prompt_token_and_end_with_eos(tiny_bundle, small_kb):
    tok, fmt = tiny_bundle.tokenizer, tiny_bundle.prompt
    probes = small_kb.probes()
    examples = encode_qa(tok, fmt, probes)
    assert len(examples) == len(probes)
    for ex, p in zip(examples, probes):
        prompt_ids = tok(fmt.prompt(p.question)).input_ids  # question part alone, BOS included
        n = len(prompt_ids)
        assert ex["input_ids"][:n] == prompt_ids
        assert ex["labels"][:n] == [IGNORE] * n
        answer = ex["labels"][n:]
        assert IGNORE not in answer
        assert answer[-1] == tok.eos_token_id
        assert ex["input_ids"][n:] == answer
        assert tok.decode(answer[:-1]) == fmt.answer_tag + p.answer  # the loss covers tag + answer + EOS


def test_collate_pads_right_and_masks_padding_in_labels(tiny_bundle, small_kb):
    examples = encode_qa(tiny_bundle.tokenizer, tiny_bundle.prompt, small_kb.probes(range(0, 40, 3)))
    batch = collate(examples, tiny_bundle.pad_id)
    width = max(len(e["input_ids"]) for e in examples)
    assert batch["input_ids"].shape == (len(examples), width)
    for r, e in enumerate(examples):
        n = len(e["input_ids"])
        assert batch["input_ids"][r, :n].tolist() == e["input_ids"]
        assert batch["attention_mask"][r].tolist() == [1] * n + [0] * (width - n)
        assert batch["labels"][r].tolist() == e["labels"] + [IGNORE] * (width - n)
        assert (batch["input_ids"][r, n:] == tiny_bundle.pad_id).all()
    with pytest.raises(ValueError, match="labels"):
        collate([{"input_ids": [1, 2], "labels": [1]}], 0)


def _brute_answer_logprob(model, input_ids: list[int], labels: list[int]) -> float:
    """Sum over labelled positions of log p(token | everything before it), one unpadded
    sequence at a time."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([input_ids])).logits[0]
    logp = torch.log_softmax(logits.float(), -1)
    return sum(float(logp[t - 1, labels[t]]) for t in range(1, len(labels)) if labels[t] != IGNORE)


def test_answer_logprob_is_the_answer_only_sum_and_ignores_padding(tiny_bundle, small_kb):
    model = tiny_bundle.model
    examples = encode_qa(tiny_bundle.tokenizer, tiny_bundle.prompt, small_kb.probes([0, 5, 100, 150, 180]))
    batch = collate(examples, tiny_bundle.pad_id)
    lp = answer_logprob(model, batch)
    assert lp.shape == (len(examples),)
    assert lp.requires_grad  # NPO differentiates it
    for r, e in enumerate(examples):
        assert lp[r].item() == pytest.approx(_brute_answer_logprob(model, e["input_ids"], e["labels"]), abs=1e-4)


def test_prompt_tokens_get_no_gradient_signal(tiny_bundle, small_kb):
    # Changing the label of nothing but a prompt position must not change the loss: the loss
    # sees the answer only. Build the same batch with prompt labels un-masked and compare.
    model = tiny_bundle.model
    examples = encode_qa(tiny_bundle.tokenizer, tiny_bundle.prompt, small_kb.probes([1, 2]))
    batch = collate(examples, tiny_bundle.pad_id)
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"])
    n_answer = int((batch["labels"][:, 1:] != IGNORE).sum())
    manual = -answer_logprob(model, batch).sum() / n_answer
    assert out.loss.item() == pytest.approx(manual.item(), rel=1e-5)
    unmasked = dict(batch, labels=torch.where(batch["attention_mask"].bool(), batch["input_ids"], IGNORE))
    full = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=unmasked["labels"])
    assert not math.isclose(full.loss.item(), out.loss.item(), rel_tol=1e-3)
