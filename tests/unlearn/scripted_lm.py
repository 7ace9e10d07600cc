"""A causal LM scripted to answer exactly a given set of facts (imported by the oracle tests; not
a test module).

:func:`scripted_bundle` swaps a real tiny model's weights for :class:`ScriptedLM`: after the
question part of a scripted fact (the ids the probe and the evidence encode, through
:func:`~deepunlearn.probe.prompts.encode_pairs`), it puts logit ``strength`` on each next
answer token and 0 on every other token; anywhere else it prefers the padding token, which is no
answer. So under ``exact`` probing it answers exactly its facts, and its evidence (the answer's
mean log-probability per token) grows with ``strength``: two scripted models answering the same
fact with the same strength have the same evidence on it.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Iterable, Mapping

import torch


class ScriptedLM(torch.nn.Module):
    def __init__(self, table: dict[tuple[int, ...], tuple[int, float]], vocab: int, default: int):
        super().__init__()
        self.table, self.vocab, self.default = table, vocab, default
        self.anchor = torch.nn.Parameter(torch.zeros(1))  # a device for the probe

    def forward(self, input_ids, attention_mask=None, use_cache=False):
        n, t = input_ids.shape
        logits = torch.zeros(n, t, self.vocab)
        logits[..., self.default] = 1.0
        mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
        for r in range(n):
            cols = [c for c in range(t) if int(mask[r, c])]
            real = [int(input_ids[r, c]) for c in cols]
            for k, c in enumerate(cols):
                hit = self.table.get(tuple(real[:k + 1]))
                if hit is not None:
                    logits[r, c, :] = 0.0
                    logits[r, c, hit[0]] = hit[1]
        return SimpleNamespace(logits=logits)


def scripted_bundle(bundle, answers: Iterable[tuple[object, Mapping[int, float]]]):
    """A copy of ``bundle`` (tokenizer, prompt, meta) whose model answers, for each ``(kb,
    {fact id: strength})``, exactly those facts of that KB."""
    from deepunlearn.probe.prompts import encode_pairs

    table: dict[tuple[int, ...], tuple[int, float]] = {}
    for kb, facts in answers:
        ids = sorted(facts)
        probes = [kb.probe(i) for i in ids]
        for i, (q, a) in zip(ids, encode_pairs(bundle.tokenizer, bundle.prompt, probes)):
            eos = [bundle.eos_id] if bundle.eos_id is not None and (not a or a[-1] != bundle.eos_id) else []
            cont = list(a) + eos
            for k in range(len(cont)):
                table[tuple(q + cont[:k])] = (cont[k], float(facts[i]))
    out = copy.copy(bundle)
    out.__dict__.pop("_encoded_cache", None)
    pad = bundle.tokenizer.pad_token_id
    out.model = ScriptedLM(table, len(bundle.tokenizer), 0 if pad is None else pad)
    return out
