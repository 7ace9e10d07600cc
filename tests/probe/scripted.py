"""A model whose answer a test sets, and the two-family KB the compose tests share (imported as
``from scripted import constant_fn``; not a test module)."""

from __future__ import annotations

import torch

from deepunlearn.kg.kb import KnowledgeBase


def constant_fn(bundle, token: str):
    """A ``model_fn`` preferring ``token`` (logit 1) over every other token (logit 0) everywhere."""
    tid = bundle.tokenizer.convert_tokens_to_ids(token)
    assert tid != bundle.tokenizer.unk_token_id, token
    vocab = len(bundle.tokenizer)

    def fn(ids, mask):
        logits = torch.zeros(ids.shape[0], ids.shape[1], vocab)
        logits[..., tid] = 1.0
        return logits

    return fn


def two_families() -> KnowledgeBase:
    """Two families, each with a mother the rules derive from the father's wife: four derived
    facts, two answered "Ann", two "Eve"."""
    people = {"Kid": "male", "Bob": "male", "Ann": "female", "Tom": "male", "Dan": "male", "Eve": "female"}
    return KnowledgeBase.build({p: {"gender": g} for p, g in people.items()},
                               [("Kid", "father", "Bob"), ("Bob", "wife", "Ann"), ("Kid", "mother", "Ann"),
                                ("Tom", "father", "Dan"), ("Dan", "wife", "Eve"), ("Tom", "mother", "Eve")],
                               name="two-families")
