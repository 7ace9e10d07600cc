"""Per-fact scores: facts/s and forward passes per fact of ``score_facts`` on the tiny
model finetuned on EDU-RELAT, candidates on vs off, shared-prefix (KV cache) vs ``model_fn`` path.

    python -m pytest benchmarks/bench_scores.py --benchmark-only

Scores the first 100 facts in KB order (family and biography mixed as in the release: 400
family facts come first, so the slice also takes 100 biography facts from the end: 50 + 50).
Generation is off (it is generate-mode probing's cost, see ``bench_probe.py``). Each benchmark's
``extra_info`` holds ``facts_per_s``, ``forward_passes`` (model forward calls per run, counted
with a forward pre-hook) and ``passes_per_fact``.
"""

from __future__ import annotations

import pytest

N_FACTS = 100


@pytest.fixture(scope="module")
def edu_bundle(edu_model_dir):
    from deepunlearn.probe import load_model

    return load_model(edu_model_dir)


def _facts(kb):
    return list(range(N_FACTS // 2)) + list(range(len(kb) - N_FACTS // 2, len(kb)))


@pytest.mark.parametrize("path", ["shared_prefix", "model_fn"])
@pytest.mark.parametrize("candidates", [True, False], ids=["candidates", "gold_only"])
def test_score_facts(benchmark, edu_bundle, edu_kb, path, candidates):
    from deepunlearn.probe.scores import score_facts

    model = edu_bundle.model
    calls = [0]
    handle = model.register_forward_pre_hook(lambda *a: calls.__setitem__(0, calls[0] + 1))
    fn = (lambda ids, m: model(input_ids=ids, attention_mask=m).logits) if path == "model_fn" else None
    facts = _facts(edu_kb)
    try:
        res = benchmark.pedantic(score_facts, args=(edu_bundle, edu_kb, facts),
                                 kwargs={"model_fn": fn, "candidates": candidates, "generate": False,
                                         "progress": False}, rounds=3, warmup_rounds=1, iterations=1)
    finally:
        handle.remove()
    runs = 4  # one warm-up + three rounds
    benchmark.extra_info["facts"] = len(facts)
    benchmark.extra_info["facts_per_s"] = round(len(facts) / benchmark.stats.stats.mean, 1)
    benchmark.extra_info["forward_passes"] = calls[0] // runs
    benchmark.extra_info["passes_per_fact"] = round(calls[0] / runs / len(facts), 3)
    benchmark.extra_info["candidates_per_fact"] = float(res.n_candidates.mean()) if candidates else 1.0
    benchmark.extra_info["mean_prob"] = float(res.prob.mean())
    assert res.prob.mean() > 0.5  # the finetuned model knows its facts
