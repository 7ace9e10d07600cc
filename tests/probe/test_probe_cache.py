"""The on-disk probe cache and the fingerprints it is keyed on."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import deepunlearn.probe.cache as cache_mod
from deepunlearn.probe import cached_probe, kb_fingerprint, model_fingerprint, probe, weights_fingerprint
from deepunlearn.probe.fingerprint import tensor_checksum


def test_cache_returns_the_same_result_without_probing_again(tiny_bundle, small_kb, tmp_path, monkeypatch):
    first = cached_probe(tiny_bundle, small_kb, cache_dir=tmp_path, progress=False)
    files = list(tmp_path.glob("probe-*.json"))
    assert len(files) == 1
    fresh = probe(tiny_bundle, small_kb, progress=False)
    np.testing.assert_array_equal(first.known, fresh.known)

    def fail(*a, **k):
        raise AssertionError("probed again although the result is cached")

    monkeypatch.setattr(cache_mod, "probe", fail)
    again = cached_probe(tiny_bundle, small_kb, cache_dir=tmp_path, progress=False)
    np.testing.assert_array_equal(again.fact_ids, first.fact_ids)
    np.testing.assert_array_equal(again.known, first.known)
    np.testing.assert_array_equal(again.logprob, first.logprob)
    # A freshly loaded copy of the same checkpoint hits the same entry.
    from deepunlearn.probe import load_model

    copy = load_model(tiny_bundle.path, device="cpu")
    np.testing.assert_array_equal(cached_probe(copy, small_kb, cache_dir=tmp_path).known, first.known)


def test_cache_is_invalidated_when_weights_change(tiny_bundle, small_kb, tmp_path):
    before = cached_probe(tiny_bundle, small_kb, cache_dir=tmp_path, progress=False)
    with torch.no_grad():
        tiny_bundle.model.lm_head.weight[:, tiny_bundle.tokenizer.eos_token_id] += 0.0  # no change
    assert len(list(tmp_path.glob("probe-*.json"))) == 1
    cached_probe(tiny_bundle, small_kb, cache_dir=tmp_path, progress=False)
    assert len(list(tmp_path.glob("probe-*.json"))) == 1
    # Scramble the output layer: the model forgets, and the cache must not answer for it.
    with torch.no_grad():
        w = tiny_bundle.model.lm_head.weight
        w.copy_(w[torch.randperm(w.shape[0], generator=torch.Generator().manual_seed(0))])
    after = cached_probe(tiny_bundle, small_kb, cache_dir=tmp_path, progress=False)
    assert len(list(tmp_path.glob("probe-*.json"))) == 2
    assert after.n_known < before.n_known
    np.testing.assert_array_equal(after.known, probe(tiny_bundle, small_kb, progress=False).known)


def test_cache_key_covers_mode_kb_and_prompt(tiny_bundle, small_kb, tmp_path):
    cached_probe(tiny_bundle, small_kb, cache_dir=tmp_path, progress=False)
    cached_probe(tiny_bundle, small_kb, mode="generate", cache_dir=tmp_path, progress=False)
    cached_probe(tiny_bundle, small_kb.subset(range(50)), cache_dir=tmp_path, progress=False)
    assert len(list(tmp_path.glob("probe-*.json"))) == 3
    with pytest.raises(ValueError, match="model_fn"):
        cached_probe(tiny_bundle, small_kb, cache_dir=tmp_path, model_fn=lambda i, m: None)


def test_weights_fingerprint_sees_any_single_change(tiny_bundle):
    model = tiny_bundle.model
    base = weights_fingerprint(model)
    assert weights_fingerprint(model) == base
    name, p = next(iter(model.named_parameters()))
    with torch.no_grad():
        old = p.view(-1)[123].item()
        p.view(-1)[123] = float(np.nextafter(np.float32(old), np.float32(np.inf)))  # one ulp
        assert weights_fingerprint(model) != base
        p.view(-1)[123] = old
    assert weights_fingerprint(model) == base


def test_tensor_checksum_is_exact_and_position_sensitive():
    t = torch.arange(10, dtype=torch.float32)
    assert tensor_checksum(t) == tensor_checksum(t.clone())
    swapped = t.clone()
    swapped[[2, 7]] = swapped[[7, 2]]
    assert tensor_checksum(swapped) != tensor_checksum(t)
    assert tensor_checksum(t.to(torch.bfloat16)) != tensor_checksum(t.to(torch.float16))
    assert 0 <= tensor_checksum(torch.randn(1000)) < 2**64


def test_model_and_kb_fingerprints(tiny_bundle, small_kb):
    from deepunlearn.probe import PromptFormat

    fp = model_fingerprint(tiny_bundle)
    tiny_bundle.prompt = PromptFormat(template="Q: {question}\n")
    assert model_fingerprint(tiny_bundle) != fp
    assert kb_fingerprint(small_kb) == kb_fingerprint(small_kb.subset(range(len(small_kb))))
    assert kb_fingerprint(small_kb) != kb_fingerprint(small_kb.subset(range(1, len(small_kb))))
