"""Batched probing against one-fact-at-a-time greedy decoding (the outside truth)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from deepunlearn.kg.kb import KBError
from deepunlearn.probe import ProbeResult, build_tiny_model, load_model, logits_fn, probe
from deepunlearn.probe.prompts import encode_pair


def _greedy_one(bundle, question: str, steps: int):
    """Plain greedy decoding of one unpadded prompt (the question part, tokenised as vLLM does),
    token by token, no cache."""
    ids = torch.tensor([bundle.tokenizer(bundle.prompt.prompt(question)).input_ids])
    out = []
    with torch.no_grad():
        for _ in range(steps):
            nxt = int(bundle.model(input_ids=ids).logits[0, -1].argmax())
            out.append(nxt)
            if nxt == bundle.eos_id:
                break
            ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
    return out


def test_exact_mode_is_greedy_decoding_of_the_gold_tokens(tiny_bundle, small_kb):
    res = probe(tiny_bundle, small_kb, mode="exact", progress=False)
    assert res.share >= 0.95
    for i in list(range(0, len(small_kb), 9)) + [int(j) for j in np.flatnonzero(~res.known)]:
        p = small_kb.probe(i)
        _, gold = encode_pair(tiny_bundle.tokenizer, tiny_bundle.prompt, p.question, p.answer)
        emitted = _greedy_one(tiny_bundle, p.question, len(gold))
        assert res.known[i] == (emitted == gold), (i, p)


def test_generate_mode_is_the_reference_substring_rule(tiny_bundle, small_kb):
    ids = list(range(0, len(small_kb), 5))
    res = probe(tiny_bundle, small_kb, ids, mode="generate", progress=False)
    for j, i in enumerate(ids):
        p = small_kb.probe(i)
        text = tiny_bundle.tokenizer.decode(_greedy_one(tiny_bundle, p.question, 10), skip_special_tokens=True)
        assert res.outputs[j] == text
        assert res.known[j] == (p.answer.lower() in text.lower())


def _varied(kb):
    """The KB with questions of different lengths (every EDU-RELAT question is the same number
    of words): every second question is asked twice, every third three times."""
    from dataclasses import replace

    overrides = {}
    for i in range(len(kb)):
        p = kb.probe(i)
        overrides[i] = (" ".join([p.question] * (1 + (i % 2) + (i % 3 == 0))), p.answer)
    return replace(kb, probe_overrides=overrides)


@pytest.mark.parametrize("mode", ["exact", "generate"])
def test_left_padded_batches_equal_one_fact_at_a_time(tiny_bundle, small_kb, mode):
    kb = _varied(small_kb)
    ids = list(range(0, len(kb), 2)) + [1, 3]
    batched = probe(tiny_bundle, kb, ids, mode=mode, batch_size=64, progress=False)
    single = probe(tiny_bundle, kb, ids, mode=mode, batch_size=1, progress=False)
    # The batches really are padded: prompts differ in length.
    lengths = {len(encode_pair(tiny_bundle.tokenizer, tiny_bundle.prompt, kb.probe(i).question, "x")[0])
               for i in ids}
    assert len(lengths) == 3
    np.testing.assert_array_equal(batched.fact_ids, ids)
    np.testing.assert_array_equal(batched.known, single.known)
    np.testing.assert_allclose(batched.logprob, single.logprob, atol=1e-4)
    assert batched.outputs == single.outputs


def test_exact_and_generate_agree_on_the_finetuned_model(tiny_bundle, small_kb):
    exact = probe(tiny_bundle, small_kb, mode="exact", progress=False)
    gen = probe(tiny_bundle, small_kb, mode="generate", progress=False)
    agree = float((exact.known == gen.known).mean())
    assert agree >= 0.99, f"exact and generate agree on only {agree:.1%} of facts"
    np.testing.assert_allclose(exact.logprob, gen.logprob, atol=1e-5)
    assert np.all(exact.logprob <= 0)


@pytest.mark.parametrize("mode", ["exact", "generate"])
def test_model_fn_gives_the_same_result(tiny_bundle, small_kb, mode):
    bundle = tiny_bundle
    small_kb = _varied(small_kb)  # prompts of different lengths: padded batches
    ids = list(range(0, len(small_kb), 3)) + [1, 2]
    plain = probe(bundle, small_kb, ids, mode=mode, progress=False)
    calls = []

    def fn(ids_, m):
        calls.append(ids_.shape)
        return bundle.model(input_ids=ids_, attention_mask=m).logits

    via_fn = probe(bundle, small_kb, ids, mode=mode, model_fn=fn, progress=False)
    assert calls
    np.testing.assert_array_equal(plain.known, via_fn.known)
    np.testing.assert_allclose(plain.logprob, via_fn.logprob, atol=1e-4)
    assert plain.outputs == via_fn.outputs


def test_model_fn_is_used_instead_of_the_model(tiny_bundle, small_kb):
    # A callable that always prefers one token: nothing is known except facts answered by it
    # (in the bare format, whose continuation is the answer alone).
    from deepunlearn.probe import PromptFormat

    tiny_bundle.prompt = PromptFormat.named("bare")
    vocab = len(tiny_bundle.tokenizer)
    target = tiny_bundle.tokenizer.convert_tokens_to_ids("father")

    def fn(ids, m):
        logits = torch.zeros(ids.shape[0], ids.shape[1], vocab)
        logits[..., target] = 1.0
        return logits

    res = probe(tiny_bundle, small_kb, mode="exact", model_fn=fn, progress=False)
    expected = np.array([small_kb.probe(i).answer == "father" for i in range(len(small_kb))])
    assert expected.any()
    np.testing.assert_array_equal(res.known, expected)
    gen = probe(tiny_bundle, small_kb, [0, 1], mode="generate", model_fn=fn, progress=False)
    assert gen.outputs == ["father" * 10] * 2


def test_absolute_position_model_is_padded_correctly(small_kb, tmp_path):
    # GPT-2 reads learned absolute positions: a row padded without position ids would shift them.
    bundle = load_model(build_tiny_model(small_kb, tmp_path / "g", hidden=64, heads=4, arch="gpt2"), device="cpu")
    small_kb = _varied(small_kb)
    ids = list(range(0, len(small_kb), 4))
    for mode in ("exact", "generate"):
        batched = probe(bundle, small_kb, ids, mode=mode, batch_size=32, progress=False)
        single = probe(bundle, small_kb, ids, mode=mode, batch_size=1, progress=False)
        via_fn = probe(bundle, small_kb, ids, mode=mode, batch_size=32, progress=False,
                       model_fn=lambda i, m: bundle.model(input_ids=i, attention_mask=m).logits)
        helper = probe(bundle, small_kb, ids, mode=mode, batch_size=32, progress=False,
                       model_fn=logits_fn(bundle.model))
        for other in (single, via_fn, helper):
            np.testing.assert_allclose(batched.logprob, other.logprob, atol=1e-4)
            np.testing.assert_array_equal(batched.known, other.known)
            assert batched.outputs == other.outputs


def test_probe_restores_train_mode_and_keeps_order(tiny_bundle, small_kb):
    tiny_bundle.model.train()
    res = probe(tiny_bundle, small_kb, [7, 3, 7, 0], progress=False)
    assert tiny_bundle.model.training
    assert res.fact_ids.tolist() == [7, 3, 7, 0]
    full = probe(tiny_bundle, small_kb, progress=False)
    np.testing.assert_array_equal(res.known, full.known[[7, 3, 7, 0]])
    assert not torch.is_inference_mode_enabled()


def test_probe_rejects_bad_arguments(tiny_bundle, small_kb):
    with pytest.raises(KBError, match="out of range"):
        probe(tiny_bundle, small_kb, [len(small_kb)], progress=False)
    with pytest.raises(ValueError, match="mode"):
        probe(tiny_bundle, small_kb, mode="fuzzy", progress=False)
    empty = probe(tiny_bundle, small_kb, [], progress=False)
    assert len(empty) == 0 and empty.known_ids() == set()


def test_probe_result_round_trips_through_json(tiny_bundle, small_kb):
    res = probe(tiny_bundle, small_kb, list(range(20)), mode="generate", progress=False)
    back = ProbeResult.from_json(res.to_json())
    import json

    back2 = ProbeResult.from_json(json.dumps(res.to_json()))
    for b in (back, back2):
        np.testing.assert_array_equal(b.fact_ids, res.fact_ids)
        np.testing.assert_array_equal(b.known, res.known)
        np.testing.assert_array_equal(b.logprob, res.logprob)
        assert b.outputs == res.outputs and b.mode == "generate"
    assert res.known_ids() == {i for i in range(20) if res.known[i]}
    with pytest.raises(ValueError, match="known"):
        ProbeResult.from_json({"fact_ids": [1], "logprob": [0.0]})
