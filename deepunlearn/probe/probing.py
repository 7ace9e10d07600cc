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

Issue 15 adds probing over a fact's *forms* (paraphrases, statements, yes/no questions:
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

import inspect
import sys
from typing import Callable, Iterable, Sequence

import numpy as np

from ..kg.kb import KBError, KnowledgeBase
from .models import ModelBundle
from .prompts import encode_pairs, left_pad, position_ids, question_ids
from .result import MODES, MAX_NEW_TOKENS, Mode, ProbeResult, ProbeResultError  # noqa: F401  (re-exported)


def _accepts(model, name: str) -> bool:
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
    takes_pos = _accepts(model, "position_ids")
    takes_keep = _accepts(model, "logits_to_keep")

    def fn(input_ids, attention_mask, keep: int | None = None):
        kw = {}
        if takes_pos:
            kw["position_ids"] = position_ids(attention_mask)
        if keep is not None and takes_keep:
            kw["logits_to_keep"] = keep
        logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False, **kw).logits
        return logits if keep is None else logits[:, -keep:]

    return fn


def _encoded(bundle: ModelBundle, kb: KnowledgeBase) -> tuple[list[tuple[list[int], list[int]]], list[list[int]]]:
    """Per fact of ``kb``: (question part, continuation) ids as in finetuning, and the question
    part tokenised alone (the generate prompt); computed once per (bundle, KB content)."""
    from .fingerprint import kb_fingerprint

    cache = bundle.__dict__.setdefault("_encoded_cache", {})
    key = (kb_fingerprint(kb), bundle.prompt.model_dump_json(), id(bundle.tokenizer))
    if key not in cache:
        if len(cache) > 8:
            cache.clear()
        probes = kb.probes()
        cache[key] = (encode_pairs(bundle.tokenizer, bundle.prompt, probes),
                      question_ids(bundle.tokenizer, bundle.prompt, [p.question for p in probes]))
    return cache[key]


def _model_device(bundle: ModelBundle):
    import torch

    try:
        return next(bundle.model.parameters()).device
    except StopIteration:  # pragma: no cover - a model without parameters
        return torch.device(bundle.device)


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
) -> ProbeResult:
    """Probe the model on the facts ``fact_ids`` of ``kb`` (all facts by default).

    ``mode``: one of :data:`MODES`. ``forms``: a form selection (``--forms``,
    :func:`deepunlearn.kg.forms.select_forms`; a bad token is a ``FormError`` naming
    ``--forms``). With ``forms`` ``None`` or ``"default"`` and mode ``exact`` or ``generate``
    the probe is today's (the primary question); any other selection or mode probes over forms
    (:mod:`deepunlearn.probe.forms_probe`: the modes ``yesno``, ``rank`` and ``any``, what a
    fact known over several forms means, the cost per fact). ``any_modes`` restricts the modes
    ``any`` combines (default all four).

    ``model_fn(input_ids, attention_mask) -> logits [B, T, V]`` replaces ``bundle.model`` (the
    unlearning layer passes one that mixes two models' next-token distributions); in
    ``generate`` mode it is then decoded greedily by a plain loop without KV cache. It receives
    RIGHT-padded batches, so every row has the plain positions 0..n-1 and
    ``lambda ids, m: model(input_ids=ids, attention_mask=m).logits`` is exact for any model
    (models used only inside the callable must be put in eval mode by the caller). Its output
    only needs to be logits up to a constant per position: log-softmax gives the answer's
    log-probability, argmax the greedy token.
    Without it, batches are left-padded (behind each row's first token) with explicit position
    ids and decoded with Hugging Face ``generate`` and its KV cache. Runs in inference mode and
    eval mode and restores train mode.

    ``batch_size``: facts per forward pass; ``None`` or ``"auto"`` (default) sizes batches to the
    free memory on CUDA (:func:`~deepunlearn.probe.batching.resolve_batch_size`) and takes 64 on
    CPU. The result keeps the order of ``fact_ids``.
    """
    import torch

    if mode not in MODES:
        raise ValueError(f"unknown probe mode {mode!r}: expected one of {MODES}")
    ids = checked_ids(kb, fact_ids, batch_size)
    if any_modes is not None and mode != "any":
        raise ValueError(f"any_modes is for mode 'any', not {mode!r}")
    if mode not in ("exact", "generate") or (forms is not None and str(forms).strip() != "default"):
        from .forms_probe import probe_forms

        return probe_forms(bundle, kb, ids, mode=mode, forms=forms, any_modes=any_modes, batch_size=batch_size,
                           model_fn=model_fn, progress=progress)

    enc, q_alone = _encoded(bundle, kb)
    rows = [enc[i] for i in ids]
    gen_prompts = [q_alone[i] for i in ids]
    # Longest first: batches hold rows of similar length (little padding), and running out of
    # memory shows at the first batch.
    order = sorted(range(len(rows)), key=lambda j: (-(len(rows[j][0]) + len(rows[j][1])), -len(rows[j][0]), j))
    known = np.zeros(len(rows), dtype=bool)
    logprob = np.zeros(len(rows), dtype=np.float64)
    outputs: list[str] | None = [""] * len(rows) if mode == "generate" else None
    answers = [kb.probe(int(i)).answer for i in ids]

    model = bundle.model
    was_training = model.training
    model.eval()
    device = _model_device(bundle)
    from .batching import resolve_batch_size

    longest = max((len(p) + len(a) for p, a in rows), default=1) + (MAX_NEW_TOKENS if mode == "generate" else 0)
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
                lp, exact = _teacher_forced(b_rows, model_fn, default_fn, pad, device)
                logprob[batch] = lp
                if mode == "exact":
                    known[batch] = exact
                else:
                    texts = _generate(bundle, [gen_prompts[j] for j in batch], model_fn, device)
                    for j, text in zip(batch, texts):
                        outputs[j] = text
                        known[j] = answers[j].lower() in text.lower()
                bar.update(len(batch))
    finally:
        bar.close()
        if was_training:
            model.train()
    return ProbeResult(fact_ids=ids, known=known, logprob=logprob, outputs=outputs, mode=mode)


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


def _teacher_forced(b_rows, model_fn, default_fn, pad: int, device):
    """Summed answer log-probability and "argmax is gold at every answer token" per row."""
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
        ids, mask = _right_pad(seqs, pad)
        logits = model_fn(ids.to(device), mask.to(device))
        col = torch.zeros((n, longest), dtype=torch.long)
        for r, (p, a) in enumerate(b_rows):
            col[r, :len(a)] = len(p) - 1 + torch.arange(len(a))
    col, gold, valid = col.to(logits.device), gold.to(logits.device), valid.to(logits.device)
    picked = logits[torch.arange(n, device=logits.device)[:, None], col]  # [n, longest, V]
    logp = torch.log_softmax(picked.float(), dim=-1)
    tok_lp = logp.gather(-1, gold.unsqueeze(-1)).squeeze(-1)
    lp = (tok_lp * valid).sum(-1)
    hit = (logp.argmax(-1) == gold) | ~valid
    return lp.double().cpu().numpy(), hit.all(-1).cpu().numpy()


def _right_pad(rows, pad: int, extra: int = 0):
    import torch

    width = max(len(r) for r in rows) + extra
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = torch.as_tensor(r, dtype=torch.long)
        mask[i, :len(r)] = 1
    return ids, mask


def _generate(bundle: ModelBundle, prompts: list[list[int]], model_fn, device) -> list[str]:
    """Greedy decoding of :data:`MAX_NEW_TOKENS` tokens; the decoded new text per prompt."""
    import torch

    eos = bundle.eos_id
    n = len(prompts)
    if model_fn is None:
        from transformers import GenerationConfig

        ids, mask, _ = left_pad(prompts, bundle.pad_id)
        ids, mask = ids.to(device), mask.to(device)
        cfg = GenerationConfig(max_new_tokens=MAX_NEW_TOKENS, do_sample=False, num_beams=1,
                               pad_token_id=bundle.pad_id, eos_token_id=eos)
        out = bundle.model.generate(input_ids=ids, attention_mask=mask, generation_config=cfg)
        new = out[:, ids.shape[1]:].cpu().tolist()
    else:
        # Right-padded rows, each continued at its own end; no KV cache (the callable may mix
        # several models), so every step reruns the sequences.
        ids, mask = _right_pad(prompts, bundle.pad_id, extra=MAX_NEW_TOKENS)
        ids, mask = ids.to(device), mask.to(device)
        lens = torch.as_tensor([len(p) for p in prompts], device=device)
        rows = torch.arange(n, device=device)
        done = torch.zeros(n, dtype=torch.bool, device=device)
        steps = []
        for _ in range(MAX_NEW_TOKENS):
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
