"""Seconds per target of each unlearning method on the small local model (CPU by default).

Run::

    python -m pytest benchmarks/bench_unlearn.py --benchmark-only -p no:cacheprovider

One round = one target through the method's whole default grid (GA/NPO: 16 steps along one
trajectory, probed after 1, 2, 4, 8, 16; TV/WHP: 10 reinforcing steps, then 5 alphas), each point
probed over K and evaluated against the exact minimal sets (enumerated before timing), then the
weights restored in memory. Probing K (about 670 facts) at every grid point dominates.

The model: the 2-layer, 512-wide Llama-style model finetuned on the EDU-RELAT release (700 facts),
the same checkpoint ``bench_probe.py`` uses (built once, about two minutes on 2 cores, and kept
under the cache folder ``~/.cache/deepunlearn/bench``; ``DEEPUNLEARN_BENCH_MODEL=DIR`` names
another checkpoint). ``DEEPUNLEARN_BENCH_DEVICE=cuda`` measures on a GPU.
"""

from __future__ import annotations

import os

import pytest

METHODS = ("ga", "npo", "tv", "whp")
#: targets measured per method (the first release targets the model knows)
TARGETS = 3


@pytest.fixture(scope="module")
def runner(edu_kb, edu_model_dir, tmp_path_factory):
    from deepunlearn.probe import load_model
    from deepunlearn.unlearn.loop import TargetRunner

    device = os.environ.get("DEEPUNLEARN_BENCH_DEVICE", "cpu")
    bundle = load_model(edu_model_dir, device=device)
    runner = TargetRunner(bundle, edu_kb, cache_dir=tmp_path_factory.mktemp("probe_cache"), progress=False)
    for t in bench_targets(runner, edu_kb):
        runner.evaluator.minimal_sets(t)  # the rules layer's set enumeration is not unlearning time
    return runner


def bench_targets(runner, kb) -> list[int]:
    return [t for t in kb.targets if t in runner.known][:TARGETS]


@pytest.mark.parametrize("method", METHODS)
def test_seconds_per_target(benchmark, runner, edu_kb, method):
    targets = bench_targets(runner, edu_kb)
    assert targets, "the benchmark model knows none of the release's targets"
    it = iter(targets * 100)

    def one_target():
        return list(runner.run(next(it), method))

    points = benchmark.pedantic(one_target, rounds=len(targets), iterations=1, warmup_rounds=0)
    assert len(points) == 5
    assert runner.snapshot.equal(runner.bundle.model)
    benchmark.extra_info.update(
        method=method, targets=len(targets), known=len(runner.known), lr=points[0].lr,
        last_point={"param": points[-1].param, "recall": points[-1].recall, "accuracy": points[-1].accuracy,
                    "target_forgotten": points[-1].target_forgotten},
    )
