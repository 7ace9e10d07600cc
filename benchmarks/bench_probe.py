"""Probe throughput (facts/s): exact vs generate mode, on the tiny model finetuned on EDU-RELAT.

    python -m pytest benchmarks/bench_probe.py --benchmark-only

The finetuned model (2 layers, 512 wide, >= 95 % of the 700 facts known) is built once and
kept in ``$DEEPUNLEARN_CACHE/bench/`` (default ``~/.cache/deepunlearn/bench/``), keyed on
the KB's content; the first run spends a few minutes finetuning it. Each benchmark's
``extra_info`` holds ``facts_per_s`` and the known count; the generate benchmark also holds
its agreement with exact mode. Runs on CUDA when present.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _edu_dir() -> Path:
    env = os.environ.get("DEEPUNLEARN_EDU_RELAT")
    for c in ([Path(env)] if env else []) + [ROOT.parent / "shared" / "edu-relat", ROOT / "shared" / "edu-relat"]:
        if (c / "family-200-graph.pt").exists():
            return c
    raise RuntimeError("EDU-RELAT release not found: set DEEPUNLEARN_EDU_RELAT=/path/to/edu-relat")


@pytest.fixture(scope="module")
def edu_kb():
    from deepunlearn.kg.edu_relat import import_edu_relat

    return import_edu_relat(_edu_dir())


@pytest.fixture(scope="module")
def edu_bundle(edu_kb):
    from deepunlearn.probe import build_tiny_model, kb_fingerprint, load_model, read_meta
    from deepunlearn.probe.cache import default_cache_dir
    from deepunlearn.unlearn.finetune import FinetuneConfig, finetune

    folder = default_cache_dir().parent / "bench" / f"tiny-edu-{kb_fingerprint(edu_kb)}"
    meta = read_meta(folder) if folder.is_dir() else {}
    if meta.get("total") != len(edu_kb) or meta.get("known", 0) < 0.95 * len(edu_kb):
        build_tiny_model(edu_kb, folder)
        res = finetune(load_model(folder), edu_kb, FinetuneConfig.tiny(), out_dir=folder)
        assert res.share >= 0.95, res
    return load_model(folder)


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
