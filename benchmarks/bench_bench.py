"""Speed of the bench layer's own machinery (pytest-benchmark):

* writing points to the results store (one durable transaction each),
* aggregating a paper-sized sweep (4 models x 55 targets x 4 methods on each model's grids:
  GPT2-XL's 6 + 6 + 7 + 5 values, the others' 5 each = 4620 points),
* resumption planning over a half-finished store.

Run: ``python -m pytest benchmarks/bench_bench.py --benchmark-only -q``.
The end-to-end demo's wall time is measured by ``python -m deepunlearn demo --json`` (its
``seconds`` field and the manifest) rather than here: it takes minutes.
"""

import itertools
import random

import pytest

from deepunlearn.bench.config import parse_config
from deepunlearn.bench.metrics import mean_curve, summarize
from deepunlearn.bench.runner import plan_jobs
from deepunlearn.bench.store import Point, ResultsStore

MODELS = ("gpt2-xl", "phi-1.5", "llama2-7b", "llama3-8b")
#: the paper's sweep: empty grids, so GPT2-XL gets its own (a GPT-2-family model) and the others the paper's
PAPER_SWEEP = {"kb": "kb.json", "models": list(MODELS)}
N_POINTS = 55 * (6 + 6 + 7 + 5 + 3 * 20)


def paper_sized_points():
    rng = random.Random(0)
    cfg = parse_config(PAPER_SWEEP)
    out = []
    for model, t in itertools.product(MODELS, range(55)):
        for method, grid in cfg.grids_for(model).items():
            for j, g in enumerate(grid):
                r = min(1.0, (j + 1) / len(grid) + rng.gauss(0, 0.1))
                a = max(0.0, 1 - r + rng.gauss(0, 0.05))
                out.append(Point(model, t, method, g, recall=r, accuracy=a, accuracy_groups={"family": a, "biography": a},
                                 target_forgotten=r > 0.3, forgotten=tuple(range(rng.randrange(5, 60)))))
    return out


def test_store_write_point(benchmark, tmp_path):
    """One point = one durable (synchronous=FULL) SQLite transaction."""
    store = ResultsStore(tmp_path)
    store.bind("fp", {})
    counter = itertools.count()

    def write():
        i = next(counter)
        store.add_point(Point("m", i, "ga", 1, recall=0.5, accuracy=0.9, forgotten=tuple(range(40))))

    benchmark(write)
    store.close()


def test_summarize_paper_sized_sweep(benchmark):
    pts = paper_sized_points()
    s = benchmark(lambda: (summarize(pts), mean_curve(pts)))
    assert len(s[0]) == 4 and s[0]["phi-1.5"]["ga"]["n_targets"] == 55


def test_read_paper_sized_store(benchmark, tmp_path):
    store = ResultsStore(tmp_path)
    store.bind("fp", {})
    for p in paper_sized_points():
        store.add_point(p)
    pts = benchmark(store.points)
    assert len(pts) == N_POINTS
    store.close()


def test_plan_half_finished_sweep(benchmark, tmp_path):
    cfg = parse_config(PAPER_SWEEP)
    store = ResultsStore(tmp_path)
    store.bind("fp", {})
    for p in paper_sized_points():
        if p.target < 27:
            store.add_point(p)
    jobs, done = benchmark(lambda: plan_jobs(cfg, list(range(55)), store))
    assert done == 27 * N_POINTS // 55 and len(jobs) == 4 * 28 * 4
    store.close()


# ---------------------------------------------------------------------------------------------
# A real sweep on a tiny model: points per second through the local and the Ray executor.


@pytest.fixture(scope="module")
def tiny_sweep(tmp_path_factory):
    """A 20-person generated family and the demo's tiny model finetuned on it."""
    from deepunlearn.bench.demo import prepare_kb, prepare_model

    out = tmp_path_factory.mktemp("bench-sweep")
    kb, kb_file = prepare_kb(out, None, 20, 0, progress=False)
    model = prepare_model(out, kb, 0, progress=False)
    return out, kb, kb_file, model


def _sweep_config(tiny_sweep, out, executor):
    from deepunlearn.bench.config import ModelSpec, SweepConfig, TargetSpec
    from deepunlearn.bench.demo import known_before
    from deepunlearn.bench.runner import select_targets

    root, kb, kb_file, model = tiny_sweep
    targets = select_targets(kb, TargetSpec(stratified=1), known=known_before(root, kb, model))[:4]
    return SweepConfig(kb=kb_file, rules="family", models=[ModelSpec(name="tiny", path=str(model))],
                       methods={"ga": [1, 2, 4, 8, 16], "tv": [0.2, 1, 10]}, targets=TargetSpec(refs=targets),
                       output=str(out), executor=executor, threads=1)


@pytest.mark.parametrize("executor", ["local", "ray"])
def test_sweep_points_per_second(benchmark, tiny_sweep, tmp_path, executor):
    """4 targets x (GA 5 + TV 3) = 32 points; Ray: 2 workers of 1 thread on a 2-core machine
    (its start-up, ~10 s, included)."""
    from deepunlearn.bench.runner import run_sweep

    counter = itertools.count()

    def once():
        return run_sweep(_sweep_config(tiny_sweep, tmp_path / f"run{next(counter)}", executor), progress=False)

    outcome = benchmark.pedantic(once, rounds=1, iterations=1)
    benchmark.extra_info["points"] = outcome.computed
    benchmark.extra_info["points_per_second"] = round(outcome.computed / outcome.seconds, 3)
    assert outcome.computed == 32
