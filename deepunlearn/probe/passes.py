"""The forward passes every probe is made of: a model's logits callable, the teacher-forced
check of a continuation, greedy decoding, padding, the per-KB encoding cache and the checked fact
ids. :mod:`~deepunlearn.probe.probing` (one form per fact) and
:mod:`~deepunlearn.probe.forms_probe` (forms and the modes yesno, rank, any) are built on them;
this module imports neither, so the probe modules form no import circle."""

from __future__ import annotations

import inspect
import math
from typing import Callable, Iterable

import numpy as np

from ..kg.kb import KBError, KnowledgeBase
from .models import ModelBundle
from .prompts import encode_pairs, left_pad, position_ids, question_ids
from .result import MAX_NEW_TOKENS

def accepts(model, name: str) -> bool:
    try:
        return name in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


def logits_fn(model) -> Callable:
    """``fn(input_ids, attention_mask) -> logits`` for a Hugging Face causal LM that passes
    position ids counting real tokens, so left-padded batches are exact also for
    absolute-position models (GPT-2); ``fn(ids, mask, keep=k)`` returns only the last ``k``
    positions. (Right-padded batches, as a ``model_fn`` gets, need no position ids; this
    callable is exact for them too.)
    """
    takes_pos = accepts(model, "position_ids")
    takes_keep = accepts(model, "logits_to_keep")

    def fn(input_ids, attention_mask, keep: int | None = None):
        kw = {}
        if takes_pos:
            kw["position_ids"] = position_ids(attention_mask)
        if keep is not None and takes_keep:
            kw["logits_to_keep"] = keep
        logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False, **kw).logits
        return logits if keep is None else logits[:, -keep:]

    return fn


def encoded(bundle: ModelBundle, kb: KnowledgeBase) -> tuple[list[tuple[list[int], list[int]]], list[list[int]]]:
    """Per fact of ``kb``: (question part, continuation) ids as in finetuning, and the question
    part tokenised alone (the generate prompt); computed once per (bundle, KB content)."""
    cache = bundle.__dict__.setdefault("_encoded_cache", {})
    key = _encoding_key(bundle, kb)
    if key not in cache:
        if len(cache) > 8:
            cache.clear()
        probes = kb.probes()
        cache[key] = (encode_pairs(bundle.tokenizer, bundle.prompt, probes),
                      question_ids(bundle.tokenizer, bundle.prompt, [p.question for p in probes]))
    return cache[key]


def _encoding_key(bundle: ModelBundle, kb: KnowledgeBase) -> tuple:
    """What a KB's encoding under a bundle depends on: the KB's content, the answer format and
    the tokenizer."""
    from .fingerprint import kb_fingerprint

    return kb_fingerprint(kb), bundle.prompt.model_dump_json(), id(bundle.tokenizer)


def primary_blocks(bundle: ModelBundle, kb: KnowledgeBase, ids) -> list | None:
    """Per fact of ``ids``: :func:`answer_blocks` of its primary question's other right answers
    (:func:`deepunlearn.kg.other_answers.primary_others`), or ``None`` when the KB judges another
    right answer wrong (nothing is set aside anywhere). Computed once per fact, bundle and KB
    content, as :func:`encoded` is (a sweep probes the same facts at every grid point)."""
    from ..kg.other_answers import other_answers_rule, primary_others

    if other_answers_rule(kb) != "aside":
        return None
    caches = bundle.__dict__.setdefault("_blocks_cache", {})
    key = _encoding_key(bundle, kb)
    if key not in caches:
        if len(caches) > 8:
            caches.clear()
        caches[key] = {}
    cache = caches[key]
    todo = [int(i) for i in dict.fromkeys(int(i) for i in ids) if int(i) not in cache]
    if todo:
        enc, _ = encoded(bundle, kb)
        for i in todo:
            others = sorted(primary_others(kb, i))
            q = kb.probe(i).question
            cache[i] = answer_blocks(enc[i], encode_pairs(bundle.tokenizer, bundle.prompt, [(q, a) for a in others])
                                     ) if others else []
    return [cache[int(i)] for i in ids]


def model_device(bundle: ModelBundle):
    import torch

    try:
        return next(bundle.model.parameters()).device
    except StopIteration:  # pragma: no cover - a model without parameters
        return torch.device(bundle.device)


def checked_ids(kb: KnowledgeBase, fact_ids: Iterable[int] | None, batch_size) -> np.ndarray:
    """The fact ids to probe (all by default) as an array, after checking them and ``batch_size``."""
    if batch_size is not None and batch_size != "auto" and (
            isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
        raise ValueError(f"batch_size must be a positive integer, None or 'auto', got {batch_size!r}")
    n_facts = len(kb.facts)
    ids = np.arange(n_facts, dtype=np.int64) if fact_ids is None else np.asarray(list(fact_ids), dtype=np.int64)
    bad = ids[(ids < 0) | (ids >= n_facts)]
    if len(bad):
        raise KBError(f"fact index {int(bad[0])} out of range (KB has {n_facts} facts)")
    return ids


def answer_blocks(row: tuple[list[int], list[int]], others: list[tuple[list[int], list[int]]]) -> list[tuple[int, int]]:
    """The (answer position, token) pairs set aside for ``row`` = (prompt ids, answer ids): where
    another right answer's ids (``others``, encoded as the row was) leave the row's own, the token
    they continue with (:mod:`deepunlearn.kg.other_answers`). An answer that leaves it inside the
    prompt, or that ends before leaving it, sets nothing aside.

    >>> answer_blocks(([1, 2], [5, 6, 7]), [([1, 2], [5, 8]), ([1, 2], [9]), ([1, 2], [5])])
    [(0, 9), (1, 8)]
    """
    full, start = row[0] + row[1], len(row[0])
    out = set()
    for p, a in others:
        o = p + a
        k = 0
        while k < len(full) and k < len(o) and full[k] == o[k]:
            k += 1
        if start <= k < len(full) and k < len(o):
            out.add((k - start, o[k]))
    return sorted(out)


def teacher_forced(b_rows, model_fn, default_fn, pad: int, device, blocks=None):
    """Summed answer log-probability and "argmax is gold at every answer token" per row;
    ``blocks[r]``: the (answer position, token) pairs the argmax of row ``r`` leaves out
    (:func:`answer_blocks`; the log-probability is the model's own)."""
    import torch

    seqs = [p + a for p, a in b_rows]
    longest = max(len(a) for _, a in b_rows)
    n = len(b_rows)
    gold = torch.full((n, longest), pad, dtype=torch.long)
    valid = torch.zeros((n, longest), dtype=torch.bool)
    for r, (_, a) in enumerate(b_rows):
        gold[r, :len(a)] = torch.as_tensor(a)
        valid[r, :len(a)] = True
    if model_fn is None:
        # Left-padded: every answer ends in the last column, so only the last longest+1
        # positions' logits are computed; the one predicting answer token k of a row with m
        # answer tokens sits m-k columns from the end.
        ids, mask, _ = left_pad(seqs, pad)
        logits = default_fn(ids.to(device), mask.to(device), keep=longest + 1)
        col = torch.zeros((n, longest), dtype=torch.long)
        for r, (_, a) in enumerate(b_rows):
            col[r, :len(a)] = longest - len(a) + torch.arange(len(a))
    else:
        # Right-padded, so the callable may run any model with plain positions 0..n-1.
        ids, mask = right_pad(seqs, pad)
        logits = model_fn(ids.to(device), mask.to(device))
        col = torch.zeros((n, longest), dtype=torch.long)
        for r, (p, a) in enumerate(b_rows):
            col[r, :len(a)] = len(p) - 1 + torch.arange(len(a))
    col, gold, valid = col.to(logits.device), gold.to(logits.device), valid.to(logits.device)
    picked = logits[torch.arange(n, device=logits.device)[:, None], col]  # [n, longest, V]
    logp = torch.log_softmax(picked.float(), dim=-1)
    tok_lp = logp.gather(-1, gold.unsqueeze(-1)).squeeze(-1)
    lp = (tok_lp * valid).sum(-1)
    if blocks is not None and any(blocks):
        rows_, pos_, toks_ = zip(*[(r, k, t) for r, bl in enumerate(blocks) for k, t in (bl or ())])
        at = (torch.as_tensor(rows_, device=logp.device), torch.as_tensor(pos_, device=logp.device),
              torch.as_tensor(toks_, device=logp.device))
        logp = logp.index_put(at, torch.tensor(-math.inf, device=logp.device))
    hit = (logp.argmax(-1) == gold) | ~valid
    return lp.double().cpu().numpy(), hit.all(-1).cpu().numpy()


def right_pad(rows, pad: int, extra: int = 0):
    import torch

    width = max(len(r) for r in rows) + extra
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = torch.as_tensor(r, dtype=torch.long)
        mask[i, :len(r)] = 1
    return ids, mask


def generate_answers(bundle: ModelBundle, prompts: list[list[int]], model_fn, device) -> list[str]:
    """Greedy decoding of the bundle's answer rule's new tokens (:data:`MAX_NEW_TOKENS` by
    default); the decoded new text per prompt."""
    import torch

    from .answer_rule import rule_of_bundle

    new_tokens = rule_of_bundle(bundle).max_new_tokens

    eos = bundle.eos_id
    n = len(prompts)
    if model_fn is None:
        from transformers import GenerationConfig

        ids, mask, _ = left_pad(prompts, bundle.pad_id)
        ids, mask = ids.to(device), mask.to(device)
        cfg = GenerationConfig(max_new_tokens=new_tokens, do_sample=False, num_beams=1,
                               pad_token_id=bundle.pad_id, eos_token_id=eos)
        out = bundle.model.generate(input_ids=ids, attention_mask=mask, generation_config=cfg)
        new = out[:, ids.shape[1]:].cpu().tolist()
    else:
        # Right-padded rows, each continued at its own end; no KV cache (the callable may mix
        # several models), so every step reruns the sequences.
        ids, mask = right_pad(prompts, bundle.pad_id, extra=new_tokens)
        ids, mask = ids.to(device), mask.to(device)
        lens = torch.as_tensor([len(p) for p in prompts], device=device)
        rows = torch.arange(n, device=device)
        done = torch.zeros(n, dtype=torch.bool, device=device)
        steps = []
        for _ in range(new_tokens):
            width = int(lens.max())
            logits = model_fn(ids[:, :width], mask[:, :width])
            nxt = logits[rows, lens - 1].argmax(-1)
            nxt = torch.where(done, torch.full_like(nxt, bundle.pad_id), nxt)
            steps.append(nxt)
            if eos is not None:
                done |= nxt == eos
            ids[rows, lens] = nxt
            mask[rows, lens] = 1
            lens = lens + 1
            if bool(done.all()):
                break
        new = torch.stack(steps, dim=1).cpu().tolist()
    return bundle.tokenizer.batch_decode(new, skip_special_tokens=True)
