"""Batched teacher-forced log-probabilities of many answers to the same prompt.

:func:`deepunlearn.probe.scores.score_facts` needs, per fact, the log-probability of every token
of the fact's text (for Min-K% Prob, PPL, zlib) and of every candidate answer's tokens (for rank,
exposure, multiple-choice probability, truth ratio). A fact's candidates share their prefix (the
question part and the answer tag), so they are not one forward pass each:

**Shared prefix** (the model's own forward, ``model_fn=None``)
    one left-padded pass over the prefixes of a batch of facts (position ids counting real
    tokens, :func:`~deepunlearn.probe.prompts.left_pad`) with ``use_cache=True``. The logits of
    its last column score every candidate's FIRST answer token, so single-token candidates (the
    relation names of the release's "Who is X to Y?" form, the birth years) cost nothing more.
    The candidates with two or more tokens go through a second pass, in chunks of ``row_budget``
    rows: the prefix cache is expanded to one row per candidate (``Cache.reorder_cache`` on a
    shallow copy, which selects rows with ``index_select`` and leaves the prefix cache intact),
    the input is the candidate's tokens but its last (right-padded), the attention mask
    ``[prefix mask | candidate mask]`` and the positions continue the prefix's real-token count.
**Full sequences** (a ``model_fn``: WHP mixes two models, there is no cache)
    every (fact, candidate) row as the whole sequence prefix + answer, right-padded, in chunks of
    ``row_budget`` rows.

Both give the same numbers (up to float rounding; ``tests/probe/test_probe_scores.py`` checks
it). Log-softmax runs in float32 (float64 for a float64 model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass
class FactRows:
    """One fact's token ids: the shared ``prefix`` (at least one token) and each candidate's
    answer tokens after it (at least one each)."""

    prefix: list[int]
    answers: list[list[int]]


@dataclass
class FactLogprobs:
    """``prefix[t-1]`` = log P(prefix token t | tokens before it) for t = 1 .. len(prefix)-1;
    ``answers[c][j]`` = log P(answer token j of candidate c | prefix, its tokens before j)."""

    prefix: np.ndarray
    answers: list[np.ndarray]


def _lsm(logits):
    import torch

    return torch.log_softmax(logits if logits.dtype == torch.float64 else logits.float(), dim=-1)


def shared_prefix_logprobs(rows: list[FactRows], model, pad: int, device, *, row_budget: int = 256) -> list[FactLogprobs]:
    """Token log-probabilities of ``rows`` (one batch of facts) by the shared-prefix path (module
    docstring). Call it under ``torch.inference_mode()`` with the model in eval mode."""
    import copy

    import torch

    from .passes import accepts
    from .prompts import left_pad

    ids, mask, pos = left_pad([r.prefix for r in rows], pad)
    ids, mask, pos = ids.to(device), mask.to(device), pos.to(device)
    takes_pos = accepts(model, "position_ids")
    kw = {"position_ids": pos} if takes_pos else {}
    out = model(input_ids=ids, attention_mask=mask, use_cache=True, **kw)
    logp = _lsm(out.logits)  # [B, W, V]
    width = ids.shape[1]
    result = []
    for b, r in enumerate(rows):
        p = len(r.prefix)
        # token 0 sits in column 0, tokens 1..p-1 in the last p-1 columns
        cols = torch.as_tensor([0] + list(range(width - p + 1, width - 1)), device=logp.device)[:p - 1]
        gold = torch.as_tensor(r.prefix[1:], device=logp.device)
        pre = logp[b, cols].gather(-1, gold[:, None]).squeeze(-1) if p > 1 else logp.new_zeros(0)
        last = logp[b, -1]
        firsts = last[torch.as_tensor([a[0] for a in r.answers], device=logp.device)]
        result.append(FactLogprobs(pre.double().cpu().numpy(),
                                   [np.array([float(x)]) for x in firsts.double().cpu().tolist()]))
    longer = [(b, c) for b, r in enumerate(rows) for c, a in enumerate(r.answers) if len(a) > 1]
    if not longer:
        return result
    # transformers 5.x names the cache ``cache`` (``past_key_values`` is deprecated there), 4.x not
    cache_kw = "cache" if accepts(model, "cache") else "past_key_values"
    past = getattr(out, "cache", None)
    past = out.past_key_values if past is None else past
    real = mask.sum(-1)  # real prefix tokens per row
    for start in range(0, len(longer), row_budget):
        chunk = longer[start:start + row_budget]
        feeds = [rows[b].answers[c][:-1] for b, c in chunk]
        n, L = len(chunk), max(len(f) for f in feeds)
        c_ids = torch.full((n, L), pad, dtype=torch.long)
        c_mask = torch.zeros((n, L), dtype=torch.long)
        for j, f in enumerate(feeds):
            c_ids[j, :len(f)] = torch.as_tensor(f)
            c_mask[j, :len(f)] = 1
        c_ids, c_mask = c_ids.to(device), c_mask.to(device)
        idx = torch.as_tensor([b for b, _ in chunk], device=device)
        cache = copy.copy(past)
        cache.layers = [copy.copy(layer) for layer in past.layers]
        cache.reorder_cache(idx)
        attn = torch.cat([mask[idx], c_mask], dim=1)
        kw = {"position_ids": real[idx][:, None] + torch.arange(L, device=device)[None]} if takes_pos else {}
        o = model(input_ids=c_ids, attention_mask=attn, use_cache=True, **{cache_kw: cache}, **kw)
        lp = _lsm(o.logits)
        for j, (b, c) in enumerate(chunk):
            a = rows[b].answers[c]
            tgt = torch.as_tensor(a[1:], device=lp.device)
            rest = lp[j, :len(a) - 1].gather(-1, tgt[:, None]).squeeze(-1).double().cpu().numpy()
            result[b].answers[c] = np.concatenate([result[b].answers[c], rest])
    return result


def full_sequence_logprobs(rows: list[FactRows], model_fn: Callable, pad: int, device, *,
                           row_budget: int = 256) -> list[FactLogprobs]:
    """Token log-probabilities of ``rows`` by full right-padded sequences through ``model_fn``
    (``fn(input_ids, attention_mask) -> logits``); the prefix's come from each fact's first
    candidate's row."""
    import torch

    from .passes import right_pad

    flat = [(b, c) for b, r in enumerate(rows) for c in range(len(r.answers))]
    flat.sort(key=lambda bc: -(len(rows[bc[0]].prefix) + len(rows[bc[0]].answers[bc[1]])))
    result = [FactLogprobs(np.zeros(0), [np.zeros(0)] * len(r.answers)) for r in rows]
    for start in range(0, len(flat), row_budget):
        chunk = flat[start:start + row_budget]
        seqs = [rows[b].prefix + rows[b].answers[c] for b, c in chunk]
        ids, mask = right_pad(seqs, pad)
        logp = _lsm(model_fn(ids.to(device), mask.to(device)))
        for j, (b, c) in enumerate(chunk):
            p = len(rows[b].prefix)
            seq = torch.as_tensor(seqs[j], device=logp.device)
            tok = logp[j, :len(seqs[j]) - 1].gather(-1, seq[1:, None]).squeeze(-1).double().cpu().numpy()
            result[b].answers[c] = tok[p - 1:]
            if c == 0:
                result[b].prefix = tok[:p - 1]
    return result


def candidate_rows(tokenizer, items: list[tuple[list[str], str]], *, what: list[str] | None = None) -> list[FactRows]:
    """One :class:`FactRows` per item ``(texts, tag)``: ``texts`` are the item's full texts, one
    per candidate answer (the question part, the answer tag and the answer), ``tag`` the text
    without any answer. All are tokenised in one batch with special tokens; the shared prefix is
    the longest common token prefix of the texts and the tag, at most all but one token of the
    shortest text, so every candidate keeps at least one answer token. The one row builder of
    :func:`~deepunlearn.probe.scores.score_facts` (per fact) and of rank/yes-no probing over forms
    (:mod:`deepunlearn.probe.forms_probe`, per form). ``what[j]`` names item ``j`` in the
    ``ValueError`` raised when its text has no token before the answer."""
    flat = [t for texts, _ in items for t in texts]
    tags = [tag for _, tag in items]
    if not items:
        return []
    enc = tokenizer(flat + tags, add_special_tokens=True)["input_ids"]
    out, pos = [], 0
    for j, (texts, _) in enumerate(items):
        full = [list(x) for x in enc[pos:pos + len(texts)]]
        pos += len(texts)
        cut = min(longest_common_prefix(full + [list(enc[len(flat) + j])]), min(len(f) for f in full) - 1)
        if cut < 1:
            name = what[j] if what else f"item {j}"
            raise ValueError(f"{name}: its text has no token before the answer to score from")
        out.append(FactRows(prefix=full[0][:cut], answers=[f[cut:] for f in full]))
    return out


def longest_common_prefix(seqs: list[list[int]]) -> int:
    """Length of the longest common prefix of token-id lists.

    >>> longest_common_prefix([[1, 2, 3], [1, 2, 4], [1, 2]])
    2
    """
    if not seqs:
        return 0
    n = min(len(s) for s in seqs)
    first = seqs[0]
    for i in range(n):
        if any(s[i] != first[i] for s in seqs):
            return i
    return n
