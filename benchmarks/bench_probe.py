"""Probe throughput (facts/s): exact vs generate mode, on the tiny model finetuned on EDU-RELAT.

    python -m pytest benchmarks/bench_probe.py --benchmark-only

The finetuned model (2 layers, 512 wide, >= 95 % of the 700 facts known) is built once and
kept in ``$DEEPUNLEARN_CACHE/bench/`` (default ``~/.cache/deepunlearn/bench/``), keyed on
the KB's content; the first run spends a few minutes finetuning it. Each benchmark's
``extra_info`` holds ``facts_per_s`` and the known count; the generate benchmark also holds
its agreement with exact mode. Runs on CUDA when present.
"""

from __future__ import annotations


import numpy as np
import pytest



@pytest.fixture(scope="module")
def edu_bundle(edu_model_dir):
    from deepunlearn.probe import load_model

    return load_model(edu_model_dir)


def _record(benchmark, n: int, res) -> None:
    benchmark.extra_info["facts"] = n
    benchmark.extra_info["known"] = int(res.n_known)
    benchmark.extra_info["facts_per_s"] = round(n / benchmark.stats.stats.mean, 1)


def test_probe_exact(benchmark, edu_bundle, edu_kb):
    from deepunlearn.probe import probe

    res = benchmark.pedantic(probe, args=(edu_bundle, edu_kb), kwargs={"mode": "exact", "progress": False},
                             rounds=5, warmup_rounds=1, iterations=1)
    assert res.share >= 0.95
    _record(benchmark, len(edu_kb), res)


def test_probe_generate(benchmark, edu_bundle, edu_kb):
    from deepunlearn.probe import probe

    res = benchmark.pedantic(probe, args=(edu_bundle, edu_kb), kwargs={"mode": "generate", "progress": False},
                             rounds=3, warmup_rounds=1, iterations=1)
    exact = probe(edu_bundle, edu_kb, mode="exact", progress=False)
    agreement = float(np.mean(exact.known == res.known))
    benchmark.extra_info["agreement_with_exact"] = agreement
    assert agreement >= 0.99
    _record(benchmark, len(edu_kb), res)


def test_probe_exact_model_fn(benchmark, edu_bundle, edu_kb):
    """Exact mode through a ``model_fn`` (what WHP pays for one model): full logits, right padding."""
    from deepunlearn.probe import probe

    model = edu_bundle.model

    def fn(ids, mask):
        return model(input_ids=ids, attention_mask=mask).logits

    res = benchmark.pedantic(probe, args=(edu_bundle, edu_kb),
                             kwargs={"mode": "exact", "model_fn": fn, "progress": False},
                             rounds=5, warmup_rounds=1, iterations=1)
    assert res.share >= 0.95
    _record(benchmark, len(edu_kb), res)
